"""Turn what was read from both clusters into snapshot rows (pure: no Kafka, no ClickHouse)."""

from __future__ import annotations

from collections.abc import Iterable

from offset_pipeline.kafka_io.group_offsets import GroupState, PartitionRange
from offset_pipeline.storage.snapshots import SnapshotRow

ABSENT_GROUP_STATE = "ABSENT"  # the group has never existed on that cluster
UNAVAILABLE_GROUP_STATE = "UNAVAILABLE"  # the cluster did not answer: nothing is known there


def involved_partitions(groups: Iterable[GroupState]) -> set[tuple[str, int]]:
    return {tp for group in groups for tp in group.committed}


def build_snapshot_rows(
    snapshot_id: str,
    snapshot_time_ms: int,
    groups: dict[str, list[GroupState]],
    ranges: dict[str, list[PartitionRange]],
    timestamp_types: dict[str, dict[str, str]] | None = None,
    unavailable: dict[str, str] | None = None,
    range_errors: dict[str, dict[tuple[str, int], str]] | None = None,
) -> list[SnapshotRow]:
    """One row per (cluster, group, partition) for every partition the group committed on either
    cluster: the sync needs both sides' facts even where a side has no commit (or no topic).
    ``timestamp_types``: cluster -> topic -> ``message.timestamp.type`` (the timestamp search needs
    CreateTime on the standby).

    What could not be read is said, never guessed (every such row has a ``read_error``):
    ``unavailable``: cluster -> why it did not answer; its rows get state ``UNAVAILABLE``, no
    offsets and no log range (it must also be a key of ``groups``, with no states). A group read
    with a ``read_error`` keeps it on each of its rows there. ``range_errors``: cluster ->
    (topic, partition) -> why that partition's log range could not be read."""
    timestamp_types = timestamp_types or {}
    unavailable = unavailable or {}
    range_errors = range_errors or {}
    by_group: dict[str, dict[str, GroupState]] = {}
    for cluster, states in groups.items():
        for state in states:
            by_group.setdefault(state.group_id, {})[cluster] = state
    range_of = {(r.cluster, r.topic, r.partition): r for cluster_ranges in ranges.values() for r in cluster_ranges}
    rows = []
    for group_id in sorted(by_group):
        states = by_group[group_id]
        partitions = sorted(involved_partitions(states.values()))
        for cluster in sorted(groups):
            state = states.get(cluster)
            for topic, partition in partitions:
                log_range = range_of.get((cluster, topic, partition))
                read_error = (
                    unavailable.get(cluster)
                    or (state.read_error if state else "")
                    or range_errors.get(cluster, {}).get((topic, partition), "")
                )
                if cluster in unavailable:
                    group_state = UNAVAILABLE_GROUP_STATE
                else:
                    group_state = state.state if state else ABSENT_GROUP_STATE
                rows.append(
                    SnapshotRow(
                        snapshot_id=snapshot_id,
                        snapshot_time_ms=snapshot_time_ms,
                        cluster=cluster,
                        group_id=group_id,
                        group_state=group_state,
                        member_count=state.member_count if state else 0,
                        topic=topic,
                        partition=partition,
                        committed_offset=state.committed.get((topic, partition)) if state else None,
                        topic_present=log_range is not None,
                        log_start=log_range.log_start if log_range else None,
                        log_end=log_range.log_end if log_range else None,
                        last_stable=log_range.last_stable if log_range else None,
                        timestamp_type=timestamp_types.get(cluster, {}).get(topic, "") if log_range else "",
                        read_error=read_error,
                    )
                )
    return rows
