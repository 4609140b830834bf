"""One single-node KRaft Kafka cluster on loopback, run from the jars fetched from Maven Central.

A cluster owns a data directory holding its ``server.properties``, its log directory, its broker
output (``broker.log``) and a pid file, so ``start``/``stop``/``status`` work from any process.

Readiness is a real metadata request answered by the broker, never a fixed sleep. Start-up
failures (port taken, no ``java``, broker exiting) raise :class:`BrokerStartError` with the tail
of the broker log.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from devstack.errors import BrokerStartError, DevStackError
from devstack.liveness import pid_alive, pid_runs
from devstack.paths import broker_heap, jvm_options
from devstack.processes import log_file_tail

LOG_TAIL_LINES = 40

# The broker log is bounded: it rolls over at this size, keeping this many older files
# (``broker.log.1`` the newest), so a broker left running takes at most 6 x 20 MB.
BROKER_LOG_MAX_SIZE = "20MB"
BROKER_LOG_BACKUPS = 5


def rolling_log4j2(log_path: Path, appender: str, max_size: str, backups: int, loggers: dict[str, str]) -> str:
    """A log4j2 configuration that writes everything (INFO and up, ``loggers``' levels apart) to
    ``log_path``, rolled over by size: at most ``backups + 1`` files."""
    lines = [
        "status = warn",
        "appender.rolling.type = RollingFile",
        f"appender.rolling.name = {appender}",
        f"appender.rolling.fileName = {log_path}",
        f"appender.rolling.filePattern = {log_path}.%i",
        "appender.rolling.layout.type = PatternLayout",
        "appender.rolling.layout.pattern = [%d] %p %m (%c)%n",
        "appender.rolling.policies.type = Policies",
        "appender.rolling.policies.size.type = SizeBasedTriggeringPolicy",
        f"appender.rolling.policies.size.size = {max_size}",
        "appender.rolling.strategy.type = DefaultRolloverStrategy",
        "appender.rolling.strategy.fileIndex = min",
        f"appender.rolling.strategy.max = {backups}",
        "rootLogger.level = INFO",
        f"rootLogger.appenderRef.main.ref = {appender}",
    ]
    for i, (name, level) in enumerate(loggers.items()):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {level}"]
    return "\n".join(lines) + "\n"


def log4j2_properties(log_path: Path) -> str:
    """The broker's log4j2 configuration (Kafka 4 logs through log4j2): everything to ``log_path``,
    rolled over by size. The broker's stdout goes to the same file (``start``) for what the JVM
    prints before log4j starts; after a rollover, such rare output lands in the rolled file."""
    return rolling_log4j2(log_path, "BROKER_LOG", BROKER_LOG_MAX_SIZE, BROKER_LOG_BACKUPS, {
        "kafka": "INFO", "state.change.logger": "WARN", "kafka.request.logger": "WARN",
    })


@dataclass(frozen=True)
class ClusterSpec:
    """Where one cluster lives: its name (``idc1``), client and controller ports, data dir."""

    name: str
    port: int
    controller_port: int
    data_dir: Path
    # 512m was too small at the soak's 2,000 partitions: the fetch purgatory alone held ~300 MB and
    # the broker spent a third of its time in full GCs (see broker_properties).
    heap: str = field(default_factory=broker_heap)  # OFFSET_PIPELINE_BROKER_HEAP
    jvm_options: tuple[str, ...] = field(default_factory=lambda: tuple(jvm_options()))  # OFFSET_PIPELINE_JVM_OPTIONS
    # Extra broker settings; they override the defaults below (tests use this to break things).
    overrides: dict[str, str] = field(default_factory=dict)
    # Extra arguments of the storage format (a secure cluster's ``--add-scram`` credentials) and the
    # librdkafka settings the harness's own readiness probe needs to be let in (devstack/secure_cluster.py).
    format_args: tuple[str, ...] = field(default=(), repr=False)
    client_config: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    bootstrap_servers: str
    pid: int | None
    running: bool
    ready: bool
    data_dir: Path
    dead: bool = False  # a pid file names a broker that is gone: it crashed or was killed

    def line(self) -> str:
        state = "ready" if self.ready else ("starting/unresponsive" if self.running else "dead" if self.dead else "stopped")
        pid = f"pid {self.pid}" if self.pid else "no pid"
        return f"{self.name:5} {state:22} {self.bootstrap_servers:18} {pid:10} {self.data_dir}"


def broker_properties(spec: ClusterSpec) -> dict[str, str]:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{spec.controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{spec.port},CONTROLLER://127.0.0.1:{spec.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{spec.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(spec.data_dir / "kraft-logs"),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "10",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Topics are created on purpose (by the traffic set-up or the mirror), never by a typo.
        "auto.create.topics.enable": "false",
        # A 2-core machine runs two of these plus Spark: keep the broker small.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "log.cleaner.dedupe.buffer.size": "2097152",
        "log.cleaner.threads": "1",
        # A delayed fetch keeps an entry per partition it asked for until the purgatory is purged,
        # by default every 1,000 completed requests. A consumer of 2,000 partitions (the mirror, the
        # soak's load) then keeps ~2M entries (~300 MB) alive: measured, 786 full GCs in 12 minutes
        # and admin requests timing out. Purging every 100 bounds that to a tenth.
        "fetch.purgatory.purge.interval.requests": "100",
        # The controller appends a no-op record to the metadata log every 500 ms by default, so
        # that brokers see it alive; this node is its own only broker. Every 5 s: an idle broker
        # took a third less CPU (2.4 -> 1.6 CPU-s in 2 minutes, measured), and the test runs and
        # the soak keep a dozen of them.
        "metadata.max.idle.interval.ms": "5000",
    }
    props.update(spec.overrides)
    return props


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerStartError(
            "'java' was not found on PATH (and JAVA_HOME is not set): Kafka needs Java 17 or "
            "newer. Install one (Debian: apt-get install -y openjdk-17-jre-headless) or run bin/setup."
        )
    return java


class KafkaCluster:
    """Start, stop and inspect one single-node KRaft cluster."""

    def __init__(self, spec: ClusterSpec, jars_dir: Path):
        self.spec = spec
        self.jars_dir = jars_dir

    # -- files ------------------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.spec.data_dir / "broker.log"

    @property
    def pid_path(self) -> Path:
        return self.spec.data_dir / "broker.pid"

    @property
    def _properties_path(self) -> Path:
        return self.spec.data_dir / "server.properties"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_file_tail(self.log_path, lines, "(no broker log was written)")

    def pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _runs(self, pid: int) -> bool:
        """``pid`` is this cluster's broker (not a zombie, not another program with a reused pid)."""
        return pid_runs(pid, "kafka.Kafka", str(self._properties_path))

    # -- lifecycle --------------------------------------------------------------------------
    def _java_command(self, java: str, main_class: str, *args: str, broker: bool = False) -> list[str]:
        # The broker takes its whole heap at start and touches it (Kafka's own start script also
        # sets -Xms = -Xmx): a heap that grows on demand showed as +27 %/h RSS in the soak, an
        # hour of the JVM slowly claiming its -Xmx, indistinguishable from a leak. The storage
        # tool is a short run and keeps a small heap.
        heap = [f"-Xms{self.spec.heap}", "-XX:+AlwaysPreTouch"] if broker else ["-Xms64m"]
        return [
            java,
            f"-Xmx{self.spec.heap}",
            *heap,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.spec.data_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.spec.data_dir / 'logs'}",
            *self.spec.jvm_options,  # last, so they win over the defaults above
            "-cp",
            f"{self.jars_dir}/*",
            main_class,
            *args,
        ]

    def _write_config(self) -> None:
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        (self.spec.data_dir / "log4j2.properties").write_text(log4j2_properties(self.log_path))
        props = broker_properties(self.spec)
        self._properties_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format_storage(self, java: str) -> None:
        if (self.spec.data_dir / "kraft-logs" / "meta.properties").exists():
            return
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cmd = self._java_command(
            java, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",  # ids may start with '-'
            "-c", str(self._properties_path), *self.spec.format_args
        )
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-LOG_TAIL_LINES:])
            raise BrokerStartError(f"{self.spec.name}: formatting the KRaft storage failed:\n{tail}")

    def start(self, timeout: float = 90.0) -> ClusterStatus:
        """Start the broker and return once it answers a metadata request. Idempotent."""
        current = self.status()
        if current.ready:
            return current
        if current.running:
            return self.wait_ready(timeout)
        java = find_java()
        if not any(self.jars_dir.glob("kafka_2.13-*.jar")):
            raise BrokerStartError(
                f"{self.spec.name}: no Kafka jars in {self.jars_dir}; run "
                "`python -m devstack fetch` first."
            )
        for port, what in ((self.spec.port, "client"), (self.spec.controller_port, "controller")):
            if port_in_use(port):
                raise BrokerStartError(
                    f"{self.spec.name}: {what} port 127.0.0.1:{port} is already in use by another "
                    f"process; stop it or choose other ports. Last broker log lines:\n{self.log_tail()}"
                )
        self._write_config()
        self._format_storage(java)
        cmd = self._java_command(java, "kafka.Kafka", str(self._properties_path), broker=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== starting {self.spec.name} at {time.strftime('%Y-%m-%dT%H:%M:%S')} ===\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the command that started it
            )
        self.pid_path.write_text(str(proc.pid))
        self._proc = proc
        return self.wait_ready(timeout)

    def _metadata_ok(self, request_timeout: float = 2.0) -> bool:
        admin = AdminClient(
            {"bootstrap.servers": self.spec.bootstrap_servers,
             "socket.connection.setup.timeout.ms": int(max(2.0, request_timeout) * 1000), "log_level": 0,
             **self.spec.client_config}
        )
        try:
            metadata = admin.list_topics(timeout=request_timeout)
        except KafkaException:
            return False
        return bool(metadata.brokers)

    def wait_ready(self, timeout: float = 90.0) -> ClusterStatus:
        deadline = time.monotonic() + timeout
        while True:
            pid = self.pid()
            proc = getattr(self, "_proc", None)
            if proc is not None:
                proc.poll()  # reap our own child so a dead broker is seen as dead
            # pid_alive, not _runs: right after the start the command line may not be java's yet.
            if pid is None or not pid_alive(pid):
                raise BrokerStartError(
                    f"{self.spec.name}: the broker process exited during start-up. "
                    f"Last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if self._metadata_ok():
                return self.status()
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"{self.spec.name}: the broker did not answer a metadata request on "
                    f"{self.spec.bootstrap_servers} within {timeout:.0f}s. "
                    f"Last lines of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.25)  # pause between metadata probes, not a readiness criterion

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout``). Returns whether one ran."""
        pid = self.pid()
        if pid is None or not self._runs(pid):
            self.pid_path.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        proc = getattr(self, "_proc", None)
        while pid_alive(pid):
            if proc is not None:
                proc.poll()
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)
        if proc is not None:
            proc.wait(timeout=10)
        self.pid_path.unlink(missing_ok=True)
        return True

    def kill(self, timeout: float = 30.0) -> bool:
        """``kill -9`` the broker, as a crash would: no clean shutdown, the pid file stays (so
        ``status`` says dead) and ``start`` recovers the same data dir. Returns whether one ran."""
        pid = self.pid()
        if pid is None or not self._runs(pid):
            return False
        os.kill(pid, signal.SIGKILL)
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.pid == pid:
            proc.wait(timeout=timeout)  # our child: reap it
        deadline = time.monotonic() + timeout
        while pid_alive(pid):
            if time.monotonic() > deadline:
                raise DevStackError(f"{self.spec.name}: broker pid {pid} survived SIGKILL for {timeout:.0f}s")
            time.sleep(0.05)
        return True

    def status(self) -> ClusterStatus:
        pid = self.pid()
        running = pid is not None and self._runs(pid)
        # 5 s: a secure cluster's TLS handshake, SCRAM login and metadata took over 1 s on a loaded
        # 2-core machine, and status then called a ready broker unresponsive
        ready = running and self._metadata_ok(request_timeout=5.0)
        return ClusterStatus(
            name=self.spec.name,
            bootstrap_servers=self.spec.bootstrap_servers,
            pid=pid if running else None,
            running=running,
            ready=ready,
            data_dir=self.spec.data_dir,
            dead=pid is not None and not running,
        )

    def clean(self) -> None:
        """Delete the cluster's data directory. Refuses while the broker runs."""
        if self.status().running:
            raise DevStackError(f"{self.spec.name} is running; stop it before cleaning its data")
        shutil.rmtree(self.spec.data_dir, ignore_errors=True)
