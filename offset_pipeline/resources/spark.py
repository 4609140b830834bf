"""Spark as a Dagster resource: local[*] by default, a Spark cluster or Spark Connect by configuration.

Every session in the project comes from :func:`get_spark_session`, so the small-machine defaults
and the Python-interpreter pinning apply everywhere (assets, tests, scripts).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Optional, TypeVar
from urllib.parse import urlparse

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, model_validator
from pyspark.sql import SparkSession

from offset_pipeline.settings import spark_connect_timeout_s, spark_timeout_s

T = TypeVar("T")

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


def pin_python_interpreter(executor_python: str | None = None) -> None:
    """Make Spark's Python workers run ``executor_python`` (``spark.pyspark.python``), else this
    interpreter (the venv) unless the caller chose one.

    Without this, workers start whatever ``python3`` is on PATH, which lacks the project's packages
    or differs in minor version, and Python UDFs / RDD code fail. PySpark takes the workers' Python
    from this process's ``PYSPARK_PYTHON`` when it creates the context (``spark.pyspark.python`` is
    only read by ``spark-submit``), so the setting is applied here.
    """
    if executor_python:
        os.environ["PYSPARK_PYTHON"] = executor_python
    else:
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
        session = _connect_session(conf)
        ship_project_code(session, connect=True)
        return session
    pin_python_interpreter(conf.get("spark.pyspark.python"))
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if not conf["spark.master"].startswith("local"):
        ship_project_code(session, connect=False)
    return session


_shipped: set[tuple[int, str]] = set()  # (id of the SparkContext or Connect session, zip) already added
_package_zip: str | None = None


def project_code_zip() -> str:
    """offset_pipeline as a zip (built once per process from the code this process runs): what a
    cluster's executors import it from. Content-named, so a code change is a new file to Spark."""
    global _package_zip
    if _package_zip is None or not os.path.exists(_package_zip):
        import hashlib
        import tempfile
        import zipfile
        from pathlib import Path

        import offset_pipeline

        root = Path(offset_pipeline.__file__).resolve().parent
        files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
        digest = hashlib.sha256()
        for path in files:
            digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
        target = Path(tempfile.gettempdir()) / f"offset_pipeline-{digest.hexdigest()[:16]}.zip"
        if not target.exists():
            partial = target.with_suffix(f".{os.getpid()}.tmp")
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in files:
                    archive.write(path, str(path.relative_to(root.parent)))
            os.replace(partial, target)
        _package_zip = str(target)
    return _package_zip


def ship_project_code(session, *, connect: bool) -> None:
    """Make ``offset_pipeline`` importable on the session's executors: ``addPyFile`` (a cluster
    master) or a Python artifact (Spark Connect) of :func:`project_code_zip`. Executors then need only
    the libraries the tasks import (README, "Spark on a cluster"), never the project installed. Once
    per session and zip."""
    path = project_code_zip()
    key = (id(session) if connect else id(session.sparkContext), path)
    if key in _shipped:
        return
    if connect:
        session.addArtifacts(path, pyfile=True)
    else:
        session.sparkContext.addPyFile(path)
    _shipped.add(key)


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


class SparkUnavailable(RuntimeError):
    """Spark did not do the job: the Connect server refused or did not answer, the job failed, or it
    ran past its time bound. The message says which; callers turn it into a status on their rows."""


def connect_endpoint(connect_url: str) -> tuple[str, int]:
    """``sc://host:port/;params`` -> (host, port); Spark Connect's default port is 15002."""
    parsed = urlparse(connect_url.replace("sc://", "http://", 1).split(";", 1)[0])
    return parsed.hostname or "localhost", parsed.port or 15002


def probe_connect_server(connect_url: str, timeout_s: float) -> None:
    """Raise :class:`SparkUnavailable` unless the Connect server accepts a TCP connection in
    ``timeout_s``. Spark Connect's own client retries a refused server for minutes; this answers
    in at most ``timeout_s``."""
    host, port = connect_endpoint(connect_url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise SparkUnavailable(
            f"Spark Connect server {host}:{port} did not accept a connection within {timeout_s:g}s: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def run_bounded(work: Callable[[], T], timeout_s: float, what: str, on_timeout: Callable[[], None] | None = None) -> T:
    """``work()`` in a daemon thread, waited for at most ``timeout_s``. Past it, ``on_timeout`` is
    called (best effort: interrupt the Spark job) and :class:`SparkUnavailable` is raised; the
    thread is abandoned (daemon: it never holds the run's process open). An exception of ``work``
    is raised as :class:`SparkUnavailable` naming it."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"bounded-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        if on_timeout is not None:
            threading.Thread(target=_quietly, args=(on_timeout,), daemon=True).start()
        raise SparkUnavailable(f"{what} did not finish within {timeout_s:g}s (OFFSET_PIPELINE_SPARK_TIMEOUT_S)")
    if "error" in outcome:
        exc = outcome["error"]
        first_line = (str(exc).strip().splitlines() or [""])[0][:400]
        raise SparkUnavailable(f"{what} failed: {type(exc).__name__}: {first_line}") from exc
    return outcome["value"]


def _quietly(call: Callable[[], None]) -> None:
    try:
        call()
    except Exception:  # noqa: BLE001 - interrupting a dead server fails too; nothing to add
        pass


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy resource with project defaults: no JVM starts until ``spark_session``
    is first used, so assets that take the resource but skip Spark on a cycle cost nothing.
    """

    spark_config: dict[str, Any] = Field(default_factory=dict, description="Extra Spark settings, passed through")
    master: Optional[str] = Field(default=None, description="e.g. spark://host:7077; default local[*]")
    connect_url: Optional[str] = Field(default=None, description="Spark Connect, e.g. sc://host:15002")
    job_timeout_s: float = Field(
        default_factory=spark_timeout_s, gt=0,
        description="bound of one Spark job of a cycle (OFFSET_PIPELINE_SPARK_TIMEOUT_S)",
    )
    connect_timeout_s: float = Field(
        default_factory=spark_connect_timeout_s, gt=0,
        description="how long a Spark Connect server may take to accept a connection (OFFSET_PIPELINE_SPARK_CONNECT_TIMEOUT_S)",
    )

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

    def run_job(self, job: Callable[[SparkSession], T], what: str = "the Spark job",
                timeout_s: float | None = None) -> T:
        """``job(session)`` within ``timeout_s`` (default ``job_timeout_s``), session creation
        included; a Connect server is probed first (``connect_timeout_s``). Any failure raises
        :class:`SparkUnavailable`; past the bound the session's jobs are interrupted."""
        if self.connect_url:
            probe_connect_server(self.connect_url, self.connect_timeout_s)
        bound = self.job_timeout_s if timeout_s is None else timeout_s
        return run_bounded(lambda: job(self.spark_session), bound, what, on_timeout=self._interrupt)

    def _interrupt(self) -> None:
        session = self._spark_session
        if session is None:
            return
        if hasattr(session, "interruptAll") and self.connect_url:
            session.interruptAll()
        else:
            session.sparkContext.cancelAllJobs()
