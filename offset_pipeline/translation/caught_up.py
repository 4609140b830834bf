"""Strategy 3 (docs/concepts/strategies.md, the caught-up rule): the caught-up rule, a.k.a. stale fast-forward.

For low-traffic partitions that would otherwise wait hours for a header. When

1. the group has read everything on the active cluster A (``c == A's log end``: lag 0; or ``c``
   below it with only transaction markers / aborted records in ``[c, A's log end)``, read),
2. neither log end moved for the configured window (default 10 minutes), and
3. the standby -> active mirror has caught up (its position on B is at B's log end, or only
   markers lie between them, read),

every record on B is a copy of something the group already processed, so ``t = B's log end``:

* a record of B produced on A sits on A below A's log end, and every real record there is below
  ``c`` (condition 1);
* a record of B produced on B was copied to A (condition 3), below A's log end: below ``c`` too.

Condition 2 makes the order of the reads irrelevant: nothing was written to either log while they
were taken. It works on every topic shape. Zero duplicates are promised only when the active ->
standby mirror has caught up too (otherwise processed A records may still arrive on B, after t).

**Kept point.** A fast-forward that was applied is kept (:class:`CaughtUpPoint`): its proof stays
true as logs only grow, so a later cycle whose ``c`` is still the point's ``active_offset``
translates to the point's ``t`` exactly, without the quiet window (the partition is in sync, not
stale). Any other ``c`` (the group moved on, or was reset) and the point says nothing.

Invariants (tests/translation/test_caught_up.py, and the failover properties over the model):
a caught-up result is NO-LOSS; it needs every condition above; a kept point applies only to its
own direction and ``c``, and only inside the standby log.
"""

from __future__ import annotations

from .facts import PartitionFacts
from .result import Strategy, TranslationResult, TranslationStatus


def caught_up_problem(facts: PartitionFacts) -> str | None:
    """Why the caught-up rule does not apply, or None when it does."""
    cu = facts.caught_up
    if cu is None:
        return "no caught-up facts (the stale-partition sensor did not look at this partition)"
    c = facts.committed
    if c is None or c > facts.active_log_end or (c < facts.active_log_end and not cu.no_record_from_committed):
        return f"lag is not 0: c={c}, {facts.active} log end {facts.active_log_end}"
    if cu.logs_stable_for_s < cu.window_s:
        return f"log ends moved {cu.logs_stable_for_s:.0f}s ago, less than the {cu.window_s:.0f}s window"
    position = cu.standby_to_active_mirror_position
    if position is None:
        return f"the {facts.standby}->{facts.active} mirror position is unknown"
    if position < facts.standby_log_end and not cu.no_record_from_standby_mirror_position:
        return (
            f"the {facts.standby}->{facts.active} mirror is at {position}, "
            f"behind {facts.standby}'s log end {facts.standby_log_end}"
        )
    return None


def _active_mirror_done(facts: PartitionFacts) -> bool:
    cu = facts.caught_up
    assert cu is not None
    position = cu.active_to_standby_mirror_position
    return position is not None and (position >= facts.active_log_end or cu.no_record_from_active_mirror_position)


def _common(facts: PartitionFacts) -> dict:
    return dict(
        group_id=facts.group_id, topic=facts.topic, partition=facts.partition, active=facts.active,
        standby=facts.standby, committed=facts.committed, standby_committed=facts.standby_committed,
    )


def _not_applicable(facts: PartitionFacts, problem: str) -> TranslationResult:
    return TranslationResult(
        strategy=None, standby_offset=None, status=TranslationStatus.NOT_APPLICABLE,
        reason=f"caught-up rule does not apply: {problem}", **_common(facts),
    )


def translate_caught_up(facts: PartitionFacts) -> TranslationResult:
    """``t = standby_log_end`` when the caught-up rule applies; else a NOT_APPLICABLE result."""
    problem = caught_up_problem(facts)
    if problem is not None:
        return _not_applicable(facts, problem)
    cu = facts.caught_up
    assert cu is not None
    lag = facts.active_log_end - facts.committed
    return TranslationResult(
        strategy=Strategy.CAUGHT_UP, standby_offset=facts.standby_log_end, status=TranslationStatus.CAUGHT_UP,
        reason=(
            f"caught up: c = {facts.committed}, {facts.active} log end {facts.active_log_end}"
            + (" (only markers in between, read)" if lag else "")
            + f", logs quiet for {cu.logs_stable_for_s:.0f}s, {facts.standby}->{facts.active} mirror at "
            f"{facts.standby} log end: t = {facts.standby_log_end}"
        ),
        expected_duplicates=0 if _active_mirror_done(facts) else None, **_common(facts),
    )


def kept_point_problem(facts: PartitionFacts) -> str | None:
    """Why the kept fast-forward point does not translate this cycle, or None when it does."""
    point = facts.kept_caught_up
    if point is None:
        return "no fast-forward kept"
    if (point.active, point.standby) != (facts.active, facts.standby):
        return f"the kept fast-forward {point} is for the other direction"
    if facts.committed != point.active_offset:
        return f"c={facts.committed} moved from the kept fast-forward {point}"
    if not facts.standby_log_start <= point.standby_offset <= facts.standby_log_end:
        return (f"the kept fast-forward {point} is outside {facts.standby}'s log "
                f"{facts.standby_log_start}..{facts.standby_log_end}")
    return None


def translate_kept_caught_up(facts: PartitionFacts) -> TranslationResult:
    """``t`` of the kept fast-forward point when ``c`` is still its ``active_offset``."""
    problem = kept_point_problem(facts)
    if problem is not None:
        return _not_applicable(facts, problem)
    point = facts.kept_caught_up
    assert point is not None
    return TranslationResult(
        strategy=Strategy.CAUGHT_UP, standby_offset=point.standby_offset, status=TranslationStatus.CAUGHT_UP,
        reason=f"c = {facts.committed} is where the kept fast-forward {point} was proven: t = {point.standby_offset}",
        **_common(facts),
    )


def caught_up_translation(facts: PartitionFacts) -> TranslationResult | None:
    """The caught-up strategy for these facts: the live rule when its facts were read (the
    fast-forward job), else the kept point (the sync cycle), else None (not tried)."""
    if facts.caught_up is not None:
        return translate_caught_up(facts)
    if facts.kept_caught_up is not None:
        return translate_kept_caught_up(facts)
    return None


def caught_up_backs(facts: PartitionFacts, t: int) -> str | None:
    """None when a caught-up ``t`` is backed by these facts (live rule or kept point), else why not."""
    if facts.caught_up is not None:
        why = caught_up_problem(facts)
        if why is None:
            return None if t == facts.standby_log_end else f"t={t} is not the standby log end"
        return why
    why = kept_point_problem(facts)
    if why is None:
        assert facts.kept_caught_up is not None
        return None if t == facts.kept_caught_up.standby_offset else f"t={t} is not the kept fast-forward's"
    return why
