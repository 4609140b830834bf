"""The ``offset_failover_audits`` table: what a failover at each past snapshot would have cost.

One row per audit window (a UTC day), snapshot, group and partition: ``c``, ``t``, the standby log
end then, ``status`` (``audited``, ``records_deleted``, ``needs_wider_read``, ``no_standby_offset``,
...), ``lost`` / ``duplicated`` with the first standby offsets of each, the translation's strategy
in that cycle, and the reason. Idempotent per window: :func:`replace_window` deletes the window's
rows, then inserts the new ones (re-running a partition replaces, never doubles). Parameterized
queries and column binding only. A window's rows are kept ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS``
after its day (``storage/retention.py``); the day's totals stay longer in the audit run's metadata.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

from offset_pipeline.storage import snapshots, translations
from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_failover_audits"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    window_date        Date,
    snapshot_id        String,
    snapshot_time      DateTime64(3, 'UTC'),
    group_id           String,
    topic              String,
    partition          UInt32,
    active             LowCardinality(String),
    standby            LowCardinality(String),
    committed          Nullable(Int64),
    standby_committed  Nullable(Int64),
    standby_end_at     Nullable(Int64),
    strategy           LowCardinality(String),
    status             LowCardinality(String),
    lost               Nullable(Int64),
    duplicated         Nullable(Int64),
    lost_offsets       Array(Int64),
    duplicated_offsets Array(Int64),
    reason             String,
    margin             Int64,
    records_read       Int64,
    audited_at         DateTime64(3, 'UTC')
)
ENGINE = MergeTree
PARTITION BY window_date
ORDER BY (group_id, topic, partition, snapshot_time)
"""

COLUMNS = [
    "window_date", "snapshot_id", "snapshot_time", "group_id", "topic", "partition", "active", "standby", "committed",
    "standby_committed", "standby_end_at", "strategy", "status", "lost", "duplicated", "lost_offsets",
    "duplicated_offsets", "reason", "margin", "records_read", "audited_at",
]


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("window_date", clickhouse_retention().history_days))
    ensure_upkeep(client, TABLE)


def replace_window(client, window: date, rows: list[dict], audited_at_ms: int) -> int:
    """Delete the window's rows, then insert ``rows`` (dicts with the audit's result columns)."""
    client.command(f"DELETE FROM {TABLE} WHERE window_date = {{d:Date}}", parameters={"d": window},
                   settings={"lightweight_deletes_sync": 2})
    data = []
    audited_at = datetime.fromtimestamp(audited_at_ms / 1000, tz=timezone.utc)
    for r in rows:
        values = {**r, "window_date": window, "audited_at": audited_at,
                  "snapshot_time": datetime.fromtimestamp(r["snapshot_time"] / 1000, tz=timezone.utc)}
        data.append([values[c] for c in COLUMNS])
    if data:
        client.insert(TABLE, data, column_names=COLUMNS)
    return len(data)


_MOMENTS = (
    "SELECT s.snapshot_id, toUnixTimestamp64Milli(min(s.snapshot_time)), s.group_id, s.topic, s.partition, "
    "tr.active, tr.standby, anyIf(s.committed_offset, s.cluster = tr.active), "
    "anyIf(s.committed_offset, s.cluster = tr.standby), anyIf(s.log_end, s.cluster = tr.active), "
    "anyIf(s.log_end, s.cluster = tr.standby), any(tr.strategy) "
    f"FROM {snapshots.TABLE} AS s INNER JOIN ("
    f"  SELECT snapshot_id, group_id, topic, partition, active, standby, strategy FROM {translations.TRANSLATIONS_TABLE} "
    "  WHERE cycle_time >= {lo:DateTime64(3, 'UTC')} AND cycle_time < {hi:DateTime64(3, 'UTC')} + INTERVAL 1 HOUR "
    "  AND active != ''"
    ") AS tr ON s.snapshot_id = tr.snapshot_id AND s.group_id = tr.group_id AND s.topic = tr.topic "
    "AND s.partition = tr.partition "
    "WHERE s.snapshot_time >= {lo:DateTime64(3, 'UTC')} AND s.snapshot_time < {hi:DateTime64(3, 'UTC')} "
    "AND s.topic_present "
    "GROUP BY s.snapshot_id, s.group_id, s.topic, s.partition, tr.active, tr.standby"
)


def snapshot_moments(client, lo: datetime, hi: datetime) -> list[tuple]:
    """Every decided group-partition of every snapshot in ``[lo, hi)``, with both clusters' facts:
    snapshot_id, snapshot ms, group_id, topic, partition, active, standby, c (on the active),
    the standby's committed offset, both log ends, and the cycle's strategy."""
    return client.query(_MOMENTS, parameters={"lo": lo, "hi": hi}).result_rows
