"""The ``offset_mirror_checks`` table: the mirror check's verdicts (which proof the mirror gives each
topic and direction), one row per topic, direction and check, for Grafana and ``readiness``.

Parameterized queries only (topic names can hold any character Kafka allows). Rows are kept
``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (``storage/retention.py``); partitioned by day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_mirror_checks"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    check_id    String,
    checked_at  DateTime64(3, 'UTC'),
    topic       String,
    active      LowCardinality(String),
    standby     LowCardinality(String),
    proof       LowCardinality(String),
    status      LowCardinality(String),
    reason      String
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(checked_at)
ORDER BY (topic, active, standby, checked_at)
"""

_COLUMNS = ["check_id", "checked_at", "topic", "active", "standby", "proof", "status", "reason"]


@dataclass(frozen=True)
class MirrorCheckRow:
    check_id: str
    checked_at_ms: int
    topic: str
    active: str
    standby: str
    proof: str
    status: str
    reason: str


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("checked_at", clickhouse_retention().history_days))
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: list[MirrorCheckRow]) -> int:
    if not rows:
        return 0
    client.insert(
        TABLE,
        [[r.check_id, datetime.fromtimestamp(r.checked_at_ms / 1000, tz=timezone.utc), r.topic, r.active, r.standby,
          r.proof, r.status, r.reason] for r in rows],
        column_names=_COLUMNS,
    )
    return len(rows)


def newest(client, topics: list[str] | None = None, *, within_s: float = 86_400.0) -> list[MirrorCheckRow]:
    """The newest verdict of every topic and direction checked within ``within_s`` (of ``topics``
    only, when given), by topic and direction."""
    where = "checked_at >= now64(3) - toIntervalMillisecond({within_ms:Int64})"
    parameters: dict[str, object] = {"within_ms": int(within_s * 1000)}
    if topics is not None:
        where += " AND topic IN {topics:Array(String)}"
        parameters["topics"] = list(topics)
    rows = client.query(
        f"SELECT check_id, toUnixTimestamp64Milli(checked_at), topic, active, standby, proof, status, reason "
        f"FROM {TABLE} WHERE {where} ORDER BY topic, active, standby, checked_at DESC "
        "LIMIT 1 BY topic, active, standby",
        parameters=parameters,
    ).result_rows
    return [MirrorCheckRow(c, int(ms), t, a, s, p, st, r) for c, ms, t, a, s, p, st, r in rows]
