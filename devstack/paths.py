"""Where the local stack keeps its files and listens. Its default ports and folder come from the
product's settings (which never import this harness), so every command agrees."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from devstack.errors import DevStackError
from offset_pipeline.settings import DEFAULT_CLUSTER_NAMES, local_stack_dir, local_stack_port

REPO_ROOT = Path(__file__).resolve().parents[1]


def stack_dir(env: Mapping[str, str] | None = None) -> Path:
    """The git-ignored folder holding jars, cluster data, logs and pid files (the product's
    settings name it: ``settings.local_stack_dir``)."""
    return local_stack_dir(env)


def jars_dir() -> Path:
    # Jars are shared by every stack (tests included): fetched once, then cached.
    return Path(os.environ.get("OFFSET_PIPELINE_JARS_DIR", REPO_ROOT / ".devstack" / "jars")).resolve()


@dataclass(frozen=True)
class ClusterPorts:
    name: str
    port: int
    controller_port: int


def cluster_ports(env: Mapping[str, str] | None = None) -> tuple[ClusterPorts, ...]:
    """The ports the product's settings expect the local stack on (``settings.LOCAL_STACK_PORTS``),
    each overridable: ``OFFSET_PIPELINE_IDC1_PORT``, ``..._CONTROLLER_PORT``. The local stack keeps the
    default names (``idc1``, ``idc2``) whatever ``OFFSET_PIPELINE_CLUSTERS`` says."""
    env = os.environ if env is None else env
    return tuple(
        ClusterPorts(name, local_stack_port(env, name), local_stack_port(env, name, controller=True))
        for name in DEFAULT_CLUSTER_NAMES
    )


#: JVM memory sizes as Java writes them (-Xmx512m, -Xmx4g)
JVM_SIZE = re.compile(r"[1-9][0-9]*[kKmMgG]")
DEFAULT_BROKER_HEAP = "1g"
DEFAULT_SPARK_CONNECT_DRIVER_MEMORY = "4g"


def jvm_size(variable: str, default: str, env: Mapping[str, str] | None = None) -> str:
    """A JVM memory size from ``variable`` (``512m``, ``2g``), else ``default``; anything else is
    a :class:`DevStackError` naming the variable and the value."""
    env = os.environ if env is None else env
    value = env.get(variable, "").strip() or default
    if not JVM_SIZE.fullmatch(value):
        raise DevStackError(f"{variable}={value!r} is not a JVM memory size such as 512m or 2g")
    return value


def broker_heap(env: Mapping[str, str] | None = None) -> str:
    """Each local broker's heap, taken whole at start: ``OFFSET_PIPELINE_BROKER_HEAP``, default 1g
    (the soak's 2,000 partitions needed it; a test's few partitions run in 512m)."""
    return jvm_size("OFFSET_PIPELINE_BROKER_HEAP", DEFAULT_BROKER_HEAP, env)


def spark_connect_driver_memory(env: Mapping[str, str] | None = None) -> str:
    """The local Spark Connect driver's heap, taken whole at start:
    ``OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY``, default 4g (a day of failover-audit moments at
    1,000 group-partitions is built on the driver)."""
    return jvm_size("OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY", DEFAULT_SPARK_CONNECT_DRIVER_MEMORY, env)


def jvm_options(env: Mapping[str, str] | None = None) -> list[str]:
    """Extra options for the dev stack's JVMs (brokers, their storage format, MirrorMaker 2, the
    Spark Connect server), after their own, so they win: ``OFFSET_PIPELINE_JVM_OPTIONS``, split as a shell would, default
    none. The tests use it for JVMs that start fast and idle cheaply (C1 only, the serial collector,
    no pre-touched heap). A word that is not an option is a :class:`DevStackError`."""
    env = os.environ if env is None else env
    raw = env.get("OFFSET_PIPELINE_JVM_OPTIONS", "")
    try:
        words = shlex.split(raw)
    except ValueError as exc:
        raise DevStackError(f"OFFSET_PIPELINE_JVM_OPTIONS={raw!r} cannot be split: {exc}") from None
    wrong = [w for w in words if not w.startswith("-")]
    if wrong:
        raise DevStackError(f"OFFSET_PIPELINE_JVM_OPTIONS={raw!r}: {wrong[0]!r} is not a JVM option "
                            "(each starts with '-', e.g. -XX:+UseSerialGC)")
    return words


DEFAULT_SPARK_CONNECT_PORT = 15002


def spark_connect_port() -> int:
    """The local Spark Connect server's port: ``OFFSET_PIPELINE_SPARK_CONNECT_PORT``, default 15002."""
    return int(os.environ.get("OFFSET_PIPELINE_SPARK_CONNECT_PORT", DEFAULT_SPARK_CONNECT_PORT))


def executor_python_dir() -> Path:
    """The Spark standalone executors' virtual environment (devstack/executor_python.py): made once,
    then reused, like the jars."""
    return Path(os.environ.get("OFFSET_PIPELINE_EXECUTOR_PYTHON_DIR",
                               REPO_ROOT / ".devstack" / "executor-python")).resolve()


DEFAULT_SPARK_MASTER_PORT = 17077
DEFAULT_SPARK_MASTER_UI_PORT = 18080
DEFAULT_SPARK_WORKER_PORTS = (17078, 18081, 17079, 18082)  # RPC and UI port of each of two workers


@dataclass(frozen=True)
class SparkStandalonePorts:
    master: int
    master_ui: int
    workers: tuple[int, ...]  # two per worker: RPC, UI


def spark_standalone_ports(env: Mapping[str, str] | None = None) -> SparkStandalonePorts:
    """The local Spark standalone cluster's ports (not Spark's own 7077/8080, so a developer's own
    Spark is left alone): ``OFFSET_PIPELINE_SPARK_MASTER_PORT`` (17077), ``..._MASTER_UI_PORT`` (18080),
    ``OFFSET_PIPELINE_SPARK_WORKER_PORTS`` (``17078,18081,17079,18082``: RPC and UI of each worker)."""
    env = os.environ if env is None else env
    workers = env.get("OFFSET_PIPELINE_SPARK_WORKER_PORTS", "").strip()
    try:
        worker_ports = tuple(int(p) for p in workers.split(",")) if workers else DEFAULT_SPARK_WORKER_PORTS
    except ValueError:
        raise ValueError(f"OFFSET_PIPELINE_SPARK_WORKER_PORTS: {workers!r} is not a list of ports") from None
    return SparkStandalonePorts(int(env.get("OFFSET_PIPELINE_SPARK_MASTER_PORT", DEFAULT_SPARK_MASTER_PORT)),
                                int(env.get("OFFSET_PIPELINE_SPARK_MASTER_UI_PORT", DEFAULT_SPARK_MASTER_UI_PORT)),
                                worker_ports)
