"""Strategy 3 (DESIGN.md §4.3): the caught-up rule, a.k.a. stale fast-forward.

For low-traffic partitions that would otherwise wait hours for a header. When

1. the group has read everything on the active cluster A (``c == A's log end``: lag 0),
2. neither log end moved for the configured window (default 10 minutes), and
3. the standby -> active mirror has caught up (its position on B is at B's log end),

every record on B is a copy of something the group already processed, so ``t = B's log end``:

* a record of B produced on A sits on A below A's log end, which is ``c``;
* a record of B produced on B was copied to A (condition 3), below A's log end, which is ``c``.

Condition 2 makes the order of the reads irrelevant: nothing was written to either log while they
were taken. It works on every topic shape. Zero duplicates are promised only when the active ->
standby mirror has caught up too (otherwise processed A records may still arrive on B, after t).
"""

from __future__ import annotations

from .facts import PartitionFacts
from .result import Strategy, TranslationResult, TranslationStatus


def caught_up_problem(facts: PartitionFacts) -> str | None:
    """Why the caught-up rule does not apply, or None when it does."""
    cu = facts.caught_up
    if cu is None:
        return "no caught-up facts (the stale-partition sensor did not look at this partition)"
    if facts.committed != facts.active_log_end:
        return f"lag is not 0: c={facts.committed}, {facts.active} log end {facts.active_log_end}"
    if cu.logs_stable_for_s < cu.window_s:
        return f"log ends moved {cu.logs_stable_for_s:.0f}s ago, less than the {cu.window_s:.0f}s window"
    if cu.standby_to_active_mirror_position is None:
        return f"the {facts.standby}->{facts.active} mirror position is unknown"
    if cu.standby_to_active_mirror_position < facts.standby_log_end:
        return (
            f"the {facts.standby}->{facts.active} mirror is at {cu.standby_to_active_mirror_position}, "
            f"behind {facts.standby}'s log end {facts.standby_log_end}"
        )
    return None


def translate_caught_up(facts: PartitionFacts) -> TranslationResult:
    """``t = standby_log_end`` when the caught-up rule applies; else a NOT_APPLICABLE result."""
    common = dict(
        group_id=facts.group_id, topic=facts.topic, partition=facts.partition, active=facts.active,
        standby=facts.standby, committed=facts.committed, standby_committed=facts.standby_committed,
    )
    problem = caught_up_problem(facts)
    if problem is not None:
        return TranslationResult(
            strategy=None, standby_offset=None, status=TranslationStatus.NOT_APPLICABLE,
            reason=f"caught-up rule does not apply: {problem}", **common,
        )
    cu = facts.caught_up
    assert cu is not None
    both = cu.active_to_standby_mirror_position is not None and cu.active_to_standby_mirror_position >= facts.active_log_end
    return TranslationResult(
        strategy=Strategy.CAUGHT_UP, standby_offset=facts.standby_log_end, status=TranslationStatus.CAUGHT_UP,
        reason=(
            f"caught up: c = {facts.active} log end {facts.active_log_end}, logs quiet for "
            f"{cu.logs_stable_for_s:.0f}s, {facts.standby}->{facts.active} mirror at {facts.standby} log end: "
            f"t = {facts.standby_log_end}"
        ),
        expected_duplicates=0 if both else None, **common,
    )
