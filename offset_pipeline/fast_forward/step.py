"""One group's fast-forward (docs/operating/fast-forward.md): re-read live, re-check, translate, commit, record.

:func:`fast_forward_group` takes what the stale-partition sensor requested for one group (its
partitions and the log ends it saw) and returns one ``offset_fast_forwards`` row per partition,
whatever happens:

1. the live facts are read again (``fast_forward/live_reads.py``); a cluster that does not
   answer fails the group's rows (``failed``, with the error), nothing written;
2. each partition is re-checked (``recheck.recheck``): a failed condition leaves it
   alone with its named rejection (a mirror behind a log end quiet for the window: ``mirror_stopped``,
   whatever the sensor saw);
3. the passing ones are translated by the caught-up rule (``t`` = the standby log end) with their
   safe bound, and every row goes through the sync cycle's commit step (``commit_step.commit_group``:
   the standby group re-read, the commit rules, ONE commit call, the written offsets read back),
   so the fast-forward obeys the same commit rules as the cycle, dry run included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from offset_pipeline.sync.commit_rules import StandbyCommit
from offset_pipeline.sync.commit_step import CycleContext, TranslatedRow, commit_group
from offset_pipeline.fast_forward.recheck import RequestedPartition, Recheck, recheck
from offset_pipeline.fast_forward.live_reads import LiveGroup, read_live_partitions
from offset_pipeline.storage import fast_forwards as ff
from offset_pipeline.storage.commits import CommitRow
from offset_pipeline.translation import (
    TranslationStatus,
    safe_standby_bound,
    translate_caught_up,
)


@dataclass(frozen=True)
class FastForwardRequest:
    group_id: str
    active: str
    standby: str
    partitions: tuple[RequestedPartition, ...]
    window_s: float = 600.0
    marker_slack: int = 1


@dataclass
class FastForwardOutcome:
    rows: list[ff.FastForwardRow] = field(default_factory=list)
    commit_rows: list[CommitRow] = field(default_factory=list)  # the commit step's rows (for metrics)
    plan: list[StandbyCommit] = field(default_factory=list)
    live: LiveGroup | None = None


def _outcome(row: CommitRow) -> str:
    if row.decision == "failed" or row.error:
        return ff.FAILED
    if row.decision in ("commit", "rewind_after_reset"):
        return ff.FAST_FORWARDED if row.applied else ff.FAILED
    return {"unchanged": ff.UNCHANGED, "dry_run": ff.DRY_RUN, "skipped_untranslated": ff.LEFT_ALONE}.get(
        row.decision, ff.REFUSED)


def fast_forward_group(
    request: FastForwardRequest,
    clusters: Mapping[str, object],
    mirrors,
    cycle: CycleContext,
) -> FastForwardOutcome:
    """``clusters``: name -> KafkaClusterResource; ``mirrors``: a MirrorsResource; ``cycle``: the
    run id as ``snapshot_id``, the check time, dry run and Kafka timeout."""
    out = FastForwardOutcome()
    wanted = {(p.topic, p.partition): p for p in request.partitions}
    g, active, standby = request.group_id, request.active, request.standby

    def row(p: RequestedPartition, outcome: str, reason: str, *, rejection: str = "", check: Recheck | None = None,
            commit: CommitRow | None = None, error: str | None = None) -> ff.FastForwardRow:
        live = out.live.partitions.get((p.topic, p.partition)) if out.live else None
        return ff.FastForwardRow(
            run_id=cycle.snapshot_id, checked_at_ms=cycle.cycle_time_ms, group_id=g, topic=p.topic,
            partition=p.partition, active=active, standby=standby, outcome=outcome, rejection=rejection,
            decision=commit.decision if commit else "", reason=reason,
            committed=live.committed if live else None, expected_active_end=p.active_end,
            expected_standby_end=p.standby_end, active_log_end=live.active_log_end if live else None,
            standby_log_end=live.standby_log_end if live else None,
            standby_mirror_position=live.standby_mirror_position if live else None,
            active_mirror_position=live.active_mirror_position if live else None,
            stable_for_s=check.stable_for_s if check else None,
            previous_offset=commit.previous_offset if commit else None,
            new_offset=commit.new_offset if commit else None,
            committed_after=commit.committed_after if commit else None, dry_run=cycle.dry_run,
            applied=bool(commit and commit.applied), error=error if error is not None else (commit.error if commit else None),
        )

    if active not in clusters or standby not in clusters or active == standby:
        error = f"no Kafka resource for {active!r} or {standby!r}, or the same cluster twice"
        out.rows = [row(p, ff.FAILED, error, error=error) for p in request.partitions]
        return out
    try:
        out.live = read_live_partitions(clusters, mirrors, g, active, standby, sorted(wanted),
                                        marker_slack=request.marker_slack, timeout_s=cycle.timeout_s)
    except Exception as exc:  # noqa: BLE001 - the group's failure, recorded on its rows
        error = f"re-reading live state failed: {type(exc).__name__}: {exc}"
        out.rows = [row(p, ff.FAILED, error, error=error) for p in request.partitions]
        return out

    checks: dict[tuple[str, int], Recheck] = {}
    translated = []
    for tp, p in sorted(wanted.items()):
        check = recheck(g, active, standby, p, out.live.partitions[tp], cycle.cycle_time_ms, window_s=request.window_s)
        checks[tp] = check
        live = out.live.partitions[tp]
        if check.passed:
            assert check.facts is not None
            result = translate_caught_up(check.facts)
            bound = safe_standby_bound(check.facts)
            translated.append(TranslatedRow(
                g, p.topic, p.partition, active, standby, live.committed, result.standby_offset,
                result.status.value, result.strategy.value if result.strategy else "none", result.reason, bound,
            ))
        else:
            translated.append(TranslatedRow(
                g, p.topic, p.partition, active, standby, live.committed, None, TranslationStatus.NOT_APPLICABLE.value,
                "none", f"left alone: {check.rejection.value}: {check.detail}", None,
            ))
    out.plan, out.commit_rows = commit_group(translated, clusters, cycle)
    by_tp = {(r.topic, r.partition): r for r in out.commit_rows}
    for tp, p in sorted(wanted.items()):
        check, commit = checks[tp], by_tp[tp]
        if not check.passed:
            out.rows.append(row(p, ff.LEFT_ALONE, check.detail, rejection=check.rejection.value, check=check,
                                commit=commit))
        else:
            out.rows.append(row(p, _outcome(commit), commit.reason, check=check, commit=commit))
    return out
