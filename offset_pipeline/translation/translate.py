"""``translate_partition``: facts in, one :class:`TranslationResult` out, for every group-partition.

Order (docs/concepts/strategies.md, the order of strategies; docs/concepts/statuses.md):

1. bad inputs that make any translation meaningless get their status: topic missing on the standby,
   partition count mismatch, no committed offset, ``c`` below the active log start (retention) or
   past its end (truncated / recreated topic);
2. strategy 1, header anchors (record at c, backward window, kept anchor) -- every shape;
3. MirrorMaker 2's offset-sync pairs (offset_sync_anchor.py) -- only for one-way topics
   translated from the producing side, when the pairs were read (a mirror without origin headers);
4. strategy 2, timestamp search -- the same topics, when the pairs gave nothing;
5. strategy 3, the caught-up rule -- when its facts are given (the stale-partition sensor).

The first strategy that yields an offset is the result, with one exception: a proven caught-up
fast-forward replaces a lower offset. Every candidate satisfies NO-LOSS on its own and NO-LOSS is
closed downwards (if ``t`` is safe, so is any smaller ``t``), so the highest safe candidate is safe
and has the fewest duplicates; without this the stale anchor of a quiet partition would block the
fast-forward the rule exists for. When nothing yields an offset the result carries the most
specific status seen and ``standby_offset=None``.

:func:`decision_log_line` renders every result in one line, one format, with its reason (in the
spirit of MirrorMaker 2's OffsetSyncStore debug lines); :func:`parse_decision_log_line` reads it
back. :func:`check_no_loss` re-checks a result against its facts before a commit.
"""

from __future__ import annotations

import dataclasses

from .caught_up import caught_up_backs, caught_up_translation
from .facts import PartitionFacts, TimestampType
from .header_anchor import translate_by_header_anchor
from .log_line import PREFIX, Token, log_value, parse_log_line
from .offset_sync_anchor import offset_sync_proof, translate_by_offset_sync
from .result import Strategy, TranslationResult, TranslationStatus, untranslatable
from .timestamp_search import translate_by_timestamp

DECISION_KIND = "decision"
LOG_PREFIX = f"{PREFIX} {DECISION_KIND}"
_DROP_ANCHOR = frozenset({TranslationStatus.TOPIC_MISSING_ON_STANDBY, TranslationStatus.COMMITTED_BEYOND_LOG_END})


def facts_problem(facts: PartitionFacts) -> tuple[TranslationStatus, str] | None:
    """What makes ``facts`` untranslatable by any strategy (topic missing on the standby, partition
    counts differing, no committed offset, logs that contradict the offset), as a status and its
    reason; None when the strategies may try. The safe bound (safe_bound.py) asks the same."""
    c = facts.committed
    syncs = facts.offset_syncs
    if syncs is not None and syncs.remote_topic is not None and syncs.remote_topic != facts.topic:
        return (
            TranslationStatus.REMOTE_TOPIC_RENAMED,
            f"{facts.topic!r} is mirrored to {facts.standby} as {syncs.remote_topic!r}: a group reading "
            f"{facts.topic!r} there has no offsets to take over",
        )
    if not facts.standby_topic_exists:
        return TranslationStatus.TOPIC_MISSING_ON_STANDBY, f"topic {facts.topic!r} does not exist on {facts.standby}"
    if (
        facts.active_partition_count is not None
        and facts.standby_partition_count is not None
        and facts.active_partition_count != facts.standby_partition_count
    ):
        return (
            TranslationStatus.PARTITION_COUNT_MISMATCH,
            f"{facts.active} has {facts.active_partition_count} partitions, {facts.standby} has "
            f"{facts.standby_partition_count}: records of one partition are not copies of one partition",
        )
    if c is None:
        return TranslationStatus.NO_COMMITTED_OFFSET, f"group has no committed offset on {facts.active}"
    if facts.active_log_start > facts.active_log_end or facts.standby_log_start > facts.standby_log_end:
        return (
            TranslationStatus.INCONSISTENT_FACTS,
            f"log start after log end ({facts.active} {facts.active_log_start}..{facts.active_log_end}, "
            f"{facts.standby} {facts.standby_log_start}..{facts.standby_log_end})",
        )
    if c < facts.active_log_start:
        return (
            TranslationStatus.COMMITTED_BELOW_LOG_START,
            f"c={c} is below {facts.active}'s log start {facts.active_log_start}: retention deleted records "
            "the group never read",
        )
    if c > facts.active_log_end:
        return (
            TranslationStatus.COMMITTED_BEYOND_LOG_END,
            f"c={c} is past {facts.active}'s log end {facts.active_log_end} (truncated or recreated topic?)",
        )
    return None


def translate_partition(facts: PartitionFacts) -> TranslationResult:
    """Translate one group-partition. Never raises on bad data; always returns a result."""
    problem = facts_problem(facts)
    if problem is not None:
        status, reason = problem
        return untranslatable(
            facts.group_id, facts.topic, facts.partition, status, reason, active=facts.active,
            standby=facts.standby, committed=facts.committed, standby_committed=facts.standby_committed,
            # A kept anchor is re-checked whenever it is used; drop it only when a log was replaced.
            anchor_to_keep=None if status in _DROP_ANCHOR else facts.kept_anchor,
        )

    header = translate_by_header_anchor(facts)
    tried: list[TranslationResult] = [header]
    primary = header if header.translated else None
    timestamp = None
    by_sync = None
    if primary is None and facts.offset_syncs is not None and facts.shape.allows_timestamp_search(facts.active):
        # Proven by the pairs, so the commit guard (safe_bound) accepts it: preferred over a
        # timestamp search that nothing read can prove for a mirror without origin headers.
        by_sync = translate_by_offset_sync(facts)
        tried.append(by_sync)
        if by_sync.translated:
            primary = by_sync
    if primary is None and facts.shape.allows_timestamp_search(facts.active):
        timestamp = translate_by_timestamp(facts)
        tried.append(timestamp)
        if timestamp.translated:
            primary = timestamp
    caught = caught_up_translation(facts)
    if caught is not None:
        tried.append(caught)

    warnings = tuple(dict.fromkeys(w for r in tried for w in r.warnings))
    if by_sync is not None and not by_sync.translated and by_sync.status is not TranslationStatus.NOT_APPLICABLE:
        warnings = tuple(dict.fromkeys(warnings + (by_sync.status,)))
    inversion = any(r.timestamp_inversion for r in tried)
    chosen = primary
    if caught is not None and caught.translated and (primary is None or caught.standby_offset > primary.standby_offset):
        chosen = dataclasses.replace(
            caught,
            reason=caught.reason
            + (f" (replaces {primary.status.value} t={primary.standby_offset})" if primary is not None else ""),
        )
    if chosen is not None:
        if (chosen.anchor_to_keep, chosen.warnings, chosen.timestamp_inversion) == (
            header.anchor_to_keep, warnings, inversion
        ):
            return chosen  # the header result alone, as most are: replace() would build an equal copy
        return dataclasses.replace(
            chosen, anchor_to_keep=header.anchor_to_keep, warnings=warnings, timestamp_inversion=inversion
        )

    # Nothing translated: the most specific status. The timestamp strategy is the one expected to
    # work on a one-way topic from the producing side, so its problem wins there.
    if by_sync is not None and by_sync.status is not TranslationStatus.NOT_APPLICABLE:
        status = by_sync.status  # the pairs are what a mirror without origin headers is translated by
    elif timestamp is not None and timestamp.status is not TranslationStatus.NOT_APPLICABLE:
        status = timestamp.status
    else:
        status = header.status
    parts = [f"header: {header.reason}"]
    if by_sync is not None:
        parts.append(f"offset sync: {by_sync.reason}")
    if timestamp is not None:
        parts.append(f"timestamp: {timestamp.reason}")
    else:
        parts.append(f"timestamp: not for shape {facts.shape.value} with {facts.active} active")
    if caught is not None:
        parts.append(f"caught-up: {caught.reason.removeprefix('caught-up rule does not apply: ')}")
    return untranslatable(
        facts.group_id, facts.topic, facts.partition, status, "; ".join(parts), active=facts.active,
        standby=facts.standby, committed=facts.committed, standby_committed=facts.standby_committed,
        anchor_to_keep=header.anchor_to_keep, warnings=warnings, timestamp_inversion=inversion,
    )


# -- the decision log ----------------------------------------------------------------------------


def _anchor_token(anchor) -> Token:
    return Token("-" if anchor is None else f"{anchor.active_offset}->{anchor.standby_offset}")


def decision_fields(result: TranslationResult) -> list[tuple[str, object]]:
    """The decision line's fields in their order, for :func:`log_line`."""
    return [
        ("group", result.group_id),
        ("topic", result.topic),
        ("partition", result.partition),
        ("active", result.active),
        ("standby", result.standby),
        ("committed", result.committed),
        ("standby_committed", result.standby_committed),
        ("standby_offset", result.standby_offset),
        ("strategy", result.strategy),
        ("status", result.status),
        ("anchor", _anchor_token(result.anchor_used)),
        ("keep", _anchor_token(result.anchor_to_keep)),
        ("expected_duplicates", result.expected_duplicates),
        ("timestamp_inversion", result.timestamp_inversion),
        ("warnings", Token(",".join(w.value for w in result.warnings) or "-")),
        ("reason", result.reason),
    ]


def decision_log_line(result: TranslationResult) -> str:
    """One line per decision (log_line.py's format), same keys in the same order every time:
    ``log_line(DECISION_KIND, decision_fields(result))``, written out in one f-string because it
    runs once per group-partition and cycle (the generic loop was 4.6 of a 100,000-row task's 33
    profiled seconds; a property test holds the two equal).

    ``offset-sync decision group="g" topic="t" partition=0 active="idc1" standby="idc2" committed=12
    standby_committed=- standby_offset=7 strategy=header_anchor status=header_anchor anchor=11->6
    keep=11->6 expected_duplicates=- timestamp_inversion=false warnings=- reason="..."``
    """
    r = result
    warnings = ",".join(w.value for w in r.warnings) or "-"
    return (
        f"{LOG_PREFIX} group={log_value(r.group_id)} topic={log_value(r.topic)}"
        f" partition={log_value(r.partition)} active={log_value(r.active)} standby={log_value(r.standby)}"
        f" committed={log_value(r.committed)} standby_committed={log_value(r.standby_committed)}"
        f" standby_offset={log_value(r.standby_offset)} strategy={log_value(r.strategy)}"
        f" status={log_value(r.status)} anchor={_anchor_token(r.anchor_used)} keep={_anchor_token(r.anchor_to_keep)}"
        f" expected_duplicates={log_value(r.expected_duplicates)}"
        f" timestamp_inversion={log_value(r.timestamp_inversion)} warnings={warnings} reason={log_value(r.reason)}"
    )


def parse_decision_log_line(line: str) -> dict[str, object]:
    """The fields of a :func:`decision_log_line` line: quoted strings decoded, ``-`` as None,
    integers and booleans typed, everything else (enum values, anchors, warnings) as text."""
    return parse_log_line(DECISION_KIND, line)


# -- a last check before committing ----------------------------------------------------------------


class NoLossViolation(AssertionError):
    """A result that its own facts show to be unsafe. Never commit it."""


def check_no_loss(facts: PartitionFacts, result: TranslationResult) -> None:
    """Re-check a result against the facts it came from; raise :class:`NoLossViolation` if the
    facts show it breaks NO-LOSS or the rule it claims. For the commit step, as a guard.

    Checks: the offset lies inside the standby log and ``c`` inside the active log; header results
    are backed by a standby-origin anchor that the facts contain, at or below c, with ``t = s``
    only for the record at c; timestamp results only on a one-way topic from the producing side
    with CreateTime; caught-up results only with their conditions; and no standby record in the
    facts below ``t`` is a copy of an active record at or after ``c`` (a positively known loss).
    """
    if not result.translated:
        return
    t = result.standby_offset
    c = facts.committed
    problems: list[str] = []
    if (result.group_id, result.topic, result.partition) != (facts.group_id, facts.topic, facts.partition):
        problems.append("result is for another group-partition")
    if c is None or not facts.active_log_start <= c <= facts.active_log_end:
        problems.append(f"c={c} outside {facts.active}'s log {facts.active_log_start}..{facts.active_log_end}")
    if not facts.standby_log_start <= t <= facts.standby_log_end:
        problems.append(f"t={t} outside {facts.standby}'s log {facts.standby_log_start}..{facts.standby_log_end}")

    if result.strategy is Strategy.HEADER_ANCHOR:
        anchor = result.anchor_used
        if anchor is None or (anchor.active, anchor.standby) != (facts.active, facts.standby):
            problems.append("header result without an anchor of this direction")
        else:
            a, s = anchor.active_offset, anchor.standby_offset
            if result.status is TranslationStatus.HEADER_EXACT:
                at = facts.usable_record_at_or_after()
                if at is None or at.offset != a or at.copy_of(facts.standby) != s or t != s:
                    problems.append(f"exact anchor {anchor} is not the standby-origin record at c with t = s")
            elif result.status is TranslationStatus.HEADER_ANCHOR:
                below = {r.offset: r for r in facts.usable_records_below()}
                if a not in below or below[a].copy_of(facts.standby) != s or t != s + 1:
                    problems.append(f"anchor {anchor} is not a standby-origin record below c with t = s + 1")
            elif result.status is TranslationStatus.KEPT_ANCHOR:
                if facts.kept_anchor != anchor or c is None or a >= c or t != s + 1:
                    problems.append(f"kept anchor {anchor} is not the kept anchor below c with t = s + 1")
            else:
                problems.append(f"status {result.status.value} is not a header status")
    elif result.strategy is Strategy.TIMESTAMP_SEARCH:
        if not facts.shape.allows_timestamp_search(facts.active):
            problems.append(f"timestamp search on shape {facts.shape.value} with {facts.active} active")
        if facts.standby_timestamp_type is not TimestampType.CREATE_TIME:
            problems.append("timestamp search with LogAppendTime on the standby")
    elif result.strategy is Strategy.OFFSET_SYNC:
        proof = offset_sync_proof(facts)
        if isinstance(proof, tuple):
            problems.append(f"offset-sync result without a proof: {proof[1]}")
        elif t > proof.t:
            problems.append(f"offset-sync result t={t} above what the pairs prove ({proof.t})")
    elif result.strategy is Strategy.CAUGHT_UP:
        why = caught_up_backs(facts, t)
        if why is not None:
            problems.append(f"caught-up result without its conditions: {why}")

    if c is not None and facts.timestamp is not None:
        known = list(facts.timestamp.standby_records)
        known += [r for r in (facts.timestamp.standby_last, facts.timestamp.standby_first) if r is not None]
        for record in known:
            origin = record.copy_of(facts.active)
            if record.offset < t and origin is not None and origin >= c:
                problems.append(f"{facts.standby}:{record.offset} < t copies unprocessed {facts.active}:{origin}")
    if problems:
        raise NoLossViolation(f"{facts.group_id!r} {facts.topic}[{facts.partition}]: " + "; ".join(problems))
