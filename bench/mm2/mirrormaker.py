"""Apache Kafka's MirrorMaker 2 in dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``),
one-way, as the data mirror and offset syncer the comparison benchmark measures against.

Jars come from Maven Central (``devstack/mirrormaker2-pom.xml``, cached in ``.devstack/mm2-jars``)
like the brokers', shared with the dev harness's own MirrorMaker 2 mirror (``devstack/mirrormaker2.py``). Each instance gets cluster aliases of its own: MM2 names its Connect group, its config,
offset and status topics, its offset-syncs and checkpoints topics after the aliases, so two
instances on the same two clusters (defaults and tuned) never share state.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from devstack.mirrormaker2 import mm2_jars

#: ``offset.lag.max=0`` (an offset sync for every record) and one-second intervals for everything
#: that paces the checkpoints and the group offset writes.
TUNED = {
    "offset.lag.max": "0",
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "refresh.topics.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "1",
}

_LOG4J2 = """status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %p %c{1} %m%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
"""


@dataclass
class MirrorMaker2:
    """One dedicated MM2 mirroring ``topics`` (a regex) from ``source`` to ``target`` with
    ``IdentityReplicationPolicy`` (same topic names) and group offset sync for ``groups``.

    ``name`` prefixes the aliases (``<name>-src``, ``<name>-dst``); ``settings`` are added to the
    flow's properties (``TUNED``, or nothing for MM2's defaults)."""

    name: str
    source: str  # bootstrap servers
    target: str
    topics: str
    groups: str
    work_dir: Path
    settings: dict[str, str] = field(default_factory=dict)
    heap: str = "512m"
    proc: subprocess.Popen | None = None

    @property
    def aliases(self) -> tuple[str, str]:
        return f"{self.name}-src", f"{self.name}-dst"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "mm2.log"

    def properties(self) -> dict[str, str]:
        src, dst = self.aliases
        flow = f"{src}->{dst}"
        props = {
            "clusters": f"{src}, {dst}",
            f"{src}.bootstrap.servers": self.source,
            f"{dst}.bootstrap.servers": self.target,
            f"{flow}.enabled": "true",
            f"{dst}->{src}.enabled": "false",
            # Otherwise the disabled reverse flow still writes heartbeats into the source.
            f"{dst}->{src}.emit.heartbeats.enabled": "false",
            f"{flow}.topics": self.topics,
            f"{flow}.groups": self.groups,
            f"{flow}.sync.group.offsets.enabled": "true",
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            # The brokers' own topics are not the benchmark's: mirror only the named ones.
            "sync.topic.acls.enabled": "false",
            "sync.topic.configs.enabled": "false",
        }
        props.update({f"{flow}.{k}": v for k, v in self.settings.items()})
        return props

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "mm2.properties"
        config.write_text("".join(f"{k} = {v}\n" for k, v in self.properties().items()))
        (self.work_dir / "log4j2.properties").write_text(_LOG4J2)
        java = shutil.which("java") or "java"
        cmd = [
            java, f"-Xmx{self.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp", f"{mm2_jars()}/*", "org.apache.kafka.connect.mirror.MirrorMaker", str(config),
        ]
        with open(self.log_path, "wb") as out:  # the console appender: its whole log
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(2)
        if self.proc.poll() is not None:
            raise RuntimeError(f"MirrorMaker 2 {self.name} exited with {self.proc.returncode}: see {self.log_path}")

    def stop(self, timeout_s: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> "MirrorMaker2":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
