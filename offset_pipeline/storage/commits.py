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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from offset_pipeline.storage.recent import now_ms, recent
from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep
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
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: Iterable[CommitRow]) -> int:
    return insert_dataclass_rows(client, TABLE, rows, COLUMNS)


def newest_synced_cycle_times(client, group_ids: Iterable[str]) -> dict[str, float]:
    """group -> epoch seconds of its newest cycle in which every one of its partitions ended
    synced (:attr:`CommitRow.synced`); groups that never had such a cycle are absent. Recent
    cycles first; the groups without one there are looked up in their whole history by the primary
    index (storage/recent.py; a cycle's rows share one ``cycle_time``, so a cycle is wholly inside
    the window or wholly outside)."""
    groups = sorted(set(group_ids))
    if not groups:
        return {}

    def read(groups: list[str], window: str) -> dict[str, float]:
        rows = client.query(
            "SELECT group_id, toFloat64(max(cycle_at)) FROM ("
            "  SELECT group_id, snapshot_id, max(cycle_time) AS cycle_at, "
            "    min(decision = {unchanged:String} OR (decision IN {writes:Array(String)} AND applied)) AS all_synced "
            f"  FROM {TABLE} WHERE group_id IN {{groups:Array(String)}} {window} GROUP BY group_id, snapshot_id"
            ") WHERE all_synced GROUP BY group_id",
            parameters={"groups": groups, "unchanged": SYNCED_UNCHANGED, "writes": list(SYNCED_WRITES),
                        "at_ms": now_ms()},
        ).result_rows
        return {group_id: float(seconds) for group_id, seconds in rows}

    found = read(groups, f"AND {recent('cycle_time')}")
    missing = [g for g in groups if g not in found]
    return found | (read(missing, "") if missing else {})


def last_recorded_offsets(client, group_ids: Iterable[str] | Mapping[str, Iterable]) -> dict[tuple[str, str, int, str], int]:
    """(group, topic, partition, standby) -> the standby's committed offset as the group-partition's
    newest recorded cycle left it (``committed_after``), where that cycle had this standby (after a
    switchover the new standby was the group's own active cluster: nothing to compare). A live
    offset that differs was moved by something this table does not know: a sync run killed after
    its commit call and before its rows were stored, or a hand on the standby group.

    ``group_ids`` may map each group to its rows (with ``topic`` and ``partition``): then recent
    cycles are read first and only the partitions without a row there are looked up in the whole
    history, by the primary index (storage/recent.py). Otherwise the groups' whole history is read."""
    groups = sorted(set(group_ids))
    if not groups:
        return {}

    def read(where: str, **parameters) -> dict[tuple[str, str, int], tuple[str, int]]:
        rows = client.query(
            "SELECT group_id, topic, partition, last.1, last.2 FROM ("
            "  SELECT group_id, topic, partition, argMax((standby, committed_after), cycle_time) AS last "
            f"  FROM {TABLE} WHERE committed_after IS NOT NULL AND standby != '' AND {where} "
            "  GROUP BY group_id, topic, partition)",
            parameters=parameters,
        ).result_rows
        return {(g, t, int(p)): (s, int(offset)) for g, t, p, s, offset in rows}

    if isinstance(group_ids, Mapping):
        wanted = {(g, r.topic, int(r.partition)) for g, rows in group_ids.items() for r in rows}
        newest = {k: v for k, v in read(f"group_id IN {{groups:Array(String)}} AND {recent('cycle_time')}",
                                        groups=groups, at_ms=now_ms()).items() if k in wanted}
        missing = sorted(wanted - set(newest))
        if missing:
            newest |= read("(group_id, topic, partition) IN {keys:Array(Tuple(String, String, UInt32))}", keys=missing)
    else:
        newest = read("group_id IN {groups:Array(String)}", groups=groups)
    return {(g, t, p, s): offset for (g, t, p), (s, offset) in newest.items()}
