"""The ``offset_group_readiness`` table: per cycle (or continuous checkpoint), group and direction,
is it safe to switch the group to its standby now, what it would cost, and why not
(``readiness/rules.py`` decides; Grafana's readiness panel and ``offset-pipeline readiness`` read it).

Append-only, kept ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (``storage/retention.py``); new tables are
partitioned by day. Inserts use clickhouse-connect's column binding and queries are parameterized:
group ids may hold any character.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from offset_pipeline.storage.retention import (
    clickhouse_retention,
    delete_ttl,
    ensure_ttl,
)
from offset_pipeline.storage.row_inserts import columns_of, insert_dataclass_rows
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_group_readiness"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    snapshot_id         String,
    checked_at          DateTime64(3, 'UTC'),
    group_id            String,
    active              LowCardinality(String),
    standby             LowCardinality(String),
    partitions          UInt32,
    ready               Bool,
    expected_duplicates Nullable(Int64),
    duplicates_at_most  Nullable(Int64),
    seconds_since_sync  Nullable(Float64),
    reasons             Map(LowCardinality(String), UInt32),
    first_problem       String
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(checked_at)
ORDER BY (group_id, active, standby, checked_at)
"""


@dataclass(frozen=True)
class ReadinessRow:
    snapshot_id: str
    checked_at_ms: int
    group_id: str
    active: str
    standby: str
    partitions: int
    ready: bool
    expected_duplicates: int | None
    duplicates_at_most: int | None
    seconds_since_sync: float | None
    reasons: dict[str, int]
    first_problem: str


COLUMNS = columns_of(ReadinessRow, "checked_at_ms")


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("checked_at", clickhouse_retention().history_days))
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: Iterable[ReadinessRow]) -> int:
    return insert_dataclass_rows(client, TABLE, rows, COLUMNS)


def newest(client, group_ids: Iterable[str] | None = None, within_s: float = 3600.0) -> list[ReadinessRow]:
    """The verdicts in force of the last ``within_s`` seconds, sorted by group and direction; only
    ``group_ids`` when given.

    A group's verdicts in force are those of its newest cycle, one per direction: the rows at the
    greatest ``checked_at`` of the group (every row of a cycle or checkpoint has its time), the
    newest of each direction (``LIMIT 1 BY``; a replayed spool may have written one twice). A
    direction only older cycles wrote is no longer in force and is not returned: the ``undecided``
    verdicts of an outage once the cluster is back, the old direction of a group that moved.
    ``readiness/current.py`` states the rule; this query answers the same."""
    # the same window and groups outside and in the subquery: the outer scan reads those days' parts only
    where, parameters = "checked_at > now64(3) - toIntervalMillisecond({within_ms:Int64})", {
        "within_ms": int(within_s * 1000)}
    if group_ids is not None:
        where, parameters["groups"] = where + " AND group_id IN {groups:Array(String)}", sorted(set(group_ids))
    rows = client.query(
        "SELECT snapshot_id, toUnixTimestamp64Milli(checked_at), group_id, active, standby, partitions, ready, "
        "expected_duplicates, duplicates_at_most, seconds_since_sync, reasons, first_problem "
        f"FROM {TABLE} WHERE {where} AND (group_id, checked_at) IN ("
        f"SELECT group_id, max(checked_at) FROM {TABLE} WHERE {where} GROUP BY group_id) "
        "ORDER BY group_id, active, standby, snapshot_id DESC, first_problem "
        "LIMIT 1 BY group_id, active, standby",
        parameters=parameters,
    ).result_rows
    return [
        ReadinessRow(sid, int(at_ms), group_id, active, standby, int(parts), bool(ready),
                     None if dup is None else int(dup), None if at_most is None else int(at_most),
                     None if since is None else float(since), dict(reasons), problem)
        for sid, at_ms, group_id, active, standby, parts, ready, dup, at_most, since, reasons, problem in rows
    ]
