"""Shared set-up for the benchmarks in ``bench/``: two scratch KRaft clusters on free ports, a
mirrored workload of every topic shape, and consumer groups with members and commits on their
active cluster.

Real brokers (the pinned Kafka jars), the real :class:`~devstack.mirror.DataMirror`,
real group members: nothing is mocked, nothing runs in Docker. Meant for ``cycle_benchmark.py`` and
for other benchmarks over the same world (failover trials)::

    with ScratchClusters() as clusters, ActiveGroups(clusters, workload) as groups:
        ...

Imported as ``bench.clusters`` (the repository root is on the venv's path: ``bin/setup``).
"""

from __future__ import annotations

import random
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from devstack.cluster import ClusterSpec, KafkaCluster
from devstack.jars import fetch_jars
from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint, MirrorStats
from devstack.paths import jars_dir
from devstack.traffic import ProducedRecord, TopicTraffic, TrafficGenerator, ensure_topics
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges

CLUSTERS = ("idc1", "idc2")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ScratchClusters:
    """Two single-node KRaft clusters (``idc1``, ``idc2``) on free loopback ports in a temporary
    folder, apart from the dev stack's fixed ports; stopped and deleted on exit."""

    def __init__(self, base_dir: Path | None = None, keep: bool = False, heap: str = "768m"):
        self._given_dir = base_dir
        self.keep = keep
        self.heap = heap
        self.base_dir: Path | None = None
        self.clusters: dict[str, KafkaCluster] = {}

    def __enter__(self) -> "ScratchClusters":
        self.base_dir = self._given_dir or Path(tempfile.mkdtemp(prefix="offset-pipeline-bench-"))
        jars = fetch_jars(jars_dir())
        try:
            for name in CLUSTERS:
                spec = ClusterSpec(name, free_port(), free_port(), self.base_dir / name, heap=self.heap)
                self.clusters[name] = KafkaCluster(spec, jars)
                self.clusters[name].start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for cluster in self.clusters.values():
            cluster.stop()
        if self.base_dir is not None and not self.keep and self._given_dir is None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    @property
    def bootstraps(self) -> dict[str, str]:
        return {name: c.spec.bootstrap_servers for name, c in self.clusters.items()}

    def admin(self, name: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstraps[name], "log_level": 3})


# -- the workload ---------------------------------------------------------------------------------

# Ten shape slots, repeated over the topics: 4 two-way, 6 one-way (3 timestamp patterns, both sides).
_SHAPE_SLOTS = (
    ("two_way", ("idc1", "idc2"), "increasing"),
    ("two_way", ("idc1", "idc2"), "increasing"),
    ("two_way", ("idc1", "idc2"), "increasing"),
    ("two_way", ("idc1", "idc2"), "increasing"),
    ("one_way", ("idc1",), "increasing"),
    ("one_way", ("idc1",), "increasing"),
    ("one_way", ("idc2",), "increasing"),
    ("one_way", ("idc1",), "equal_batches"),
    ("one_way", ("idc1",), "equal_batches"),
    ("one_way", ("idc2",), "equal_batches"),
)


@dataclass(frozen=True)
class GroupSpec:
    group_id: str
    active: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class Workload:
    """``topics`` x ``partitions`` partitions, each read by ``groups_per_topic`` groups; a group reads
    ``topics_per_group`` topics (fewer groups, so fewer members to keep alive). About
    ``records_per_partition`` records per producing cluster per partition."""

    topics: int = 100
    partitions: int = 20
    groups_per_topic: int = 5
    topics_per_group: int = 10
    records_per_partition: int = 40
    seed: int = 7
    prefix: str = "bench."

    def __post_init__(self) -> None:
        if min(self.topics, self.partitions, self.groups_per_topic, self.topics_per_group) < 1:
            raise ValueError("topics, partitions, groups_per_topic and topics_per_group must be >= 1")
        if self.topics_per_group > self.topics:
            raise ValueError("topics_per_group cannot exceed topics")

    @property
    def group_partitions(self) -> int:
        return self.topics * self.partitions * self.groups_per_topic

    def topic_name(self, i: int) -> str:
        return f"{self.prefix}t{i:03d}.{_SHAPE_SLOTS[i % len(_SHAPE_SLOTS)][0]}"

    def plan(self) -> tuple[TopicTraffic, ...]:
        out = []
        for i in range(self.topics):
            _, producers, timestamps = _SHAPE_SLOTS[i % len(_SHAPE_SLOTS)]
            # equal_batches: batches of 5 records per partition on average share one timestamp.
            batch = 5 * self.partitions if timestamps == "equal_batches" else 1
            out.append(TopicTraffic(self.topic_name(i), self.partitions, producers, timestamps, batch_size=batch))
        return tuple(out)

    def shapes(self) -> dict[str, str]:
        """``TranslationConfig.topic_shapes`` for the workload's topics."""
        return {
            t.name: "two_way" if t.two_way else f"one_way:{t.producers_on[0]}" for t in self.plan()
        }

    def groups(self) -> list[GroupSpec]:
        """Each (topic, slot) pair goes to one group; a group takes up to ``topics_per_group``
        consecutive topics of one slot. Even slots are active on idc1, odd slots on idc2, so every
        topic has groups on both clusters and each partition is read in both directions."""
        groups: list[GroupSpec] = []
        for slot in range(self.groups_per_topic):
            for k in range(0, self.topics, self.topics_per_group):
                topics = tuple(self.topic_name(i) for i in range(k, min(k + self.topics_per_group, self.topics)))
                groups.append(GroupSpec(f"{self.prefix}g{len(groups):03d}", CLUSTERS[slot % 2], topics))
        return groups


@dataclass
class FilledWorkload:
    produced: dict[str, int]  # origin cluster -> committed records produced there
    seconds: float


def create_and_fill(clusters: ScratchClusters, workload: Workload) -> FilledWorkload:
    """Create every topic on both clusters (same partition counts) and produce the records."""
    started = time.monotonic()
    plan = workload.plan()
    ensure_topics(plan, clusters.bootstraps, timeout_s=120)
    generator = TrafficGenerator(plan, clusters.bootstraps, seed=workload.seed)
    records: list[ProducedRecord] = generator.emit(workload.records_per_partition * workload.partitions)
    produced = {name: 0 for name in CLUSTERS}
    for record in records:
        produced[record.origin] += record.committed
    return FilledWorkload(produced, time.monotonic() - started)


def mirror_both_ways(clusters: ScratchClusters, workload: Workload, expected: dict[str, int],
                     timeout_s: float = 600) -> tuple[list[MirrorStats], float]:
    """Run the real data mirror both ways (threads) until every produced record was copied, then
    stop it: the benchmark measures the sync over quiescent, fully mirrored logs."""
    started = time.monotonic()
    stop = threading.Event()
    pattern = "^" + workload.prefix.replace(".", "[.]")
    mirrors = {
        src: DataMirror(MirrorConfig(
            MirrorEndpoint(src, clusters.bootstraps[src]), MirrorEndpoint(dst, clusters.bootstraps[dst]),
            topic_pattern=pattern, metadata_refresh_s=1.0,
        ))
        for src, dst in (("idc1", "idc2"), ("idc2", "idc1"))
    }
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True, name=f"mirror-{s}") for s, m in mirrors.items()]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + timeout_s
        while any(m.stats.copied < expected[src] for src, m in mirrors.items()):
            if time.monotonic() > deadline or not all(t.is_alive() for t in threads):
                raise RuntimeError(
                    "the mirror did not copy every record: "
                    + ", ".join(f"{s}: {m.stats.copied}/{expected[s]}" for s, m in mirrors.items())
                )
            time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    return [m.stats for m in mirrors.values()], time.monotonic() - started


# -- consumer groups ------------------------------------------------------------------------------


@dataclass
class ActiveGroups:
    """One real member per group on its active cluster (subscribed, assigned, then paused so it
    fetches nothing), with committed offsets at varied positions. Members stay until exit, so the
    snapshot sees each group active on exactly one cluster.

    ``committed``: (group, topic, partition) -> c. Positions: a fifth of the partitions at the log
    end (caught up), the rest uniform over the log.
    """

    clusters: ScratchClusters
    workload: Workload
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    members: dict[str, Consumer] = field(default_factory=dict)
    seconds: float = 0.0

    def __enter__(self) -> "ActiveGroups":
        started = time.monotonic()
        rng = random.Random(f"{self.workload.seed}:commits")
        groups = self.workload.groups()
        tps = [(t.name, p) for t in self.workload.plan() for p in range(t.partitions)]
        ranges = {
            name: {(r.topic, r.partition): r for r in read_partition_ranges(self.clusters.admin(name), name, tps)}
            for name in CLUSTERS
        }
        try:
            self._join_all(groups)
            for spec in groups:
                offsets = []
                for topic in spec.topics:
                    for p in range(self.workload.partitions):
                        r = ranges[spec.active][(topic, p)]
                        c = r.log_end if rng.random() < 0.2 else rng.randint(r.log_start, r.log_end)
                        self.committed[(spec.group_id, topic, p)] = c
                        offsets.append(TopicPartition(topic, p, c))
                self.members[spec.group_id].commit(offsets=offsets, asynchronous=False)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.seconds = time.monotonic() - started
        return self

    def _join_all(self, groups: list[GroupSpec], timeout_s: float = 120) -> None:
        """Subscribe one member per group, then poll them all until each has its assignment."""
        assigned: set[str] = set()
        for spec in groups:
            member = Consumer({
                "bootstrap.servers": self.clusters.bootstraps[spec.active],
                "group.id": spec.group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "session.timeout.ms": 45000,
                "heartbeat.interval.ms": 15000,  # 500 members' heartbeats every 3 s cost the brokers CPU too
                "max.poll.interval.ms": 3_600_000,  # members are not polled after joining
                "log_level": 3,
            })

            def on_assign(consumer, partitions, group_id=spec.group_id):
                # A member that fetches nothing: no CPU, no lag change. Assigned here, then paused: a
                # pause before the assignment (which the client makes after this callback) did not
                # hold, and 500 members long-polling 200 partitions each took 1.3 of the 2 cores'
                # broker time and half a core here, at idle (measured at 100k group-partitions).
                consumer.assign(partitions)
                consumer.pause(partitions)
                assigned.add(group_id)

            member.subscribe(list(spec.topics), on_assign=on_assign)
            self.members[spec.group_id] = member
        deadline = time.monotonic() + timeout_s
        while len(assigned) < len(groups):
            if time.monotonic() > deadline:
                missing = sorted({g.group_id for g in groups} - assigned)
                raise RuntimeError(f"groups without an assignment after {timeout_s}s: {missing[:5]}...")
            for group_id, member in self.members.items():
                if group_id not in assigned:
                    member.poll(0.01)

    def __exit__(self, *exc) -> None:
        for member in self.members.values():
            member.close()
        self.members.clear()
