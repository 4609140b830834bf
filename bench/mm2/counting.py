"""What a failover at a moment would cost, counted from the logs by record identity: pure, for the
MirrorMaker 2 comparison (``bench/compare_mm2.py``) and its tests.

One partition: the active log (where the group reads and commits ``c``) and the standby log.
``copy_of[o]`` is the active offset of the record with the same identity as the record at standby
offset ``o`` (for a one-way topic its original; for a two-way topic the original or its copy),
``NO_COPY`` (-1) for a record with no such active record, ``NO_RECORD`` (-2) for an offset that holds
no record a consumer reads: a transaction marker (an exactly-once mirror writes one per transaction)
or an aborted record. A consumer skips those: they are neither lost nor read again.

A group that failed over at a moment restarts on the standby at ``g``, the standby offset then, and
reads the standby log as it stood then (its end ``standby_end``):

* **lost**: standby records below ``g`` (in the final log: a ``g`` past the end then skips what is
  written there later) that are no copy of an active record below ``c`` -- the group never
  processed them, and never will (NO-LOSS); offsets without a record are none;
* **duplicated**: standby records from ``g`` to ``standby_end`` that copy an active record below
  ``c`` -- processed once, read again.

**Staleness** of ``g`` at time ``s``: how long the group has been past the active position the
standby offset would restart it from. The position is the active offset ``a`` of the record at
``g`` (or, at the standby's end, the active offset after the last copy); the staleness is ``s``
minus the first time the group's committed offset went beyond ``a``, and 0 while it has not.

**Delay** of a group commit to ``c`` at time ``t``: from ``t`` to the first standby offset at or after
``t`` whose active position (as for staleness) is at least ``c``; None while there is none. A failover
within the delay reads again the records of that commit.

Invariants (tests/bench/test_mm2_counting.py): ``g`` at the exact copy position of ``c`` costs nothing;
moving ``g`` down only adds duplicates, moving it up past unprocessed copies only adds losses; a
standby offset that keeps up with the group has staleness 0.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np


NO_COPY = -1  # a standby record with no active record of the same identity
NO_RECORD = -2  # a standby offset no consumer reads a record at (transaction marker, aborted record)


@dataclass(frozen=True)
class FailoverCost:
    lost: int
    duplicated: int


def failover_cost(copy_of: np.ndarray, c: int, g: int, standby_end: int) -> FailoverCost:
    """The cost of restarting at ``g`` on the standby, the group having committed ``c`` on the active."""
    end = min(standby_end, len(copy_of))
    # Losses over the whole final log below g, not only what stood below g then: a g beyond the
    # log's end then skips the records written there later, and a standby end read a moment
    # before s must not hide them.
    below = copy_of[:max(0, min(g, len(copy_of)))]
    lost = int(np.count_nonzero((below == NO_COPY) | (below >= c)))
    g = max(0, min(g, end))
    duplicated = int(np.count_nonzero((copy_of[g:end] >= 0) & (copy_of[g:end] < c)))
    return FailoverCost(lost, duplicated)


def fewest_duplicates(copy_of: np.ndarray, c: int, standby_end: int) -> int:
    """The duplicates of the best standby offset any syncer could have chosen then: the first standby
    record (below ``standby_end``) the group has not processed; a lower offset only adds duplicates,
    a higher one loses that record. 0 for a one-way topic (the copies keep the active order); on a
    two-way topic, the processed copies the mirror wrote after a record the group never saw."""
    end = min(standby_end, len(copy_of))
    head = copy_of[:end]
    unprocessed = np.flatnonzero((head == NO_COPY) | (head >= c))
    g = int(unprocessed[0]) if len(unprocessed) else end
    return failover_cost(copy_of, c, g, standby_end).duplicated


def active_position(copy_of: np.ndarray, g: int, standby_end: int) -> int:
    """The active offset the standby offset ``g`` restarts the group from."""
    end = min(standby_end, len(copy_of))
    if g < end and copy_of[g] >= 0:
        return int(copy_of[g])
    copies = copy_of[:end][copy_of[:end] >= 0]
    return int(copies.max()) + 1 if len(copies) else 0


@dataclass(frozen=True)
class CommitSeries:
    """The group's committed offset on the active cluster over time (polled; non-decreasing)."""

    times: list[float]
    offsets: list[int]

    def at(self, s: float) -> int | None:
        i = bisect_right(self.times, s)
        return self.offsets[i - 1] if i else None

    def first_beyond(self, a: int) -> float | None:
        """The first polled time the committed offset was above ``a``."""
        i = bisect_right(self.offsets, a)  # offsets are non-decreasing
        return self.times[i] if i < len(self.times) else None


def staleness_s(series: CommitSeries, s: float, a: int) -> float:
    passed = series.first_beyond(a)
    return max(0.0, s - passed) if passed is not None and passed <= s else 0.0


def commit_delays(active: CommitSeries, standby_times: list[float], standby_positions: list[int],
                  start: float, end: float) -> list[float | None]:
    """Per commit of ``active`` in ``[start, end)`` that moved its offset: its delay (see the module's
    docstring). ``standby_positions[j]``: the active position of the standby offset committed at
    ``standby_times[j]`` (time order)."""
    delays: list[float | None] = []
    previous = None
    for t, c in zip(active.times, active.offsets):
        moved = previous is None or c > previous
        previous = c
        if not moved or not start <= t < end:
            continue
        j = bisect_right(standby_times, t)  # a standby commit appended before t cannot follow this one
        while j < len(standby_times) and standby_positions[j] < c:
            j += 1
        delays.append(standby_times[j] - t if j < len(standby_times) else None)
    return delays
