"""The ``offset_commit_log_follow`` table: at every checkpoint of a continuous run, one row per
cluster saying how the run read it since the previous checkpoint (following its commit log, or
polling and why) and what its listings found against the followed offsets, for Grafana.

Counts are the checkpoint interval's (not the run's totals), so sums over any time range add up.
Rows are kept ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (``storage/retention.py``); partitioned by day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_commit_log_follow"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    checkpoint_id   String,
    checked_at      DateTime64(3, 'UTC'),
    run_id          String,
    cluster         LowCardinality(String),
    mode            LowCardinality(String),
    reason          String,
    reads_followed  UInt32,
    reads_listed    UInt32,
    compared        UInt64,
    differences     UInt32,
    records         UInt64
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(checked_at)
ORDER BY (cluster, checked_at)
"""

_COLUMNS = ["checkpoint_id", "checked_at", "run_id", "cluster", "mode", "reason", "reads_followed", "reads_listed",
            "compared", "differences", "records"]


@dataclass(frozen=True)
class CommitLogFollowRow:
    checkpoint_id: str
    checked_at_ms: int
    run_id: str
    cluster: str
    mode: str  # following | commit_log_not_authorized | ... (continuous/commit_feed.py FollowerMode)
    reason: str
    reads_followed: int  # cycles since the previous checkpoint that read only the changed groups
    reads_listed: int  # cycles that listed every group
    compared: int  # group-partitions of this cluster compared with a listing
    differences: int  # of them, followed offsets the listing contradicted
    records: int  # commit-log records read


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("checked_at", clickhouse_retention().history_days))
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: list[CommitLogFollowRow]) -> int:
    if not rows:
        return 0
    client.insert(
        TABLE,
        [[r.checkpoint_id, datetime.fromtimestamp(r.checked_at_ms / 1000, tz=timezone.utc), r.run_id, r.cluster,
          r.mode, r.reason, r.reads_followed, r.reads_listed, r.compared, r.differences, r.records] for r in rows],
        column_names=_COLUMNS,
    )
    return len(rows)


def newest(client, *, within_s: float = 86_400.0) -> list[CommitLogFollowRow]:
    """Each cluster's newest row written within ``within_s``, by cluster."""
    rows = client.query(
        f"SELECT checkpoint_id, toUnixTimestamp64Milli(checked_at), run_id, cluster, mode, reason, reads_followed, "
        f"reads_listed, compared, differences, records FROM {TABLE} "
        "WHERE checked_at >= now64(3) - toIntervalMillisecond({within_ms:Int64}) "
        "ORDER BY cluster, checked_at DESC LIMIT 1 BY cluster",
        parameters={"within_ms": int(within_s * 1000)},
    ).result_rows
    return [CommitLogFollowRow(*row) for row in rows]
