"""The ``offset_snapshots`` table: append-only history of what each sync cycle read from Kafka.

One row per cluster, consumer group and partition the group involves on either cluster, so a
cycle's facts for one group-partition are the two rows (one per cluster) with its snapshot id.
Inserts go through clickhouse-connect's column binding, never through SQL text: group ids may
hold any character. Rows are kept ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (``storage/retention.py``;
never shorter than the audit horizon: the failover audit reads them); new tables are partitioned
by day so whole days expire as whole parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from offset_pipeline.storage.recent import now_ms, recent
from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.row_inserts import insert_dataclass_rows
from offset_pipeline.storage.upkeep import ensure_upkeep

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
    last_stable      Nullable(Int64),
    timestamp_type   LowCardinality(String) DEFAULT '',
    read_error       String DEFAULT ''
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(snapshot_time)
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
    # the topic's message.timestamp.type on this cluster ('' when unknown or the topic is missing)
    timestamp_type: str = ""
    # why this cluster's facts for the row are unknown ('' when read): cluster unavailable, the
    # group unreadable, the partition's log range unreadable
    read_error: str = ""


COLUMNS = [f.name for f in fields(SnapshotRow)]


# Columns added after the first release: a table created by an older version gains them.
_ADDED_COLUMNS = ("timestamp_type LowCardinality(String) DEFAULT ''", "read_error String DEFAULT ''")


def ensure_table(client) -> None:
    client.command(DDL)
    for column in _ADDED_COLUMNS:
        client.command(f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {column}")
    ensure_ttl(client, TABLE, delete_ttl("snapshot_time", clickhouse_retention().history_days))
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: list[SnapshotRow]) -> int:
    names = ["snapshot_time" if c == "snapshot_time_ms" else c for c in COLUMNS]
    return insert_dataclass_rows(client, TABLE, rows, names)


def snapshot_time_ms(client, snapshot_id: str) -> int | None:
    """When ``snapshot_id`` was taken (epoch ms), or None when it has no row. A recent snapshot
    (the usual case: this cycle's own) is found in the recent parts alone (storage/recent.py)."""
    for window in (f"AND {recent('snapshot_time')}", ""):
        rows = client.query(
            f"SELECT toUnixTimestamp64Milli(min(snapshot_time)), count() FROM {TABLE} "
            f"WHERE snapshot_id = {{sid:String}} {window}",
            parameters={"sid": snapshot_id, "at_ms": now_ms()},
        ).result_rows
        if rows and rows[0][1]:
            return int(rows[0][0])
    return None


def previous_committed_offsets(
    client, snapshot_id: str, group_ids: list[str], clusters: Iterable[str] = ()
) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """(cluster, group) -> {(topic, partition): committed offset} in that group's newest snapshot on
    that cluster taken before ``snapshot_id`` (the group's own previous snapshot, which need not be
    the cycle's previous one). Pairs with no earlier snapshot are absent.

    Each pair's newest snapshot is looked for in the hours before ``snapshot_id`` first; a group
    without one there on each of ``clusters`` (and on each cluster seen) is looked up in its whole
    history by the primary index (storage/recent.py)."""
    if not group_ids:
        return {}
    taken_ms = snapshot_time_ms(client, snapshot_id)
    if taken_ms is None:
        return {}

    def newest(groups: list[str], window: str) -> dict[tuple[str, str], tuple[str, int]]:
        rows = client.query(
            f"SELECT cluster, group_id, argMax(snapshot_id, snapshot_time), "
            f"toUnixTimestamp64Milli(max(snapshot_time)) FROM {TABLE} "
            "WHERE group_id IN {groups:Array(String)} "
            f"AND snapshot_time < fromUnixTimestamp64Milli({{taken_ms:Int64}}, 'UTC') {window} "
            "GROUP BY cluster, group_id",
            parameters={"groups": groups, "taken_ms": taken_ms},
        ).result_rows
        return {(cluster, group_id): (sid, int(ms)) for cluster, group_id, sid, ms in rows}

    wanted = sorted(set(group_ids))
    pairs = newest(wanted, f"AND {recent('snapshot_time', 'taken_ms')}")
    names = set(clusters) | {cluster for cluster, _ in pairs}
    lacking = [g for g in wanted if any((c, g) not in pairs for c in names) or not names]
    if lacking:
        pairs = {k: v for k, v in pairs.items() if k[1] not in set(lacking)} | newest(lacking, "")
    if not pairs:
        return {}
    rows = client.query(
        f"SELECT cluster, group_id, topic, partition, committed_offset FROM {TABLE} "
        "WHERE group_id IN {groups:Array(String)} AND committed_offset IS NOT NULL "
        "AND (cluster, group_id, snapshot_id) IN {pairs:Array(Tuple(String, String, String))} "
        "AND snapshot_time >= fromUnixTimestamp64Milli({oldest_ms:Int64}, 'UTC')",
        parameters={"groups": sorted({g for _, g in pairs}),
                    "pairs": sorted((c, g, sid) for (c, g), (sid, _) in pairs.items()),
                    "oldest_ms": min(ms for _, ms in pairs.values())},
    ).result_rows
    out: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
    for cluster, group_id, topic, partition, offset in rows:
        out.setdefault((cluster, group_id), {})[(topic, int(partition))] = int(offset)
    return out


def newest_snapshot_ms(client) -> int | None:
    """The time of the newest snapshot row (epoch ms), or None when the table is empty."""
    rows = client.query(f"SELECT toUnixTimestamp64Milli(max(snapshot_time)), count() FROM {TABLE}").result_rows
    return int(rows[0][0]) if rows and rows[0][1] else None
