"""A Spark standalone cluster on loopback: one master and its workers, from the pyspark distribution.

What a team that outgrows ``local[*]`` runs, small: ``spark-class org.apache.spark.deploy.master.Master``
and ``...deploy.worker.Worker`` (pyspark's ``bin/spark-class``), each a :class:`ManagedProcess` with
its log and pid file under ``run_dir``. The executors the workers start run the Python of
:mod:`devstack.executor_python`: a virtual environment with the executors' libraries and **without**
offset_pipeline, so the project's code reaches them only the way it reaches a real cluster's, shipped
with the job (``resources/spark.py``: ``addPyFile`` of a zip built at run time).

Ready means the master's status page lists every worker ALIVE, not that the processes exist. A
taken port is an error (no silent move to the next one).
"""

from __future__ import annotations

import json
import shlex
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.cluster import find_java, port_in_use
from devstack.errors import DevStackError
from devstack.paths import jvm_options
from devstack.processes import ManagedProcess
from devstack.spark_connect import spark_home

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class SparkStandaloneStartError(DevStackError):
    """The master or a worker did not start or register; the message ends with the log tails."""


@dataclass(frozen=True)
class SparkStandalone:
    """A master on ``port`` (status page on ``ui_port``) and ``workers`` workers of ``worker_cores``
    cores and ``worker_memory`` each, their ports from ``worker_ports`` (two per worker: RPC and UI)."""

    port: int
    ui_port: int
    worker_ports: tuple[int, ...]
    run_dir: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    name: str = "spark-master"

    def __post_init__(self) -> None:
        if len(self.worker_ports) != 2 * self.workers:
            raise ValueError(f"{self.workers} workers need {2 * self.workers} worker ports, got {len(self.worker_ports)}")

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def status_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}/json/"

    def _env(self) -> tuple[tuple[str, str], ...]:
        options = jvm_options()
        return tuple(sorted({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",  # loopback even where the hostname resolves elsewhere
            "SPARK_NO_DAEMONIZE": "1",
            # the master's and workers' JVMs (OFFSET_PIPELINE_JVM_OPTIONS; none by default)
            **({"SPARK_DAEMON_JAVA_OPTS": shlex.join(options)} if options else {}),
        }.items()))

    def master(self) -> ManagedProcess:
        args = (MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port))
        return ManagedProcess(self.name, "", args, self.run_dir, program=(str(spark_home() / "bin" / "spark-class"),),
                              env=self._env())

    def worker(self, index: int) -> ManagedProcess:
        rpc, ui = self.worker_ports[2 * index], self.worker_ports[2 * index + 1]
        work_dir = self.run_dir / f"spark-worker-{index}"
        args = (WORKER_CLASS, self.master_url, "--host", "127.0.0.1", "--port", str(rpc), "--webui-port", str(ui),
                "--cores", str(self.worker_cores), "--memory", self.worker_memory, "--work-dir", str(work_dir))
        return ManagedProcess(f"spark-worker-{index}", "", args, self.run_dir,
                              program=(str(spark_home() / "bin" / "spark-class"),), env=self._env())

    def parts(self) -> list[ManagedProcess]:
        return [self.master()] + [self.worker(i) for i in range(self.workers)]

    def start(self, timeout_s: float = 120.0) -> str:
        """Start what is not running and return the master URL once every worker is ALIVE."""
        find_java()
        for part, port in zip(self.parts(), (self.port, *self.worker_ports[::2])):
            if part.pid() is None and port_in_use(port):
                raise SparkStandaloneStartError(f"{part.name}: port 127.0.0.1:{port} is already in use")
        self.master().start(settle_s=1.0)
        self._wait(lambda status: status is not None, timeout_s, "the master's status page")
        for i in range(self.workers):
            self.worker(i).start(settle_s=1.0)
        self._wait(lambda status: status is not None and self.alive_workers(status) >= self.workers, timeout_s,
                   f"{self.workers} workers ALIVE")
        return self.master_url

    def stop(self) -> None:
        for part in reversed(self.parts()):
            part.stop(timeout=30.0)

    def status(self) -> dict | None:
        """The master's status (its ``/json/`` page), or None when it does not answer."""
        try:
            with urllib.request.urlopen(self.status_url, timeout=2.0) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError):
            return None

    @staticmethod
    def alive_workers(status: dict) -> int:
        return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            for part in self.parts():
                state, _ = part.state()
                if state.value == "dead":
                    raise SparkStandaloneStartError(f"{part.name} exited during start-up:\n{part.log_tail()}")
            if ready(self.status()):
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {p.name}\n{p.log_tail(15)}" for p in self.parts())
                raise SparkStandaloneStartError(f"no {what} within {timeout_s:.0f}s:\n{tails}")
            time.sleep(0.5)  # between probes, not a readiness criterion
