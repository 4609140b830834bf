"""A cycle's own rows read back by snapshot id: what a step needs of the earlier steps of its run
when they did not carry their rows in this process (a step re-executed alone from the UI, or after
a restart), and the monitoring step's log ends of earlier snapshots.

The tables are sorted by group first, so a snapshot id alone reads every day kept; a run's rows are
never older than the run, so the reads of the monitoring step take ``run_since`` (the run's start,
less a margin) and skip the days before it. Parameterized queries only; columns the caller names
are project column names, never user data.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from offset_pipeline.storage import commits, snapshots, translations

_FACTS = (
    "SELECT t.group_id, t.topic, t.partition, t.active, t.standby, t.committed, t.standby_offset, t.status, "
    "t.strategy, c.decision, c.applied, c.committed_after, t.timestamp_inversion "
    f"FROM {translations.TRANSLATIONS_TABLE} AS t "
    f"LEFT JOIN (SELECT * FROM {commits.TABLE} WHERE snapshot_id = {{sid:String}} "
    "AND cycle_time >= {run_since:DateTime64(3, 'UTC')}) AS c "
    "ON t.group_id = c.group_id AND t.topic = c.topic AND t.partition = c.partition "
    "WHERE t.snapshot_id = {sid:String} AND t.cycle_time >= {run_since:DateTime64(3, 'UTC')}"
)
_LOG_ENDS = (
    f"SELECT DISTINCT cluster, topic, partition, log_end FROM {snapshots.TABLE} "
    "WHERE snapshot_id = {sid:String} AND snapshot_time >= {run_since:DateTime64(3, 'UTC')} AND topic_present"
)
_EARLIER_LOG_ENDS = (
    f"SELECT cluster, topic, partition, argMax(log_end, snapshot_time) FROM {snapshots.TABLE} "
    # never this cycle's own snapshot: a slow cycle's metrics step may start a window after it
    "WHERE topic_present AND snapshot_id != {sid:String} AND snapshot_time <= {until:DateTime64(3, 'UTC')} "
    "AND snapshot_time >= {since:DateTime64(3, 'UTC')} AND topic IN {topics:Array(String)} "
    "GROUP BY cluster, topic, partition"
)


def _columns(names: Sequence[str], allowed: set[str]) -> str:
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ValueError(f"not a column of the table: {unknown}")
    return ", ".join(names)


def snapshot_rows(client, snapshot_id: str, columns: Sequence[str]) -> list[tuple]:
    """This snapshot's rows of ``offset_snapshots``, as tuples of ``columns``."""
    query = (f"SELECT {_columns(columns, set(snapshots.COLUMNS))} FROM {snapshots.TABLE} "
             "WHERE snapshot_id = {sid:String}")
    return client.query(query, parameters={"sid": snapshot_id}).result_rows


def translation_rows(client, snapshot_id: str, columns: Sequence[str]) -> list[tuple]:
    """This snapshot's rows of ``offset_translations``, as tuples of ``columns``, by group-partition."""
    query = (f"SELECT {_columns(columns, set(translations.TRANSLATION_COLUMNS))} FROM "
             f"{translations.TRANSLATIONS_TABLE} WHERE snapshot_id = {{sid:String}} ORDER BY group_id, topic, partition")
    return client.query(query, parameters={"sid": snapshot_id}).result_rows


def cycle_log_ends(client, snapshot_id: str, run_since: datetime) -> dict[tuple[str, str, int], int]:
    """(cluster, topic, partition) -> log end, of this snapshot."""
    rows = client.query(_LOG_ENDS, parameters={"sid": snapshot_id, "run_since": run_since}).result_rows
    return {(cluster, topic, int(partition)): end for cluster, topic, partition, end in rows}


def cycle_facts(client, snapshot_id: str, run_since: datetime) -> list[tuple]:
    """Per group-partition of this snapshot: its translation joined with its commit (NULLs where the
    commit step wrote none): group_id, topic, partition, active, standby, committed, standby_offset,
    status, strategy, decision, applied, committed_after, timestamp_inversion."""
    return client.query(_FACTS, parameters={"sid": snapshot_id, "run_since": run_since},
                        settings={"join_use_nulls": 1}).result_rows


def earlier_log_ends(client, snapshot_id: str, since: datetime, until: datetime,
                     topics: Sequence[str]) -> dict[tuple[str, str, int], int]:
    """(cluster, topic, partition) -> its newest log end in ``[since, until]``, other snapshots than
    this one, for ``topics``."""
    rows = client.query(_EARLIER_LOG_ENDS, parameters={
        "sid": snapshot_id, "since": since, "until": until, "topics": sorted(topics),
    }).result_rows
    return {(cluster, topic, int(partition)): end for cluster, topic, partition, end in rows}
