"""The ``offset_translation_deferrals`` table: the Kafka partitions a cycle's translation did not
reach before its read budget ran out (status ``translation_deferred``), one row per partition and
direction, keyed by the cycle's ``snapshot_id``. The next cycle reads them first
(``assets/translation.py``), so a cycle that cannot finish never leaves the same partitions behind
twice.

It is working state, not history: a row matters to one later cycle, so rows expire after
:data:`KEEP_DAYS` whatever the history TTL (``storage/retention.py``). Sorted by ``snapshot_id``:
the one query reads a single cycle's rows by the primary key, never a scan. Inserts use
clickhouse-connect's column binding; the query is parameterized.
"""

from __future__ import annotations

from datetime import datetime, timezone

from offset_pipeline.storage.retention import delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_translation_deferrals"
KEEP_DAYS = 1

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    snapshot_id String,
    cycle_time  DateTime64(3, 'UTC'),
    topic       String,
    partition   UInt32,
    active      LowCardinality(String),
    standby     LowCardinality(String)
)
ENGINE = MergeTree
ORDER BY (snapshot_id, topic, partition, active, standby)
"""

COLUMNS = ["snapshot_id", "cycle_time", "topic", "partition", "active", "standby"]

PartitionKey = tuple[str, int, str, str]  # topic, partition, active, standby (spark_translation.PARTITION_KEY)


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("cycle_time", KEEP_DAYS))
    ensure_upkeep(client, TABLE)


def insert_deferred(client, snapshot_id: str, cycle_time_ms: int, keys: set[PartitionKey]) -> int:
    """Record the partitions of ``snapshot_id``'s cycle left unread. Returns how many rows."""
    if not keys:
        return 0
    at = datetime.fromtimestamp(cycle_time_ms / 1000.0, tz=timezone.utc)
    data = [[snapshot_id, at, topic, int(partition), active, standby]
            for topic, partition, active, standby in sorted(keys)]
    client.insert(TABLE, data, column_names=COLUMNS)
    return len(data)


def deferred_by(client, snapshot_id: str | None) -> set[PartitionKey]:
    """The partitions ``snapshot_id``'s cycle left unread (none for None or a cycle that read all)."""
    if snapshot_id is None:
        return set()
    rows = client.query(
        f"SELECT topic, partition, active, standby FROM {TABLE} WHERE snapshot_id = {{sid:String}}",
        parameters={"sid": snapshot_id},
    ).result_rows
    return {(topic, int(partition), active, standby) for topic, partition, active, standby in rows}
