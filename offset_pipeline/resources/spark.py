"""Spark as a Dagster resource: local[*] by default, a Spark cluster or Spark Connect by configuration.

Every session in the project comes from :func:`get_spark_session`, so the small-machine defaults
and the Python-interpreter pinning apply everywhere (assets, tests, scripts).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, Optional

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, model_validator
from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
APP_NAME = "offset-pipeline"

# Sized for a laptop or a CI runner; anything here can be overridden through spark_config.
SQL_DEFAULTS = {
    # The default 200 shuffle partitions is tuned for clusters; per-cycle data here is small.
    "spark.sql.shuffle.partitions": "4",
    # Offsets carry broker timestamps; never let the host timezone shift them.
    "spark.sql.session.timeZone": "UTC",
}
# Only meaningful where this process launches the driver JVM (local or spark:// master).
DRIVER_DEFAULTS = {
    "spark.ui.enabled": "false",
    # A day of audit moments (2.88M rows at 1,000 group-partitions) is built and collected on the
    # driver: 1g ran out of heap (bench/audit_benchmark.py); the JVM only reserves it.
    "spark.driver.memory": "4g",
    "spark.log.level": "WARN",
}
# local[*] only: bind to loopback so a container or VPN hostname that does not resolve cannot
# break driver start-up.
LOCAL_DEFAULTS = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def spark_conf(
    master: Optional[str] = None,
    connect_url: Optional[str] = None,
    spark_config: Optional[Mapping[str, Any]] = None,
) -> dict[str, str]:
    """The full Spark configuration :func:`get_spark_session` uses (plain data, for tests and logs)."""
    if master and connect_url:
        raise ValueError(f"Set either a Spark master ({master!r}) or a Spark Connect URL ({connect_url!r}), not both")
    if connect_url:
        if not connect_url.startswith("sc://"):
            raise ValueError(f"Spark Connect URL must start with sc://, got {connect_url!r}")
        conf = {**SQL_DEFAULTS, "spark.remote": connect_url}
    else:
        master = master or DEFAULT_MASTER
        conf = {**SQL_DEFAULTS, **DRIVER_DEFAULTS, "spark.master": master, "spark.app.name": APP_NAME}
        if master.startswith("local"):
            conf.update(LOCAL_DEFAULTS)
    conf.update({key: str(value) for key, value in (spark_config or {}).items()})
    return conf


def pin_python_interpreter() -> None:
    """Make Spark's Python workers run this interpreter (the venv), unless the caller chose one.

    Without this, workers start whatever ``python3`` is on PATH, which lacks the project's packages
    or differs in minor version, and Python UDFs / RDD code fail.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def get_spark_session(
    master: Optional[str] = None,
    connect_url: Optional[str] = None,
    spark_config: Optional[Mapping[str, Any]] = None,
) -> SparkSession:
    """The one place a SparkSession is built.

    Spark keeps one session per process: a later call returns the existing session (runtime SQL
    settings are applied to it, static ones such as master or driver memory are not).
    """
    conf = spark_conf(master, connect_url, spark_config)
    if "spark.remote" in conf:
        return _connect_session(conf)
    pin_python_interpreter()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _connect_session(conf: Mapping[str, str]):
    """A Spark Connect session (the server's own Python workers run the UDFs; nothing to pin here).

    Built with the Connect builder itself: pyspark's generic builder refuses a Connect session in a
    process that already runs a local SparkContext (a test session, a notebook). Like that builder,
    it marks the process as a Connect client so ``pyspark.sql.functions`` build Connect columns.
    Runtime SQL settings (shuffle partitions, time zone) are applied to the server-side session.
    """
    from pyspark.sql.connect.session import SparkSession as ConnectSparkSession

    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    builder = ConnectSparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy resource with project defaults: no JVM starts until ``spark_session``
    is first used, so assets that take the resource but skip Spark on a cycle cost nothing.
    """

    spark_config: dict[str, Any] = Field(default_factory=dict, description="Extra Spark settings, passed through")
    master: Optional[str] = Field(default=None, description="e.g. spark://host:7077; default local[*]")
    connect_url: Optional[str] = Field(default=None, description="Spark Connect, e.g. sc://host:15002")

    @model_validator(mode="after")
    def _consistent_target(self) -> "SparkResource":
        # Master and Connect URL together is a configuration mistake: report it when the code
        # location loads, not on the first Spark asset run. (EnvVar values resolve later.)
        if not any(isinstance(v, dg.EnvVar) for v in (self.master, self.connect_url)):
            spark_conf(self.master, self.connect_url, self.spark_config)
        return self

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False  # LazyPySparkResource says True; this subclass is ours

    def _init_session(self) -> None:
        # Replaces LazyPySparkResource's builder so sessions come from get_spark_session.
        if self._spark_session is None:
            self._spark_session = get_spark_session(self.master, self.connect_url, self.spark_config)

    def conf(self) -> dict[str, str]:
        return spark_conf(self.master, self.connect_url, self.spark_config)
