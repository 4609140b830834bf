"""The local Spark Connect server: one long-lived Spark driver that every sync run connects to.

Each Dagster run of the sync cycle is a fresh process; with ``local[*]`` each one starts (and pays
for) its own Spark JVM. With this server running, a run only opens a Spark Connect session
(``OFFSET_PIPELINE_SPARK_CONNECT_URL``, which ``bin/up`` exports as :attr:`SparkConnectServer.url`):
the JVM, its Python worker daemon and the workers' Kafka consumers stay warm from cycle to cycle.

The URL names a fixed session (``sc://127.0.0.1:<port>/;session_id=<SYNC_SESSION_ID>``): the server
keeps Python workers per session, so runs that each opened a new session would each start new
workers (and new Kafka consumers: measured, the first cycle of a session took 2-4x a warm one).
Runs share that session and should not ``stop()`` it (nothing in the project does); the server keeps
no tombstones of closed sessions, so a stopped or expired (idle for an hour) session is simply
created again by the next run, with new workers.

The server is pyspark's own (``pyspark/jars/spark-connect_*.jar``), run as a :class:`ManagedProcess`
through ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``:

* ``--master local[*]``, bound to loopback only (gRPC and the driver), no UI, a small driver heap;
* ``PYSPARK_PYTHON`` = this interpreter (the venv), so Python workers import ``offset_pipeline``.
  Workers are reused and keep modules loaded: **restart the server after changing code that runs
  inside Spark tasks** (``bin/stack down && bin/stack up``);
* the port fails fast when taken (no silent move to the next port).

Ready means a Spark Connect session answers a query, not that the process exists.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from devstack.cluster import find_java, port_in_use
from devstack.errors import DevStackError
from devstack.paths import jvm_options, spark_connect_driver_memory
from devstack.processes import ManagedProcess

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
NAME = "spark-connect"
#: The one Spark Connect session every sync run of the local stack uses (see the module docstring).
SYNC_SESSION_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "offset-pipeline/spark-connect/sync"))


class SparkConnectStartError(DevStackError):
    """The Spark Connect server did not start or did not answer; the message ends with its log tail."""


def spark_home() -> Path:
    """pyspark's folder: it holds ``bin/spark-submit`` and ``jars/`` (the Connect server included)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass(frozen=True)
class SparkConnectServer:
    port: int
    run_dir: Path
    # a day of failover-audit moments on the driver (resources/spark.py); OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY
    driver_memory: str = field(default_factory=spark_connect_driver_memory)
    master: str = "local[*]"
    python: str = sys.executable
    name: str = NAME
    jvm_options: tuple[str, ...] = field(default_factory=lambda: tuple(jvm_options()))  # OFFSET_PIPELINE_JVM_OPTIONS, last

    @property
    def address(self) -> str:
        """The server itself (each client gets a session of its own)."""
        return f"sc://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """What sync runs connect to: the server and the shared session."""
        return f"{self.address}/;session_id={SYNC_SESSION_ID}"

    def process(self) -> ManagedProcess:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.port.maxRetries": "0",  # a taken port is an error, not another port
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.log.level": "WARN",
            "spark.sql.session.timeZone": "UTC",
            "spark.python.worker.reuse": "true",  # the default, relied on: workers keep their Kafka consumers
            # The runs' shared session id must stay usable after the session was stopped or expired
            # (idle for an hour): by default the server refuses a closed session's id for good.
            "spark.connect.session.manager.closedSessionsTombstonesSize": "0",
        }
        args = ["--class", SERVER_CLASS, "--name", "offset-pipeline-spark-connect", "--master", self.master,
                "--driver-memory", self.driver_memory,
                # The whole heap from the start, touched (as the brokers, devstack/cluster.py): in the
                # soak the JVM grew its heap towards --driver-memory for the whole hour, +700 MB
                # after a restart, which a 1-hour fit cannot tell from a leak. OFFSET_PIPELINE_JVM_OPTIONS
                # come last, so they win (the tests' servers start on C1 and touch no heap).
                "--driver-java-options", shlex.join([f"-Xms{self.driver_memory}", "-XX:+AlwaysPreTouch",
                                                     *self.jvm_options])]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        home = spark_home()
        env = {
            "SPARK_HOME": str(home),
            "PYSPARK_PYTHON": self.python,
            "PYSPARK_DRIVER_PYTHON": self.python,
            "SPARK_CONNECT_MODE": "0",  # the server itself is a classic Spark driver
            "SPARK_LOCAL_IP": "127.0.0.1",  # loopback even where the hostname resolves elsewhere
        }
        return ManagedProcess(
            self.name, "", tuple(args), self.run_dir,
            program=(str(home / "bin" / "spark-submit"),), env=tuple(sorted(env.items())),
        )

    def pid(self) -> int | None:
        return self.process().pid()

    def launch(self) -> int:
        """Start the process unless it runs; do not wait for it to answer. Returns its pid."""
        proc = self.process()
        running = proc.pid()
        if running is None:
            find_java()  # a clear message when there is no Java at all
            if port_in_use(self.port):
                raise SparkConnectStartError(
                    f"{self.name}: port 127.0.0.1:{self.port} is already in use by another process; stop it "
                    "or choose another port (OFFSET_PIPELINE_SPARK_CONNECT_PORT)"
                )
            running = proc.start(settle_s=1.0)
        return running

    def start(self, timeout_s: float = 180.0) -> int:
        """Start unless running, and return once a session answers (``SparkConnectStartError`` else)."""
        pid = self.launch()
        self.wait_ready(timeout_s)
        return pid

    def stop(self) -> bool:
        return self.process().stop(timeout=30.0)

    def listening(self, timeout_s: float = 1.0) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s):
                return True
        except OSError:
            return False

    def answers(self) -> bool:
        """A Spark Connect session runs a query on the server."""
        return session_answers(self.address)  # a session of its own: the probe stops it

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        proc = self.process()
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.pid() is None:
                raise SparkConnectStartError(f"{self.name} exited during start-up:\n{self.log_tail()}")
            if self.listening() and self.answers():
                return
            if time.monotonic() > deadline:
                raise SparkConnectStartError(
                    f"{self.name} did not answer on {self.address} within {timeout_s:.0f}s:\n{self.log_tail()}"
                )
            time.sleep(0.5)  # between probes, not a readiness criterion

    def status_line(self) -> str:
        pid = self.pid()
        if pid is None:
            state = "stopped"
        else:
            state = "ready" if self.listening() and self.answers() else "starting/unresponsive"
        running = f"running pid {pid}" if pid else "stopped"
        return f"{self.name:22} {running:16} {state:22} {self.address}  log {self.process().log_path}"

    def log_tail(self, lines: int = 30) -> str:
        return self.process().log_tail(lines)


def session_answers(url: str, timeout_s: float = 30.0) -> bool:
    """True when a Spark Connect session at ``url`` answers (it reports the server's Spark version: a
    plan-analysis call, so closing the session right after leaves no execution behind). Runs in a
    child process: the Connect client keeps process-wide state (a default session, gRPC channels)
    that a long-lived caller (the stack's CLI, a test) should not inherit."""
    import subprocess

    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.remote(sys.argv[1]).create()\n"
        "ok = bool(s.version)\n"
        "s.stop()\n"
        "sys.exit(0 if ok else 1)\n"
    )
    try:
        result = subprocess.run(
            [sys.executable, "-c", code, url], capture_output=True, timeout=timeout_s,
            env={**os.environ, "SPARK_CONNECT_MODE": "1"},
        )
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0
