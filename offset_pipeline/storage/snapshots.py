"""The ``offset_snapshots`` table: append-only history of what each sync cycle read from Kafka.

One row per cluster, consumer group and partition the group involves on either cluster, so a
cycle's facts for one group-partition are the two rows (one per cluster) with its snapshot id.
Inserts go through clickhouse-connect's column binding, never through SQL text: group ids may
hold any character.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from datetime import datetime, timezone

TABLE = "offset_snapshots"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    snapshot_id      String,
    snapshot_time    DateTime64(3, 'UTC'),
    cluster          LowCardinality(String),
    group_id         String,
    group_state      LowCardinality(String),
    member_count     UInt32,
    topic            String,
    partition        UInt32,
    committed_offset Nullable(Int64),
    topic_present    Bool,
    log_start        Nullable(Int64),
    log_end          Nullable(Int64),
    last_stable      Nullable(Int64)
)
ENGINE = MergeTree
ORDER BY (group_id, topic, partition, cluster, snapshot_time)
"""


@dataclass(frozen=True)
class SnapshotRow:
    snapshot_id: str
    snapshot_time_ms: int
    cluster: str
    group_id: str
    group_state: str
    member_count: int
    topic: str
    partition: int
    committed_offset: int | None
    topic_present: bool
    log_start: int | None
    log_end: int | None
    last_stable: int | None


COLUMNS = [f.name for f in fields(SnapshotRow)]


def ensure_table(client) -> None:
    client.command(DDL)


def insert_rows(client, rows: list[SnapshotRow]) -> int:
    if not rows:
        return 0
    data = []
    for row in rows:
        values = list(astuple(row))
        values[1] = datetime.fromtimestamp(values[1] / 1000.0, tz=timezone.utc)
        data.append(values)
    names = ["snapshot_time" if c == "snapshot_time_ms" else c for c in COLUMNS]
    client.insert(TABLE, data, column_names=names)
    return len(rows)
