"""Reads of earlier cycles that the direction rules need (:class:`~offset_pipeline.translation.direction.DirectionHistory`).

All queries are parameterized (clickhouse-connect binding); a table that does not exist yet (a
first cycle, or a cycle before any commit) reads as empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from offset_pipeline.storage.commits import TABLE as COMMITS_TABLE
from offset_pipeline.storage.recent import recent
from offset_pipeline.storage.snapshots import TABLE as SNAPSHOTS_TABLE
from offset_pipeline.storage.snapshots import snapshot_time_ms
from offset_pipeline.storage.translations import TRANSLATIONS_TABLE
from offset_pipeline.translation.direction import DirectionHistory


def _exists(client, table: str) -> bool:
    return bool(client.command("EXISTS TABLE {t:Identifier}", parameters={"t": table}))


@dataclass(frozen=True)
class SnapshotRef:
    snapshot_id: str
    time_ms: int  # the snapshot's ``snapshot_time`` (all its rows share it)


def previous_snapshot(client, snapshot_id: str) -> SnapshotRef | None:
    """The newest snapshot taken before ``snapshot_id``'s, or None. Looked for in the
    :data:`~offset_pipeline.storage.recent.RECENT_HOURS` before it first (exact: storage/recent.py)."""
    taken_ms = snapshot_time_ms(client, snapshot_id)
    if taken_ms is None:
        return None
    for window in (f"AND {recent('snapshot_time', 'taken_ms')}", ""):
        rows = client.query(
            f"SELECT snapshot_id, toUnixTimestamp64Milli(max(snapshot_time)) FROM {SNAPSHOTS_TABLE} "
            f"WHERE snapshot_time < fromUnixTimestamp64Milli({{taken_ms:Int64}}, 'UTC') {window} "
            f"GROUP BY snapshot_id ORDER BY max(snapshot_time) DESC LIMIT 1",
            parameters={"taken_ms": taken_ms},
        ).result_rows
        if rows:
            return SnapshotRef(rows[0][0], int(rows[0][1]))
    return None


def previous_snapshot_id(client, snapshot_id: str) -> str | None:
    """The id of :func:`previous_snapshot`, or None."""
    ref = previous_snapshot(client, snapshot_id)
    return ref.snapshot_id if ref else None


def _by_cluster_group(rows) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """Rows of (cluster, group, topic, partition, offset) -> (cluster, group) -> {(topic, partition): offset}."""
    out: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
    for cluster, group_id, topic, partition, offset in rows:
        out.setdefault((cluster, group_id), {})[(topic, int(partition))] = int(offset)
    return out


def _ref(client, snapshot: SnapshotRef | str) -> SnapshotRef | None:
    if isinstance(snapshot, SnapshotRef):
        return snapshot
    taken_ms = snapshot_time_ms(client, snapshot)
    return None if taken_ms is None else SnapshotRef(snapshot, taken_ms)


def committed_offsets(client, snapshot: SnapshotRef | str) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """(cluster, group) -> {(topic, partition): committed offset} of one snapshot (its parts found
    by its time)."""
    ref = _ref(client, snapshot)
    if ref is None:
        return {}
    return _by_cluster_group(client.query(
        f"SELECT cluster, group_id, topic, partition, committed_offset FROM {SNAPSHOTS_TABLE} "
        f"WHERE snapshot_id = {{sid:String}} AND committed_offset IS NOT NULL "
        f"AND snapshot_time = fromUnixTimestamp64Milli({{taken_ms:Int64}}, 'UTC')",
        parameters={"sid": ref.snapshot_id, "taken_ms": ref.time_ms},
    ).result_rows)


def sync_writes(client, snapshot: SnapshotRef | str) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """(standby cluster, group) -> offsets the commit step of run ``snapshot`` applied (a run
    commits after its snapshot was taken: only parts from then on are read)."""
    ref = _ref(client, snapshot)
    if ref is None or not _exists(client, COMMITS_TABLE):
        return {}
    return _by_cluster_group(client.query(
        f"SELECT standby, group_id, topic, partition, new_offset FROM {COMMITS_TABLE} "
        f"WHERE snapshot_id = {{sid:String}} AND applied AND new_offset IS NOT NULL "
        f"AND cycle_time >= fromUnixTimestamp64Milli({{taken_ms:Int64}}, 'UTC')",
        parameters={"sid": ref.snapshot_id, "taken_ms": ref.time_ms},
    ).result_rows)


def previous_directions(client, before_snapshot_id: str, group_ids: Iterable[str] | None = None,
                        at_ms: int | None = None) -> dict[str, str]:
    """group -> the active cluster of its newest decided translation in an earlier cycle.

    With ``group_ids`` (the groups the caller needs) and ``at_ms`` (the cycle's time), the recent
    translations are read first and only the groups not decided in them are looked up in the
    whole history (storage/recent.py); without them, the whole table is read."""
    if not _exists(client, TRANSLATIONS_TABLE):
        return {}

    def read(where: str, **parameters) -> dict[str, str]:
        return dict(client.query(
            f"SELECT group_id, argMax(active, cycle_time) FROM {TRANSLATIONS_TABLE} "
            f"WHERE active != '' AND snapshot_id != {{sid:String}} {where} GROUP BY group_id",
            parameters={"sid": before_snapshot_id, **parameters},
        ).result_rows)

    if group_ids is None or at_ms is None:
        return read("")
    wanted = set(group_ids)
    found = {g: a for g, a in read(f"AND {recent('cycle_time')}", at_ms=at_ms).items() if g in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        found.update(read("AND group_id IN {groups:Array(String)}", groups=missing))
    return found


_UNSET = object()


def direction_history(client, snapshot_id: str, previous=_UNSET, group_ids: Iterable[str] | None = None,
                      at_ms: int | None = None) -> DirectionHistory:
    """Everything :func:`~offset_pipeline.sync.work.build_work` needs from earlier cycles.
    ``previous``: :func:`previous_snapshot` when the caller has it already. ``group_ids`` and
    ``at_ms``: see :func:`previous_directions`."""
    if previous is _UNSET:
        previous = previous_snapshot(client, snapshot_id)
    directions = previous_directions(client, snapshot_id, group_ids, at_ms)
    if previous is None:
        return DirectionHistory(previous_active=directions)
    return DirectionHistory(
        committed_before=committed_offsets(client, previous),
        written_by_sync=sync_writes(client, previous),
        previous_active=directions,
    )
