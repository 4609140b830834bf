"""The ``topic_shape_observations`` table: origin-header counts sampled per cycle, the evidence
shape detection sums over a horizon (``offset_pipeline/sync/shape_detection.py``).

One row per (cycle, topic, partition, cluster) sampled. Parameterized queries only. Rows are kept
``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (``storage/retention.py``; days, far longer than the
evidence horizon of hours the detection sums, so the evidence in use is never deleted); new tables
are partitioned by day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from offset_pipeline.storage.recent import now_ms, recent
from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep
from offset_pipeline.translation.shape import HeaderObservation

TABLE = "topic_shape_observations"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    snapshot_id  String,
    observed_at  DateTime64(3, 'UTC'),
    topic        String,
    partition    UInt32,
    cluster      LowCardinality(String),
    local        UInt32,
    copies       UInt32,
    malformed    UInt32
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(observed_at)
ORDER BY (topic, cluster, observed_at)
"""


@dataclass(frozen=True)
class ShapeObservationRow:
    snapshot_id: str
    observed_at_ms: int
    topic: str
    partition: int
    observation: HeaderObservation


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("observed_at", clickhouse_retention().history_days))
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: list[ShapeObservationRow]) -> int:
    if not rows:
        return 0
    client.insert(
        TABLE,
        [
            [r.snapshot_id, datetime.fromtimestamp(r.observed_at_ms / 1000, tz=timezone.utc), r.topic, r.partition,
             r.observation.cluster, r.observation.local, r.observation.copies_from_peer, r.observation.malformed]
            for r in rows
        ],
        column_names=["snapshot_id", "observed_at", "topic", "partition", "cluster", "local", "copies", "malformed"],
    )
    return len(rows)


def observations_since(client, topics: list[str], since_ms: int) -> dict[tuple[str, str], HeaderObservation]:
    """(topic, cluster) -> the summed observations of ``topics`` since ``since_ms``."""
    if not topics:
        return {}
    rows = client.query(
        f"SELECT topic, cluster, sum(local), sum(copies), sum(malformed) FROM {TABLE} "
        "WHERE topic IN {topics:Array(String)} AND observed_at >= {since:DateTime64(3, 'UTC')} "
        "GROUP BY topic, cluster",
        parameters={"topics": list(topics), "since": datetime.fromtimestamp(since_ms / 1000, tz=timezone.utc)},
    ).result_rows
    return {(t, c): HeaderObservation(c, int(loc), int(cop), int(mal)) for t, c, loc, cop, mal in rows}


def last_sampled(client, topics: list[str], at_ms: int | None = None) -> dict[str, int]:
    """topic -> epoch ms of its newest observation (topics never sampled are absent). The recent
    rows first; only the topics without one there are looked up further back, by the primary index
    (the sorting key starts with the topic; storage/recent.py)."""
    if not topics:
        return {}

    def read(wanted: list[str], window: str) -> dict[str, int]:
        rows = client.query(
            f"SELECT topic, toUnixTimestamp64Milli(max(observed_at)) FROM {TABLE} "
            f"WHERE topic IN {{topics:Array(String)}} {window} GROUP BY topic",
            parameters={"topics": wanted, "at_ms": now_ms() if at_ms is None else at_ms},
        ).result_rows
        return {t: int(ms) for t, ms in rows}

    newest = read(sorted(set(topics)), f"AND {recent('observed_at')}")
    missing = sorted(set(topics) - set(newest))
    if missing:
        newest |= read(missing, "")
    return newest
