"""Audit every moment of one topic-partition and direction (the daily failover audit): the loop that reads only what
each moment needs and widens while the regions read cannot decide it.

A moment is one snapshot of one group: ``c`` on the active cluster, ``t`` on the standby, both log
ends then. Its region starts ``margin`` offsets below ``t`` (B) and below ``c`` (A) and ends at the
log ends then; when :func:`~offset_pipeline.audit.failover_cost.failover_cost` answers
``needs_wider_read`` the margin grows fourfold, up to whole logs, where every moment is decided (or
its records are named gone). The record cache (``audit/record_cache.py``) reads each offset
once for all moments and groups of the partition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from offset_pipeline.audit.failover_cost import CostStatus, FailoverCost, failover_cost

FIRST_MARGIN = 64
MAX_MARGIN = 1 << 40  # whole logs


@dataclass(frozen=True)
class Moment:
    group_id: str
    snapshot_id: str
    snapshot_time_ms: int
    committed: int | None  # c on the active cluster
    standby_committed: int | None  # t on the standby
    active_end_at: int  # the active log end then
    standby_end_at: int  # the standby log end then
    strategy: str = ""  # the translation's strategy in that snapshot's cycle


def audit_moment(cache, moment: Moment, *, first_margin: int = FIRST_MARGIN) -> tuple[FailoverCost, int]:
    """The moment's cost and the margin that decided it. ``cache``: a PartitionRecordCache."""
    c, t = moment.committed, moment.standby_committed
    if c is None or t is None:
        return failover_cost(cache.region(0, 0, 0, 0), c, t, moment.standby_end_at), 0
    margin = first_margin
    while True:
        region = cache.region(t - margin, max(t, moment.standby_end_at), c - margin, max(c, moment.active_end_at))
        cost = failover_cost(region, c, t, moment.standby_end_at)
        if cost.status is not CostStatus.NEEDS_WIDER_READ or margin >= MAX_MARGIN:
            return cost, margin
        wider = margin * 4
        # once both regions reach the log starts, a wider margin reads nothing new
        if t - margin <= cache.sides["standby"].log_start and c - margin <= cache.sides["active"].log_start:
            return cost, margin
        margin = wider


def audit_moments(cache, moments: Iterable[Moment], *, first_margin: int = FIRST_MARGIN) -> list[tuple[Moment, FailoverCost, int]]:
    return [(m, *audit_moment(cache, m, first_margin=first_margin)) for m in moments]
