"""``offset_sync_metrics``: each cycle, the monitoring rows of every group-partition (DESIGN.md §7).

Takes this run's translations, commit decisions and snapshot log ends from the earlier steps in this
process (``sync/cycle_carry.py``; from ClickHouse only when they are not here: a step re-executed alone),
reads what it needs of earlier cycles from ClickHouse (recent rows first: ``storage/recent.py``),
computes ``d = f - g``, ``dd``, the sync age and a status per group-partition with the pure
``monitoring/metric_rules.py``, and appends them to ``offset_sync_metrics`` (the per-minute rollup
``offset_sync_metrics_1m`` fills itself). The metadata carries the status table per group and topic
and the convergence graph (dD and its 10-minute sum per cluster) as a picture.
"""

import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from enum import Enum

import dagster as dg
from clickhouse_connect.driver.exceptions import Error as ClickHouseClientError
from pydantic import Field

from offset_pipeline.monitoring.convergence_plot import as_markdown_image, convergence_png
from offset_pipeline.monitoring.metric_rules import STATUS_ORDER, CycleFacts, metric_rows, worst, worst_first
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.sync import cycle_carry
from offset_pipeline.assets.commit import COMMIT_ROWS
from offset_pipeline.assets.snapshot import SNAPSHOT_ROWS
from offset_pipeline.assets.translation import TRANSLATION_ROWS
from offset_pipeline.storage import commits, cycle_rows, metrics, snapshots, translations
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


#: How far before the run's start its rows are still looked for: the run's start is stamped by the
#: Dagster instance, the rows' times by the steps' clock, which may differ.
RUN_START_MARGIN_S = 3600.0
#: The bound when the run's start is unknown: none.
NO_BOUND = datetime(1970, 1, 1, tzinfo=timezone.utc)


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
    log_end, fact_rows, rows_from = _cycle_rows(context, client, snapshot_id)
    window_ms = int(config.mirror_window_s * 1000)
    earlier = cycle_rows.earlier_log_ends(
        client, snapshot_id,
        since=datetime.fromtimestamp((cycle_time_ms - window_ms - max(window_ms, 600_000)) / 1000, tz=timezone.utc),
        until=datetime.fromtimestamp((cycle_time_ms - window_ms) / 1000, tz=timezone.utc),
        topics={t for _, t, _ in log_end},
    )

    def mirror_stalled(active: str, standby: str, topic: str, partition: int) -> bool:
        a, s = (active, topic, partition), (standby, topic, partition)
        if not all(k in log_end and k in earlier for k in (a, s)):
            return False  # no history yet: nothing to say
        return log_end[a] > earlier[a] and log_end[s] == earlier[s]

    facts = []
    for g, t, p, active, standby, c, offset, status, strategy, decision, applied, after, inversion in fact_rows:
        facts.append(CycleFacts(
            g, t, int(p), active, standby, c, offset, status, strategy, decision or None, bool(applied), after,
            active_log_end=log_end.get((active, t, int(p))), standby_log_end=log_end.get((standby, t, int(p))),
            timestamp_inversion=bool(inversion),
            mirror_stalled=bool(active and standby) and mirror_stalled(active, standby, t, int(p)),
        ))
    previous_d, last_synced = metrics.previous_state(client, sorted({f.group_id for f in facts}), cycle_time_ms,
                                                     keys=[f.key for f in facts])
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
    points = metrics.convergence_points(client, since)
    graph = as_markdown_image(convergence_png(points, f"convergence, last {config.graph_hours:g} h"))
    context.log.info(
        f"offset-sync metrics {snapshot_id}: {written} group-partitions; "
        + ", ".join(f"{s}={statuses[s]}" for s in STATUS_ORDER if statuses[s])
    )
    return dg.MaterializeResult(
        metadata={
            "group_partitions": written,
            "cycle_rows_from": rows_from,
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


def carried_cycle_rows(snapshot_rows, translation_rows, commit_rows) -> tuple[dict, list[tuple]]:
    """This run's log ends and facts rows from the rows its earlier steps carried (``SnapshotRow``,
    translation result dicts, ``CommitRow``), equal to what ``storage/cycle_rows.cycle_log_ends`` and ``cycle_facts``
    (with ``join_use_nulls``) read once they are inserted, types included (ints, None, enum members
    as their string values, bools):

    * log ends: (cluster, topic, partition) -> ``log_end`` of the snapshot rows whose topic is
      present (one value per key: a snapshot reads each partition's range once per cluster);
    * facts: one tuple per translation row and commit row of the same group, topic and partition
      (a LEFT JOIN: the commit step records one per translated row), with the commit's
      ``decision``, ``applied`` and ``committed_after``; a translation row without one comes once,
      with None for all three (``join_use_nulls``: NULL, not the columns' defaults)."""
    log_end = {
        (_text(r.cluster), _text(r.topic), int(r.partition)): _int(r.log_end) for r in snapshot_rows if r.topic_present
    }
    by_partition: dict[tuple, list] = defaultdict(list)
    for c in commit_rows:
        by_partition[(_text(c.group_id), _text(c.topic), int(c.partition))].append(
            (_text(c.decision), bool(c.applied), _int(c.committed_after)))
    facts = []
    for t in translation_rows:
        key = (_text(t["group_id"]), _text(t["topic"]), int(t["partition"]))
        translated = (*key, _text(t["active"]), _text(t["standby"]), _int(t["committed"]), _int(t["standby_offset"]),
                      _text(t["status"]), _text(t["strategy"]))
        for commit in by_partition.get(key) or [(None, None, None)]:
            facts.append((*translated, *commit, bool(t["timestamp_inversion"])))
    return log_end, facts


def _int(value) -> int | None:
    return None if value is None else int(value)


def _text(value):
    """A string column's value as ClickHouse gives it back: an enum member as its value."""
    return value.value if isinstance(value, Enum) else value


def run_rows_since(context) -> datetime:
    """The earliest time a row of this run can carry: the run's start (Dagster's run record) less
    :data:`RUN_START_MARGIN_S`; 1970 (no bound) when the start is unknown."""
    try:
        record = context.instance.get_run_record_by_id(context.run.run_id)
    except Exception:  # noqa: BLE001 - without the bound the read is slower, not wrong
        record = None
    start = record.start_time if record is not None else None
    if start is None:
        return NO_BOUND
    return datetime.fromtimestamp(start - RUN_START_MARGIN_S, tz=timezone.utc)


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
