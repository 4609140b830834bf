"""The floor: the Kafka lookups of one sync cycle, done by a minimal sequential script.

:func:`run_lookup_floor` does the snapshot's and the commit step's lookups (admin calls);
:func:`run_floor` the translation reads, described here:

One read_committed consumer per cluster, reused for every partition, no Spark, no Dagster, no
ClickHouse, no translation logic. Per topic-partition (all its groups at once, as the pipeline):

* active side: one forward read from ``min(c) - window`` to the first record at or after ``max(c)``;
* one-way topics translated from the producing side: per distinct searched timestamp (the record
  at ``c``, else the last one below it) one ``offsets_for_times`` on the standby, then per distinct
  answer a forward read until the copy's ``Offset`` header reaches the searched record (at most
  ``refine_window`` records).

The pipeline's cycle time divided by this is what its machinery costs over the unavoidable reads.
Used by ``cycle_benchmark``, ``scale_curve`` / ``scale_cycles`` and ``translation_reads``;
:func:`run_floor` takes plain inputs (:func:`floor_partitions` makes them from a benchmark's clusters,
workload and groups).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench.clusters import CLUSTERS, ActiveGroups, ScratchClusters, Workload
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges

ORIGIN_OFFSET_HEADER = "Offset"


@dataclass(frozen=True)
class FloorPartition:
    topic: str
    partition: int
    active: str
    standby: str
    committed: tuple[int, ...]  # every group's c on the active cluster
    active_log_start: int
    active_log_end: int
    standby_log_end: int
    timestamp_search: bool  # one-way topic, translated from its producing cluster


@dataclass
class FloorResult:
    seconds: float
    partitions: int
    active_records: int = 0
    standby_records: int = 0
    offsets_for_times_calls: int = 0


def _consumer(bootstrap: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"offset-pipeline-floor-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 0,
        "log_level": 3,
    })


def _read(consumer: Consumer, topic: str, partition: int, start: int, end: int, done, limit: int | None = None) -> list:
    """Records from ``start`` below ``end`` until ``done(msg)``, ``limit`` records, a record at or
    after ``end`` or the end-of-partition event (as the pipeline's reader: never ``position()``)."""
    if start >= end:
        return []
    consumer.assign([TopicPartition(topic, partition, start)])
    out = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(500, timeout=0) or [m for m in [consumer.poll(1.0)] if m is not None]
            for msg in batch:
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    continue
                if msg.offset() >= end:
                    return out
                out.append(msg)
                if done(msg) or (limit is not None and len(out) >= limit):
                    return out
        raise TimeoutError(f"{topic}[{partition}]: no end of the log in 30 s")
    finally:
        consumer.unassign()


def _origin_offset(msg) -> int | None:
    for key, value in msg.headers() or []:
        if key == ORIGIN_OFFSET_HEADER:
            return int(value)
    return None


def run_floor(bootstraps: dict[str, str], partitions: list[FloorPartition], *, window: int = 50,
              refine_window: int = 200) -> FloorResult:
    consumers = {name: _consumer(bootstrap) for name, bootstrap in bootstraps.items()}
    result = FloorResult(0.0, len(partitions))
    try:
        for name, consumer in consumers.items():  # connect and learn the brokers before timing
            consumer.list_topics(timeout=10)
        started = time.monotonic()
        for fp in partitions:
            active, standby = consumers[fp.active], consumers[fp.standby]
            inside = [c for c in fp.committed if fp.active_log_start <= c <= fp.active_log_end]
            if not inside:
                continue
            top = max(inside)
            records = _read(active, fp.topic, fp.partition, max(fp.active_log_start, min(inside) - window),
                            fp.active_log_end, lambda m: m.offset() >= top)
            result.active_records += len(records)
            if not fp.timestamp_search or not records:
                continue
            searched = {}
            for c in inside:
                at = next((m for m in records if m.offset() >= c), None) or next(
                    (m for m in reversed(records) if m.offset() < c), None)
                if at is not None:
                    searched[at.timestamp()[1]] = max(searched.get(at.timestamp()[1], -1), at.offset())
            for ts, active_offset in searched.items():
                answer = standby.offsets_for_times([TopicPartition(fp.topic, fp.partition, ts)], timeout=10)[0]
                result.offsets_for_times_calls += 1
                if answer.offset < 0:
                    continue
                refine = _read(
                    standby, fp.topic, fp.partition, answer.offset, fp.standby_log_end,
                    lambda m, a=active_offset: (_origin_offset(m) or -1) >= a, limit=refine_window,
                )
                result.standby_records += len(refine)
        result.seconds = time.monotonic() - started
    finally:
        for consumer in consumers.values():
            consumer.close()
    return result


# -- the other lookups of a cycle: the snapshot's and the commit step's -------------------------


@dataclass
class LookupFloor:
    snapshot_seconds: float = 0.0
    commit_seconds: float = 0.0
    groups_read: int = 0
    partitions_ranged: int = 0


def run_lookup_floor(bootstraps: dict[str, str], groups: dict[str, str], partitions: list[tuple[str, int]],
                     timeout_s: float = 30.0) -> LookupFloor:
    """The snapshot's and the commit step's Kafka lookups, sequential, with plain admin clients.

    ``groups``: group id -> its active cluster. Snapshot, per cluster: list the groups, describe
    the workload's, each one's committed offsets, topic metadata, log start / end / last stable
    offset of ``partitions``, the topics' ``message.timestamp.type``. Commit step, per group: its
    members on both clusters and its committed offsets on the standby (what is re-read before
    planning; a benchmark over quiescent logs writes nothing).
    """
    from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel
    from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

    admins = {name: AdminClient({"bootstrap.servers": b, "log_level": 3}) for name, b in bootstraps.items()}
    out = LookupFloor(groups_read=len(groups), partitions_ranged=len(partitions))
    for admin in admins.values():
        admin.list_topics(timeout=timeout_s)  # connected before timing
    ids = sorted(groups)
    topics = sorted({t for t, _ in partitions})
    started = time.monotonic()
    for admin in admins.values():
        admin.list_consumer_groups(request_timeout=timeout_s).result(timeout_s)
        for future in admin.describe_consumer_groups(ids, request_timeout=timeout_s).values():
            future.result(timeout_s)
        for gid in ids:
            admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)], request_timeout=timeout_s)[gid].result(timeout_s)
        admin.list_topics(timeout=timeout_s)
        for spec, isolation in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                                (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
                                (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)):
            request = {TopicPartition(t, p): spec for t, p in partitions}
            for future in admin.list_offsets(request, isolation_level=isolation, request_timeout=timeout_s).values():
                future.result(timeout_s)
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        for future in admin.describe_configs(resources, request_timeout=timeout_s).values():
            future.result(timeout_s)
    out.snapshot_seconds = time.monotonic() - started

    started = time.monotonic()
    for gid, active in sorted(groups.items()):
        standby = next(n for n in admins if n != active)
        for name in (active, standby):
            admins[name].describe_consumer_groups([gid], request_timeout=timeout_s)[gid].result(timeout_s)
        admins[standby].list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(gid)], request_timeout=timeout_s)[gid].result(timeout_s)
    out.commit_seconds = time.monotonic() - started
    return out


def floor_partitions(clusters: ScratchClusters, workload: Workload, groups: ActiveGroups) -> list[FloorPartition]:
    """One :class:`FloorPartition` per Kafka partition the groups read: their committed offsets on the
    active cluster, both clusters' log ranges, and whether the sync would search timestamps there."""
    shapes = workload.shapes()
    active_of = {g.group_id: g.active for g in workload.groups()}
    committed: dict[tuple[str, str, int], list[int]] = {}
    for (group_id, topic, p), c in groups.committed.items():
        committed.setdefault((active_of[group_id], topic, p), []).append(c)
    tps = sorted({(t, p) for _, t, p in committed})
    ranges = {
        name: {(r.topic, r.partition): r for r in read_partition_ranges(clusters.admin(name), name, tps)}
        for name in CLUSTERS
    }
    out = []
    for (active, topic, p), cs in sorted(committed.items()):
        standby = next(n for n in CLUSTERS if n != active)
        a, s = ranges[active][(topic, p)], ranges[standby][(topic, p)]
        out.append(FloorPartition(
            topic, p, active, standby, tuple(cs), a.log_start, a.log_end, s.log_end,
            timestamp_search=shapes[topic] == f"one_way:{active}",
        ))
    return out
