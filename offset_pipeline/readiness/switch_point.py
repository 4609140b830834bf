"""Where a stopped group resumes on its target, found and verified by record identity (pure).

A planned switchover moves a group that stopped on its source cluster ``A`` at committed offset
``c`` to its target ``B``. Every record has an **identity**: ``(origin cluster, origin offset)``,
from the mirror's origin headers on a copy, or the cluster and offset it was read at on an original.
A record of ``B`` was **processed** by the group when its identity is a record of ``A`` below ``c``:
an ``A`` original below ``c``, or a ``B`` original whose copy on ``A`` lies below ``c``.

:func:`switch_point` starts from the standby offset the sync committed (``t0``: loss-free,
docs/concepts/no-loss.md) and moves forward over processed records: the first record of ``B`` that is not processed is
where the group resumes (``t``). :func:`verify` then counts, over the records read around ``t``,
the records below ``t`` that are not processed (**lost**) and the records at or after ``t`` that are
processed (**duplicates**).

Invariants (tests/readiness/test_switch_point.py):

* ``t >= t0``, and every record of ``B`` in ``[t0, t)`` is processed: moving forward never skips a
  record the group has not seen (so ``t`` keeps NO-LOSS wherever ``t0`` had it);
* when every record of ``B`` is known (the whole log read), ``verify(t)`` finds 0 lost, and 0
  duplicates once the group is drained (every processed record is on ``B``, mirrored in order);
* a record whose identity cannot be told (a malformed header), or a ``B`` original not yet copied to
  ``A``, is never counted as processed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from offset_pipeline.translation.facts import RecordFact
from offset_pipeline.translation.headers import CopiedFrom, LocalRecord

Identity = tuple[str, int]  # origin cluster, origin offset


def identity(record: RecordFact, read_from: str) -> Identity | None:
    """``(origin cluster, origin offset)`` of a record read from ``read_from``; None when its headers are malformed."""
    if isinstance(record.origin, CopiedFrom):
        return (record.origin.cluster, record.origin.offset)
    if isinstance(record.origin, LocalRecord):
        return (read_from, record.offset)
    return None


@dataclass(frozen=True)
class SourceView:
    """What the source's records near ``c`` say: where each copy of a target original lies.

    ``copies``: target origin offset -> source offset of its copy, for the source records read
    (``read_from`` .. ``read_to``); ``copies_below``: every target original whose origin offset is
    below the smallest copy read has its copy below ``read_from`` (the mirror copies in order)."""

    source: str
    target: str
    committed: int  # c
    copies: dict[int, int]
    read_from: int

    @classmethod
    def of(cls, records: Iterable[RecordFact], source: str, target: str, committed: int, read_from: int) -> SourceView:
        copies = {}
        for r in records:
            ident = identity(r, source)
            if ident is not None and ident[0] == target:
                copies[ident[1]] = r.offset
        return cls(source, target, committed, copies, read_from)

    def processed(self, record: RecordFact) -> bool:
        """The record, read from the target, was processed by the group stopped at ``committed``."""
        ident = identity(record, self.target)
        if ident is None:
            return False
        cluster, offset = ident
        if cluster == self.source:
            return offset < self.committed
        if cluster != self.target:
            return False
        if offset in self.copies:
            return self.copies[offset] < self.committed
        # Not among the copies read: below them its copy lies before read_from (processed when
        # read_from <= c); above them it is not on the source yet (not processed).
        return bool(self.copies) and offset < min(self.copies) and self.read_from <= self.committed


@dataclass(frozen=True)
class SwitchPoint:
    start: int  # t0: the standby offset the sync left
    offset: int  # t: where the group resumes on the target
    skipped: int  # processed records moved over (t - t0 real records)
    stopped_by: str  # why the walk stopped


def switch_point(target_records: list[RecordFact], start: int, view: SourceView, read_to: int) -> SwitchPoint:
    """``t``: from ``start`` over the target's records (sorted by offset, read completely from at least
    ``start`` up to ``read_to``), the first one not processed; ``read_to`` when all are."""
    skipped = 0
    for r in target_records:
        if r.offset < start:
            continue
        if not view.processed(r):
            return SwitchPoint(start, r.offset, skipped, f"the record at {r.offset} ({r.origin}) was not processed")
        skipped += 1
    return SwitchPoint(start, max(start, read_to), skipped, f"every record read up to {read_to} was processed")


@dataclass(frozen=True)
class Verification:
    lost: list[int]  # target offsets below t of records not processed
    duplicates: list[int]  # target offsets at or after t of processed records
    checked_from: int
    checked_to: int


def verify(target_records: list[RecordFact], t: int, view: SourceView, checked_from: int, checked_to: int) -> Verification:
    """Lost and duplicated records of a resume at ``t``, over the target records in ``[checked_from, checked_to)``."""
    lost, duplicates = [], []
    for r in target_records:
        if not checked_from <= r.offset < checked_to:
            continue
        done = view.processed(r)
        if r.offset < t and not done:
            lost.append(r.offset)
        elif r.offset >= t and done:
            duplicates.append(r.offset)
    return Verification(lost, duplicates, checked_from, checked_to)


def drained(target_records: Iterable[RecordFact], view: SourceView, last_processed: RecordFact | None) -> bool:
    """Every record the group processed is on the target: the source's record at ``c - 1``
    (``last_processed``; None when the group processed nothing) is there, as itself or as its copy."""
    if last_processed is None:
        return True
    ident = identity(last_processed, view.source)
    if ident is None:
        return False
    if ident[0] == view.target:
        return True  # a target original: there from the start
    return any(identity(r, view.target) == ident for r in target_records)
