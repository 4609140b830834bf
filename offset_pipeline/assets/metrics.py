"""``offset_sync_metrics``: each cycle, the monitoring rows of every group-partition (docs/operating/monitoring.md).

Takes this run's translations, commit decisions and snapshot log ends from the earlier steps in this
process (``sync/cycle_carry.py``; from ClickHouse only when they are not here: a step re-executed alone),
reads what it needs of earlier cycles from ClickHouse (recent rows first: ``storage/recent.py``),
computes ``d = f - g``, ``dd``, the sync age and a status per group-partition with the pure
``monitoring/metric_rules.py``, and appends them to ``offset_sync_metrics`` (the per-minute rollup
``offset_sync_metrics_1m`` fills itself): the step is ``monitoring/metrics_step.py``. The metadata
carries the status table per group and topic and the convergence graph (dD and its 10-minute sum per
cluster) as a picture.
"""

import time

import dagster as dg
from clickhouse_connect.driver.exceptions import Error as ClickHouseClientError
from pydantic import Field

from offset_pipeline.assets.commit import COMMIT_ROWS
from offset_pipeline.assets.readiness_checks import (
    READINESS_CHECK,
    READINESS_CHECK_DESCRIPTION,
    cycle_readiness,
    readiness_check,
    readiness_metadata,
)
from offset_pipeline.assets.snapshot import SNAPSHOT_ROWS
from offset_pipeline.assets.translation import TRANSLATION_ROWS
from offset_pipeline.monitoring.metric_rules import STATUS_ORDER
from offset_pipeline.monitoring.metrics_step import (
    CycleMetrics,
    carried_cycle_rows,
    cycle_metrics,
    run_rows_since,
    status_markdown,
    status_rows_left_out,
)
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.run_targets import SYNC_POOL
from offset_pipeline.storage import (
    commit_log_follow,
    commits,
    cycle_rows,
    metrics,
    mirror_checks,
    readiness,
    snapshots,
    translations,
)
from offset_pipeline.storage.deferred_writes import (
    DeferredWrites,
    ReplayResult,
    SpoolingClient,
    open_writer,
)
from offset_pipeline.sync import cycle_carry
from offset_pipeline.sync.gc_pause import cyclic_gc_paused


class MetricsConfig(dg.Config):
    # A partition's mirror looks stalled when, over this window, the active log grew and the
    # standby log did not (compared with the newest snapshot at least this old, if one was taken
    # within a further 10 minutes).
    mirror_window_s: float = Field(default=180.0, gt=0)
    # A partition not synced for this long is Lagging (default: four 30 s cycles).
    lagging_after_s: float = Field(default=120.0, gt=0)
    # How much history the convergence graph in the metadata shows.
    graph_hours: float = Field(default=2.0, gt=0)
    # A group whose partitions were not all synced this long is not safe to switch (switch_readiness).
    readiness_max_age_s: float = Field(default=300.0, gt=0)


METRICS_WRITTEN_CHECK = "metrics_written"


@dg.asset(
    pool=SYNC_POOL,
    group_name="offset_sync",
    deps=["offset_standby_commits"],
    kinds={"clickhouse"},
    check_specs=[
        dg.AssetCheckSpec(READINESS_CHECK, asset="offset_sync_metrics", description=READINESS_CHECK_DESCRIPTION),
        dg.AssetCheckSpec(
            METRICS_WRITTEN_CHECK, asset="offset_sync_metrics",
            description="ClickHouse took this cycle's rows and every spooled insert (WARN: ClickHouse unavailable; "
                        "the sync committed anyway, its rows wait in the spool or were dropped, counted).",
        ),
    ],
)
@cyclic_gc_paused()  # row building makes no reference cycles: sync/gc_pause.py
def offset_sync_metrics(
    context: dg.AssetExecutionContext, config: MetricsConfig, clickhouse: ClickHouseResource
) -> dg.MaterializeResult:
    """d, dd, sync age and status of every group-partition this cycle, for Grafana."""
    started = time.monotonic()
    snapshot_id = context.run.run_id
    cycle_time_ms = int(time.time() * 1000)
    spool = clickhouse.deferred_writes()
    writer = open_writer(clickhouse, snapshots.ensure_table, commits.ensure_table, translations.ensure_tables,
                         metrics.ensure_tables, readiness.ensure_table,
                         mirror_checks.ensure_table,  # every table Grafana reads exists from the first cycle
                         commit_log_follow.ensure_table)
    replay = spool.replay(writer.client) if writer.outcome.error is None else None
    if writer.outcome.error is not None or replay.error is not None:
        return _without_clickhouse(context, spool, writer.outcome.error or replay.error, replay, started)
    try:
        return _with_clickhouse(context, config, writer, replay, snapshot_id, cycle_time_ms, started)
    except (ClickHouseClientError, OSError) as exc:  # ClickHouse failed mid-step: the cycle's commits stand
        return _without_clickhouse(context, spool, f"{type(exc).__name__}: {str(exc)[:300]}", replay, started)


def _with_clickhouse(context: dg.AssetExecutionContext, config: MetricsConfig, writer: SpoolingClient,
                     replay: ReplayResult, snapshot_id: str, cycle_time_ms: int, started: float) -> dg.MaterializeResult:
    log_end, fact_rows, rows_from = _cycle_rows(context, writer.client, snapshot_id)
    done = cycle_metrics(writer, snapshot_id, cycle_time_ms, log_end, fact_rows, mirror_window_s=config.mirror_window_s,
                         lagging_after_s=config.lagging_after_s, graph_hours=config.graph_hours)
    ready = cycle_readiness(snapshot_id, cycle_time_ms, done.rows, fact_rows,
                            cycle_carry.get(snapshot_id, TRANSLATION_ROWS), config.readiness_max_age_s)
    readiness.insert_rows(writer, ready)
    statuses = done.partition_statuses
    context.log.info(
        f"offset-sync metrics {snapshot_id}: {done.written} group-partitions; "
        + ", ".join(f"{s}={statuses[s]}" for s in STATUS_ORDER if statuses[s])
    )
    return dg.MaterializeResult(
        metadata={**_metadata(done, rows_from, replay, started), **readiness_metadata(ready)},
        check_results=[readiness_check(ready), dg.AssetCheckResult(
            check_name=METRICS_WRITTEN_CHECK, passed=True, severity=dg.AssetCheckSeverity.WARN,
            description=f"{done.written} monitoring rows written" + (
                f"; {replay.rows} spooled rows of earlier cycles written late" if replay.rows else ""),
            metadata={"spooled_rows_replayed": replay.rows, "spooled_files_pending": replay.pending_files},
        )],
    )


def _metadata(done: CycleMetrics, rows_from: str, replay: ReplayResult, started: float) -> dict:
    """The materialization's metadata (``started``: the step's ``time.monotonic()`` at its start)."""
    return {
        "group_partitions": done.written,
        "cycle_rows_from": rows_from,
        **{f"partitions_{s}": done.partition_statuses[s] for s in STATUS_ORDER},
        **{f"groups_{s}": done.group_statuses[s] for s in STATUS_ORDER},
        # the worst group-topics only: every cycle's metadata stays in Dagster's storage, and at
        # 10,000 group-partitions all of them were 500 rows a cycle (all are in Grafana)
        "status_table": dg.MetadataValue.md(status_markdown(done.table)),
        "status_table_rows_left_out": status_rows_left_out(done.table),
        "convergence": dg.MetadataValue.md(done.graph),
        "spooled_rows_replayed": replay.rows,
        "spooled_rows_dropped_total": replay.dropped_rows_total,
        "total_seconds": round(time.monotonic() - started, 3),
    }


def _cycle_rows(context, client, snapshot_id: str) -> tuple[dict, list[tuple], str]:
    """This run's log ends and facts rows (:func:`carried_cycle_rows`), and where they came from:
    the earlier steps' rows in this process when all three are here ("carried"), else ClickHouse
    ("clickhouse": a step re-executed alone; read from the run's start on)."""
    carried = [cycle_carry.get(snapshot_id, key) for key in (SNAPSHOT_ROWS, TRANSLATION_ROWS, COMMIT_ROWS)]
    if all(rows is not None for rows in carried):
        return *carried_cycle_rows(*carried), "carried"
    run_since = run_rows_since(context)
    log_end = cycle_rows.cycle_log_ends(client, snapshot_id, run_since)
    fact_rows = cycle_rows.cycle_facts(client, snapshot_id, run_since)
    return log_end, fact_rows, "clickhouse"


def _without_clickhouse(context, spool: DeferredWrites, error: str, replay: ReplayResult | None,
                        started: float) -> dg.MaterializeResult:
    """ClickHouse did not answer: this cycle's monitoring rows are dropped (they need the history
    ClickHouse holds), counted, and said; the cycle's own rows wait in the spool."""
    facts = cycle_carry.get(context.run.run_id, TRANSLATION_ROWS) or []
    pending_files, pending_bytes = spool.pending()
    dropped = spool.dropped()
    context.log.warning(
        f"offset-sync clickhouse unavailable: {error}; {len(facts)} monitoring rows of this cycle dropped, "
        f"{pending_files} inserts ({pending_bytes} bytes) wait in {spool.folder}"
    )
    counts = {
        "monitoring_rows_dropped": len(facts),
        "spooled_files_pending": pending_files,
        "spooled_bytes_pending": pending_bytes,
        "spooled_rows_dropped_total": dropped["rows"],
        "spooled_rows_replayed": replay.rows if replay else 0,
    }
    return dg.MaterializeResult(
        metadata={"group_partitions": 0, "clickhouse_error": error, **counts,
                  "total_seconds": round(time.monotonic() - started, 3)},
        check_results=[dg.AssetCheckResult(
            check_name=READINESS_CHECK, passed=False, severity=dg.AssetCheckSeverity.WARN,
            description=f"not evaluated: the last syncs of the groups are in ClickHouse, unavailable ({error[:200]})",
        ), dg.AssetCheckResult(
            check_name=METRICS_WRITTEN_CHECK, passed=False, severity=dg.AssetCheckSeverity.WARN,
            description=f"ClickHouse unavailable ({error[:200]}): {len(facts)} monitoring rows dropped, "
                        f"{pending_files} inserts spooled for later",
            metadata=counts,
        )],
    )
