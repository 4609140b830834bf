"""The records an audit reads back for one topic-partition: ranges of both clusters, each read once.

An audit looks at many moments of one topic-partition (every snapshot of a day, every group), each
needing a small region of both logs near its ``t`` and ``c`` (``audit/failover_cost.py``). This
cache reads what a moment needs and is not read yet -- only those offset ranges, read_committed,
with the project's pooled readers (``partition_records``) -- and answers every later moment from
memory. Headers are parsed as the translation parses them: a standby record is a copy of an active
record, produced on the standby, or unidentified.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass

from offset_pipeline.audit.failover_cost import Origin, ReadRegion, Shape, StandbyRecord
from offset_pipeline.kafka_io.partition_records import LeasedConsumers, PartitionReader, ReadStats
from offset_pipeline.translation.headers import CopiedFrom, LocalRecord


@dataclass(frozen=True)
class _Copy:
    offset: int
    copy_of: int | None  # the standby offset this active record copies, if it is a copy


class _Side:
    """What is known of one cluster's partition: the ranges read and their real records."""

    def __init__(self, log_start: int, log_end: int):
        self.log_start, self.log_end = log_start, log_end
        self.covered: list[tuple[int, int]] = []  # merged, sorted
        self.offsets: list[int] = []
        self.records: dict[int, object] = {}

    def missing(self, lo: int, hi: int) -> list[tuple[int, int]]:
        lo, hi = max(lo, self.log_start), min(hi, self.log_end)
        gaps, at = [], lo
        for a, b in self.covered:
            if b <= at or a >= hi:
                continue
            if a > at:
                gaps.append((at, a))
            at = max(at, b)
        if at < hi:
            gaps.append((at, hi))
        return gaps

    def add(self, lo: int, hi: int, records) -> None:
        for r in records:
            if r.offset not in self.records:
                bisect.insort(self.offsets, r.offset)
                self.records[r.offset] = r
        merged = []
        for a, b in sorted(self.covered + [(lo, hi)]):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.covered = merged

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """The part of ``[lo, hi)`` (clipped to the log) read completely from its start: a read that
        stopped early (an open transaction) leaves the rest out, and the audit then says so."""
        lo, hi = max(lo, self.log_start), min(hi, self.log_end)
        if lo >= hi:
            return lo, lo
        for a, b in self.covered:
            if a <= lo < b:
                return lo, min(hi, b)
        return lo, lo

    def between(self, lo: int, hi: int) -> list:
        i, j = bisect.bisect_left(self.offsets, lo), bisect.bisect_left(self.offsets, hi)
        return [self.records[o] for o in self.offsets[i:j]]


class PartitionRecordCache:
    """Both clusters' records of one topic-partition, read on demand (one consumer per cluster)."""

    def __init__(self, active: str, standby: str, active_conf: dict, standby_conf: dict, topic: str, partition: int,
                 *, shape: Shape, exactly_once_mirror: bool, timeout_s: float = 30.0):
        self.active, self.standby, self.topic, self.partition = active, standby, topic, partition
        self.shape, self.exactly_once_mirror = shape, exactly_once_mirror
        self.stats = ReadStats()
        self.timeout_s = timeout_s
        self._clients = LeasedConsumers(self.stats, topic, time.monotonic() + timeout_s * 100)
        self._confs = {"active": active_conf, "standby": standby_conf}
        self.records_read = 0
        self.sides: dict[str, _Side] = {}
        for side in ("active", "standby"):
            low, high = self._clients.log_range(side, self._confs[side], partition, timeout_s)
            self.sides[side] = _Side(low, high)

    def close(self) -> None:
        self._clients.__exit__(None, None, None)

    def _ensure(self, side: str, lo: int, hi: int) -> None:
        known = self.sides[side]
        read_from, peer = (self.active, self.standby) if side == "active" else (self.standby, self.active)
        for a, b in known.missing(lo, hi):
            reader = PartitionReader(self._clients.get(side, self._confs[side]), self.topic, self.partition, read_from=read_from,
                             peer=peer, end=b, deadline=time.monotonic() + self.timeout_s, stats=self.stats)
            records, upto = reader.read(a)
            self.records_read += len(records)
            known.add(a, upto, [self._audit_record(side, r) for r in records])

    def _audit_record(self, side: str, record):
        """What the audit needs of a record, made once when it is read: a standby record's origin,
        or an active record's standby offset when it is a copy (``_Copy``)."""
        origin = record.origin
        if side == "active":
            copy_of = origin.offset if isinstance(origin, CopiedFrom) and origin.cluster == self.standby else None
            return _Copy(record.offset, copy_of)
        if isinstance(origin, CopiedFrom) and origin.cluster == self.active:
            return StandbyRecord(record.offset, Origin.ACTIVE, origin.offset)
        if isinstance(origin, LocalRecord):
            return StandbyRecord(record.offset, Origin.STANDBY)
        return StandbyRecord(record.offset, Origin.UNIDENTIFIED)

    def prefetch(self, standby_from: int, standby_to: int, active_from: int, active_to: int) -> None:
        """Read one contiguous range per side now: moments in time order would otherwise each read
        the little the logs grew since the previous one (two reads per snapshot, most of the time)."""
        self._ensure("standby", standby_from, standby_to)
        self._ensure("active", active_from, active_to)

    def region(self, standby_from: int, standby_to: int, active_from: int, active_to: int) -> ReadRegion:
        """The records of B ``[standby_from, standby_to)`` and A ``[active_from, active_to)`` (clipped to
        the logs), read if not read yet, as an audit region."""
        self._ensure("standby", standby_from, standby_to)
        self._ensure("active", active_from, active_to)
        b, a = self.sides["standby"], self.sides["active"]
        b_span, a_span = b.span(standby_from, standby_to), a.span(active_from, active_to)
        standby_records = b.between(*b_span)
        copies: dict[int, int] = {}
        for r in a.between(*a_span):
            if r.copy_of is not None:
                copies.setdefault(r.copy_of, r.offset)
        return ReadRegion(
            standby_records, b_span[0], b_span[1], b.log_start, copies, a_span[0], a_span[1], self.shape,
            a.log_start, a.log_end, self.exactly_once_mirror,
        )
