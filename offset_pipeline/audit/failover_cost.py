"""What a failover at a past moment would have cost, for one group-partition (docs/operating/audits.md). Pure.

At a snapshot taken at time ``T`` the group had committed ``c`` on its active cluster A and its
standby group ``t`` on B. Had A been lost at ``T``, the group would have resumed on B at ``t``, with
B as it stood at ``T`` (its log end then, ``standby_end_at``). As NO-LOSS defines them (docs/concepts/no-loss.md):

* **lost**: records of B below ``t`` whose copy on A is at ``>= c``, or was never made;
* **duplicated**: records of B in ``[t, standby_end_at)`` whose copy on A is below ``c``.

Inputs are the records read back later (read_committed, headers parsed by the I/O layer): each B
record's origin -- a copy of A's record ``a`` (``IDC``/``Offset`` headers), or produced on B -- and,
for records produced on B, the offset of their first copy on A, found from A's headers
(``active_copies``). Only bounded regions are read: B ``[standby_from, standby_to)`` and A
``[active_from, active_to)``. Counting is exact when the records outside them cannot count, which
the mirror's ordering proves:

* **Below the region.** A record produced on B whose copy on A is below ``c`` has only records below
  it on B whose copies are below ``c`` too: earlier B records were copied before it, and every A
  record copied to B before it was on A before its copy was. On a topic produced only on A (one-way),
  a copy of ``a < c`` proves the same. Without such a record, the region must start at B's log start
  0 (nothing ever below); a log start above 0 means the deciding records are gone: ``records_deleted``.
* **Above ``t``.** Only ``[t, standby_end_at)`` counts, and it must have been read completely.
* **Copies on A of B's records** are in B's order (an exactly-once mirror), so a B record whose copy
  is not in A's region lies below every found copy (copy below ``active_from``) or above (copy at
  ``active_to`` or later, or none yet); with no copy found at all the region says nothing:
  ``needs_wider_read``. With an at-least-once mirror A must be read whole (first copies).

A moment whose counts the regions cannot decide gets a named status, never a guess.

Invariants (tests/audit/test_failover_cost.py): with both logs read whole, the counts equal the
model's oracle (``devstack/two_cluster_model.count_loss`` / ``count_duplicates``, in the tests) for every moment, also with
an at-least-once mirror; with any partial regions and an exactly-once mirror an ``audited`` result
still equals it (the proofs are sound).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

LISTED_OFFSETS = 20  # lost / duplicated standby offsets listed per moment (all are counted)


class Origin(str, Enum):
    ACTIVE = "active"  # a copy of the active cluster's record ``active_offset``
    STANDBY = "standby"  # produced on the standby cluster
    UNIDENTIFIED = "unidentified"  # headers malformed or naming a third cluster


class CostStatus(str, Enum):
    """Stored in ClickHouse: stable values."""

    AUDITED = "audited"
    NO_COMMITTED_OFFSET = "no_committed_offset"  # the group had no offset on its active cluster
    NO_STANDBY_OFFSET = "no_standby_offset"  # nothing synced: the reset policy would decide
    RECORDS_DELETED = "records_deleted"  # retention removed records the answer depends on
    NEEDS_WIDER_READ = "needs_wider_read"  # the regions read do not decide it (the I/O layer widens)
    UNIDENTIFIED_RECORDS = "unidentified_records"  # records whose origin cannot be told


class Shape(str, Enum):
    TWO_WAY = "two_way"
    ONE_WAY_FROM_ACTIVE = "one_way_from_active"
    ONE_WAY_FROM_STANDBY = "one_way_from_standby"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class StandbyRecord:
    offset: int
    origin: Origin
    active_offset: int | None = None  # Origin.ACTIVE: the original's offset on the active cluster


@dataclass(frozen=True)
class ReadRegion:
    """What was read, complete, for one topic-partition and one direction."""

    standby_records: Sequence[StandbyRecord]  # the real records of B in [standby_from, standby_to)
    standby_from: int
    standby_to: int
    standby_log_start: int  # B's log start when read
    active_copies: Mapping[int, int]  # B offset -> offset of its first copy on A, found in A's region
    active_from: int
    active_to: int
    shape: Shape = Shape.UNKNOWN
    active_log_start: int | None = None  # A's log start and end when read (None: not known)
    active_log_end: int | None = None
    # The mirrors copy every record once, in order (the devstack mirror, MirrorMaker 2 with
    # exactly-once). An at-least-once mirror may copy a record again after later ones: then a
    # partial region of A proves nothing about first copies, nor a one-way copy about those below it.
    exactly_once_mirror: bool = False

    @property
    def active_read_whole(self) -> bool:
        return (self.active_log_start is not None and self.active_log_end is not None
                and self.active_from <= self.active_log_start and self.active_to >= self.active_log_end)

    def __post_init__(self) -> None:
        records = sorted(self.standby_records, key=lambda r: r.offset)
        object.__setattr__(self, "standby_records", tuple(records))
        object.__setattr__(self, "_offsets", [r.offset for r in records])
        copied = sorted(s for s in self.active_copies)
        object.__setattr__(self, "_copied", copied)


@dataclass(frozen=True)
class FailoverCost:
    status: CostStatus
    lost: int | None
    duplicated: int | None
    reason: str
    lost_offsets: tuple[int, ...] = field(default=())  # standby offsets, the first LISTED_OFFSETS
    duplicated_offsets: tuple[int, ...] = field(default=())


_INF = float("inf")
_NEG = float("-inf")


def _active_position(region: ReadRegion, record: StandbyRecord) -> float | None:
    """Where the record is (or would be) on A; -inf / +inf for "below / above A's region or never
    copied", None when the regions cannot tell."""
    if record.origin is Origin.ACTIVE:
        return float(record.active_offset)
    if record.origin is Origin.UNIDENTIFIED:
        return None
    if record.offset in region.active_copies:
        return float(region.active_copies[record.offset])
    if region.active_from <= 0 == region.active_log_start:
        return _INF  # A read from its very start (nothing deleted) holds no copy: the first is later, if any
    copied = region._copied
    if not region.exactly_once_mirror and not region.active_read_whole:
        return None  # a later copy may be all the region holds
    if copied:
        # copies are in B's order: below every found copy, or above every found one (at active_to
        # or later, or not made yet)
        return _NEG if record.offset < copied[0] else _INF
    return None


def _position_unknown(record: StandbyRecord, region: ReadRegion) -> FailoverCost:
    if record.origin is Origin.UNIDENTIFIED:
        return FailoverCost(CostStatus.UNIDENTIFIED_RECORDS, None, None,
                            f"standby record {record.offset} has no readable origin headers")
    if region.active_read_whole:
        return FailoverCost(CostStatus.RECORDS_DELETED, None, None,
                            f"no copy of standby record {record.offset} is left on the active cluster (log start "
                            f"{region.active_log_start}): deleted, or never made")
    return FailoverCost(CostStatus.NEEDS_WIDER_READ, None, None,
                        f"where standby record {record.offset}'s copy lies on the active cluster is outside "
                        f"[{region.active_from}, {region.active_to})")


def _below(position: float, c: int, region: ReadRegion) -> bool | None:
    """position < c, or None when the region cannot tell (a copy outside A's region vs a c inside)."""
    if position == _NEG:
        return True if c >= region.active_from else None
    if position == _INF:
        return False if c <= region.active_to else None
    return position < c


def failover_cost(region: ReadRegion, c: int | None, t: int | None, standby_end_at: int) -> FailoverCost:
    """The cost of a failover at a moment with committed offsets ``c`` (active) and ``t`` (standby)
    and B's log end ``standby_end_at`` then (module docstring)."""
    if c is None:
        return FailoverCost(CostStatus.NO_COMMITTED_OFFSET, None, None, "the group had no committed offset")
    if t is None:
        return FailoverCost(CostStatus.NO_STANDBY_OFFSET, None, None,
                            "no standby offset: a failover would have started at the consumer's reset policy")
    end = max(t, standby_end_at)
    if t < region.standby_log_start:
        return FailoverCost(CostStatus.RECORDS_DELETED, None, None,
                            f"t={t} is below the standby's log start {region.standby_log_start} now")
    if not (region.standby_from <= t and end <= region.standby_to):
        return FailoverCost(CostStatus.NEEDS_WIDER_READ, None, None,
                            f"[{t}, {end}) is not inside the standby region read [{region.standby_from}, "
                            f"{region.standby_to})")
    offsets = region._offsets
    lo, mid, hi = 0, bisect.bisect_left(offsets, t), bisect.bisect_left(offsets, end)
    records = region.standby_records

    # Duplicates: [t, end at T), read completely.
    duplicated = []
    for record in records[mid:hi]:
        below = _processed(region, record, c)
        if isinstance(below, FailoverCost):
            return below
        if below:
            duplicated.append(record.offset)

    # Losses: below t, down to a record proving everything below it is processed.
    lost, proven = [], False
    for record in reversed(records[lo:mid]):
        below = _processed(region, record, c)
        if isinstance(below, FailoverCost):
            return below
        if not below:
            lost.append(record.offset)
            continue
        if record.origin is Origin.STANDBY or (record.origin is Origin.ACTIVE and region.shape is Shape.ONE_WAY_FROM_ACTIVE
                                               and region.exactly_once_mirror):
            proven = True
            break
    if not proven:
        if region.standby_from > region.standby_log_start:
            return FailoverCost(CostStatus.NEEDS_WIDER_READ, None, None,
                                f"no record below t={t} in [{region.standby_from}, {t}) proves the records below it "
                                "processed")
        if region.standby_log_start > 0:
            return FailoverCost(CostStatus.RECORDS_DELETED, None, None,
                                f"the records below the standby's log start {region.standby_log_start} decide the "
                                f"loss at t={t} and are gone")
    lost.sort()
    return FailoverCost(
        CostStatus.AUDITED, len(lost), len(duplicated),
        f"c={c}, t={t}, standby end then {end}: {len(lost)} lost, {len(duplicated)} duplicated",
        tuple(lost[:LISTED_OFFSETS]), tuple(duplicated[:LISTED_OFFSETS]),
    )


def _processed(region: ReadRegion, record: StandbyRecord, c: int) -> bool | FailoverCost:
    """Whether the group had processed the record (its copy on A is below ``c``), or the status
    that says why the regions cannot tell."""
    position = _active_position(region, record)
    if position is None:
        return _position_unknown(record, region)
    below = _below(position, c, region)
    return _undecided(record, region) if below is None else below


def _undecided(record: StandbyRecord, region: ReadRegion) -> FailoverCost:
    return FailoverCost(CostStatus.NEEDS_WIDER_READ, None, None,
                        f"standby record {record.offset}'s copy lies outside [{region.active_from}, "
                        f"{region.active_to}) on the active cluster, and c is inside it")
