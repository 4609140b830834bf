"""The ``offset_sync_pairs`` table: MirrorMaker 2's offset-sync pairs the interval mode's cycles read,
with their stamps (the active log end read after the pair: ``sync/offset_sync_stamps.py``), so the
next cycle, a new process, goes on from them (``sync/offset_sync_step.py``).

A row is a pair a cycle read for the first time (stamped, or not yet when its partition had no log
end read after it) or a pair that got its first stamp; ``next_offset`` is where that cycle's read of
the offset-syncs topic stopped. Pairs are thinned before they are written (one to three per
partition and cycle), so the table grows with the cycles, not with MirrorMaker 2's pair rate.

Working state: rows expire after :data:`KEEP_DAYS`. A pair older than that is forgotten (it only
served groups lagging days behind); when every row of a flow expired, the next cycle reads its topic
from the start again. Sorted by flow and partition: the load reads one flow's rows by the primary
key. Inserts use clickhouse-connect's column binding; the queries are parameterized.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone

from offset_pipeline.storage.retention import delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_sync_pairs"
KEEP_DAYS = 7
MAX_PAIRS_PER_PARTITION = 1000

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    source           LowCardinality(String),
    target           LowCardinality(String),
    syncs_cluster    LowCardinality(String),
    syncs_topic      String,
    topic            String,
    partition        UInt32,
    upstream         Int64,
    downstream       Int64,
    active_end_after Nullable(Int64),
    next_offset      Int64,
    position         UInt32,
    cycle_time       DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (source, target, syncs_topic, topic, partition, cycle_time, position)
"""

COLUMNS = ["source", "target", "syncs_cluster", "syncs_topic", "topic", "partition", "upstream", "downstream",
           "active_end_after", "next_offset", "position", "cycle_time"]

StoredPair = tuple[str, int, int, int, int | None]  # topic, partition, u, d, active_end_after


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("cycle_time", KEEP_DAYS))
    ensure_upkeep(client, TABLE)


def insert_pairs(client, source: str, target: str, syncs_cluster: str, syncs_topic: str,
                 pairs: Iterable[StoredPair], next_offset: int, cycle_time_ms: int) -> int:
    """One cycle's new pairs and first stamps of the flow ``source -> target``, in the topic's order;
    with none, one row without a pair (topic '') keeps where the read stopped. Returns rows written."""
    at = datetime.fromtimestamp(cycle_time_ms / 1000.0, tz=timezone.utc)
    data = [[source, target, syncs_cluster, syncs_topic, topic, int(partition), int(u), int(d),
             None if end is None else int(end), int(next_offset), i, at]
            for i, (topic, partition, u, d, end) in enumerate(pairs)]
    if not data:
        data = [[source, target, syncs_cluster, syncs_topic, "", 0, 0, 0, None, int(next_offset), 0, at]]
    client.insert(TABLE, data, column_names=COLUMNS)
    return len(data)


def stored_pairs(client, source: str, target: str, syncs_topic: str) -> tuple[list[StoredPair], int]:
    """The flow's kept pairs (the newest :data:`MAX_PAIRS_PER_PARTITION` per partition), in the order
    they were read, each with its earliest stamp; and where the next read starts (0: nothing kept)."""
    where = "source = {s:String} AND target = {t:String} AND syncs_topic = {q:String}"
    parameters = {"s": source, "t": target, "q": syncs_topic}
    next_rows = client.query(
        f"SELECT argMax(next_offset, (cycle_time, position)), count() FROM {TABLE} WHERE {where}",
        parameters=parameters,
    ).result_rows
    next_offset = int(next_rows[0][0]) if next_rows and next_rows[0][1] else 0
    rows = client.query(
        f"""
        SELECT topic, partition, upstream, downstream, min(active_end_after) AS stamp,
               min((cycle_time, position)) AS first_read
        FROM {TABLE}
        WHERE {where} AND topic != ''
        GROUP BY topic, partition, upstream, downstream
        ORDER BY topic, partition, first_read DESC
        LIMIT {{n:UInt32}} BY topic, partition
        """,
        parameters={**parameters, "n": MAX_PAIRS_PER_PARTITION},
    ).result_rows
    ordered = sorted(rows, key=lambda r: (r[0], r[1], r[5]))
    return [(topic, int(partition), int(u), int(d), None if end is None else int(end))
            for topic, partition, u, d, end, _ in ordered], next_offset
