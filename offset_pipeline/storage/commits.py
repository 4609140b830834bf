"""The ``offset_commits`` table: every commit decision of every sync cycle, append-only.

One row per group-partition and cycle, keyed by the cycle's ``snapshot_id`` (the run id), for every
decision: written ones (``commit``, ``rewind_after_reset``), and also ``dry_run``, refused,
``split_brain``, skipped, ``unchanged`` and ``failed`` ones, with the reason. ``applied`` says the
standby's committed offset is ``new_offset`` after the write (re-read); ``committed_after`` is the
standby's committed offset as this step left it (re-read after a write, else as re-read before
planning); ``error`` says why a write or the group's re-read failed.

Inserts go through clickhouse-connect's column binding and queries are parameterized, never SQL
text built from data: group ids may hold any character. Rows are kept
``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (``storage/retention.py``); new tables are partitioned by day.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.row_inserts import columns_of, insert_dataclass_rows

TABLE = "offset_commits"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    snapshot_id        String,
    cycle_time         DateTime64(3, 'UTC'),
    group_id           String,
    topic              String,
    partition          UInt32,
    active             LowCardinality(String),
    standby            LowCardinality(String),
    previous_offset    Nullable(Int64),
    new_offset         Nullable(Int64),
    safe_bound         Nullable(Int64),
    decision           LowCardinality(String),
    reason             String,
    translation_status LowCardinality(String),
    strategy           LowCardinality(String),
    dry_run            Bool,
    applied            Bool,
    error              Nullable(String),
    committed_after    Nullable(Int64)
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(cycle_time)
ORDER BY (group_id, topic, partition, cycle_time)
"""

#: Decisions after which a partition counts as synced (``commit``/``rewind_after_reset`` only when
#: applied).
SYNCED_WRITES = ("commit", "rewind_after_reset")
SYNCED_UNCHANGED = "unchanged"


@dataclass(frozen=True)
class CommitRow:
    snapshot_id: str
    cycle_time_ms: int
    group_id: str
    topic: str
    partition: int
    active: str  # "" when the group's direction was not decided
    standby: str
    previous_offset: int | None
    new_offset: int | None
    safe_bound: int | None
    decision: str
    reason: str
    translation_status: str
    strategy: str  # "none" when the translation used none
    dry_run: bool
    applied: bool
    error: str | None
    committed_after: int | None

    @property
    def synced(self) -> bool:
        """This partition ended the cycle synced."""
        return self.decision == SYNCED_UNCHANGED or (self.decision in SYNCED_WRITES and self.applied)


COLUMNS = columns_of(CommitRow, "cycle_time_ms")


def ensure_table(client) -> None:
    client.command(DDL)
    ensure_ttl(client, TABLE, delete_ttl("cycle_time", clickhouse_retention().history_days))


def insert_rows(client, rows: Iterable[CommitRow]) -> int:
    return insert_dataclass_rows(client, TABLE, rows, COLUMNS, COLUMNS.index("cycle_time"))


def newest_synced_cycle_times(client, group_ids: Iterable[str]) -> dict[str, float]:
    """group -> epoch seconds of its newest cycle in which every one of its partitions ended
    synced (:attr:`CommitRow.synced`); groups that never had such a cycle are absent."""
    groups = sorted(set(group_ids))
    if not groups:
        return {}
    rows = client.query(
        "SELECT group_id, toFloat64(max(cycle_time)) FROM ("
        "  SELECT group_id, snapshot_id, max(cycle_time) AS cycle_time, "
        "    min(decision = {unchanged:String} OR (decision IN {writes:Array(String)} AND applied)) AS all_synced "
        f"  FROM {TABLE} WHERE group_id IN {{groups:Array(String)}} GROUP BY group_id, snapshot_id"
        ") WHERE all_synced GROUP BY group_id",
        parameters={"groups": groups, "unchanged": SYNCED_UNCHANGED, "writes": list(SYNCED_WRITES)},
    ).result_rows
    return {group_id: float(seconds) for group_id, seconds in rows}


def last_recorded_offsets(client, group_ids: Iterable[str]) -> dict[tuple[str, str, int, str], int]:
    """(group, topic, partition, standby) -> the standby's committed offset as the group-partition's
    newest recorded cycle left it (``committed_after``), where that cycle had this standby (after a
    switchover the new standby was the group's own active cluster: nothing to compare). A live
    offset that differs was moved by something this table does not know: a sync run killed after
    its commit call and before its rows were stored, or a hand on the standby group."""
    groups = sorted(set(group_ids))
    if not groups:
        return {}
    rows = client.query(
        "SELECT group_id, topic, partition, last.1, last.2 FROM ("
        "  SELECT group_id, topic, partition, argMax((standby, committed_after), cycle_time) AS last "
        f"  FROM {TABLE} WHERE group_id IN {{groups:Array(String)}} AND committed_after IS NOT NULL "
        "  AND standby != '' GROUP BY group_id, topic, partition)",
        parameters={"groups": groups},
    ).result_rows
    return {(g, t, int(p), s): int(offset) for g, t, p, s, offset in rows}
