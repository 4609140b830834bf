"""Apache Kafka's MirrorMaker 2 as the data mirror of the dev harness: both directions in one JVM,
every copy marked with its origin by the project's Connect transform.

What runs: ``org.apache.kafka.connect.mirror.MirrorMaker`` (dedicated mode; jars from
``mirrormaker2-pom.xml`` beside this file, cached in ``.devstack/mm2-jars``) with the project's jar
(``connect-transform/``, :mod:`devstack.connect_transform`) on its classpath, configured by
:func:`mm2_properties`:

* the cluster aliases are the clusters' names, so a copy's ``IDC`` header is the name the sync
  knows the cluster by (the transform writes the alias verbatim);
* both flows, ``a->b`` and ``b->a``, with ``IdentityReplicationPolicy``: a topic is copied into the
  topic of the same name on the other side, partition to partition;
* on each flow ``transforms=origin``: ``io.offsetpipeline.connect.OriginHeaders`` with
  ``drop.copies=true`` first drops every record that already carries an origin header, i.e. a copy,
  so nothing is mirrored back (two flows over same-named topics would otherwise loop forever), as
  Kafka's ``Filter`` under ``HasHeaderKey{IDC}`` in front of it would; then it adds ``IDC`` (the
  source alias) and ``Offset`` (the upstream offset). Unlike the Python mirror, which replaces
  origin headers a producer forged, a record produced with an ``IDC`` header of its own is taken
  for a copy and not mirrored at all (the transform cannot tell them apart). In dedicated mode a flow's settings reach all of its connectors, and the
  transform refuses records that are not copies, so heartbeats and checkpoints are turned off
  (the sync translates offsets itself), and offset syncs with them (nothing reads them). MirrorMaker
  2 says so at every start with one ERROR line per flow, expected: "Failed to configure
  MirrorCheckpointConnector ... can't run with emit.checkpoints.enabled set to false" (its way of
  not creating that connector; no ``offset-syncs.*`` setting may be given either, or the source
  connector is refused too);
* MirrorMaker 2's header converter in dedicated mode is the ``ByteArrayConverter`` (set by
  ``MirrorMakerConfig.workerConfig`` unless configured): the transform's byte-array headers reach
  the log as they are, the exact bytes ``offset_pipeline.translation.headers.parse_origin`` reads;
* the source consumers read ``read_committed``: aborted transactions are never copied;
* internal topics with replication factor 1, topics refreshed every second, source offsets
  flushed every second, lost tasks reassigned at once (single-node dev clusters, fast tests).

Exactly-once (``exactly.once.source.support=enabled`` on both target clusters' workers, which in
dedicated mode needs the internal REST server: ``dedicated.mode.enable.internal.rest=true`` and a
``listeners`` port): it holds with Kafka 4.2.0 here. Copies and MirrorMaker 2's source offsets are
written in one transaction on the target, so a ``kill -9`` in the middle of copying and a restart
neither lose nor repeat a copy for a ``read_committed`` reader (the records of the transaction the
kill cut short are aborted, and only a ``read_uncommitted`` reader sees them);
tests/devstack/test_mirrormaker2.py kills and restarts it under load and checks exactly that.
Without exactly-once (``exactly_once=False``) a restart repeats the copies made since the last
offset flush (at most about a second's worth): at-least-once.

Ready means both flows copy: a probe record produced on each side (topic :data:`PROBE_TOPIC`) is
seen on the other with the origin headers naming its source and its exact offset. Measured here
(:attr:`MirrorMaker2.ready_after_s`, 2 cores shared with other work): 16-25 s from the JVM's start
to both probes copied, about as long again after a ``kill -9``. Most of it is the JVM and Connect
starting two herders (internal topics read, group joined, tasks started); finding plugins through
their ServiceLoader manifests instead of scanning the classpath saved ~10 s of it.

Lifetime: the JVM is a child of the Python process that starts it, with a parent-death signal
(``SIGKILL``, Linux): it never outlives that process, even one killed with ``kill -9``. (The signal
follows the starting *thread*: start it from a thread that lives as long as the mirror, e.g. the
main thread.) :meth:`MirrorMaker2.stop` stops it with ``SIGTERM`` (MirrorMaker 2's shutdown hook
stops its connectors and commits), then ``SIGKILL`` after a grace period. Run as
``python -m devstack.mirrormaker2 ...`` it stops the JVM on ``SIGINT``, ``SIGTERM`` and ``SIGHUP``.

Failures are :class:`~devstack.errors.DevStackError` naming what failed and the log: the internal
REST port already taken, the JVM exiting during start-up, a cluster refusing its login, a flow that
did not copy its probe in time.

Secure clusters: an endpoint's librdkafka login (its ``client_config``: ``security.protocol``,
``sasl.mechanism``, ``sasl.username``/``sasl.password``, ``ssl.ca.location``) becomes MirrorMaker 2's
per-cluster settings (:func:`mm2_login_properties`): ``<alias>.security.protocol``,
``<alias>.sasl.mechanism``, ``<alias>.sasl.jaas.config`` (SCRAM's login module) and the CA as a PEM
truststore. A setting of the cluster prefix reaches every client MirrorMaker 2 opens on that cluster:
its connectors' consumer, producer and admin (``MirrorMakerConfig.clusterProps`` copies the client
settings to the ``consumer.``, ``producer.`` and ``admin.`` prefixes) and, on a flow's target, the
herder's own clients (its worker's group membership, offsets/config/status topics, exactly-once
fencing). A setting this mapping does not know is refused (:class:`DevStackError` naming the key,
never its value) rather than dropped: MirrorMaker 2 would otherwise connect differently from the
Python clients of the same endpoint. The password is in ``mm2-secrets.properties`` only (mode 0600):
``mm2.properties`` (also 0600) refers to each JAAS setting there through Kafka's
``FileConfigProvider`` (``${file:<path>:<alias>.sasl.jaas.config}``). The reference matters beyond
the file: MirrorMaker 2 stores every connector's configuration, both clusters' login settings
included, in its Connect config topics (``mm2-configs.<source>.internal``) and resolves references
only when a connector or task starts, so with the JAAS text inline those topics would hold both
passwords in plain text for anyone allowed to read them; with the reference they hold the path. The
JVM's command line names the properties file, and errors name keys and clusters, never values. A
login the brokers refuse is a :class:`DevStackError` as soon as MirrorMaker 2 logs it (:data:`AUTH_FAILED`),
quoting that line, instead of a probe timing out.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.cluster import find_java, port_in_use, rolling_log4j2
from devstack.connect_transform import TRANSFORM_CLASS, transform_jar
from devstack.errors import DevStackError
from devstack.jars import fetch_jars
from devstack.mirror import MirrorEndpoint
from devstack.paths import REPO_ROOT, jvm_options
from devstack.processes import log_file_tail
from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER

POM = Path(__file__).with_name("mirrormaker2-pom.xml")
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
#: Every flow also mirrors this topic: the readiness probe (created on both clusters at start).
PROBE_TOPIC = "offset-pipeline.mirror-probe"
#: The topics mirrored by default, as a Java regex matched against the whole name (as MirrorMaker 2
#: matches): everything but the brokers' own (``_``, ``__``) and the project's (``offset-pipeline.``).
#: MirrorMaker 2 excludes its own internal topics besides (``topics.exclude``).
DEFAULT_TOPICS = r"(?!_)(?!offset-pipeline\.).*"
#: The internal REST port of the local stack's MirrorMaker 2 (``OFFSET_PIPELINE_MM2_REST_PORT``).
DEFAULT_REST_PORT = 18083
LOG_MAX_SIZE = "20MB"
LOG_BACKUPS = 3
STOP_GRACE_S = 30.0
#: What a Kafka client of MirrorMaker 2 logs when the brokers refuse its login (``NetworkClient``, at
#: ERROR, ``Connection to node -1 (/127.0.0.1:PORT) failed authentication due to: ...``), and the
#: exception a refused login raises elsewhere (a herder's start-up).
AUTH_FAILED = ("failed authentication due to", "SaslAuthenticationException")
#: librdkafka's login settings that :func:`mm2_login_properties` maps; any other is refused.
LOGIN_SETTINGS = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                  "ssl.ca.location")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms mapped (to Kafka's SCRAM login module); GSSAPI, PLAIN and OAUTHBEARER are not.
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: The per-cluster settings that hold a password: written to the secrets file, referred to elsewhere.
SECRET_SETTINGS = ("sasl.jaas.config",)
FILE_CONFIG_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
#: What Connect logs when one of its tasks failed: the task stays stopped until someone restarts it
#: (seen under load on 2 shared cores: an exactly-once task whose producer ended in
#: ``InvalidTxnStateException`` after ``CONCURRENT_TRANSACTIONS`` retries; that flow stops copying).
TASK_FAILED = "will not recover until manually restarted"
_PR_SET_PDEATHSIG = 1


def mm2_jars() -> Path:
    """MirrorMaker 2's classpath (fetched once, then cached): ``OFFSET_PIPELINE_MM2_JARS_DIR`` or the
    repository's ``.devstack/mm2-jars``, shared by every stack as the broker jars are."""
    default = REPO_ROOT / ".devstack" / "mm2-jars"
    return fetch_jars(Path(os.environ.get("OFFSET_PIPELINE_MM2_JARS_DIR") or default).resolve(), POM)


def mm2_rest_port() -> int:
    """The local stack's MirrorMaker 2 REST port: ``OFFSET_PIPELINE_MM2_REST_PORT``, default 18083."""
    return int(os.environ.get("OFFSET_PIPELINE_MM2_REST_PORT") or DEFAULT_REST_PORT)


def batched_fetch_wait_ms() -> int | None:
    """``OFFSET_PIPELINE_MM2_FETCH_WAIT_MS``: when set, the copies' source consumers wait up to that
    long for a fetch to fill (``fetch.min.bytes`` 1 MiB), so a poll, and with exactly-once a
    transaction, carries a batch instead of a record or two. At the stack's 15 records/s this took
    the brokers from 0.14 to 0.10 cores each and MirrorMaker 2 from 0.095 to 0.059 on a 2-core
    machine (the suite sets 500), for copies up to that much later. Unset (the default): copy at once,
    as the freshness and comparison benchmarks need."""
    text = os.environ.get("OFFSET_PIPELINE_MM2_FETCH_WAIT_MS", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) > 60_000:
        raise DevStackError(f"OFFSET_PIPELINE_MM2_FETCH_WAIT_MS must be a whole number of milliseconds up to 60000, "
                            f"got {text!r}")
    return int(text) or None


def mirror_positions_setting(cluster_names: list[str] | tuple[str, ...]) -> str:
    """``OFFSET_PIPELINE_MIRROR_POSITIONS`` for this MirrorMaker 2 between ``cluster_names``: each
    flow keeps its source positions in its herder's Connect offsets topic, ``mm2-offsets.<source>.internal``
    on the target (dedicated mode's name, the cluster aliases being the clusters' names), written in
    the same transaction as the copies (exactly-once), so never ahead of them."""
    a, b = cluster_names
    return ",".join(f"{source}->{target}={target}:connect-offsets:mm2-offsets.{source}.internal"
                    for source, target in ((a, b), (b, a)))


def _log4j2(log_path: Path) -> str:
    """Everything to ``log_path``, rolled by size (a mirror left running keeps at most
    ``LOG_BACKUPS + 1`` files). Configuration dumps, client and telemetry start-up lines at WARN: they
    were nine tenths of a start's log (the configuration is in ``mm2.properties`` beside it)."""
    return rolling_log4j2(log_path, "MM2_LOG", LOG_MAX_SIZE, LOG_BACKUPS, {
        "org.apache.kafka.clients": "WARN", "org.apache.kafka.common.config.AbstractConfig": "WARN",
        "org.apache.kafka.common.telemetry": "WARN", "org.apache.kafka.common.utils.AppInfoParser": "WARN",
        "org.apache.kafka.connect.mirror.Scheduler": "WARN",
    })


def _escape_property(text: str) -> str:
    """``text`` as a value of a Java ``.properties`` file, read back unchanged: the format treats
    a backslash as an escape (a regex's ``\\.`` would lose it) and ends a value at a line break."""
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + escaped if escaped[:1] in (" ", "\t") else escaped


@dataclass(frozen=True)
class MirrorMaker2Config:
    """One MirrorMaker 2 mirroring ``topics`` both ways between two clusters.

    ``topics``: a Java regex that MirrorMaker 2 matches against whole topic names; no commas (the
    setting is a comma-separated list). ``rest_port``: the internal REST server's port, required
    with ``exactly_once``. ``work_dir``: its configuration and log."""

    clusters: tuple[MirrorEndpoint, MirrorEndpoint]
    work_dir: Path
    topics: str = DEFAULT_TOPICS
    rest_port: int | None = None
    exactly_once: bool = True
    refresh_topics_s: int = 1
    heap: str = "512m"
    jvm_options: tuple[str, ...] = field(default_factory=lambda: tuple(jvm_options()))  # OFFSET_PIPELINE_JVM_OPTIONS
    # MirrorMaker 2 without the transform (the throughput benchmark's baseline), otherwise configured
    # the same (offset syncs stay off with the checkpoints: MirrorMaker 2 here does not create their
    # topic then; bench/mm2/mirrormaker.py runs it with them). Without the origin headers nothing
    # drops copies, so only the first cluster's flow runs.
    origin_headers: bool = True
    one_way: bool = False  # only clusters[0] -> clusters[1]

    def __post_init__(self) -> None:
        a, b = self.clusters
        if a.name == b.name:
            raise DevStackError(f"MirrorMaker 2 needs two clusters of different names, got {a.name!r} twice")
        if "," in self.topics:
            raise DevStackError(f"MirrorMaker 2's topic regex may hold no comma (its setting is a list): {self.topics!r}")
        if not self.origin_headers and not self.one_way:
            raise DevStackError("MirrorMaker 2 without the origin-header transform mirrors one way only (one_way=True): "
                                "two flows over same-named topics would copy copies back")
        if self.exactly_once and self.rest_port is None:
            raise DevStackError("MirrorMaker 2 with exactly-once needs its internal REST server: give rest_port")
        for endpoint in self.clusters:
            mm2_login_properties(endpoint)  # refuses a login it cannot map, before anything starts
        if mm2_secret_properties(self) and any(ch in str(self.secrets_path) for ch in ":}$"):
            # a config provider's reference is ${provider:path:key}: these would end or split the path
            raise DevStackError(f"MirrorMaker 2's work_dir may hold no ':', '}}' or '$' on a secure cluster: {self.work_dir}")

    @property
    def flows(self) -> tuple[tuple[str, str], ...]:
        """The flows that run (source, target)."""
        a, b = (endpoint.name for endpoint in self.clusters)
        return ((a, b),) if self.one_way else ((a, b), (b, a))

    @property
    def log_path(self) -> Path:
        return self.work_dir / "mm2.log"

    @property
    def properties_path(self) -> Path:
        return self.work_dir / "mm2.properties"

    @property
    def secrets_path(self) -> Path:
        """The logins' passwords (0600), referred to from :attr:`properties_path`."""
        return (self.work_dir / "mm2-secrets.properties").absolute()  # read by the JVM, whatever its directory


def _jaas_quoted(text: str) -> str:
    """``text`` as a quoted value of a JAAS configuration: Kafka's parser reads a backslash as an
    escape inside quotes, so backslashes and quotes are escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mm2_login_properties(endpoint: MirrorEndpoint) -> dict[str, str]:
    """MirrorMaker 2's settings for logging in to ``endpoint`` (keys under its alias, the cluster's
    name), mapped from its librdkafka ``client_config``; empty for a plain cluster.

    Invariants: every librdkafka setting is mapped or refused, none dropped (a refusal is a
    :class:`DevStackError` naming the cluster and the key, never a value); a SASL login is complete
    (mechanism, user and password) and SCRAM; SASL settings on a protocol without SASL, or a CA on
    one without TLS, are refused (they would be ignored)."""
    name, config = endpoint.name, dict(endpoint.client_config)
    unknown = sorted(key for key in config if key not in LOGIN_SETTINGS)
    if unknown:
        raise DevStackError(f"{name}: MirrorMaker 2 here cannot map the librdkafka setting(s) {', '.join(unknown)} "
                            f"(it maps {', '.join(LOGIN_SETTINGS)})")
    if not config:
        return {}
    if "sasl.mechanism" in config and "sasl.mechanisms" in config \
            and config["sasl.mechanism"] != config["sasl.mechanisms"]:
        raise DevStackError(f"{name}: sasl.mechanism and sasl.mechanisms (the same librdkafka setting) differ")
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise DevStackError(f"{name}: security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}")
    props = {f"{name}.security.protocol": protocol}
    sasl = {key: config[key] for key in ("sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password")
            if key in config}
    if protocol.startswith("SASL_"):
        mechanism = str(sasl.get("sasl.mechanism", sasl.get("sasl.mechanisms", ""))).upper()
        if mechanism not in SCRAM_MECHANISMS:
            raise DevStackError(f"{name}: MirrorMaker 2 here logs in with SASL mechanism "
                                f"{' or '.join(SCRAM_MECHANISMS)} only (sasl.mechanism is {mechanism or 'not set'})")
        missing = [key for key in ("sasl.username", "sasl.password") if not sasl.get(key)]
        if missing:
            raise DevStackError(f"{name}: a {mechanism} login needs {' and '.join(missing)}")
        user, password = str(sasl["sasl.username"]), str(sasl["sasl.password"])
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in user + password):
            raise DevStackError(f"{name}: sasl.username or sasl.password holds a control character")
        props[f"{name}.sasl.mechanism"] = mechanism
        props[f"{name}.sasl.jaas.config"] = (f"{SCRAM_LOGIN_MODULE} required username={_jaas_quoted(user)} "
                                             f"password={_jaas_quoted(password)};")
    elif sasl:
        raise DevStackError(f"{name}: {', '.join(sorted(sasl))} given with security.protocol {protocol}, "
                            "which does not use SASL")
    if "ssl.ca.location" in config:
        if not protocol.endswith("SSL"):
            raise DevStackError(f"{name}: ssl.ca.location given with security.protocol {protocol}, which does not use TLS")
        ca = Path(str(config["ssl.ca.location"]))
        if ca.is_dir():
            raise DevStackError(f"{name}: ssl.ca.location {ca} is a directory; MirrorMaker 2 takes one PEM file")
        props[f"{name}.ssl.truststore.type"] = "PEM"
        props[f"{name}.ssl.truststore.location"] = str(ca)
    return props


def mm2_secret_properties(config: MirrorMaker2Config) -> dict[str, str]:
    """The per-cluster settings that hold a password (:data:`SECRET_SETTINGS`), for the secrets file."""
    return {key: value for endpoint in config.clusters for key, value in mm2_login_properties(endpoint).items()
            if key.partition(".")[2] in SECRET_SETTINGS}


def mm2_properties(config: MirrorMaker2Config) -> dict[str, str]:
    """The dedicated-mode configuration (see the module docstring for why each part is there). A
    setting holding a password is a reference to the secrets file (:func:`mm2_secret_properties`)."""
    names = [endpoint.name for endpoint in config.clusters]
    secrets = mm2_secret_properties(config)
    fetch_wait_ms = batched_fetch_wait_ms()
    props = {
        "clusters": ", ".join(names),
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        # connector settings shared by every flow
        "emit.heartbeats.enabled": "false",
        # Only the topics named: MirrorMaker 2 otherwise copies every heartbeats topic it finds. Beside
        # another MirrorMaker 2 on the same clusters (the tests' plain one, the benchmark's), each
        # copied the other's copies of heartbeats as new topics, a longer name a round, until Kafka
        # refused the names (249 characters); every new topic also restarted the flows' tasks.
        "heartbeats.replication.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "emit.offset-syncs.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "refresh.topics.interval.seconds": str(config.refresh_topics_s),
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        # worker settings (each flow's herder has its own offset, config and status topics)
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        # Plugins found through their ServiceLoader manifests (Kafka's jars and the transform's jar
        # have them) instead of a reflective scan of the classpath, which took ~8 s of the start-up
        # for each of the three plugin scans (MirrorMaker 2's own, then each flow's).
        "plugin.discovery": "service_load",
    }
    for endpoint in config.clusters:
        name = endpoint.name
        props[f"{name}.bootstrap.servers"] = endpoint.bootstrap_servers
        props.update({key: f"${{file:{config.secrets_path}:{key}}}" if key in secrets else value
                      for key, value in mm2_login_properties(endpoint).items()})
        # As a source: what the flow's consumer reads. As a target: its herder's worker settings.
        props[f"{name}.consumer.isolation.level"] = "read_committed"
        if fetch_wait_ms:
            props[f"{name}.consumer.fetch.min.bytes"] = str(1 << 20)
            props[f"{name}.consumer.fetch.max.wait.ms"] = str(fetch_wait_ms)
        props[f"{name}.offset.flush.interval.ms"] = "1000"
        # A worker killed and restarted comes back as a new member: its lost tasks are reassigned
        # at once instead of after the default five-minute wait for the old member to return.
        props[f"{name}.scheduled.rebalance.max.delay.ms"] = "0"
        props[f"{name}.plugin.discovery"] = "service_load"
        if config.exactly_once:
            props[f"{name}.exactly.once.source.support"] = "enabled"
            # A restart reads the flow's offsets topic up to its last stable offset, which a
            # transaction left open by a kill -9 holds back until the broker aborts it at this
            # timeout (Connect's default: one minute of a restart spent waiting). A transaction
            # spans one poll of the source, milliseconds long.
            props[f"{name}.producer.transaction.timeout.ms"] = "10000"
        else:
            # The worker reads its offsets topic read_committed only with exactly-once on. One that
            # takes over flows an exactly-once MirrorMaker 2 ran would otherwise take the offsets of
            # that one's last, aborted transaction (left by a stop or a kill mid-copy) for committed,
            # and never copy that transaction's records (seen: one record lost in a trial round).
            props[f"{name}.isolation.level"] = "read_committed"
    if secrets:  # resolved by each herder's worker, and by it only when a connector or task starts
        props["config.providers"] = "file"
        props["config.providers.file.class"] = FILE_CONFIG_PROVIDER
    if config.rest_port is not None:  # always so with exactly-once (checked by the config)
        props["dedicated.mode.enable.internal.rest"] = "true"
        props["listeners"] = f"http://127.0.0.1:{config.rest_port}"
    if config.one_way:
        a, b = names
        props[f"{b}->{a}.enabled"] = "false"
    for source, target in config.flows:
        flow = f"{source}->{target}"
        props.update({
            f"{flow}.enabled": "true",
            f"{flow}.topics": f"{config.topics}, {re.escape(PROBE_TOPIC)}",
        })
        if not config.origin_headers:
            continue
        # One transform drops copies and marks the rest: the same records as Kafka's Filter under
        # HasHeaderKey{IDC} in front of it, one worker stage per record fewer (a two-stage chain
        # copied 85 % of the rate without transforms, the one stage 94 %:
        # docs/results/transform-throughput.md)
        props.update({
            f"{flow}.transforms": "origin",
            f"{flow}.transforms.origin.type": TRANSFORM_CLASS,
            f"{flow}.transforms.origin.cluster.header": ORIGIN_CLUSTER_HEADER,
            f"{flow}.transforms.origin.offset.header": ORIGIN_OFFSET_HEADER,
            f"{flow}.transforms.origin.drop.copies": "true",
        })
    return props


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by its owner only (0600) from the first byte on: written to a
    new file of that mode beside it, then moved over ``path`` (a file left by an older run, of any
    mode, is replaced, not rewritten in place)."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.unlink(missing_ok=True)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def _die_with_parent():
    """In the JVM's process before exec: SIGKILL when the starting thread's process dies."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        prctl = None
    parent = os.getpid()

    def arm() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


class MirrorMaker2:
    """One MirrorMaker 2 JVM (see the module docstring). ``start()`` returns once both flows copy."""

    def __init__(self, config: MirrorMaker2Config):
        self.config = config
        self.proc: subprocess.Popen | None = None
        self.ready_after_s: float | None = None
        self._log_scanned = 0  # how far task_failed() read the log (from where the JVM last started)
        self._task_failed = False
        self._login_scanned = 0  # how far _login_refused() read the log (from where the JVM last started)

    @property
    def log_path(self) -> Path:
        return self.config.log_path

    def log_tail(self, lines: int = 40) -> str:
        return log_file_tail(self.log_path, lines, "(no MirrorMaker 2 log was written)")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def task_failed(self) -> bool:
        """Whether a task of this JVM failed since it started (:data:`TASK_FAILED` in its log). Reads
        only what was logged since the last call; a log rolled meanwhile is read from its start."""
        if not self._task_failed and self.log_path.exists():
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                if size < self._log_scanned:  # rolled
                    self._log_scanned = 0
                log.seek(max(0, self._log_scanned - len(TASK_FAILED)))
                self._task_failed = TASK_FAILED.encode() in log.read(size)
                self._log_scanned = size
        return self._task_failed

    def healthy(self) -> bool:
        """The JVM runs and none of its tasks failed."""
        return self.running() and not self.task_failed()

    def command(self) -> list[str]:
        classpath = f"{mm2_jars()}/*{os.pathsep}{transform_jar()}"
        return [
            find_java(), f"-Xmx{self.config.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.config.work_dir / 'log4j2.properties'}",
            *self.config.jvm_options,  # last, so they win over the defaults above
            "-cp", classpath, MAIN_CLASS, str(self.config.properties_path),
        ]

    def write_config(self) -> None:
        self.config.work_dir.mkdir(parents=True, exist_ok=True)
        (self.config.work_dir / "log4j2.properties").write_text(_log4j2(self.log_path))
        for path, props in ((self.config.secrets_path, mm2_secret_properties(self.config)),
                            (self.config.properties_path, mm2_properties(self.config))):
            _write_private(path, "".join(f"{key} = {_escape_property(value)}\n" for key, value in props.items()))

    def start(self, timeout_s: float = 120.0, stop: threading.Event | None = None) -> float:
        """Start the JVM and wait until both flows copy; returns the seconds that took. A taken
        REST port, a JVM that exits, a cluster refusing MirrorMaker 2's login, or a flow that copies
        nothing within ``timeout_s`` is a :class:`DevStackError` naming it and the log; so is
        ``stop`` set meanwhile (the JVM is stopped in every one of these cases)."""
        if self.running():
            raise DevStackError(f"MirrorMaker 2 already runs (pid {self.proc.pid}); log: {self.log_path}")
        port = self.config.rest_port
        if port is not None and port_in_use(port):
            raise DevStackError(
                f"MirrorMaker 2: its internal REST port 127.0.0.1:{port} is already in use by another process; "
                f"stop it or choose another port (log: {self.log_path})")
        command = self.command()  # builds or fetches the jars first: not part of the start-up time
        self.write_config()
        began = time.monotonic()
        self._log_scanned, self._task_failed = self._log_size(), False
        self._login_scanned = self._log_scanned
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== starting MirrorMaker 2 at {time.strftime('%Y-%m-%dT%H:%M:%S')} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent(),
            )
        try:
            self._wait_both_flows_copy(began + timeout_s, stop or threading.Event())
        except BaseException:
            self.stop(grace_s=5.0)
            raise
        self.ready_after_s = time.monotonic() - began
        return self.ready_after_s

    def _login_refused(self) -> str | None:
        """The first line MirrorMaker 2 logged since its start saying a cluster refused its login
        (:data:`AUTH_FAILED`), or None. Reads only what was logged since the last call."""
        if not self.log_path.exists():
            return None
        with open(self.log_path, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            if size < self._login_scanned:  # rolled
                self._login_scanned = 0
            log.seek(self._login_scanned)
            text = log.read(size - self._login_scanned).decode(errors="replace")
        complete = text.rfind("\n") + 1  # a line being written is read whole next time
        self._login_scanned += len(text[:complete].encode(errors="replace"))
        lines = text[:complete].splitlines()
        for marker in AUTH_FAILED:  # the client's line first: it names the broker's address
            for line in lines:
                if marker in line:
                    return line.strip()
        return None

    def _check_login(self) -> None:
        """A :class:`DevStackError` naming the cluster whose brokers refused MirrorMaker 2's login,
        quoting the line of the log that says so (MirrorMaker 2 exits or retries; either way nothing
        is copied to or from that cluster)."""
        line = self._login_refused()
        if line is None:
            return
        named = [endpoint.name for endpoint in self.config.clusters
                 if any(f":{address.rpartition(':')[2]})" in line for address in endpoint.bootstrap_servers.split(","))]
        where = " or ".join(named) if named else "one of its clusters"
        raise DevStackError(f"MirrorMaker 2 could not log in to {where}: authentication failed (a wrong user or "
                            f"password in its login?); {self.log_path} says:\n{line}")

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        self._check_login()  # the likeliest cause of an exit at start-up on a secure cluster
        code = None if self.proc is None else self.proc.returncode
        tail = self.log_tail()
        port = self.config.rest_port
        if port is not None and "Address already in use" in tail:
            raise DevStackError(
                f"MirrorMaker 2: its internal REST port 127.0.0.1:{port} is already in use (the JVM exited "
                f"with code {code}); last lines of {self.log_path}:\n{tail}")
        raise DevStackError(f"MirrorMaker 2 exited during start-up (code {code}); last lines of {self.log_path}:\n{tail}")

    def _wait_both_flows_copy(self, deadline: float, stop: threading.Event) -> None:
        """Create the probe topic on both clusters, produce one probe on each and wait until each is
        seen copied on the other, with ``IDC`` = its source's name and ``Offset`` = its offset there.
        A step that failed (a probe topic just created, a broker busy, a login refused) is tried
        again next round; the last such problem is in the error when time runs out. A login refused
        to MirrorMaker 2 itself ends the wait at once (:meth:`_check_login`). The topics are created
        after the JVM started (MirrorMaker 2 finds them within ``refresh_topics_s``), so a wrong
        password shows as MirrorMaker 2's own authentication failure, not a client call timing out
        before the JVM ever ran."""
        pending: dict[tuple[str, str], _Probe | None] = {flow: None for flow in self.config.flows}
        endpoints = {endpoint.name: endpoint for endpoint in self.config.clusters}
        without_probe_topic = list(endpoints)  # created once the JVM runs: a refused login shows in its log
        problem = ""
        while pending:
            self._check_alive()
            self._check_login()
            if stop.is_set():
                raise DevStackError(f"MirrorMaker 2 was stopped during its start-up; log: {self.log_path}")
            if time.monotonic() > deadline:
                flows = ", ".join(f"{s}->{t}" for s, t in pending)
                raise DevStackError(
                    f"MirrorMaker 2 did not copy its probe record on {flows} in time"
                    f"{f' (last probe problem: {problem})' if problem else ''}; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}")
            for name in list(without_probe_topic):
                try:
                    _ensure_probe_topic(endpoints[name])
                    without_probe_topic.remove(name)
                except (DevStackError, KafkaException, TimeoutError) as exc:
                    problem = f"{name}: {exc}"
            if without_probe_topic:
                time.sleep(0.5)  # pause before the next try, not a readiness criterion
                continue
            for (source, target), probe in list(pending.items()):
                try:
                    if probe is None:  # (re)sent until a copy is seen: MirrorMaker 2 may start late
                        pending[(source, target)] = _send_probe(endpoints[source], endpoints[target])
                    elif _probe_copied(endpoints[target], probe, source,
                                       wait_s=min(2.0, max(0.1, deadline - time.monotonic())),
                                       with_headers=self.config.origin_headers):
                        del pending[(source, target)]
                    elif time.monotonic() - probe.sent_at > 10:
                        pending[(source, target)] = None
                except (KafkaException, _ProbeNotSent) as exc:
                    problem = f"{source}->{target}: {exc}"
                    pending[(source, target)] = None
                    time.sleep(0.5)  # pause before the next try, not a readiness criterion

    def stop(self, grace_s: float = STOP_GRACE_S) -> bool:
        """SIGTERM (MirrorMaker 2 stops its connectors), SIGKILL after ``grace_s``. Returns whether it ran."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        _signal_group(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        return True

    def kill(self) -> bool:
        """``kill -9``, as a crash would: no shutdown hook, nothing flushed. Returns whether it ran."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        return True

    def __enter__(self) -> MirrorMaker2:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class MirrorMaker2Keeper:
    """Keeps one :class:`MirrorMaker2` copying, as a deployment's supervisor would: a thread of its
    own starts the JVM and restarts it when it exits or one of its tasks failed (Connect leaves a
    failed task stopped). The JVM's parent-death signal follows the thread that started it, so the
    keeper's thread, which lives as long as the mirror, starts every JVM.

    ``start()`` returns once the first start is ready (or raises its error); ``stop()`` stops the
    thread and the JVM. ``restarts`` counts restarts; each one is printed with its reason."""

    def __init__(self, mirror: MirrorMaker2, check_every_s: float = 2.0, start_timeout_s: float = 180.0,
                 stop: threading.Event | None = None):
        self.mirror = mirror
        self.check_every_s = check_every_s
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self.stop_grace_s = 10.0  # the JVM's SIGTERM grace at the end; stop(grace_s=...) changes it
        self._stop = stop or threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mirrormaker2-keeper", daemon=True)

    def start(self) -> float:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self.mirror.ready_after_s or 0.0

    def _run(self) -> None:
        try:
            self.mirror.start(timeout_s=self.start_timeout_s, stop=self._stop)
        except BaseException as exc:  # handed to start()'s caller
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.wait(self.check_every_s):
                if self.mirror.healthy():
                    continue
                reason = "a task failed" if self.mirror.running() else f"the JVM exited (code {self.mirror.proc.returncode})"
                print(f"MirrorMaker 2 restarted: {reason}; log: {self.mirror.log_path}", file=sys.stderr, flush=True)
                self.mirror.stop(grace_s=10.0)
                try:
                    self.mirror.start(timeout_s=self.start_timeout_s, stop=self._stop)
                    self.restarts += 1
                except DevStackError as exc:  # tried again at the next check, unless stopping
                    print(f"MirrorMaker 2 restart failed: {exc}", file=sys.stderr, flush=True)
        finally:
            self.mirror.stop(grace_s=self.stop_grace_s)

    def stop(self, timeout_s: float = 60.0, grace_s: float | None = None) -> None:
        """Stops the keeper and the JVM: SIGTERM, then SIGKILL after ``grace_s`` (default 10 s; a
        throwaway mirror whose positions nobody reads again can take a short one)."""
        if grace_s is not None:
            self.stop_grace_s = grace_s
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def __enter__(self) -> MirrorMaker2Keeper:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


class _ProbeNotSent(Exception):
    """The probe record was not acknowledged (tried again)."""


@dataclass(frozen=True)
class _Probe:
    token: bytes
    offset: int  # on the source cluster
    target_start: int  # the target partition's end before the probe was sent
    sent_at: float


def _ensure_probe_topic(endpoint: MirrorEndpoint) -> None:
    admin = AdminClient({**endpoint.settings(), "log_level": 3})
    future = admin.create_topics([NewTopic(PROBE_TOPIC, num_partitions=1)], operation_timeout=10, request_timeout=15)[PROBE_TOPIC]
    try:
        future.result(timeout=20)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise DevStackError(f"{endpoint.name}: creating the probe topic {PROBE_TOPIC} failed: {exc}") from exc


def _end_offset(endpoint: MirrorEndpoint) -> int:
    consumer = Consumer({**endpoint.settings(), "group.id": "offset-pipeline-mm2-probe", "log_level": 3,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(PROBE_TOPIC, 0), timeout=10)
        return high
    finally:
        consumer.close()


def _send_probe(source: MirrorEndpoint, target: MirrorEndpoint) -> _Probe:
    target_start = _end_offset(target)
    token = f"probe {source.name}->{target.name} {uuid.uuid4().hex}".encode()
    delivered: list = []
    producer = Producer({**source.settings(), "log_level": 3, "message.timeout.ms": 15000})
    try:
        producer.produce(PROBE_TOPIC, value=token, partition=0, on_delivery=lambda err, msg: delivered.append((err, msg)))
        producer.flush(20)
    finally:
        producer.flush(0)
    if not delivered or delivered[0][0] is not None:
        raise _ProbeNotSent(f"{source.name}: producing the probe record failed: {delivered[0][0] if delivered else 'no answer'}")
    return _Probe(token, delivered[0][1].offset(), target_start, time.monotonic())


def _probe_copied(target: MirrorEndpoint, probe: _Probe, source_name: str, wait_s: float,
                  with_headers: bool = True) -> bool:
    """The probe's copy is on ``target``, with the origin headers of its source and offset (unless
    ``with_headers`` is off: plain MirrorMaker 2)."""
    consumer = Consumer({**target.settings(), "group.id": "offset-pipeline-mm2-probe", "log_level": 3,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(PROBE_TOPIC, 0, probe.target_start)])
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            message = consumer.poll(min(0.5, max(0.0, deadline - time.monotonic())))
            if message is None or message.error():
                continue
            if message.value() == probe.token:
                if not with_headers:
                    return True
                headers = dict(message.headers() or [])
                expected = (source_name.encode(), str(probe.offset).encode())
                if (headers.get(ORIGIN_CLUSTER_HEADER), headers.get(ORIGIN_OFFSET_HEADER)) != expected:
                    raise DevStackError(
                        f"MirrorMaker 2 copied the probe to {target.name} with origin headers "
                        f"{message.headers()!r}, expected IDC={expected[0]!r} Offset={expected[1]!r}")
                return True
        return False
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    """Run MirrorMaker 2 both ways until SIGINT, SIGTERM or SIGHUP, restarted when its JVM exits or
    one of its tasks fails. A secure cluster's login comes from its access file (``--login``, as the
    stack's other processes get it): the password is on no command line."""
    from devstack.cli import add_login_argument, cluster_address, login_configs

    parser = argparse.ArgumentParser(prog="python -m devstack.mirrormaker2", description=main.__doc__)
    parser.add_argument("--cluster", type=cluster_address, action="append", required=True, metavar="NAME=HOST:PORT",
                        help="one of the two clusters (give it twice)")
    parser.add_argument("--work-dir", type=Path, required=True, help="its configuration and log (mm2.log)")
    parser.add_argument("--topics", default=DEFAULT_TOPICS, help="Java regex of the topics to mirror (whole names)")
    parser.add_argument("--rest-port", type=int, help="the internal REST server's port (needed for exactly-once)")
    parser.add_argument("--at-least-once", action="store_true", help="without exactly-once source support")
    add_login_argument(parser)
    args = parser.parse_args(argv)
    if len(args.cluster) != 2:
        parser.error("give --cluster exactly twice")
    strangers = sorted({name for name, _ in args.login} - {name for name, _ in args.cluster})
    if strangers:
        parser.error(f"--login names no --cluster: {', '.join(strangers)}")
    try:
        logins = login_configs(args.login)
        config = MirrorMaker2Config(
            tuple(MirrorEndpoint(name, bootstrap, client_config=logins.get(name, {})) for name, bootstrap in args.cluster),
            args.work_dir, topics=args.topics, rest_port=args.rest_port, exactly_once=not args.at_least_once,
        )
    except (DevStackError, OSError, ValueError, KeyError) as exc:  # an unreadable access file, a login not mapped
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    keeper = MirrorMaker2Keeper(MirrorMaker2(config), stop=stop)
    try:
        took = keeper.start()
        print(f"MirrorMaker 2 copies both ways ({took:.1f}s to start; JVM pid {keeper.mirror.proc.pid}); "
              f"log: {keeper.mirror.log_path}; restarted when it exits or a task fails", flush=True)
        stop.wait()
    except DevStackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        keeper.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
