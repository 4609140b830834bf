"""Which stored readiness verdicts are in force now (pure).

Every sync cycle (interval mode) and every checkpoint (continuous mode) writes one verdict per group
and direction it saw, all stamped with the same ``checked_at``: the group's partitions grouped by the
direction their newest translation used (``readiness/rules.py``'s ``group_readiness``). The table
keeps every cycle's verdicts, so one group has many rows, from many cycles and sometimes in several
directions: a cycle while a cluster was unreachable wrote the group ``undecided`` (no active
cluster), the cycles after its return wrote it in its direction again; a group that moved to the
other cluster wrote the other direction from then on.

**A direction is in force when the group's newest cycle wrote it.** The newest cycle that saw a
group is the one with the greatest ``checked_at`` among the group's rows; the directions it wrote are
the group's present, and a direction only older cycles wrote is no longer in force (the group's
direction changed, or a cluster came back and the ``undecided`` verdict of the outage ended). Within
that cycle a direction's newest row is its verdict (a replayed spool may have written it twice).

Invariants (tests/readiness/test_current.py, table-driven and property-based; the query in
``storage/readiness.py`` answers the same, tests/readiness/test_readiness_cli.py):

* at most one verdict per group and direction;
* every verdict kept has its group's newest ``checked_at``: a direction the newest cycle did not
  write is dropped;
* every group of the input keeps at least one verdict, and the verdicts kept are rows of the input,
  unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar


class Verdict(Protocol):
    """What the selection reads of a stored verdict (``storage.readiness.ReadinessRow`` has it)."""

    @property
    def group_id(self) -> str: ...

    @property
    def active(self) -> str: ...

    @property
    def standby(self) -> str: ...

    @property
    def checked_at_ms(self) -> int: ...


V = TypeVar("V", bound=Verdict)


def in_force(verdicts: Iterable[V]) -> list[V]:
    """Each group's verdicts of its newest cycle, one per direction, sorted by group and direction
    (see the module's invariants). Among rows of one direction and cycle the first one given wins."""
    newest_cycle: dict[str, int] = {}
    rows = list(verdicts)
    for v in rows:
        if v.checked_at_ms > newest_cycle.get(v.group_id, v.checked_at_ms - 1):
            newest_cycle[v.group_id] = v.checked_at_ms
    kept: dict[tuple[str, str, str], V] = {}
    for v in rows:
        if v.checked_at_ms == newest_cycle[v.group_id]:
            kept.setdefault((v.group_id, v.active, v.standby), v)
    return [kept[key] for key in sorted(kept)]
