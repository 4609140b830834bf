"""The record reads the translation needs, for ONE topic-partition, ONE direction, ALL its groups.

:func:`read_translation_facts` reads a partition once per cycle however many groups read it, and
returns one :class:`~offset_pipeline.translation.facts.PartitionFacts` per group, ready for
:func:`~offset_pipeline.translation.translate.translate_partition`. It is meant to run inside a Spark
task: it takes plain librdkafka config dicts (not Dagster resources) and returns plain dataclasses.

The reading contract of ``facts.py`` is kept:

* **read_committed**, with ``assign`` (no group membership, no commits): only real records come back.
* **Snapshot order.** The caller read committed offsets, then the active log ends, then the standby
  log ends (:class:`PartitionLogs`), and only then calls this. Records at or above the snapshot's log
  ends are never returned.
* **Active side: one contiguous pass** over ``[max(log_start, min(c) - window), max(c)]`` plus the
  first real record at or after ``max(c)``. Per group: ``record_at_or_after`` is the first real
  record at or after ``c`` below the snapshot's log end (None when there is none), and
  ``records_below`` every real record at offsets ``[c - window, c)`` (so at most ``window``; fewer
  where markers, aborted or compacted records leave gaps). The window is in offsets so that a group
  gets the same facts whether its partition is read for it alone or with other groups.
* **Standby side** (only for the timestamp search: a one-way topic produced on the active cluster,
  CreateTime on the standby): ``offsets_for_times`` once per distinct searched timestamp, one forward
  read of up to ``refine_window`` real records from each search result (overlapping windows are read
  once), ``standby_first`` always, ``standby_last`` when a search found nothing below the standby's
  log end.
* **Behind MirrorMaker 2's offset syncs** (a mirror without origin headers, pairs given): one forward
  read of the standby from the lowest pair a group's proof starts at, up to
  ``OFFSET_SYNC_FORWARD_RECORDS``. When the pairs prove every group that has records to search, the
  timestamp search is not read at all (``translate_partition`` takes the pairs' result over it, and
  the pairs' own read refines it; ``ReadStats.searches_skipped``).

Reads stop at the snapshot's log end or at the partition's last stable offset when that is lower (an
open transaction): records not read then are at or after ``c`` and only ever make a translation
smaller (``record_at_or_after`` None gives the caught-up variants, which use records below ``c``).
The last stable offset costs no request of its own: a read_committed fetch at it reports the end of
the partition (``enable.partition.eof``); only a read that gets nothing at all (it starts above the
last stable offset) asks the broker for the last stable offset.

**One partition or many.** The reads are written once, as a generator of Kafka requests
(:func:`translation_fact_steps`: passes, ``offsets_for_times`` lookups, topic metadata), and run
either one request at a time with this call's own consumers (:func:`read_translation_facts`) or
with many partitions' requests answered together (``batched_reads.run_batched``: one fetch per
cluster serves every partition's pass of a round, one lookup call every partition's lookup). The
pass itself (when it is complete) is ``record_pass.PassState`` in both.

**Client reuse.** Consumers come from a per-process :class:`~offset_pipeline.kafka_io.consumer_pool.ConsumerPool`
keyed by client config, so a Spark worker reads partition after partition with the same consumers.
The broker answers their fetches at once when there is no data (``fetch.wait.max.ms`` = 0): a
consumer has one fetch in flight per broker, so the next partition's first fetch would otherwise wait
behind the previous partition's fetch held at its log end (500 ms by default). Measured on loopback,
a pass to the end of a 50-record partition: ~12 ms at 10 ms, ~6 ms at 1 ms, ~1 ms at 0. The price:
a consumer assigned at the end of a log fetches back to back (~15,000 empty fetches/s on loopback)
until the read hands the partition back, which it does as soon as the end is reported; a read that
sees nothing at all gives up waiting after ``_STALL_S``. Idle pooled consumers are unassigned and
fetch nothing.

**Per-record work.** A pass only collects ``(offset, timestamp, headers)`` while the partition is
assigned; the :class:`RecordFact` objects are built after ``unassign``, so the consumer does not
fetch back to back at the log end while Python parses headers. A record without headers (produced
on the cluster it is read from) is ``RecordFact(offset, timestamp)`` directly (what
``parse_origin`` returns for no headers: local); only records with headers go through
``parse_origin``. ``unassign`` of a consumer that holds no assignment is skipped
(:class:`_ReadConsumer`): the pool's unassign after a lease was a second librdkafka round trip per
lease. Measured, plain Python outside Spark, 10,000 group-partitions (4,000 partition reads, 6,221
passes, 254k records, 149k with headers; 2-core machine): of the ~13 s sequential wall, the waits
on librdkafka were poll ~4.3 s, ``offsets_for_times`` ~1.5 s (2,871 calls), assign/unassign ~1.8 s
(down from ~3.2 s with 11,421 unassigns); header parsing ~1.5 s (was applied to all 254k records)
and the translation rules ~3 s of CPU. The step is CPU-bound on 2 cores (brokers included):
reading partitions from more threads per process did not shorten it (measured 1, 2, 4 threads).
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import time
import uuid
from collections.abc import Callable, Generator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Self

from confluent_kafka import Consumer, KafkaException, TopicPartition

from offset_pipeline.kafka_io.consumer_pool import ConsumerPool
from offset_pipeline.kafka_io.record_identity import record_identity
from offset_pipeline.kafka_io.record_pass import (
    RawRead,
    RawReadResult,
    fetch_one,
    retry,
)
from offset_pipeline.translation.facts import (
    CaughtUpPoint,
    OffsetSyncFacts,
    PartitionFacts,
    RecordFact,
    TimestampFacts,
    TimestampType,
)
from offset_pipeline.translation.offset_sync_anchor import refinement_start
from offset_pipeline.translation.result import Anchor
from offset_pipeline.translation.shape import TopicShape


@dataclass(frozen=True)
class GroupPartitionInput:
    """One group reading the partition: its committed offsets on both clusters and its kept anchor."""

    group_id: str
    committed: int | None  # c on the active cluster
    standby_committed: int | None = None
    kept_anchor: Anchor | None = None
    kept_caught_up: CaughtUpPoint | None = None  # the newest fast-forward applied (stale partitions)


@dataclass(frozen=True)
class PartitionLogs:
    """The partition's log ranges from the snapshot (read after the committed offsets).

    ``standby_log_start``/``standby_log_end`` None: the snapshot found no such partition on the
    standby; the reads then ask the standby's metadata whether the topic exists and how many
    partitions it has (unless ``standby_topic_exists``/``standby_partition_count`` are given)."""

    active_log_start: int
    active_log_end: int
    standby_log_start: int | None
    standby_log_end: int | None
    standby_topic_exists: bool | None = None  # None: decided from the logs / the standby's metadata
    active_partition_count: int | None = None
    standby_partition_count: int | None = None


@dataclass
class ReadStats:
    """What one call read (for tests and metrics). ``*_consumers``: consumers used; of all of them,
    ``consumers_created`` were new and ``consumers_reused`` came from the pool."""

    active_consumers: int = 0
    standby_consumers: int = 0
    consumers_created: int = 0
    consumers_reused: int = 0
    stable_offset_queries: int = 0
    active_records: int = 0
    standby_records: int = 0
    standby_passes: int = 0
    offsets_for_times_calls: int = 0
    searched_timestamps: list[int] = field(default_factory=list)
    searches_skipped: int = 0  # partitions whose timestamp search was not needed: the pairs proved every group


class _ReadConsumer(Consumer):
    """A read consumer that remembers the topics whose metadata it has: librdkafka's first
    ``assign`` of a topic it knows nothing about waits about a second for the partition leader
    (measured on loopback: 1000 ms per new topic), while a metadata request for the topic first
    takes one round trip. Pooled consumers ask once per topic for their lifetime."""

    def __init__(self, conf: dict):
        super().__init__(conf)
        self.known_topics: set[str] = set()
        self._assigned = False

    # Every assign goes through here, so an unassign of a consumer that holds no assignment (the
    # pool's check after the reader's own unassign) is skipped: each is a round trip to
    # librdkafka's main thread (~0.15 ms, ~5,000 per cycle at 10,000 group-partitions).
    def assign(self, partitions) -> None:
        self._assigned = True
        super().assign(partitions)

    def unassign(self) -> None:
        if self._assigned:
            super().unassign()
            self._assigned = False

    def know(self, topic: str, timeout_s: float) -> None:
        if topic in self.known_topics:
            return
        metadata = self.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is not None and metadata.error is None:
            self.known_topics.add(topic)


def _consumer(conf) -> _ReadConsumer:
    settings = dict(conf)
    settings.setdefault("group.id", f"offset-pipeline-reads-{uuid.uuid4().hex}")
    settings.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",  # records deleted since the snapshot: start at the new log start
            # A fetch at the last stable offset reports the end of the partition: no extra request.
            "enable.partition.eof": True,
            # Short long-polls: a fetch waiting at the end of one partition's log holds the next
            # partition's first fetch back (module docstring).
            "fetch.wait.max.ms": 0,
            "log_level": 3,
        }
    )
    return _ReadConsumer(settings)


#: The consumers of this process (a Spark Python worker keeps them across tasks and cycles).
CONSUMERS = ConsumerPool(_consumer)


class LeasedConsumers:
    """The consumers one call leases, at most one per cluster, returned to the pool at the end (or
    closed, when the call failed: an error leaves a consumer in an unknown state). Each knows the
    topic's metadata before it is used (:class:`_ReadConsumer`)."""

    def __init__(self, stats: ReadStats, topic: str, deadline: float):
        self.stats = stats
        self.topic, self.deadline = topic, deadline
        self._leases = ExitStack()
        self._consumers: dict[str, Consumer] = {}

    def get(self, side: str, conf: dict) -> Consumer:
        if side not in self._consumers:
            lease = self._leases.enter_context(CONSUMERS.lease(conf))
            lease.consumer.know(self.topic, max(1.0, self.deadline - time.monotonic()))
            self._consumers[side] = lease.consumer
            if side == "active":
                self.stats.active_consumers += 1
            else:
                self.stats.standby_consumers += 1
            if lease.reused:
                self.stats.consumers_reused += 1
            else:
                self.stats.consumers_created += 1
        return self._consumers[side]

    def log_range(self, side: str, conf: dict, partition: int, timeout_s: float) -> tuple[int, int]:
        """(log start, last stable offset) of the topic's ``partition`` on ``side``, asked of the broker."""
        return self.get(side, conf).get_watermark_offsets(
            TopicPartition(self.topic, partition), timeout=timeout_s, cached=False
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc):
        return self._leases.__exit__(*exc)


@dataclass(frozen=True, eq=False)
class TimestampLookup:
    """``offsets_for_times`` of one timestamp in one partition, on ``side``'s consumer."""

    side: str
    conf: dict | None
    topic: str
    partition: int
    timestamp: int
    deadline: float


@dataclass(frozen=True, eq=False)
class TopicMetadataLookup:
    """Whether ``topic`` exists on ``side``'s cluster, and its partition count (None if it does not)."""

    side: str
    conf: dict | None
    topic: str
    deadline: float


ReadRequest = RawRead | TimestampLookup | TopicMetadataLookup


def drive(steps: Generator[ReadRequest, Any, Any], answer: Callable[[ReadRequest], Any]):
    """Run the read generator ``steps`` to its return value, answering each request it yields with
    ``answer(request)``; an exception of ``answer`` is raised inside the generator at that request."""
    try:
        request = next(steps)
        while True:
            try:
                reply = answer(request)
            except Exception as exc:  # noqa: BLE001 - the reads decide what an error means
                request = steps.throw(exc)
            else:
                request = steps.send(reply)
    except StopIteration as done:
        return done.value


def lookup_timestamp(consumer: Consumer, req: TimestampLookup) -> int | None:
    """The standby's answer to one ``offsets_for_times`` (None: no record at or after it)."""

    def ask():
        remaining = max(1.0, req.deadline - time.monotonic())
        answer = consumer.offsets_for_times([TopicPartition(req.topic, req.partition, req.timestamp)],
                                            timeout=remaining)[0]
        if answer.error is not None:  # the partition's own error: retried as the call's when transient
            raise KafkaException(answer.error)
        return answer

    answer = retry(ask, req.deadline)
    return answer.offset if answer.offset >= 0 else None


class DirectReads:
    """Answers read requests one at a time with the consumers of one :class:`LeasedConsumers`."""

    def __init__(self, clients: LeasedConsumers):
        self.clients = clients

    def __call__(self, req: ReadRequest):
        consumer = self.clients.get(req.side, req.conf)
        if isinstance(req, RawRead):
            return fetch_one(consumer, req)
        if isinstance(req, TimestampLookup):
            return lookup_timestamp(consumer, req)
        return topic_metadata(consumer, req.topic, max(1.0, req.deadline - time.monotonic()))


class _OwnConsumer:
    """:class:`DirectReads` for a reader given its consumer (reads outside the translation)."""

    def __init__(self, consumer: Consumer):
        self.consumer = consumer

    def __call__(self, req: ReadRequest):
        if not isinstance(req, RawRead):
            raise TypeError(f"a reader's own consumer answers passes only, not {type(req).__name__}")
        return fetch_one(self.consumer, req)


class PartitionReader:
    """Forward passes over one partition (:mod:`record_pass`). :meth:`read` runs a pass with the
    reader's own consumer; :meth:`read_steps` yields the pass as a :class:`RawRead` request for
    ``side``'s consumer, so many partitions' passes can be fetched together (``batched_reads``)."""

    def __init__(self, consumer: Consumer | None, topic: str, partition: int, *, read_from: str, peer: str,
                 end: int, deadline: float, stats: ReadStats | None = None, identities: bool = False,
                 side: str = "", conf: dict | None = None):
        self.consumer, self.tp = consumer, TopicPartition(topic, partition)
        self.read_from, self.peer = read_from, peer
        self.identities = identities  # RecordFact.identity of every record read (a header-less mirror)
        self.end, self.deadline = end, deadline
        self.stats = stats
        self.side, self.conf = side, conf
        self.passes = 0
        self.records = 0

    def read(self, start: int, stop=None, end: int | None = None) -> tuple[list[RecordFact], int]:
        """Real records from ``start`` (below ``end``, default the reader's end) until
        ``stop(offsets)`` (the offsets read so far) is true or the log is read to ``end`` (or to the
        partition's last stable offset, when that is lower). Returns the records and the offset up
        to which the log was read completely (every real record at or after ``start`` and below it
        is in the list). Completion rules: :mod:`record_pass`."""
        if self.consumer is None:
            raise ValueError("this reader has no consumer of its own: run read_steps with a read driver")
        return drive(self.read_steps(start, stop, end), _OwnConsumer(self.consumer))

    def read_steps(self, start: int, stop=None, end: int | None = None):
        """:meth:`read` as a generator of one :class:`RawRead` request."""
        end = self.end if end is None else min(end, self.end)
        if start >= end:
            return [], start
        self.passes += 1
        result: RawReadResult = yield RawRead(
            self.side, self.conf, self.tp.topic, self.tp.partition, start, end, stop, self.deadline,
            read_from=self.read_from, identities=self.identities, stats=self.stats,
        )
        if result.stable_end is not None:
            # The last stable offset is below ``end`` (an open transaction): later passes stop there too.
            self.end = min(self.end, result.stable_end)
        self.records += len(result.raw)
        # Headers are parsed after the partition is handed back: meanwhile the consumer, at the end
        # of the log, would fetch back to back (module docstring). Most records carry no header.
        read_from, peer = self.read_from, self.peer
        of, from_headers = RecordFact.of, RecordFact.from_headers  # one per record: looked up once
        if self.identities:
            return [
                RecordFact.from_headers(o, ts, headers or [], read_from=read_from, peer=peer,
                                        identity=record_identity(key, value, ts, headers))
                for o, ts, headers, key, value in result.raw
            ], result.upto
        return [
            of(o, ts) if not headers else from_headers(o, ts, headers, read_from=read_from, peer=peer)
            for o, ts, headers in result.raw
        ], result.upto


def topic_metadata(consumer: Consumer, topic: str, timeout_s: float) -> tuple[bool, int | None]:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return False, None
    return True, len(metadata.partitions)


def gap_holds_no_record(conf: dict, cluster: str, topic: str, partition: int, start: int, end: int, *,
                        timeout_s: float = 10.0) -> bool:
    """Whether ``[start, end)`` of the partition was read (read_committed) completely and holds no
    real record: only transaction markers or aborted records. For the stale fast-forward
    (``translation/caught_up.py``): a group or a mirror that stops short of the log end by such a
    gap has read everything. An open transaction (read stops at its last stable offset) or a
    timeout answers False: not proven."""
    if start >= end:
        return True
    deadline = time.monotonic() + timeout_s
    with LeasedConsumers(ReadStats(), topic, deadline) as clients:
        reader = PartitionReader(clients.get("gap", conf), topic, partition, read_from=cluster, peer=cluster, end=end,
                         deadline=deadline)
        try:
            records, upto = reader.read(start, stop=lambda offsets: bool(offsets))
        except TimeoutError:
            return False
    return not records and upto >= end


def read_translation_facts(
    active: str,
    standby: str,
    active_conf: dict,
    standby_conf: dict,
    topic: str,
    partition: int,
    logs: PartitionLogs,
    groups: list[GroupPartitionInput],
    *,
    stats: ReadStats | None = None,
    **options: Any,
) -> list[PartitionFacts]:
    """One :class:`PartitionFacts` per group (in the order given) for ``topic[partition]`` translated
    from ``active`` to ``standby``; see the module docstring for what is read and when. The reads
    are :func:`translation_fact_steps` (``options``: its keyword settings: ``shape`` and the
    window, timeout and header settings), each answered at once with this call's own consumers."""
    stats = stats if stats is not None else ReadStats()
    steps = translation_fact_steps(active, standby, active_conf, standby_conf, topic, partition, logs, groups,
                                   stats=stats, **options)
    with LeasedConsumers(stats, topic, time.monotonic() + options.get("timeout_s", 10)) as clients:
        return drive(steps, DirectReads(clients))


def translation_fact_steps(
    active: str,
    standby: str,
    active_conf: dict,
    standby_conf: dict,
    topic: str,
    partition: int,
    logs: PartitionLogs,
    groups: list[GroupPartitionInput],
    *,
    shape: TopicShape,
    standby_timestamp_type: TimestampType | str = TimestampType.CREATE_TIME,
    window: int = 50,
    refine_window: int = 200,
    timeout_s: float = 10,
    mirror_writes_headers: bool = True,
    stats: ReadStats | None = None,
    offset_syncs: OffsetSyncFacts | None = None,
) -> Generator[ReadRequest, Any, list[PartitionFacts]]:
    """:func:`read_translation_facts` as a generator: it yields each Kafka request of the reads
    (:data:`ReadRequest`, for the ``"active"`` or ``"standby"`` consumer), takes the answer, and
    returns the facts. Run it with :func:`drive` (one partition) or ``batched_reads`` (many
    partitions per request to the broker: the same requests, the same facts).

    ``offset_syncs``: MirrorMaker 2's pairs of this partition, read once per cycle and cluster
    (``offset_syncs.py``) and stamped by the caller with the active log ends read after them; every
    group's facts carry them (a mirror without origin headers is translated by them)."""
    if window < 1 or refine_window < 1:
        raise ValueError("window and refine_window must be positive")
    stats = stats if stats is not None else ReadStats()
    deadline = time.monotonic() + timeout_s
    standby_timestamp_type = TimestampType(standby_timestamp_type)
    tp = TopicPartition(topic, partition)

    # -- which groups need records: c inside the active log (else the pre-checks decide) --------
    def in_log(g: GroupPartitionInput) -> bool:
        return g.committed is not None and logs.active_log_start <= g.committed <= logs.active_log_end

    readable = [g.committed for g in groups if in_log(g)]
    return (yield from _read(
        active, standby, active_conf, standby_conf, tp, logs, groups, readable, in_log, shape=shape,
        standby_timestamp_type=standby_timestamp_type, window=window, refine_window=refine_window,
        deadline=deadline, mirror_writes_headers=mirror_writes_headers, stats=stats, offset_syncs=offset_syncs,
    ))


def _read(
    active: str, standby: str, active_conf: dict, standby_conf: dict, tp: TopicPartition,
    logs: PartitionLogs, groups: list[GroupPartitionInput], readable: list[int], in_log, *, shape: TopicShape,
    standby_timestamp_type: TimestampType, window: int, refine_window: int, deadline: float,
    mirror_writes_headers: bool, stats: ReadStats, offset_syncs: OffsetSyncFacts | None = None,
):
    topic, partition = tp.topic, tp.partition

    # -- active: one contiguous pass ---------------------------------------------------------------
    active_records: list[RecordFact] = []
    if readable and logs.active_log_start < logs.active_log_end:
        reader = PartitionReader(
            None, topic, partition, read_from=active, peer=standby,
            end=logs.active_log_end, deadline=deadline, stats=stats,
            identities=not mirror_writes_headers and shape.allows_timestamp_search(active),
            side="active", conf=active_conf,
        )
        lo = max(logs.active_log_start, min(readable) - window)
        top = max(readable)
        active_records, _ = yield from reader.read_steps(lo, stop=lambda offs: bool(offs) and offs[-1] >= top)
        stats.active_records += reader.records
    offsets = [r.offset for r in active_records]

    def base_facts(g: GroupPartitionInput, standby_log_start: int, standby_log_end: int, exists: bool,
                   standby_count: int | None) -> PartitionFacts:
        at, below = None, ()
        if in_log(g):
            i = bisect.bisect_left(offsets, g.committed)
            at = active_records[i] if i < len(active_records) else None
            j = bisect.bisect_left(offsets, g.committed - window)
            below = tuple(active_records[j:i])
        return PartitionFacts(
            group_id=g.group_id, topic=topic, partition=partition, active=active, standby=standby,
            committed=g.committed, active_log_start=logs.active_log_start, active_log_end=logs.active_log_end,
            standby_log_start=standby_log_start, standby_log_end=standby_log_end,
            standby_committed=g.standby_committed, standby_timestamp_type=standby_timestamp_type, shape=shape,
            record_at_or_after=at, records_below=below, kept_anchor=g.kept_anchor, standby_topic_exists=exists,
            kept_caught_up=g.kept_caught_up,
            active_partition_count=logs.active_partition_count, standby_partition_count=standby_count,
            offset_syncs=offset_syncs,
        )

    # -- standby: existence, then the timestamp search ---------------------------------------------
    need_search = (
        shape.allows_timestamp_search(active) and standby_timestamp_type is TimestampType.CREATE_TIME and bool(readable)
    )

    exists = logs.standby_topic_exists
    standby_count = logs.standby_partition_count
    if logs.standby_log_start is None or logs.standby_log_end is None:
        if exists is None or (exists and standby_count is None):
            found, count = yield TopicMetadataLookup("standby", standby_conf, topic, deadline)
            exists = found if exists is None else exists
            standby_count = count if standby_count is None else standby_count
        if exists and standby_count is not None and partition < standby_count:
            raise ValueError(
                f"{topic}[{partition}] exists on {standby} but the snapshot has no log range for it"
            )
        # Nothing to read on the standby: the pre-checks report a missing topic or partition
        # (a partition missing on the standby is a partition count mismatch).
        active_count = logs.active_partition_count
        if exists and active_count is None:
            _, active_count = yield TopicMetadataLookup("active", active_conf, topic, deadline)
        return [
            dataclasses.replace(base_facts(g, 0, 0, bool(exists), standby_count), active_partition_count=active_count)
            for g in groups
        ]
    exists = True if exists is None else exists
    s_start, s_end = logs.standby_log_start, logs.standby_log_end
    facts = [base_facts(g, s_start, s_end, exists, standby_count) for g in groups]
    if offset_syncs is not None and not mirror_writes_headers and exists:
        facts = yield from _with_offset_sync_window(
            facts, standby_conf, tp, s_start, s_end, active=active, standby=standby, deadline=deadline,
            refine_window=refine_window, stats=stats,
        )
        if need_search and all(_proven_by_pairs(f) for f, g in zip(facts, groups) if in_log(g)):
            # translate_partition takes the pairs' result over the timestamp search's, and their own
            # forward read refines it: the search's reads would change no answer
            stats.searches_skipped += 1
            return facts
    if not (need_search and exists):
        return facts
    return (yield from _with_timestamp_search(
        facts, standby_conf, tp, s_start, s_end, active=active, standby=standby, deadline=deadline,
        refine_window=refine_window, mirror_writes_headers=mirror_writes_headers, stats=stats,
    ))


def _with_timestamp_search(
    facts: list[PartitionFacts], standby_conf: dict, tp: TopicPartition, s_start: int, s_end: int, *,
    active: str, standby: str, deadline: float, refine_window: int, mirror_writes_headers: bool, stats: ReadStats,
):
    searched = _searched_records(facts)
    if not searched:
        return facts  # the standby's consumer is not even leased
    found = yield from _search_offsets(standby_conf, tp, searched, deadline, stats)

    end = s_end  # the reads stop at the last stable offset by themselves (module docstring)
    reader = PartitionReader(
        None, tp.topic, tp.partition, read_from=standby, peer=active, end=end, deadline=deadline, stats=stats,
        identities=not mirror_writes_headers, side="standby", conf=standby_conf,
    )
    reads = _StandbyReads(reader, s_start, s_end, refine_window)
    yield from reads.read_windows(sorted({o for o in found.values() if o is not None and o < end}))
    first = yield from reads.read_first()
    last = yield from reads.read_last_when_needed(found)
    stats.standby_records += reader.records
    stats.standby_passes += reader.passes
    return _with_timestamp_facts(
        facts, searched, found, reads, first=first, last=last, mirror_writes_headers=mirror_writes_headers
    )


#: the offset syncs' forward read reads at least this many real records (``refine_window`` when larger).
#: MirrorMaker 2 writes a pair every ``offset.lag.max`` (100) records by default, and a pair proves
#: something only once confirmed, so the newest usable pair is often 200 records or more behind the
#: group; the read has to reach past the copy of the group's next record to prove it exactly.
OFFSET_SYNC_FORWARD_RECORDS = 1000


def _with_offset_sync_window(
    facts: list[PartitionFacts], standby_conf: dict, tp: TopicPartition, s_start: int, s_end: int, *,
    active: str, standby: str, deadline: float, refine_window: int, stats: ReadStats,
):
    """The standby read forward (with record identities) from the lowest point where a group's
    offset-sync refinement starts, at most ``OFFSET_SYNC_FORWARD_RECORDS`` (or ``refine_window``)
    real records, one pass for every group of the partition: each group's refinement uses the
    records from its own start on."""
    bound = max(refine_window, OFFSET_SYNC_FORWARD_RECORDS)
    starts = [s for s in (refinement_start(f) for f in facts) if s is not None]
    start = max(min(starts), s_start) if starts else s_end
    if start >= s_end:
        return facts
    reader = PartitionReader(
        None, tp.topic, tp.partition, read_from=standby, peer=active, end=s_end, deadline=deadline, stats=stats,
        identities=True, side="standby", conf=standby_conf,
    )
    records, upto = yield from reader.read_steps(start, stop=lambda offs: len(offs) >= bound)
    records = [r for r in records if r.offset < upto]  # only what was read without a gap
    complete = upto >= reader.end
    return [
        dataclasses.replace(f, offset_syncs=dataclasses.replace(
            f.offset_syncs, forward_from=start, forward_records=tuple(records), forward_complete=complete))
        if f.offset_syncs is not None else f
        for f in facts
    ]


def _proven_by_pairs(f: PartitionFacts) -> bool:
    """MirrorMaker 2's pairs prove an offset for ``f`` and the forward read from them holds records
    to refine it (or reached the standby's end)."""
    syncs = f.offset_syncs
    return (syncs is not None and syncs.forward_from is not None and (syncs.forward_complete or bool(syncs.forward_records))
            and refinement_start(f) is not None)


def _searched_records(facts: list[PartitionFacts]) -> dict[int, RecordFact]:
    """The record each group searches (as translate_by_timestamp will pick it), by the group's index
    in ``facts``; groups whose ``c`` is outside the active log, or with no such record, are left out."""
    searched: dict[int, RecordFact] = {}
    for i, f in enumerate(facts):
        if f.committed is None or not f.active_log_start <= f.committed <= f.active_log_end:
            continue
        record = f.usable_record_at_or_after() or f.last_processed_record()
        if record is not None:
            searched[i] = record
    return searched


def _search_offsets(standby_conf: dict, tp: TopicPartition, searched: dict[int, RecordFact], deadline: float,
                    stats: ReadStats):
    """The standby's answer to ``offsets_for_times`` per distinct searched timestamp (None: no
    record at or after it), asked in ascending timestamp order."""
    # offsets_for_times: one timestamp per partition per call, so one request per distinct timestamp
    # (a batched run puts many partitions' requests in one call).
    found: dict[int, int | None] = {}
    for ts in sorted({r.timestamp for r in searched.values()}):
        found[ts] = yield TimestampLookup("standby", standby_conf, tp.topic, tp.partition, ts, deadline)
        stats.offsets_for_times_calls += 1
        stats.searched_timestamps.append(ts)
    return found


class _StandbyReads:
    """The standby reads of one timestamp search, all with one reader: the forward windows from the
    search results, then ``standby_first`` and ``standby_last``. Keeps what the windows read."""

    def __init__(self, reader: PartitionReader, s_start: int, s_end: int, refine_window: int):
        self.reader = reader
        self.s_start, self.s_end = s_start, s_end
        self.refine_window = refine_window
        self.records: list[RecordFact] = []  # sorted by offset, disjoint covered ranges
        self.covered: list[tuple[int, int]] = []  # [from, to): every real record in it is in ``records``

    def covered_to(self, offset: int) -> int | None:
        for lo, hi in self.covered:
            if lo <= offset <= hi:
                return hi
        return None

    def window_from(self, o: int) -> list[RecordFact]:
        i = bisect.bisect_left([r.offset for r in self.records], o)
        return self.records[i:i + self.refine_window]

    def window_empty(self, o: int | None) -> bool:
        return o is not None and o < self.s_end and not self.window_from(max(o, self.s_start))

    def read_windows(self, starts: list[int]):
        """Read the forward window from each search result in ``starts`` (ascending)."""
        # Forward windows: read each uncovered search result once, continuing the previous pass when the
        # windows touch, so overlapping windows are read once.
        reader, refine_window = self.reader, self.refine_window
        for o in starts:
            o = max(o, self.s_start)
            have = self.window_from(o)
            hi = self.covered_to(o)
            if hi is not None and (len(have) >= refine_window or hi >= reader.end):
                continue
            begin = hi if hi is not None else o
            need = refine_window - len(have)
            records, upto = yield from reader.read_steps(begin, stop=lambda offs, n=need: len(offs) >= n)
            self.records = sorted({r.offset: r for r in self.records + records}.values(), key=lambda r: r.offset)
            self.covered.append((o if hi is None else begin, upto))
            self.covered = _merge(self.covered)

    def read_first(self):
        """``standby_first``: the first real record of the standby's log, read unless a window holds it."""
        # standby_first: always (retention on the standby may have deleted the searched copy).
        first_hi = self.covered_to(self.s_start)
        if first_hi is not None and self.records and self.records[0].offset < first_hi:
            return self.records[0]  # the covered range starting at the log start holds the first record
        records, _ = yield from self.reader.read_steps(self.s_start, stop=lambda offs: bool(offs))
        return records[0] if records else None

    def read_last_when_needed(self, found: dict[int, int | None]):
        """``standby_last``, read only when a search result (``found``) needs it (else None)."""
        # standby_last: when some search found nothing below the standby's log end, or only what is not
        # a record (a search answered with a transaction marker stamped after the searched timestamp,
        # with no real record after it: the forward window is empty).
        if any(o is None or o >= self.s_end or self.window_empty(o) for o in found.values()):
            return (yield from _read_last(self.reader, self.s_start, self.reader.end, self.refine_window))
        return None


def _with_timestamp_facts(
    facts: list[PartitionFacts], searched: dict[int, RecordFact], found: dict[int, int | None],
    reads: _StandbyReads, *, first: RecordFact | None, last: RecordFact | None, mirror_writes_headers: bool,
) -> list[PartitionFacts]:
    """``facts`` with the :class:`TimestampFacts` of each group that searched a record."""
    s_start, s_end = reads.s_start, reads.s_end
    out = []
    for i, f in enumerate(facts):
        record = searched.get(i)
        if record is None:
            out.append(f)
            continue
        o = found[record.timestamp]
        none = o is None or o >= s_end
        window = () if none else tuple(reads.window_from(max(o, s_start)))
        tf = TimestampFacts(
            searched_offset=record.offset,
            search_offset=o,
            standby_records=window,
            standby_last=last if none or reads.window_empty(o) else None,
            mirror_writes_headers=mirror_writes_headers,
            standby_first=first,
            # the range read from o reached the readable end before the window's bound (read_windows)
            standby_records_complete=not none and len(window) < reads.refine_window
            and (reads.covered_to(max(o, s_start)) or -1) >= reads.reader.end,
        )
        out.append(_with_timestamp(f, tf))
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _read_last(reader: PartitionReader, start: int, end: int, step: int):
    """The last real record below ``end``: read backwards in growing steps until one is found."""
    span = max(step, 1)
    hi = end
    while hi > start:
        lo = max(start, hi - span)
        records, _ = yield from reader.read_steps(lo, end=hi)
        if records:
            return records[-1]
        hi, span = lo, span * 2
    return None


def _with_timestamp(facts: PartitionFacts, timestamp: TimestampFacts) -> PartitionFacts:
    """``facts`` with their timestamp search. A shallow copy with one field set: every other field
    was checked when ``facts`` were built and ``timestamp`` has no check of its own, while
    ``dataclasses.replace`` runs ``__init__`` again (2.5 s of 100,000 groups' reads, profiled)."""
    out = copy.copy(facts)
    object.__setattr__(out, "timestamp", timestamp)
    return out
