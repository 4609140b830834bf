"""``offset_standby_commits``: each cycle, write the translated offsets to the standby groups.

Reads this run's ``offset_translations`` rows, and per group (``offset_pipeline/sync/commit_step.py``):
re-reads the standby group (members, committed offsets) and the active member count just before
planning, finds partitions reset backwards on the active cluster since the group's previous
snapshot, plans with ``plan_standby_commits`` (DESIGN.md §5, with each partition's safe bound) and
writes with ONE commit call per group, never in a dry run. Every decision is logged
(``commit_log_line``, to the step's stderr: ``monitoring/decision_log.py``) and appended to
``offset_commits``, also dry-run, refused, split-brain, skipped and failed ones. Groups are
independent and handled ``parallel_groups`` at a time; one group failing (a cluster down) never
fails the others.

Asset checks: ``no_loss`` (ERROR) and ``sync_freshness`` (WARN), see ``offset_pipeline/sync/commit_checks.py``.
"""

import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import dagster as dg
from pydantic import Field

from offset_pipeline.sync.commit_checks import (
    FRESHNESS_CHECK,
    NO_LOSS_CHECK,
    evaluate_no_loss,
    evaluate_sync_freshness,
)
from offset_pipeline.sync.commit_rules import CommitDecision, commit_log_line
from offset_pipeline.sync.commit_step import TRANSLATED_COLUMNS, CycleContext, TranslatedRow, commit_group
from offset_pipeline.kafka_io.group_io import IsolatedGroupIO
from offset_pipeline.monitoring.decision_log import write_decision_lines
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.settings import dry_run_default, kafka_timeout_s
from offset_pipeline.sync import cycle_carry
from offset_pipeline.assets.translation import TRANSLATION_ROWS
from offset_pipeline.storage import commits, cycle_rows, snapshots, translations
from offset_pipeline.storage.deferred_writes import open_writer

COMMIT_ROWS = "commit_rows"  # cycle_carry key: this run's CommitRow list


class CommitConfig(dg.Config):
    # Default from OFFSET_PIPELINE_DRY_RUN (1/true/yes/on): decide and record, write nothing.
    dry_run: bool = Field(default_factory=dry_run_default)
    max_sync_age_s: float = 300.0  # sync_freshness fails for a group not fully synced this long
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)
    # Groups handled at once. Each group is independent (its own re-reads and ONE commit call);
    # one after another, the round trips add up: ~50 ms a group, 2.5 s for 50 groups.
    parallel_groups: int = Field(default=8, ge=1)


# Logged at DEBUG (monitoring/decision_log.py): a commit forward, a standby already at t, and a result with
# no offset (its translation line, at INFO, already says why; during an outage these were half of
# 8 MB of compute log per cycle at 10,000 group-partitions).
ROUTINE_COMMITS = (CommitDecision.COMMIT, CommitDecision.UNCHANGED, CommitDecision.SKIPPED_UNTRANSLATED)
_WARNED_ERRORS = 20  # commit errors logged as Dagster warnings per cycle; all are in offset_commits



@dg.asset(
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

    by_group: dict = defaultdict(list)
    carried = cycle_carry.get(snapshot_id, TRANSLATION_ROWS)
    if carried is not None:
        translated = sorted((tuple(row[c] for c in TRANSLATED_COLUMNS) for row in carried), key=lambda v: v[:3])
    elif client is not None:
        translated = cycle_rows.translation_rows(client, snapshot_id, TRANSLATED_COLUMNS)
    else:
        raise RuntimeError(f"this run's translations are neither in this process nor readable: {writer.outcome.error}")
    for values in translated:
        row = TranslatedRow(*values)
        by_group[row.group_id].append(row)
    # The active offsets of each group's previous snapshot find resets on the active cluster (the
    # one case a standby offset may go back). Without ClickHouse none is found: nothing is rewound.
    before: dict = {}
    recorded: dict = {}
    if client is not None:
        try:
            before = snapshots.previous_committed_offsets(client, snapshot_id, sorted(by_group),
                                                          (idc1.cluster_name, idc2.cluster_name))
            recorded = commits.last_recorded_offsets(client, by_group)
        except Exception as exc:  # noqa: BLE001 - commits go on; only rewinds wait for ClickHouse
            context.log.warning(f"offset-sync clickhouse unavailable: reading the previous snapshot failed "
                                f"({type(exc).__name__}); no rewind after a reset this cycle")
            client = None
    clusters = {resource.cluster_name: resource for resource in (idc1, idc2)}
    # Each cluster's calls in a child process of its own (kafka_io/group_io.py): a librdkafka
    # abort costs the groups in flight on that cluster, not the run.
    io = IsolatedGroupIO({name: resource.plain() for name, resource in clusters.items()})
    unreachable: dict = {}

    kafka_started = time.monotonic()

    def one_group(item):
        group_id, rows = item
        return commit_group(
            rows, clusters, cycle, active_before=before.get((rows[0].active, group_id)), io=io,
            unreachable=unreachable,  # shared: a cluster found down spares the groups after it the wait
        )

    stored, lines = [], []
    try:
        with ThreadPoolExecutor(max_workers=config.parallel_groups, thread_name_prefix="offset-sync-commit") as pool:
            # map keeps the groups' order: the stored rows and lines come out sorted by group
            for plan, group_rows in pool.map(one_group, sorted(by_group.items())):
                lines += [(commit_log_line(commit), commit.decision in ROUTINE_COMMITS) for commit in plan]
                stored += group_rows
    finally:
        io.close()
    kafka_s = time.monotonic() - kafka_started
    # One line per decision to the step's stderr (monitoring/decision_log.py); errors also as Dagster warnings,
    # a bounded number of them (a cluster down would otherwise be one event per group-partition).
    logged = write_decision_lines([line for line, r in lines if not r])
    logged += write_decision_lines([line for line, r in lines if r], routine=True)
    errors = [r for r in stored if r.error]
    for row in errors[:_WARNED_ERRORS]:
        context.log.warning(
            f"offset-sync commit error group={row.group_id!r} topic={row.topic!r} partition={row.partition}: {row.error}"
        )
    if len(errors) > _WARNED_ERRORS:
        context.log.warning(f"offset-sync commit errors: {len(errors) - _WARNED_ERRORS} more (offset_commits.error)")
    context.log.info(
        f"offset-sync commits {snapshot_id}: {len(stored)} group-partitions, {len(by_group)} groups; "
        f"{logged} decision lines on the step's stderr ({sum(r for _, r in lines)} routine, at DEBUG); "
        f"{len(errors)} errors"
    )
    # A standby offset that is not where the newest recorded cycle left it was moved unrecorded: most
    # likely by a sync run killed between its commit calls and storing its rows (each group's
    # commit is one call, so a group is at its old offset or at that run's new, checked one). This
    # cycle re-read it and planned from it (the repair); here it is reported.
    unrecorded = unrecorded_changes(stored, recorded)
    for change in unrecorded[:_WARNED_ERRORS]:
        context.log.warning(f"offset-sync unrecorded standby change: {change}")
    cycle_carry.put(snapshot_id, COMMIT_ROWS, stored)
    written = commits.insert_rows(writer, stored)

    no_loss = evaluate_no_loss(stored)
    # Groups fully synced this cycle, and (from ClickHouse, when it answers) in earlier ones.
    synced_now = {
        g: cycle.cycle_time_ms / 1000 for g in by_group
        if all(r.synced for r in stored if r.group_id == g)
    }
    newest_synced = dict(synced_now)
    if client is not None and writer.outcome.deferred == 0:
        try:
            newest_synced = {**commits.newest_synced_cycle_times(client, by_group), **synced_now}
        except Exception:  # noqa: BLE001 - judged from this cycle alone
            pass
    freshness = evaluate_sync_freshness(by_group, newest_synced, time.time(), config.max_sync_age_s)
    decisions = Counter(r.decision for r in stored)
    applied = [r for r in stored if r.applied]
    return dg.MaterializeResult(
        metadata={
            "snapshot_id": snapshot_id,
            "dry_run": config.dry_run,
            "group_partitions": written,
            "groups": len(by_group),
            "groups_written": len({r.group_id for r in applied}),
            "partitions_written": len(applied),
            "groups_failed": len({r.group_id for r in stored if r.decision == "failed"}),
            "write_errors": sum(1 for r in stored if r.error and r.decision != "failed"),
            "unreachable_clusters": ", ".join(sorted(unreachable)) or "none",
            **{f"decision_{k}": v for k, v in sorted(decisions.items())},
            "rows_spooled": writer.outcome.deferred,
            "unrecorded_standby_changes": len(unrecorded),
            **({"unrecorded_standby_changes_first": dg.MetadataValue.json(unrecorded[:20])} if unrecorded else {}),
            "kafka_seconds": round(kafka_s, 3),
            "total_seconds": round(time.monotonic() - started, 3),
        },
        check_results=[no_loss.to_result(), freshness.to_result()],
    )


def unrecorded_changes(stored, recorded: dict) -> list[dict]:
    """Rows whose standby offset, re-read before planning, differs from the newest recorded one."""
    out = []
    for row in stored:
        last = recorded.get((row.group_id, row.topic, int(row.partition), row.standby))
        if last is not None and row.previous_offset is not None and row.previous_offset != last:
            out.append({"group_id": row.group_id, "topic": row.topic, "partition": int(row.partition),
                        "standby": row.standby, "recorded": last, "found": row.previous_offset})
    return out
