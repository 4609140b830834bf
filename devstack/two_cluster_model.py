"""A pure model of two active-active clusters and the data mirror, for property tests and benchmarks.

One topic-partition on two clusters. Each log is a list of entries indexed by offset:

* **real records**, produced locally (origin = this cluster) or copied by the mirror (origin = the
  other cluster, with ``IDC``/``Offset`` headers, like the devstack mirror writes them);
* **gaps**: transaction markers and aborted records, invisible to read_committed readers but
  occupying offsets and carrying timestamps (``offsets_for_times`` may land on them).

The mirror copies per origin, in order, one direction at a time, skipping loops (a record whose
``IDC`` names the target) exactly like ``devstack.mirror``. Mirror steps are
interleaved with producer events at random, so the two logs interleave local and mirrored records
differently ("X-crossing"). Optional: transactional batches (a marker after each batch), aborted
mirror batches (gaps on the target), at-least-once redelivery (a mirror that rewinds and copies a
suffix again), CreateTime timestamps that repeat or go backwards, LogAppendTime on one side,
retention (log start moving up, also past records the mirror has not copied yet), producers that
write their own bogus origin headers (which the mirror replaces on copies), a header-less
mirror, and a MirrorMaker-like header-less mirror (:class:`MirrorMakerSyncs`) that writes offset-sync
pairs the way MirrorMaker 2's source task does: sparse (``offset.lag.max``), on upstream gaps, for
the first record of each task lifetime and at each task commit; sends that fail silently; task
restarts that resume at the last committed position, copying records twice; compaction of the
offset-syncs topic.

:func:`count_loss` and :func:`count_duplicates` implement the definitions of
docs/concepts/no-loss.md exactly:

* Loss: a record of B below ``t`` whose copy on A is at offset ``>= c``.
* Duplicate: a record of B at offset ``>= t`` whose copy on A is below ``c``.

"Records of B" are the records B still holds (at or above its log start; what retention deleted is
gone whatever ``t`` is). The "copy on A" of a record produced on A is the original; of a record
produced on B it is its first copy on A, and a record not copied yet counts as ``>= c`` (the group
has not processed it).

:class:`Trial` plays the part of the pipeline and of Kafka: it builds :class:`PartitionFacts` from
the model exactly as the I/O layer reads them (record at c, backward window, ``offsets_for_times``,
forward refinement window, log ends, mirror positions), runs :func:`translate_partition`, keeps the
anchor between cycles and commits by the commit rules (docs/concepts/no-loss.md). :func:`run_trials`
runs many random failover trials and returns a summary for benchmarks.
"""

from __future__ import annotations

import dataclasses
import hashlib

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from offset_pipeline.translation.facts import (
    CaughtUpFacts,
    CaughtUpPoint,
    OffsetSyncFacts,
    PartitionFacts,
    RecordFact,
    SyncPair,
    TimestampFacts,
    TimestampType,
)
from offset_pipeline.translation.offset_sync_anchor import current_pairs
from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER, origin_headers, parse_origin
from offset_pipeline.translation.result import Anchor, TranslationResult
from offset_pipeline.translation.shape import HeaderObservation, TopicShape, decide_shape
from offset_pipeline.translation.translate import check_no_loss, translate_partition

CLUSTERS = ("idc1", "idc2")
THIRD_CLUSTER = "idc9"
EVENT_MS = 1_000  # model time per event
QUIET_MS = 601_000  # a quiet period longer than the caught-up window

# Bogus origin headers a producer may write itself (the mirror replaces them on the copy). A
# producer writing ``IDC=<the other cluster>`` is not modelled: the mirror would take the record
# for a loop and never copy it, which is a data-mirror failure, not an offset-sync one.
FORGED_HEADERS = {
    0: lambda own, peer: (),
    1: lambda own, peer: ((ORIGIN_CLUSTER_HEADER, THIRD_CLUSTER.encode()), (ORIGIN_OFFSET_HEADER, b"12")),
    2: lambda own, peer: ((ORIGIN_OFFSET_HEADER, b"7"),),
    3: lambda own, peer: ((ORIGIN_CLUSTER_HEADER, own.encode()), (ORIGIN_OFFSET_HEADER, b"3")),
}


def other(cluster: str, clusters: Sequence[str] = CLUSTERS) -> str:
    first, second = clusters
    return second if cluster == first else first


@dataclass(frozen=True)
class ModelEntry:
    offset: int
    timestamp: int
    real: bool = True
    origin: str | None = None  # real records: the cluster the record was first produced on
    origin_offset: int | None = None  # its offset there
    headers: tuple[tuple[str, bytes], ...] = ()


class PartitionLog:
    """One partition of one cluster."""

    def __init__(self, cluster: str, timestamp_type: TimestampType = TimestampType.CREATE_TIME):
        self.cluster = cluster
        self.timestamp_type = timestamp_type
        self.entries: list[ModelEntry] = []
        self.log_start = 0
        self.first_copy: dict[int, int] = {}  # origin offset on the other cluster -> first copy here

    @property
    def end(self) -> int:
        return len(self.entries)

    def append(self, timestamp: int, *, real: bool = True, origin: str | None = None,
               origin_offset: int | None = None, headers: tuple = ()) -> ModelEntry:
        offset = self.end
        if real and origin is None:
            origin, origin_offset = self.cluster, offset
        entry = ModelEntry(offset, timestamp, real, origin if real else None, origin_offset if real else None, headers)
        self.entries.append(entry)
        if real and origin != self.cluster:
            self.first_copy.setdefault(origin_offset, offset)
        return entry

    def retained_real(self, lo: int = 0, hi: int | None = None) -> Iterable[ModelEntry]:
        hi = self.end if hi is None else min(hi, self.end)
        for offset in range(max(lo, self.log_start), hi):
            entry = self.entries[offset]
            if entry.real:
                yield entry

    def first_real_at_or_after(self, offset: int) -> ModelEntry | None:
        return next(iter(self.retained_real(offset)), None)

    def real_below(self, offset: int, n: int) -> list[ModelEntry]:
        """The last ``n`` retained real records below ``offset``, newest first."""
        out: list[ModelEntry] = []
        for o in range(min(offset, self.end) - 1, self.log_start - 1, -1):
            if len(out) >= n:
                break
            if self.entries[o].real:
                out.append(self.entries[o])
        return out

    def last_real(self) -> ModelEntry | None:
        below = self.real_below(self.end, 1)
        return below[0] if below else None

    def offsets_for_times(self, timestamp: int) -> int | None:
        """Kafka's ListOffsets by timestamp: the first retained offset whose entry (record, aborted
        record or marker) has a timestamp ``>= timestamp``; None when there is none."""
        for offset in range(self.log_start, self.end):
            if self.entries[offset].timestamp >= timestamp:
                return offset
        return None


@dataclass
class MirrorMakerSyncs:
    """The offset syncs of MirrorMaker 2's source task for one direction (its OffsetSyncWriter's
    rules, restated): a pair ``(u, d)`` is sent at once for the first record a task lifetime
    copies, when the downstream offset moved ``lag_max`` or more past the last pair sent, when the
    upstream offsets skip (a gap) and when the downstream offset went backwards; otherwise the
    newest pair waits for the task's commit. ``lost`` sends fail silently. ``committed`` is the
    source position a restarted task resumes at (the position at the last commit)."""

    lag_max: int = 3
    #: the offset-syncs topic: (its own offset, u, d), in write order
    topic: list[tuple[int, int, int]] = field(default_factory=list)
    written: int = 0  # the offset-syncs topic's next offset
    committed: int = 0
    lost: int = 0  # the next ``lost`` sends fail
    last_sync_downstream: int = -1
    previous_upstream: int = -1
    previous_downstream: int = -1
    delayed: tuple[int, int] | None = None

    def copied(self, upstream: int, downstream: int) -> None:
        due = (
            self.last_sync_downstream == -1
            or downstream - (self.last_sync_downstream + 1) >= self.lag_max
            or upstream - self.previous_upstream != 1
            or downstream < self.previous_downstream
        )
        self.previous_upstream, self.previous_downstream = upstream, downstream
        if due:
            self.last_sync_downstream = downstream
            self.delayed = None
            self._send(upstream, downstream)
        else:
            self.delayed = (upstream, downstream)

    def commit(self, position: int) -> None:
        self.committed = position
        if self.delayed is not None:
            self._send(*self.delayed)
            self.delayed = None

    def restart(self) -> int:
        """A new task lifetime; returns the position it resumes at."""
        self.last_sync_downstream = self.previous_upstream = self.previous_downstream = -1
        self.delayed = None
        return self.committed

    def compact(self) -> None:
        """Compaction keeps the newest record of the partition's key."""
        self.topic = self.topic[-1:]

    def _send(self, upstream: int, downstream: int) -> None:
        if self.lost > 0:
            self.lost -= 1
            return
        self.topic.append((self.written, upstream, downstream))
        self.written += 1


class TwoClusterModel:
    """Two clusters, one topic-partition, two mirror directions."""

    def __init__(self, *, clusters: Sequence[str] = CLUSTERS, active: str | None = None, mirror_headers: bool = True,
                 log_append_time: Iterable[str] = (), identical_pairs: bool = False):
        self.clusters = tuple(clusters)
        self.active = active or self.clusters[0]
        self.mirror_headers = mirror_headers
        # record content: each original's own, or shared by the originals 2k and 2k+1 of a log (byte-
        # identical when their timestamps are equal too: a producer's retry)
        self.identical_pairs = identical_pairs
        lat = set(log_append_time)
        self.logs = {
            c: PartitionLog(c, TimestampType.LOG_APPEND_TIME if c in lat else TimestampType.CREATE_TIME)
            for c in self.clusters
        }
        self.mirror_position = {(s, d): 0 for s in self.clusters for d in self.clusters if s != d}
        #: MirrorMaker-like offset syncs of the active -> standby mirror (set by a trial that uses them)
        self.mm2: MirrorMakerSyncs | None = None
        self.clock = 1_000_000
        self.last_ts = 0
        self.last_end_change = {c: self.clock for c in self.clusters}

    @classmethod
    def from_notation(
        cls,
        active_log: Sequence[str],
        standby_log: Sequence[str],
        *,
        active: str = CLUSTERS[0],
        timestamps: dict[str, int] | None = None,
        mirror_headers: bool = True,
        log_append_time: Iterable[str] = (),
        standby_log_start: int = 0,
        active_log_start: int = 0,
    ) -> TwoClusterModel:
        """Build logs from this notation: ``"a1"`` a record produced here, ``"b1'"`` a copy of
        record ``b1`` of the other log, ``"_"`` a gap (marker or aborted record). Timestamps default
        to ``1000 + 10 * offset`` of the original; ``timestamps`` overrides them by record name.

        >>> m = TwoClusterModel.from_notation(["a1", "b1'"], ["b1", "a1'"])  # Lemma 2
        """
        clusters = (active, other(active))
        model = cls(clusters=clusters, active=active, mirror_headers=mirror_headers, log_append_time=log_append_time)
        logs = {clusters[0]: list(active_log), clusters[1]: list(standby_log)}
        where: dict[str, tuple[str, int]] = {}
        for cluster, tokens in logs.items():
            for offset, token in enumerate(tokens):
                if token != "_" and not token.endswith("'"):
                    if token in where:
                        raise ValueError(f"record {token!r} produced twice")
                    where[token] = (cluster, offset)
        ts = dict(timestamps or {})
        for cluster, tokens in logs.items():
            log = model.logs[cluster]
            for offset, token in enumerate(tokens):
                if token == "_":
                    log.append(ts.get(f"_{cluster}{offset}", 1000 + 10 * offset), real=False)
                    continue
                name = token.rstrip("'")
                origin, origin_offset = where[name]
                stamp = ts.get(name, 1000 + 10 * origin_offset)
                if log.timestamp_type is TimestampType.LOG_APPEND_TIME and token.endswith("'"):
                    stamp = 1_000_000 + offset
                if token.endswith("'"):
                    if origin == cluster:
                        raise ValueError(f"{token!r} copies a record of its own log")
                    headers = origin_headers(origin, origin_offset) if mirror_headers else ()
                    log.append(stamp, origin=origin, origin_offset=origin_offset, headers=headers)
                else:
                    log.append(stamp)
        for source, target in model.mirror_position:  # up to the first local record not copied yet
            src, copied = model.logs[source], model.logs[target].first_copy
            model.mirror_position[(source, target)] = next(
                (e.offset for e in src.entries if e.real and e.origin == source and e.offset not in copied), src.end
            )
        model.logs[clusters[0]].log_start = active_log_start
        model.logs[clusters[1]].log_start = standby_log_start
        return model

    @property
    def standby(self) -> str:
        return other(self.active, self.clusters)

    def peer(self, cluster: str) -> str:
        return other(cluster, self.clusters)

    def tick(self, ms: int = EVENT_MS) -> None:
        self.clock += ms

    def _append(self, cluster: str, timestamp: int, **kwargs) -> ModelEntry:
        log = self.logs[cluster]
        if log.timestamp_type is TimestampType.LOG_APPEND_TIME:
            timestamp = self.clock
        self.last_end_change[cluster] = self.clock
        return log.append(timestamp, **kwargs)

    # -- producers ------------------------------------------------------------------------------
    def timestamps(self, n: int, pattern: str, jitter: int = 0) -> list[int]:
        """CreateTime timestamps for ``n`` records produced now."""
        if pattern == "increasing":  # strictly increasing across both producers
            out = []
            for _ in range(n):
                self.last_ts = max(self.last_ts + 1, self.clock)
                out.append(self.last_ts)
            return out
        if pattern == "batches":  # one timestamp per batch, non-decreasing; a negative jitter
            if jitter >= 0 or self.last_ts == 0:  # repeats the previous batch's timestamp
                self.last_ts = max(self.last_ts, self.clock)
            return [self.last_ts] * n
        if pattern == "reversed":  # skewed clocks: may go backwards, within and across batches
            return [self.clock + jitter - 300 * i for i in range(n)]
        raise ValueError(f"unknown timestamp pattern {pattern!r}")

    def produce(self, cluster: str, timestamps: Sequence[int], *, txn: str | None = None, forged: int = 0) -> list[int]:
        """Produce records on ``cluster``; ``txn='commit'`` adds a marker, ``'abort'`` leaves only gaps."""
        headers = FORGED_HEADERS[forged](cluster, self.peer(cluster))
        offsets = []
        for ts in timestamps:
            entry = self._append(cluster, ts, real=txn != "abort", headers=headers)
            offsets.append(entry.offset)
        if txn in ("commit", "abort"):
            self._append(cluster, self.clock, real=False)  # the marker, stamped by the broker
        return offsets if txn != "abort" else []

    # -- the mirror -----------------------------------------------------------------------------
    def _is_loop(self, entry: ModelEntry, target: str) -> bool:
        if self.mirror_headers:  # exactly the devstack mirror's test
            return any(k == ORIGIN_CLUSTER_HEADER and v == target.encode() for k, v in entry.headers)
        return entry.origin == target  # a header-less mirror that avoids loops some other way

    def mirror(self, source: str, target: str, max_records: int = 1, *, marker: bool = False,
               abort: bool = False) -> int:
        """Copy up to ``max_records`` records from ``source`` to ``target`` in source order.

        ``marker``: a transactional batch (commit marker after it). ``abort``: the batch's
        transaction aborts (gaps on the target) and the position stays, like the devstack mirror.
        """
        src = self.logs[source]
        position = max(self.mirror_position[(source, target)], src.log_start)
        batch: list[ModelEntry] = []
        p = position
        while p < src.end and len(batch) < max_records:
            entry = src.entries[p]
            p += 1
            if entry.real and not self._is_loop(entry, target):
                batch.append(entry)
        if abort:
            for entry in batch:
                self._append(target, entry.timestamp, real=False)
            if batch:
                self._append(target, self.clock, real=False)
            self.mirror_position[(source, target)] = position
            return 0
        syncs = self.mm2 if (source, target) == (self.active, self.standby) else None
        for entry in batch:
            headers = origin_headers(source, entry.offset) if self.mirror_headers else ()
            copy = self._append(target, entry.timestamp, origin=source, origin_offset=entry.offset, headers=headers)
            if syncs is not None:
                syncs.copied(entry.offset, copy.offset)
        if marker and batch:
            self._append(target, self.clock, real=False)
        self.mirror_position[(source, target)] = p
        return len(batch)

    def drain(self, source: str, target: str, *, marker: bool = False) -> None:
        while self.mirror_position[(source, target)] < self.logs[source].end:
            self.mirror(source, target, 50, marker=marker)

    def redeliver(self, source: str, target: str, k: int) -> None:
        """At-least-once: the mirror rewinds ``k`` offsets and will copy them again."""
        key = (source, target)
        self.mirror_position[key] = max(self.logs[source].log_start, self.mirror_position[key] - k)

    def retain(self, cluster: str, k: int) -> None:
        """Retention deletes the oldest ``k`` offsets (also ones the mirror has not copied)."""
        log = self.logs[cluster]
        log.log_start = min(log.end, log.log_start + k)
        for (source, target), position in self.mirror_position.items():
            if source == cluster:
                self.mirror_position[(source, target)] = max(position, log.log_start)

    # -- what a reader sees ---------------------------------------------------------------------
    def record_fact(self, entry: ModelEntry, cluster: str) -> RecordFact:
        return RecordFact.from_headers(entry.offset, entry.timestamp, entry.headers, read_from=cluster,
                                       peer=self.peer(cluster), identity=self.identity(entry))

    def identity(self, entry: ModelEntry) -> bytes | None:
        """The record's content identity (``RecordFact.identity``): its original's content and timestamp."""
        if entry.origin is None:
            return None
        content = entry.origin_offset // 2 if self.identical_pairs else entry.origin_offset
        return hashlib.blake2b(f"{entry.origin}:{content}:{entry.timestamp}".encode(), digest_size=16).digest()

    def observation(self, cluster: str) -> HeaderObservation:
        log = self.logs[cluster]
        return HeaderObservation.from_origins(
            cluster, (parse_origin(e.headers, read_from=cluster, peer=self.peer(cluster)) for e in log.retained_real())
        )

    def copy_offset_on(self, cluster: str, entry: ModelEntry) -> int | None:
        """Offset on ``cluster`` of the record ``entry`` (of the other cluster) is a copy of or was
        copied to: the original, or its first copy; None when it is not there (yet)."""
        if entry.origin == cluster:
            return entry.origin_offset
        return self.logs[cluster].first_copy.get(entry.origin_offset)

    def partition_facts(
        self,
        committed: int | None,
        *,
        active: str | None = None,
        group_id: str = "group",
        topic: str = "topic",
        partition: int = 0,
        window: int = 8,
        refine_window: int = 32,
        kept_anchor: Anchor | None = None,
        shape: TopicShape | None = None,
        standby_committed: int | None = None,
        with_timestamp: bool = True,
        with_caught_up: bool = True,
        caught_up_window_s: float = 600.0,
        kept_caught_up: CaughtUpPoint | None = None,
    ) -> PartitionFacts:
        """The facts the I/O layer would read for committed offset ``committed``."""
        active = active or self.active
        standby = self.peer(active)
        A, B = self.logs[active], self.logs[standby]
        shape = shape or TopicShape.unknown()
        at = below = None
        timestamp = None
        if committed is not None and A.log_start <= committed <= A.end:
            e = A.first_real_at_or_after(committed)
            at = self.record_fact(e, active) if e is not None else None
            below = [self.record_fact(e, active) for e in A.real_below(committed, window)]
            searched = at or (below[0] if below else None)
            if with_timestamp and searched is not None and shape.allows_timestamp_search(active):
                o = B.offsets_for_times(searched.timestamp)
                after = [] if o is None else [self.record_fact(e, standby) for e in B.retained_real(o)]
                forward = after[:refine_window]
                # as the reader: the last real record when nothing real follows the answer
                last = B.last_real() if o is None or not forward else None
                first = B.first_real_at_or_after(B.log_start)
                timestamp = TimestampFacts(
                    searched.offset, o, tuple(forward), self.record_fact(last, standby) if last is not None else None,
                    mirror_writes_headers=self.mirror_headers,
                    standby_first=self.record_fact(first, standby) if first is not None else None,
                    standby_records_complete=o is not None and len(after) < refine_window,
                )
        caught_up = None
        if with_caught_up:
            stable_ms = self.clock - max(self.last_end_change[active], self.last_end_change[standby])
            to_active, to_standby = self.mirror_position[(standby, active)], self.mirror_position[(active, standby)]
            # as the fast-forward job: the gaps up to the log ends read, read_committed
            caught_up = CaughtUpFacts(
                logs_stable_for_s=stable_ms / 1000.0,
                standby_to_active_mirror_position=to_active,
                active_to_standby_mirror_position=to_standby,
                window_s=caught_up_window_s,
                no_record_from_committed=committed is not None and A.first_real_at_or_after(committed) is None,
                no_record_from_standby_mirror_position=B.first_real_at_or_after(to_active) is None,
                no_record_from_active_mirror_position=A.first_real_at_or_after(to_standby) is None,
            )
        return PartitionFacts(
            group_id=group_id, topic=topic, partition=partition, active=active, standby=standby,
            committed=committed, active_log_start=A.log_start, active_log_end=A.end,
            standby_log_start=B.log_start, standby_log_end=B.end, standby_committed=standby_committed,
            standby_timestamp_type=B.timestamp_type, shape=shape, record_at_or_after=at,
            records_below=tuple(below or ()), kept_anchor=kept_anchor, timestamp=timestamp, caught_up=caught_up,
            kept_caught_up=kept_caught_up,
        )


# -- loss and duplicates, as NO-LOSS defines them -----------------------------------------------


def count_loss(model: TwoClusterModel, c: int, t: int, active: str | None = None) -> int:
    """Records of B below ``t`` whose copy on A is at offset ``>= c`` (or not on A yet)."""
    active = active or model.active
    B = model.logs[model.peer(active)]
    lost = 0
    for entry in B.retained_real(0, t):
        copy = model.copy_offset_on(active, entry)
        if copy is None or copy >= c:
            lost += 1
    return lost


def count_duplicates(model: TwoClusterModel, c: int, t: int, active: str | None = None) -> int:
    """Records of B at offset ``>= t`` whose copy on A is below ``c``."""
    active = active or model.active
    B = model.logs[model.peer(active)]
    duplicates = 0
    for entry in B.retained_real(t):
        copy = model.copy_offset_on(active, entry)
        if copy is not None and copy < c:
            duplicates += 1
    return duplicates


# -- trials ---------------------------------------------------------------------------------------

SHAPES = ("one_way_from_active", "one_way_from_standby", "two_way")
TIMESTAMP_PATTERNS = ("increasing", "batches", "reversed")
SHAPE_MODES = ("configured", "detected", "unknown")


@dataclass(frozen=True)
class TrialConfig:
    """One scenario: who produces where, how timestamps look, what the pipeline is told."""

    shape: str = "two_way"  # one of SHAPES (relative to the group's active cluster)
    active: str = CLUSTERS[0]
    timestamp_pattern: str = "increasing"
    shape_mode: str = "configured"  # what translate is told: the true shape, a detected one, or nothing
    mirror_headers: bool = True
    log_append_time_on_standby: bool = False
    window: int = 8
    refine_window: int = 32
    caught_up_facts: bool = True
    kind: str = "disaster"  # or "planned": drain, move producers, then fail over (docs/operating/runbook.md)
    identical_pairs: bool = False  # pairs of originals with one content (TwoClusterModel)
    # a MirrorMaker-like active -> standby mirror (no headers) whose offset syncs the sync reads
    mm2_syncs: bool = False
    sync_lag_max: int = 3  # its offset.lag.max
    sync_forward_window: bool = True  # the reader reads the standby forward from the best pair

    def __post_init__(self) -> None:
        if self.shape not in SHAPES or self.timestamp_pattern not in TIMESTAMP_PATTERNS or self.shape_mode not in SHAPE_MODES:
            raise ValueError(f"bad trial config {self}")
        if not self.mirror_headers and self.shape == "two_way":
            raise ValueError("a header-less mirror is modelled for one-way topics only")
        if self.mm2_syncs and (self.mirror_headers or self.shape != "one_way_from_active"):
            raise ValueError("offset syncs are modelled for a header-less mirror of a topic produced on the active")

    @property
    def standby(self) -> str:
        return other(self.active)

    @property
    def producers(self) -> tuple[str, ...]:
        if self.shape == "one_way_from_active":
            return (self.active,)
        if self.shape == "one_way_from_standby":
            return (self.standby,)
        return (self.active, self.standby)

    def true_shape(self) -> TopicShape:
        producers = self.producers
        return TopicShape.one_way(producers[0]) if len(producers) == 1 else TopicShape.two_way()

    @classmethod
    def random(cls, rng: random.Random) -> TrialConfig:
        shape = rng.choice(SHAPES)
        headers = not (shape == "one_way_from_active" and rng.random() < 0.15)
        return cls(
            shape=shape,
            active=rng.choice(CLUSTERS),
            timestamp_pattern=rng.choice(TIMESTAMP_PATTERNS),
            shape_mode=rng.choices(SHAPE_MODES, weights=(6, 2, 1))[0],
            mirror_headers=headers,
            log_append_time_on_standby=rng.random() < 0.08,
            window=rng.randint(1, 10),
            refine_window=rng.randint(4, 40),
            caught_up_facts=rng.random() < 0.8,
            kind=rng.choice(("disaster", "planned")),
        )


# Events are plain tuples so that property tests can generate and shrink them:
#   ("produce", side, n, txn, forged, jitter)  side 0 = active, 1 = standby (mapped onto the producers)
#                                              txn 0 none, 1 commit, 2 abort; forged: FORGED_HEADERS key
#   ("mirror", direction, n, mode)             direction 0 = active->standby, 1 = standby->active;
#                                              mode 0 plain, 1 transactional (marker), 2 aborted batch
#   ("redeliver", direction, k)                at-least-once rewind
#   ("retain", side, k)                        retention on the active (0) or standby (1) cluster
#   ("consume", pct)                           the group commits pct% of the way to the log end
#   ("reset", pct)                             the group is reset to pct% between log start and end
#   ("quiet",)                                 nothing happens for longer than the caught-up window
#   ("sync",)                                  one sync cycle
# With a MirrorMaker-like mirror (TrialConfig.mm2_syncs; no-ops otherwise):
#   ("mm2_commit",)                            its task commits its source position (delayed pair sent)
#   ("mm2_restart",)                           its task restarts at the committed position (copies again)
#   ("lose_syncs", k)                          its next k offset-sync sends fail
#   ("compact_syncs",)                         compaction of the offset-syncs topic
Event = tuple


def random_events(rng: random.Random, n: int, *, gaps: bool = True, retention: bool = False,
                  redelivery: bool = False, forged: bool = False, standby_retention: bool = True) -> list[Event]:
    kinds = ["produce", "mirror", "consume", "sync", "reset", "quiet"]
    weights = [30, 30, 12, 12, 2, 1]
    if retention:
        kinds.append("retain")
        weights.append(3)
    if redelivery:
        kinds.append("redeliver")
        weights.append(2)
    events: list[Event] = []
    for _ in range(n):
        kind = rng.choices(kinds, weights)[0]
        if kind == "produce":
            txn = rng.choice((0, 0, 1, 2)) if gaps else 0
            events.append(("produce", rng.randint(0, 1), rng.randint(1, 4), txn,
                           rng.choice((1, 2, 3)) if forged and rng.random() < 0.3 else 0, rng.randint(-5000, 2000)))
        elif kind == "mirror":
            mode = rng.choice((0, 1, 1, 2)) if gaps else 0
            events.append(("mirror", rng.randint(0, 1), rng.randint(1, 5), mode))
        elif kind == "redeliver":
            events.append(("redeliver", rng.randint(0, 1), rng.randint(1, 6)))
        elif kind == "retain":
            events.append(("retain", rng.randint(0, 1) if standby_retention else 0, rng.randint(1, 6)))
        elif kind in ("consume", "reset"):
            events.append((kind, rng.randint(0, 100)))
        else:
            events.append((kind,))
    return events


@dataclass(frozen=True)
class CycleOutcome:
    facts: PartitionFacts
    result: TranslationResult
    lost: int  # count_loss at translation time (0 when nothing was translated)
    duplicates: int | None  # count_duplicates at translation time, None when nothing was translated


@dataclass(frozen=True)
class FailoverOutcome:
    committed: int  # c on the active cluster at failover
    standby_offset: int  # where the group resumes on the standby
    lost: int
    duplicates: int
    strategy: str  # strategy of the result that set the standby offset, or "none" / "rewound"
    status: str


@dataclass
class Trial:
    """A model plus a group that syncs, keeps its anchor and commits by the commit rules."""

    config: TrialConfig
    model: TwoClusterModel = field(init=False)
    c: int = 0
    kept: Anchor | None = None
    kept_point: CaughtUpPoint | None = None  # the last fast-forward committed, as the sync cycle keeps it
    commit_t: int | None = None
    commit_c: int | None = None
    commit_label: tuple[str, str] = ("none", "none")
    cycles: list[CycleOutcome] = field(default_factory=list)
    #: offset-syncs topic offset -> the active log end read after the sync first read that pair
    sync_stamps: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cfg = self.config
        self.model = TwoClusterModel(
            active=cfg.active, mirror_headers=cfg.mirror_headers,
            log_append_time=(cfg.standby,) if cfg.log_append_time_on_standby else (),
            identical_pairs=cfg.identical_pairs,
        )
        if cfg.mm2_syncs:
            self.model.mm2 = MirrorMakerSyncs(lag_max=cfg.sync_lag_max)

    # -- events ---------------------------------------------------------------------------------
    def apply(self, event: Event) -> CycleOutcome | None:
        m, cfg = self.model, self.config
        kind = event[0]
        m.tick()
        A = m.logs[cfg.active]
        if kind == "produce":
            _, side, n, txn, forged, jitter = event
            producers = cfg.producers
            cluster = producers[side % len(producers)]
            m.produce(cluster, m.timestamps(n, cfg.timestamp_pattern, jitter),
                      txn={0: None, 1: "commit", 2: "abort"}[txn], forged=forged)
        elif kind == "mirror":
            _, direction, n, mode = event
            source, target = (cfg.active, cfg.standby) if direction == 0 else (cfg.standby, cfg.active)
            m.mirror(source, target, n, marker=mode == 1, abort=mode == 2)
        elif kind == "redeliver":
            _, direction, k = event
            source, target = (cfg.active, cfg.standby) if direction == 0 else (cfg.standby, cfg.active)
            m.redeliver(source, target, k)
        elif kind == "retain":
            _, side, k = event
            m.retain(cfg.active if side == 0 else cfg.standby, k)
        elif kind == "consume":
            self.c = min(A.end, max(self.c, A.log_start) + (A.end - max(self.c, A.log_start)) * event[1] // 100)
        elif kind == "reset":
            self.c = A.log_start + (A.end - A.log_start) * event[1] // 100
        elif kind == "quiet":
            m.tick(QUIET_MS)
        elif kind == "sync":
            return self.sync()
        elif kind in ("mm2_commit", "mm2_restart", "lose_syncs", "compact_syncs"):
            self._mirror_maker_event(event)
        else:
            raise ValueError(f"unknown event {event!r}")
        return None

    def _mirror_maker_event(self, event: Event) -> None:
        m, cfg = self.model, self.config
        syncs = m.mm2
        if syncs is None:
            return
        key = (cfg.active, cfg.standby)
        kind = event[0]
        if kind == "mm2_commit":
            syncs.commit(m.mirror_position[key])
        elif kind == "mm2_restart":
            m.mirror_position[key] = syncs.restart()
        elif kind == "lose_syncs":
            syncs.lost += event[1]
        else:
            syncs.compact()

    def offset_sync_facts(self, c: int) -> OffsetSyncFacts:
        """What the reader gives the rule: the partition's pairs in the topic's order, each stamped
        with the active log end read after the sync first read it (read now, after the pairs), and
        the standby read forward from just past the best confirmed pair for ``c``."""
        m, cfg = self.model, self.config
        A, B = m.logs[cfg.active], m.logs[cfg.standby]
        assert m.mm2 is not None
        for position, _, _ in m.mm2.topic:
            self.sync_stamps.setdefault(position, A.end)
        pairs = tuple(SyncPair(u, d, self.sync_stamps[position]) for position, u, d in m.mm2.topic)
        if not cfg.sync_forward_window:
            return OffsetSyncFacts(pairs)
        confirmed = [
            p.downstream for p in current_pairs(pairs)
            if p.upstream <= c and p.upstream < p.active_end_after <= c and B.log_start <= p.downstream + 1 < B.end + 1
        ]
        if not confirmed:
            return OffsetSyncFacts(pairs)
        start = max(confirmed) + 1
        after = [m.record_fact(e, cfg.standby) for e in B.retained_real(start)]
        return OffsetSyncFacts(pairs, forward_from=start, forward_records=tuple(after[: cfg.refine_window]),
                               forward_complete=len(after) <= cfg.refine_window)

    def shape(self) -> TopicShape:
        mode = self.config.shape_mode
        if mode == "configured":
            return self.config.true_shape()
        if mode == "detected":
            return decide_shape(self.model.observation(self.config.active), self.model.observation(self.config.standby))
        return TopicShape.unknown()

    def sync(self, c: int | None = None) -> CycleOutcome:
        """One cycle: facts, translation, anchor kept, commit rule, loss checked at once."""
        m, cfg = self.model, self.config
        c = self.c if c is None else c
        # With caught-up facts, every other cycle is a fast-forward job's (live facts) and the others
        # are sync cycles, which only have the fast-forward point kept from the last one committed.
        live = cfg.caught_up_facts and len(self.cycles) % 2 == 0
        facts = m.partition_facts(
            c, window=cfg.window, refine_window=cfg.refine_window, kept_anchor=self.kept, shape=self.shape(),
            standby_committed=self.commit_t, with_caught_up=live, kept_caught_up=None if live else self.kept_point,
        )
        if m.mm2 is not None:
            facts = dataclasses.replace(facts, offset_syncs=self.offset_sync_facts(c))
        result = translate_partition(facts)
        check_no_loss(facts, result)
        self.kept = result.anchor_to_keep
        lost, dups = 0, None
        if result.translated:
            t = result.standby_offset
            lost = count_loss(m, c, t)
            dups = count_duplicates(m, c, t)
            label = (result.strategy.value, result.status.value)
            if self.commit_t is None or self.commit_c is None or c < self.commit_c:
                self.commit_t, self.commit_label = t, label
            elif t > self.commit_t:  # never backwards unless the group was reset backwards
                self.commit_t, self.commit_label = t, label
            self.commit_c = c
            if live and result.strategy is not None and result.strategy.value == "caught_up" and self.commit_t == t:
                self.kept_point = CaughtUpPoint(cfg.active, cfg.standby, c, t)
        elif self.commit_t is not None and self.commit_c is not None and c < self.commit_c:
            # Reset below the last synced point and nothing newer known: rewind to the start.
            self.commit_t, self.commit_c = m.logs[cfg.standby].log_start, c
            self.commit_label = ("rewound", result.status.value)
        outcome = CycleOutcome(facts, result, lost, dups)
        self.cycles.append(outcome)
        return outcome

    def planned_switchover(self, quiet: bool) -> None:
        """The planned switchover (docs/operating/runbook.md): drain the mirrors, move the producers to
        the standby (two-way topics), let the group read everything, then sync once more."""
        m, cfg = self.model, self.config
        m.tick()
        m.drain(cfg.active, cfg.standby, marker=True)
        if cfg.shape == "two_way":
            m.produce(cfg.standby, m.timestamps(2, cfg.timestamp_pattern, 0))
        m.drain(cfg.standby, cfg.active, marker=True)
        m.drain(cfg.active, cfg.standby, marker=True)
        m.tick()
        self.c = m.logs[cfg.active].end
        if quiet:
            m.tick(QUIET_MS)

    def failover(self) -> FailoverOutcome:
        """The group resumes on the standby at the committed standby offset (earliest when none)."""
        m = self.model
        t = self.commit_t if self.commit_t is not None else m.logs[self.config.standby].log_start
        return FailoverOutcome(
            self.c, t, count_loss(m, self.c, t), count_duplicates(m, self.c, t), self.commit_label[0],
            self.commit_label[1],
        )


def run_trial(config: TrialConfig, events: Iterable[Event], *, quiet: bool = False) -> tuple[Trial, FailoverOutcome]:
    trial = Trial(config)
    for event in events:
        trial.apply(event)
    if config.kind == "planned":
        trial.planned_switchover(quiet)
    trial.sync()
    return trial, trial.failover()


def _bucket() -> dict[str, int]:
    return {"trials": 0, "lost": 0, "duplicates": 0, "zero_duplicate_trials": 0}


def run_trials(n: int = 1000, seed: int = 0, *, events_per_trial: int = 60) -> dict:
    """``n`` random failover trials. Returns a summary: loss and duplicates at failover by strategy,
    shape, timestamp pattern and trial kind, plus per-cycle status counts (freshness)."""
    summary: dict = {
        "trials": n, "seed": seed, "lost": 0, "duplicates": 0, "cycles": 0, "cycles_translated": 0,
        "cycle_lost": 0, "timestamp_inversions": 0, "planned_duplicates": 0,
    }
    groups: dict[str, defaultdict] = {
        key: defaultdict(_bucket) for key in ("by_strategy", "by_shape", "by_timestamp_pattern", "by_kind", "by_shape_mode")
    }
    statuses: Counter = Counter()
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        config = TrialConfig.random(rng)
        events = random_events(
            rng, events_per_trial, gaps=rng.random() < 0.6, retention=rng.random() < 0.3,
            redelivery=rng.random() < 0.15, forged=rng.random() < 0.2, standby_retention=config.mirror_headers,
        )
        trial, outcome = run_trial(config, events, quiet=rng.random() < 0.5)
        for cycle in trial.cycles:
            statuses[cycle.result.status.value] += 1
            summary["cycles"] += 1
            summary["cycles_translated"] += cycle.result.translated
            summary["cycle_lost"] += cycle.lost
            summary["timestamp_inversions"] += cycle.result.timestamp_inversion
        summary["lost"] += outcome.lost
        summary["duplicates"] += outcome.duplicates
        if config.kind == "planned":
            summary["planned_duplicates"] += outcome.duplicates
        keys = {
            "by_strategy": outcome.strategy,
            "by_shape": config.shape,
            "by_timestamp_pattern": config.timestamp_pattern,
            "by_kind": config.kind,
            "by_shape_mode": config.shape_mode,
        }
        for group, key in keys.items():
            bucket = groups[group][key]
            bucket["trials"] += 1
            bucket["lost"] += outcome.lost
            bucket["duplicates"] += outcome.duplicates
            bucket["zero_duplicate_trials"] += outcome.duplicates == 0
    for group, buckets in groups.items():
        summary[group] = {key: dict(value) for key, value in sorted(buckets.items())}
    summary["cycle_statuses"] = dict(statuses.most_common())
    return summary


def without_identities(facts: PartitionFacts) -> PartitionFacts:
    """``facts`` as a reader that read no record identity gives them (a header-writing mirror's
    setting, or before identities were read): every ``RecordFact.identity`` None."""

    def strip(record: RecordFact | None) -> RecordFact | None:
        return None if record is None else dataclasses.replace(record, identity=None)

    tf = facts.timestamp
    if tf is not None:
        tf = dataclasses.replace(tf, standby_records=tuple(strip(r) for r in tf.standby_records),
                                 standby_last=strip(tf.standby_last), standby_first=strip(tf.standby_first))
    return dataclasses.replace(facts, record_at_or_after=strip(facts.record_at_or_after),
                               records_below=tuple(strip(r) for r in facts.records_below), timestamp=tf)
