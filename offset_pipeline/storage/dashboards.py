"""The Grafana dashboards, as code: every panel's SQL in one place, rendered to the JSON files in
``grafana/dashboards/`` (for the grafana-clickhouse-datasource plugin, provisioned by
``grafana/provisioning/``).

    .venv/bin/python -m offset_pipeline.storage.dashboards   # rewrite grafana/dashboards/*.json

The time series read the per-minute rollup (``offset_sync_metrics_1m``) so 30 days stay fast; the
status table reads the newest raw rows. Macros are the plugin's (``$__timeFilter``,
``$__timeInterval``); variables use Grafana's ``singlequote`` format (group ids may hold quotes).
tests/storage/test_dashboards.py checks that the files match this module and runs every panel's SQL
(``grafana_sql.expand``) against ClickHouse on rows written by real sync cycles.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from offset_pipeline.storage.commit_log_follow import TABLE as COMMIT_LOG_FOLLOW
from offset_pipeline.storage.fast_forwards import TABLE as FAST_FORWARDS
from offset_pipeline.storage.metrics import ROLLUP, TABLE
from offset_pipeline.storage.mirror_checks import TABLE as MIRROR_CHECKS
from offset_pipeline.storage.readiness import TABLE as READINESS

DATASOURCE = {"type": "grafana-clickhouse-datasource", "uid": "offset-pipeline-clickhouse"}
DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "grafana" / "dashboards"

_ROLLUP_FILTER = (
    "$__timeFilter(minute) AND active IN (${cluster:singlequote}) AND group_id IN (${group:singlequote}) "
    "AND topic IN (${topic:singlequote})"
)
_ANY_ACTIVE = "(active IN (${cluster:singlequote}) OR active = '')"  # split brains count as broken
_READINESS_WINDOW = ("checked_at >= $__toTime - INTERVAL 10 MINUTE AND checked_at <= $__toTime "
                     "AND group_id IN (${group:singlequote})")
STATUS_ORDER_SQL = "['SplitBrain', 'Broken', 'Stale', 'Lagging', 'Mirroring', 'InSync']"


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # timeseries | table | stat
    sql: str
    description: str = ""
    columns: tuple[str, ...] = ()  # what the query returns, in order (tests check it)
    sparse: bool = False  # rows only when something happened (a fast-forward): may be empty


def _convergence(by: str, label: str) -> str:
    # dD per minute, and its sum over the trailing 10 minutes: ~0 while sync works (docs/operating/monitoring.md).
    return (
        f"SELECT time, {label}, dd, sum(dd) OVER (PARTITION BY {label} ORDER BY toUInt32(time) "
        "RANGE BETWEEN 599 PRECEDING AND CURRENT ROW) AS dd_10m FROM ("
        f"SELECT $__timeInterval(minute) AS time, {by} AS {label}, sum(dd_sum) AS dd FROM {ROLLUP} "
        f"WHERE {_ROLLUP_FILTER} GROUP BY time, {label}) ORDER BY time, {label}"
    )


OVERVIEW = [
    Panel("Convergence per cluster: dD and its 10-minute sum", "timeseries", _convergence("active", "cluster"),
          "D = f - g (group offset on the active cluster minus its synced offset on the standby). Its change dD "
          "alternates around 0 and the 10-minute sum stays near 0 while sync works; a growing sum means sync "
          "stopped.", ("time", "cluster", "dd", "dd_10m")),
    Panel("Convergence per group", "timeseries", _convergence("group_id", "group"),
          "The same per group.", ("time", "group", "dd", "dd_10m")),
    Panel("f, g and D per group (mean per partition)", "timeseries", (
        "SELECT $__timeInterval(minute) AS time, group_id AS group, sum(f_sum) / greatest(sum(fg_rows), 1) AS f, "
        "sum(g_sum) / greatest(sum(fg_rows), 1) AS g, sum(d_sum) / greatest(sum(fg_rows), 1) AS d "
        f"FROM {ROLLUP} WHERE {_ROLLUP_FILTER} GROUP BY time, group ORDER BY time, group"
    ), "f: the group's offset on its active cluster; g: its synced offset on the standby; D = f - g (the "
       "constant offset difference between the clusters included). Means over the partitions with both.",
        ("time", "group", "f", "g", "d")),
    Panel("Status per group and topic (newest cycle)", "table", (
        "SELECT group_id AS group, topic, active, standby, "
        f"arrayElement({STATUS_ORDER_SQL}, toUInt8(min(indexOf({STATUS_ORDER_SQL}, partition_status)))) AS status, "
        "count() AS partitions, countIf(partition_status = 'InSync') AS in_sync, max(sync_age_s) AS max_sync_age_s, "
        "sum(gap) AS offset_gap, max(stalled) AS mirror_stalled, max(cycle) AS last_cycle FROM ("
        "SELECT group_id, topic, partition, active, standby, argMax(sync_status, cycle_time) AS partition_status, "
        "argMax(sync_age_s, cycle_time) AS sync_age_s, argMax(standby_lag - active_lag, cycle_time) AS gap, "
        "argMax(mirror_stalled, cycle_time) AS stalled, "
        f"max(cycle_time) AS cycle FROM {TABLE} "
        "WHERE cycle_time >= $__toTime - INTERVAL 10 MINUTE AND cycle_time <= $__toTime "
        # undecided groups (split brain) have no active cluster: shown whatever the cluster filter
        "AND (active IN (${cluster:singlequote}) OR active = '') AND group_id IN (${group:singlequote}) "
        "AND topic IN (${topic:singlequote}) "
        "GROUP BY group_id, topic, partition, active, standby) "
        "GROUP BY group_id, topic, active, standby ORDER BY indexOf(" + STATUS_ORDER_SQL + ", status), group, topic"
    ), "Worst partition status first. InSync: the synced offsets point at copies of the same record (a "
       "switchover now duplicates nothing). Mirroring: synced, loss-free. Lagging: not synced for 4 cycles. "
       "Stale: a fast-forward candidate. Broken: an error status. SplitBrain: members on both clusters.",
       ("group", "topic", "active", "standby", "status", "partitions", "in_sync", "max_sync_age_s", "offset_gap",
        "mirror_stalled", "last_cycle")),
    Panel("Switch readiness per group (newest)", "table", (
        # The verdicts in force at $__toTime (readiness/current.py): each group's newest cycle of the
        # last 10 minutes, one row per direction. The cluster filter applies after that choice: a group
        # that moved, or whose cluster came back, shows its present direction or nothing, never an old one.
        "SELECT group_id AS group, active, standby, ready AS safe_to_switch, expected_duplicates, "
        "duplicates_at_most, seconds_since_sync, toString(reasons) AS why_not, first_problem, "
        f"checked_at AS verdict_at FROM {READINESS} WHERE {_READINESS_WINDOW} "
        f"AND (group_id, checked_at) IN (SELECT group_id, max(checked_at) FROM {READINESS} "
        f"WHERE {_READINESS_WINDOW} GROUP BY group_id) AND {_ANY_ACTIVE} "
        "ORDER BY safe_to_switch, group_id, active, standby, snapshot_id DESC LIMIT 1 BY group_id, active, standby"
    ), "Is it safe to switch each group to its standby now (nothing lost), what it would cost, the seconds "
       "since its last sync, and why not (partitions per reason: cluster_unavailable, not_authorized, "
       "split_brain, mirror_lag, no_anchor, no_standby_offset, commit_not_synced, stale_sync, ...). "
       "expected_duplicates is exact (empty when not known); duplicates_at_most is its upper bound (the same "
       "number when exact; empty for an unrefined timestamp search). Each group's newest verdict, one row per "
       "direction: a direction its newest cycle did not write (the undecided verdict of a past outage, the old "
       "direction of a group that moved) is not shown. Written by every continuous checkpoint and interval "
       "cycle; `offset-pipeline readiness` prints the same.",
        ("group", "active", "standby", "safe_to_switch", "expected_duplicates", "duplicates_at_most",
         "seconds_since_sync", "why_not", "first_problem", "verdict_at"), sparse=True),
    Panel("Mirror proofs per topic and direction (newest check)", "table", (
        "SELECT topic, active, standby, proof, status, reason, checked_at AS checked "
        f"FROM {MIRROR_CHECKS} WHERE checked_at >= $__toTime - INTERVAL 1 DAY AND checked_at <= $__toTime "
        "AND (active IN (${cluster:singlequote}) OR standby IN (${cluster:singlequote})) "
        "ORDER BY topic, active, standby, checked_at DESC LIMIT 1 BY topic, active, standby"
    ), "What the mirror lets the sync prove for a group of each topic moving from active to standby "
       "(offset_mirror_proofs, every 10 minutes; `offset-pipeline mirror check` prints the same): "
       "origin_headers (copies carry IDC/Offset: every shape), offset_syncs (plain MirrorMaker 2's pairs: a "
       "topic configured one-way from the active side), none (status and reason say why: not_mirrored, "
       "renamed_remote_topic, no_offset_sync_yet, shape_not_configured, unknown_origin_name, ...).",
        ("topic", "active", "standby", "proof", "status", "reason", "checked"), sparse=True),
    Panel("Commit logs: how each cluster is read (newest checkpoint)", "table", (
        "SELECT cluster, mode, reason, checked_at AS checked "
        f"FROM {COMMIT_LOG_FOLLOW} WHERE checked_at >= $__toTime - INTERVAL 1 DAY AND checked_at <= $__toTime "
        "AND cluster IN (${cluster:singlequote}) ORDER BY cluster, checked_at DESC LIMIT 1 BY cluster"
    ), "How the continuous run reads each cluster: following (its __consumer_offsets followed, a cycle reads only "
       "the groups that committed) or polling, and why (commit_log_not_authorized: no Read on __consumer_offsets; "
       "commit_log_unreadable, commit_log_lagging, commit_log_starting, commit_log_off). Written at every "
       "continuous checkpoint (docs/operating/sync-modes.md).",
        ("cluster", "mode", "reason", "checked"), sparse=True),
    Panel("Commit logs: followed offsets a listing contradicted", "timeseries", (
        "SELECT $__timeInterval(checked_at) AS time, cluster, sum(differences) AS differences, "
        "sum(compared) AS compared "
        f"FROM {COMMIT_LOG_FOLLOW} WHERE $__timeFilter(checked_at) AND cluster IN (${{cluster:singlequote}}) "
        "GROUP BY time, cluster ORDER BY time, cluster"
    ), "Every reconcile_s the run lists every group anyway and compares: group-partitions compared, and those "
       "whose followed offset the listing contradicted (a commit missed, or one the cluster does not have). "
       "Expected: 0 differences.",
        ("time", "cluster", "differences", "compared"), sparse=True),
    Panel("Translation success rate per strategy", "timeseries", (
        "SELECT $__timeInterval(minute) AS time, "
        "sum(header_hit_rows) / greatest(sum(header_rows), 1) AS header_hit_rate, "
        "sum(timestamp_ok_rows) / greatest(sum(timestamp_rows), 1) AS timestamp_success_rate, "
        "sum(translated_rows) / greatest(sum(rows), 1) AS translated_rate, "
        "sum(exact_rows) / greatest(sum(rows), 1) AS exact_rate "
        f"FROM {ROLLUP} WHERE {_ROLLUP_FILTER} GROUP BY time ORDER BY time"
    ), "Header hit rate: header-strategy partitions anchored; timestamp success: searches that translated.",
        ("time", "header_hit_rate", "timestamp_success_rate", "translated_rate", "exact_rate")),
    Panel("Sync age (max) per group", "timeseries", (
        "SELECT $__timeInterval(minute) AS time, group_id AS group, max(max_sync_age_s) AS sync_age_s "
        f"FROM {ROLLUP} WHERE {_ROLLUP_FILTER} GROUP BY time, group ORDER BY time, group"
    ), "Seconds since each group's least recently synced partition was synced.", ("time", "group", "sync_age_s")),
    Panel("Offset gap between the clusters per group", "timeseries", (
        "SELECT $__timeInterval(minute) AS time, group_id AS group, sum(gap_sum) / greatest(sum(rows), 1) AS gap "
        f"FROM {ROLLUP} WHERE {_ROLLUP_FILTER} GROUP BY time, group ORDER BY time, group"
    ), "Records a switchover would read again on the standby (standby lag minus active lag), per partition.",
        ("time", "group", "gap")),
    Panel("InSync, broken, timestamp inversions, stalled mirror", "timeseries", (
        "SELECT $__timeInterval(minute) AS time, sum(in_sync_rows) / greatest(sum(rows), 1) AS in_sync_share, "
        "sum(broken_rows) AS broken, sum(inversion_rows) AS timestamp_inversions, "
        "sum(mirror_stalled_rows) AS mirror_stalled "
        f"FROM {ROLLUP} WHERE {_ROLLUP_FILTER.replace('active IN (${cluster:singlequote})', _ANY_ACTIVE)} "
        "GROUP BY time ORDER BY time"
    ), "Timestamp inversions: searches whose first record had a later timestamp (duplicate risk). Stalled "
       "mirror: partitions whose active log grew while the standby's did not, over the last minutes.",
        ("time", "in_sync_share", "broken", "timestamp_inversions", "mirror_stalled")),
    Panel("Fast-forwards of stale low-traffic partitions", "table", (
        "SELECT checked_at AS time, group_id AS group, topic, partition, active, standby, outcome, rejection, "
        "previous_offset, new_offset, stable_for_s, reason "
        f"FROM {FAST_FORWARDS} WHERE $__timeFilter(checked_at) AND active IN (${{cluster:singlequote}}) "
        "AND group_id IN (${group:singlequote}) AND topic IN (${topic:singlequote}) "
        "ORDER BY checked_at DESC, group, topic, partition LIMIT 500"
    ), "Every partition a fast-forward run looked at: fast_forwarded to the standby log end, "
       "unchanged, dry_run, or left_alone with the live condition that failed (receiving_data, group_has_lag, "
       "mirror_stopped, ...). The stale_partition_sensor's skip reasons and tick logs say why others were not asked.",
        ("time", "group", "topic", "partition", "active", "standby", "outcome", "rejection", "previous_offset",
         "new_offset", "stable_for_s", "reason"), sparse=True),
]

VARIABLES = [
    ("cluster", "Active cluster", f"SELECT DISTINCT active FROM {ROLLUP} WHERE active != '' ORDER BY active"),
    ("group", "Group", f"SELECT DISTINCT group_id FROM {ROLLUP} WHERE active IN (${{cluster:singlequote}}) OR active = '' "
     "ORDER BY group_id"),
    ("topic", "Topic", f"SELECT DISTINCT topic FROM {ROLLUP} WHERE group_id IN (${{group:singlequote}}) ORDER BY topic"),
]

DASHBOARDS = {"offset_sync_overview": ("Offset sync: convergence and status", OVERVIEW)}


def render(uid: str, title: str, panels: list[Panel]) -> dict:
    """A Grafana dashboard model (schemaVersion 39) for the ClickHouse plugin."""
    out = []
    for i, panel in enumerate(panels):
        width = 24 if panel.kind == "table" else 12
        out.append({
            "id": i + 1, "title": panel.title, "type": panel.kind, "description": panel.description,
            "datasource": DATASOURCE,
            "gridPos": {"h": 9, "w": width, "x": 0 if width == 24 else (i % 2) * 12, "y": i * 9},
            "targets": [{
                "refId": "A", "datasource": DATASOURCE, "editorType": "sql", "rawSql": panel.sql,
                # the plugin's QueryType ("table" / "timeSeries") and grafana/sqlds' format (1 / 0)
                "queryType": "table" if panel.kind == "table" else "timeSeries",
                "format": 1 if panel.kind == "table" else 0,
            }],
        })
    templating = [
        {
            "name": name, "label": label, "type": "query", "datasource": DATASOURCE, "query": sql,
            "definition": sql, "multi": True, "includeAll": True, "refresh": 2,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        }
        for name, label, sql in VARIABLES
    ]
    return {
        "uid": uid, "title": title, "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"}, "tags": ["offset_pipeline"],
        "templating": {"list": templating}, "panels": out,
    }


def rendered() -> dict[str, str]:
    """file name -> JSON text of every dashboard."""
    return {
        f"{uid}.json": json.dumps(render(uid, title, panels), indent=2, ensure_ascii=False) + "\n"
        for uid, (title, panels) in DASHBOARDS.items()
    }


def main() -> int:
    DASHBOARD_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (DASHBOARD_DIR / name).write_text(text)
        print(f"wrote {DASHBOARD_DIR / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
