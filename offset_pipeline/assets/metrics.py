"""``offset_sync_metrics``: each cycle, the monitoring rows of every group-partition (DESIGN.md §7).

Reads this run's translations, commit decisions and snapshot log ends from ClickHouse, computes
``d = f - g``, ``dd``, the sync age and a status per group-partition with the pure
``monitoring/metric_rules.py``, and appends them to ``offset_sync_metrics`` (the per-minute rollup
``offset_sync_metrics_1m`` fills itself). The metadata carries the status table per group and topic
and the convergence graph (dD and its 10-minute sum per cluster) as a picture.
"""

import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

import dagster as dg
from clickhouse_connect.driver.exceptions import Error as ClickHouseClientError
from pydantic import Field

from offset_pipeline.monitoring.convergence_plot import as_markdown_image, convergence_png
from offset_pipeline.monitoring.metric_rules import STATUS_ORDER, CycleFacts, metric_rows, worst, worst_first
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline import cycle_carry
from offset_pipeline.assets.translation import TRANSLATION_ROWS
from offset_pipeline.storage import commits, metrics, snapshots, translations
from offset_pipeline.storage.deferred_writes import open_writer


class MetricsConfig(dg.Config):
    # A partition's mirror looks stalled when, over this window, the active log grew and the
    # standby log did not (compared with the newest snapshot at least this old, if one was taken
    # within a further 10 minutes).
    mirror_window_s: float = Field(default=180.0, gt=0)
    # A partition not synced for this long is Lagging (default: four 30 s cycles).
    lagging_after_s: float = Field(default=120.0, gt=0)
    # How much history the convergence graph in the metadata shows.
    graph_hours: float = Field(default=2.0, gt=0)


_FACTS_QUERY = (
    "SELECT t.group_id, t.topic, t.partition, t.active, t.standby, t.committed, t.standby_offset, t.status, "
    "t.strategy, c.decision, c.applied, c.committed_after, t.timestamp_inversion "
    f"FROM {translations.TRANSLATIONS_TABLE} AS t "
    f"LEFT JOIN (SELECT * FROM {commits.TABLE} WHERE snapshot_id = {{sid:String}}) AS c "
    "ON t.group_id = c.group_id AND t.topic = c.topic AND t.partition = c.partition "
    "WHERE t.snapshot_id = {sid:String}"
)
_CONVERGENCE_QUERY = (
    f"SELECT minute, active, sum(dd_sum) FROM {metrics.ROLLUP} "
    "WHERE minute >= {since:DateTime('UTC')} AND active != '' GROUP BY minute, active ORDER BY minute"
)
_EARLIER_LOG_ENDS_QUERY = (
    f"SELECT cluster, topic, partition, argMax(log_end, snapshot_time) FROM {snapshots.TABLE} "
    # never this cycle's own snapshot: a slow cycle's metrics step may start a window after it
    "WHERE topic_present AND snapshot_id != {sid:String} AND snapshot_time <= {until:DateTime64(3, 'UTC')} "
    "AND snapshot_time >= {since:DateTime64(3, 'UTC')} AND topic IN {topics:Array(String)} "
    "GROUP BY cluster, topic, partition"
)
_LOG_ENDS_QUERY = (
    f"SELECT DISTINCT cluster, topic, partition, log_end FROM {snapshots.TABLE} "
    "WHERE snapshot_id = {sid:String} AND topic_present"
)


METRICS_WRITTEN_CHECK = "metrics_written"


@dg.asset(
    group_name="offset_sync",
    deps=["offset_standby_commits"],
    kinds={"clickhouse"},
    check_specs=[
        dg.AssetCheckSpec(
            METRICS_WRITTEN_CHECK, asset="offset_sync_metrics",
            description="ClickHouse took this cycle's rows and every spooled insert (WARN: ClickHouse unavailable; "
                        "the sync committed anyway, its rows wait in the spool or were dropped, counted).",
        ),
    ],
)
def offset_sync_metrics(
    context: dg.AssetExecutionContext, config: MetricsConfig, clickhouse: ClickHouseResource
) -> dg.MaterializeResult:
    """d, dd, sync age and status of every group-partition this cycle, for Grafana."""
    started = time.monotonic()
    snapshot_id = context.run.run_id
    cycle_time_ms = int(time.time() * 1000)
    spool = clickhouse.deferred_writes()
    writer = open_writer(clickhouse, snapshots.ensure_table, commits.ensure_table, translations.ensure_tables,
                         metrics.ensure_tables)
    replay = spool.replay(writer.client) if writer.outcome.error is None else None
    if writer.outcome.error is not None or replay.error is not None:
        return _without_clickhouse(context, spool, writer.outcome.error or replay.error, replay, started)
    try:
        return _with_clickhouse(context, config, writer, replay, snapshot_id, cycle_time_ms, started)
    except (ClickHouseClientError, OSError) as exc:  # ClickHouse failed mid-step: the cycle's commits stand
        return _without_clickhouse(context, spool, f"{type(exc).__name__}: {str(exc)[:300]}", replay, started)


def _with_clickhouse(context, config, writer, replay, snapshot_id: str, cycle_time_ms: int, started: float):
    client = writer.client
    log_end = {
        (cluster, topic, int(partition)): end
        for cluster, topic, partition, end in client.query(_LOG_ENDS_QUERY, parameters={"sid": snapshot_id}).result_rows
    }
    window_ms = int(config.mirror_window_s * 1000)
    earlier = {
        (cluster, topic, int(partition)): end
        for cluster, topic, partition, end in client.query(_EARLIER_LOG_ENDS_QUERY, parameters={
            "until": datetime.fromtimestamp((cycle_time_ms - window_ms) / 1000, tz=timezone.utc),
            "since": datetime.fromtimestamp((cycle_time_ms - window_ms - max(window_ms, 600_000)) / 1000, tz=timezone.utc),
            "topics": sorted({t for _, t, _ in log_end}), "sid": snapshot_id,
        }).result_rows
    }

    def mirror_stalled(active: str, standby: str, topic: str, partition: int) -> bool:
        a, s = (active, topic, partition), (standby, topic, partition)
        if not all(k in log_end and k in earlier for k in (a, s)):
            return False  # no history yet: nothing to say
        return log_end[a] > earlier[a] and log_end[s] == earlier[s]

    facts = []
    for g, t, p, active, standby, c, offset, status, strategy, decision, applied, after, inversion in client.query(
        _FACTS_QUERY, parameters={"sid": snapshot_id}, settings={"join_use_nulls": 1},
    ).result_rows:
        facts.append(CycleFacts(
            g, t, int(p), active, standby, c, offset, status, strategy, decision or None, bool(applied), after,
            active_log_end=log_end.get((active, t, int(p))), standby_log_end=log_end.get((standby, t, int(p))),
            timestamp_inversion=bool(inversion),
            mirror_stalled=bool(active and standby) and mirror_stalled(active, standby, t, int(p)),
        ))
    previous_d, last_synced = metrics.previous_state(client, sorted({f.group_id for f in facts}), cycle_time_ms)
    rows = metric_rows(cycle_time_ms, facts, previous_d, last_synced, lagging_after_s=config.lagging_after_s)
    written = metrics.insert_rows(writer, rows)

    by_group_topic: dict[tuple[str, str], list] = defaultdict(list)
    for row in rows:
        by_group_topic[(row.group_id, row.topic)].append(row)
    table = [
        {
            "group": group, "topic": topic, "status": worst(r.sync_status for r in rs),
            "partitions": len(rs), "in_sync": sum(r.sync_status == "InSync" for r in rs),
            "max_sync_age_s": max((r.sync_age_s for r in rs if r.sync_age_s is not None), default=None),
            "d": sum(r.d for r in rs if r.d is not None),
        }
        for (group, topic), rs in sorted(by_group_topic.items())
    ]
    statuses = Counter(r.sync_status for r in rows)
    group_status = Counter(worst(r.sync_status for r in rows if r.group_id == g) for g in {r.group_id for r in rows})
    since = datetime.fromtimestamp(cycle_time_ms / 1000 - config.graph_hours * 3600, tz=timezone.utc)
    points = client.query(_CONVERGENCE_QUERY, parameters={"since": since}).result_rows
    graph = as_markdown_image(convergence_png(points, f"convergence, last {config.graph_hours:g} h"))
    context.log.info(
        f"offset-sync metrics {snapshot_id}: {written} group-partitions; "
        + ", ".join(f"{s}={statuses[s]}" for s in STATUS_ORDER if statuses[s])
    )
    return dg.MaterializeResult(
        metadata={
            "group_partitions": written,
            **{f"partitions_{s}": statuses[s] for s in STATUS_ORDER},
            **{f"groups_{s}": group_status[s] for s in STATUS_ORDER},
            # the worst group-topics only: every cycle's metadata stays in Dagster's storage, and at
            # 10,000 group-partitions all of them were 500 rows a cycle (all are in Grafana)
            "status_table": dg.MetadataValue.md(_markdown(worst_first(table, STATUS_TABLE_ROWS))),
            "status_table_rows_left_out": max(len(table) - STATUS_TABLE_ROWS, 0),
            "convergence": dg.MetadataValue.md(graph),
            "spooled_rows_replayed": replay.rows,
            "spooled_rows_dropped_total": replay.dropped_rows_total,
            "total_seconds": round(time.monotonic() - started, 3),
        },
        check_results=[dg.AssetCheckResult(
            check_name=METRICS_WRITTEN_CHECK, passed=True, severity=dg.AssetCheckSeverity.WARN,
            description=f"{written} monitoring rows written" + (
                f"; {replay.rows} spooled rows of earlier cycles written late" if replay.rows else ""),
            metadata={"spooled_rows_replayed": replay.rows, "spooled_files_pending": replay.pending_files},
        )],
    )


def _without_clickhouse(context, spool, error: str, replay, started: float) -> dg.MaterializeResult:
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
            check_name=METRICS_WRITTEN_CHECK, passed=False, severity=dg.AssetCheckSeverity.WARN,
            description=f"ClickHouse unavailable ({error[:200]}): {len(facts)} monitoring rows dropped, "
                        f"{pending_files} inserts spooled for later",
            metadata=counts,
        )],
    )


STATUS_TABLE_ROWS = 50


def _markdown(table: list[dict]) -> str:
    if not table:
        return "(no group-partitions this cycle)"
    lines = ["| group | topic | status | partitions | InSync | max sync age (s) | d |", "|---|---|---|---|---|---|---|"]
    for row in table:
        age = "-" if row["max_sync_age_s"] is None else f"{row['max_sync_age_s']:.0f}"
        group = row["group"].replace("|", "\\|")
        topic = row["topic"].replace("|", "\\|")
        lines.append(f"| {group} | {topic} | {row['status']} | {row['partitions']} | {row['in_sync']} | {age} | {row['d']} |")
    return "\n".join(lines)
