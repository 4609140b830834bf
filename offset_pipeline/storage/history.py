"""Reads of earlier cycles that the direction rules need (:class:`~offset_pipeline.sync_work.DirectionHistory`).

All queries are parameterized (clickhouse-connect binding); a table that does not exist yet (a
first cycle, or a cycle before any commit) reads as empty.
"""

from __future__ import annotations

from offset_pipeline.storage.commits import TABLE as COMMITS_TABLE
from offset_pipeline.storage.snapshots import TABLE as SNAPSHOTS_TABLE
from offset_pipeline.storage.translations import TRANSLATIONS_TABLE
from offset_pipeline.sync_work import DirectionHistory


def _exists(client, table: str) -> bool:
    return bool(client.command("EXISTS TABLE {t:Identifier}", parameters={"t": table}))


def previous_snapshot_id(client, snapshot_id: str) -> str | None:
    """The newest snapshot taken before ``snapshot_id``'s, or None."""
    rows = client.query(
        f"SELECT snapshot_id FROM {SNAPSHOTS_TABLE} "
        f"WHERE snapshot_time < (SELECT min(snapshot_time) FROM {SNAPSHOTS_TABLE} WHERE snapshot_id = {{sid:String}}) "
        f"GROUP BY snapshot_id ORDER BY max(snapshot_time) DESC LIMIT 1",
        parameters={"sid": snapshot_id},
    ).result_rows
    return rows[0][0] if rows else None


def _by_cluster_group(rows) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """Rows of (cluster, group, topic, partition, offset) -> (cluster, group) -> {(topic, partition): offset}."""
    out: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
    for cluster, group_id, topic, partition, offset in rows:
        out.setdefault((cluster, group_id), {})[(topic, int(partition))] = int(offset)
    return out


def committed_offsets(client, snapshot_id: str) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """(cluster, group) -> {(topic, partition): committed offset} of one snapshot."""
    return _by_cluster_group(client.query(
        f"SELECT cluster, group_id, topic, partition, committed_offset FROM {SNAPSHOTS_TABLE} "
        f"WHERE snapshot_id = {{sid:String}} AND committed_offset IS NOT NULL",
        parameters={"sid": snapshot_id},
    ).result_rows)


def sync_writes(client, snapshot_id: str) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """(standby cluster, group) -> offsets the commit step of run ``snapshot_id`` applied."""
    if not _exists(client, COMMITS_TABLE):
        return {}
    return _by_cluster_group(client.query(
        f"SELECT standby, group_id, topic, partition, new_offset FROM {COMMITS_TABLE} "
        f"WHERE snapshot_id = {{sid:String}} AND applied AND new_offset IS NOT NULL",
        parameters={"sid": snapshot_id},
    ).result_rows)


def previous_directions(client, before_snapshot_id: str) -> dict[str, str]:
    """group -> the active cluster of its newest decided translation in an earlier cycle."""
    if not _exists(client, TRANSLATIONS_TABLE):
        return {}
    rows = client.query(
        f"SELECT group_id, argMax(active, cycle_time) FROM {TRANSLATIONS_TABLE} "
        f"WHERE active != '' AND snapshot_id != {{sid:String}} GROUP BY group_id",
        parameters={"sid": before_snapshot_id},
    ).result_rows
    return {group_id: active for group_id, active in rows}


_UNSET = object()


def direction_history(client, snapshot_id: str, previous=_UNSET) -> DirectionHistory:
    """Everything :func:`~offset_pipeline.sync_work.build_work` needs from earlier cycles.
    ``previous``: :func:`previous_snapshot_id` when the caller has it already."""
    if previous is _UNSET:
        previous = previous_snapshot_id(client, snapshot_id)
    if previous is None:
        return DirectionHistory(previous_active=previous_directions(client, snapshot_id))
    return DirectionHistory(
        committed_before=committed_offsets(client, previous),
        written_by_sync=sync_writes(client, previous),
        previous_active=previous_directions(client, snapshot_id),
    )
