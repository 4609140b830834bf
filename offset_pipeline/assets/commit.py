"""``offset_standby_commits``: each cycle, write the translated offsets to the standby groups.

Reads this run's ``offset_translations`` rows (the cycle's steps: ``offset_pipeline/sync/commit_cycle.py``),
and per group (``offset_pipeline/sync/commit_step.py``):
re-reads the standby group (members, committed offsets) and the active member count just before
planning, finds partitions reset backwards on the active cluster since the group's previous snapshot,
plans with ``plan_standby_commits`` (the commit rules, with each partition's safe bound:
docs/concepts/no-loss.md) and writes with ONE commit call per group, never in a dry run. Every
decision is logged (``commit_log_line``, to the step's stderr: ``monitoring/decision_log.py``) and
appended to ``offset_commits``, also dry-run, refused, split-brain, skipped and failed ones. Groups
are independent and handled ``parallel_groups`` at a time; one group failing (a cluster down) never
fails the others.

Asset checks: ``no_loss`` (ERROR) and ``sync_freshness`` (WARN), see ``offset_pipeline/sync/commit_checks.py``.
"""

import time
from collections import Counter

import dagster as dg
from pydantic import Field

from offset_pipeline.assets.snapshot import KAFKA_CHILDREN
from offset_pipeline.assets.translation import TRANSLATION_ROWS
from offset_pipeline.kafka_io.group_io import IsolatedGroupIO
from offset_pipeline.monitoring.decision_log import write_decision_lines
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.run_targets import SYNC_POOL
from offset_pipeline.settings import dry_run_default, kafka_timeout_s
from offset_pipeline.storage import commits, snapshots, translations
from offset_pipeline.storage.deferred_writes import open_writer
from offset_pipeline.sync import cycle_carry
from offset_pipeline.sync.commit_checks import (
    FRESHNESS_CHECK,
    NO_LOSS_CHECK,
    evaluate_no_loss,
    evaluate_sync_freshness,
)
from offset_pipeline.sync.commit_cycle import (
    CycleCommits,
    commit_groups,
    newest_synced_times,
    read_commit_history,
    translated_by_group,
    unrecorded_changes,
)
from offset_pipeline.sync.commit_step import CycleContext
from offset_pipeline.sync.gc_pause import cyclic_gc_paused

COMMIT_ROWS = "commit_rows"  # cycle_carry key: this run's CommitRow list


class CommitConfig(dg.Config):
    # Default from OFFSET_PIPELINE_DRY_RUN (1/true/yes/on): decide and record, write nothing.
    dry_run: bool = Field(default_factory=dry_run_default)
    max_sync_age_s: float = 300.0  # sync_freshness fails for a group not fully synced this long
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)
    # Groups handled at once. Each group is independent (its own re-reads and ONE commit call);
    # one after another, the round trips add up: ~50 ms a group, 2.5 s for 50 groups.
    parallel_groups: int = Field(default=8, ge=1)


_WARNED_ERRORS = 20  # commit errors logged as Dagster warnings per cycle; all are in offset_commits



@dg.asset(
    pool=SYNC_POOL,
    group_name="offset_sync",
    deps=["offset_translations"],
    kinds={"kafka", "clickhouse"},
    check_specs=[
        dg.AssetCheckSpec(
            NO_LOSS_CHECK, asset="offset_standby_commits",
            description="Every standby offset written this cycle, read back, is at or below its proven safe bound.",
        ),
        dg.AssetCheckSpec(
            FRESHNESS_CHECK, asset="offset_standby_commits",
            description="Every group had a cycle with all its partitions synced within max_sync_age_s.",
        ),
    ],
)
@cyclic_gc_paused()  # row building makes no reference cycles: sync/gc_pause.py
def offset_standby_commits(
    context: dg.AssetExecutionContext,
    config: CommitConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
) -> dg.MaterializeResult:
    """Commit decisions for every group-partition of this cycle's translations, written to the standbys."""
    started = time.monotonic()
    snapshot_id = context.run.run_id
    cycle = CycleContext(snapshot_id, int(time.time() * 1000), config.dry_run, config.kafka_timeout_s)
    writer = open_writer(clickhouse, snapshots.ensure_table, translations.ensure_tables, commits.ensure_table)
    client = writer.client if writer.outcome.error is None else None

    by_group = translated_by_group(cycle_carry.get(snapshot_id, TRANSLATION_ROWS), client, snapshot_id,
                                   writer.outcome.error)
    # The active offsets of each group's previous snapshot find resets on the active cluster (the
    # one case a standby offset may go back). Without ClickHouse none is found: nothing is rewound.
    history = read_commit_history(client, snapshot_id, by_group, (idc1.cluster_name, idc2.cluster_name))
    if history.error is not None:
        context.log.warning(f"offset-sync clickhouse unavailable: reading the previous snapshot failed "
                            f"({type(history.error).__name__}); no rewind after a reset this cycle")
        client = None
    clusters = {resource.cluster_name: resource for resource in (idc1, idc2)}
    # The snapshot step's child processes when it ran in this process (closed here), else new ones.
    children = cycle_carry.take(snapshot_id, KAFKA_CHILDREN)
    io = IsolatedGroupIO({name: resource.plain() for name, resource in clusters.items()},
                         calls=children.calls if children is not None else None)
    try:
        done = commit_groups(by_group, clusters, cycle, history.previous_committed, config.parallel_groups, io=io)
    finally:
        io.close()
    _log_commits(context.log, snapshot_id, len(by_group), done)
    # A standby offset that is not where the newest recorded cycle left it was moved unrecorded: most
    # likely by a sync run killed between its commit calls and storing its rows (each group's
    # commit is one call, so a group is at its old offset or at that run's new, checked one). This
    # cycle re-read it and planned from it (the repair); here it is reported.
    unrecorded = unrecorded_changes(done.stored, history.recorded)
    for change in unrecorded[:_WARNED_ERRORS]:
        context.log.warning(f"offset-sync unrecorded standby change: {change}")
    cycle_carry.put(snapshot_id, COMMIT_ROWS, done.stored)
    written = commits.insert_rows(writer, done.stored)

    no_loss = evaluate_no_loss(done.stored)
    # Groups fully synced this cycle, and (from ClickHouse, when it answers) in earlier ones.
    newest_synced = newest_synced_times(by_group, done.stored, cycle.cycle_time_ms, client, writer.outcome.deferred)
    freshness = evaluate_sync_freshness(by_group, newest_synced, time.time(), config.max_sync_age_s)
    return dg.MaterializeResult(
        metadata=_metadata(snapshot_id, config.dry_run, written, len(by_group), done, writer.outcome.deferred,
                           unrecorded, started),
        check_results=[no_loss.to_result(), freshness.to_result()],
    )


def _log_commits(log, snapshot_id: str, groups: int, done: CycleCommits) -> None:
    """The cycle's decision lines, its first commit errors as Dagster warnings, and one summary."""
    stored = done.stored
    # One line per decision to the step's stderr (monitoring/decision_log.py); errors also as Dagster warnings,
    # a bounded number of them (a cluster down would otherwise be one event per group-partition).
    logged = write_decision_lines(done.lines(routine=False))
    logged += write_decision_lines(done.lines(routine=True), routine=True)
    errors = [r for r in stored if r.error]
    for row in errors[:_WARNED_ERRORS]:
        log.warning(
            f"offset-sync commit error group={row.group_id!r} topic={row.topic!r} partition={row.partition}: {row.error}"
        )
    if len(errors) > _WARNED_ERRORS:
        log.warning(f"offset-sync commit errors: {len(errors) - _WARNED_ERRORS} more (offset_commits.error)")
    log.info(
        f"offset-sync commits {snapshot_id}: {len(stored)} group-partitions, {groups} groups; "
        f"{logged} decision lines on the step's stderr ({done.routine_count} routine, at DEBUG); "
        f"{len(errors)} errors"
    )


def _metadata(snapshot_id: str, dry_run: bool, written: int, groups: int, done: CycleCommits, rows_spooled: int,
              unrecorded: list[dict], started: float) -> dict:
    """The materialization's metadata (``started``: the step's ``time.monotonic()`` at its start)."""
    stored = done.stored
    decisions = Counter(r.decision for r in stored)
    applied = [r for r in stored if r.applied]
    return {
        "snapshot_id": snapshot_id,
        "dry_run": dry_run,
        "group_partitions": written,
        "groups": groups,
        "groups_written": len({r.group_id for r in applied}),
        "partitions_written": len(applied),
        "groups_failed": len({r.group_id for r in stored if r.decision == "failed"}),
        "write_errors": sum(1 for r in stored if r.error and r.decision != "failed"),
        "unreachable_clusters": ", ".join(sorted(done.unreachable)) or "none",
        **{f"decision_{k}": v for k, v in sorted(decisions.items())},
        "rows_spooled": rows_spooled,
        "unrecorded_standby_changes": len(unrecorded),
        **({"unrecorded_standby_changes_first": dg.MetadataValue.json(unrecorded[:20])} if unrecorded else {}),
        "kafka_seconds": round(done.kafka_s, 3),
        "total_seconds": round(time.monotonic() - started, 3),
    }
