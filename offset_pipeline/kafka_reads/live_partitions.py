"""The fast-forward job's live re-read (DESIGN.md §4.3): what the stale-partition sensor saw may be
old, so every fact the caught-up rule needs is read again from Kafka just before committing.

Per partition of one group: both clusters' log ranges (admin ``list_offsets``), the group's
committed offset on the active cluster, both mirrors' positions (``resources/mirrors.py``), and --
only where the group or a mirror stops at most ``marker_slack`` offsets short of a log end -- whether
that gap holds a real record (``partition_records.gap_holds_no_record``). Plain data out.

Read order: committed offset first, then the log ranges, then the mirror positions, then the gaps.
The rule requires the log ends to equal what the sensor saw over its quiet window, so nothing was
written while these reads were taken and their order cannot matter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from offset_pipeline.fast_forward_check import LivePartition
from offset_pipeline.kafka_reads.group_offsets import read_partition_ranges
from offset_pipeline.kafka_reads.partition_records import gap_holds_no_record
from offset_pipeline.kafka_reads.standby_groups import read_live_group_state

TP = tuple[str, int]


@dataclass(frozen=True)
class LiveGroup:
    group_id: str
    active: str
    standby: str
    active_members: int
    partitions: dict[TP, LivePartition]


def read_live_partitions(
    clusters: Mapping[str, object],
    mirrors,
    group_id: str,
    active: str,
    standby: str,
    partitions: Iterable[TP],
    *,
    marker_slack: int = 1,
    timeout_s: float = 10.0,
) -> LiveGroup:
    """``clusters``: name -> KafkaClusterResource; ``mirrors``: a MirrorsResource. Raises on a
    cluster that does not answer (the caller records it as the group's failure)."""
    wanted = sorted(set(partitions))
    group = read_live_group_state(clusters[active], group_id, wanted, timeout_s=timeout_s)
    ranges = {}
    for cluster in (active, standby):
        admin = clusters[cluster].admin()
        ranges[cluster] = {(r.topic, r.partition): r for r in read_partition_ranges(admin, cluster, wanted, timeout_s)}
    to_active = mirrors.positions(clusters, standby, active, wanted)  # read on the standby
    to_standby = mirrors.positions(clusters, active, standby, wanted)  # read on the active

    def gap(cluster: str, tp: TP, start: int | None, end: int) -> bool:
        if start is None or start >= end or end - start > marker_slack:
            return False  # nothing to prove (at the end), or too far behind to be markers only
        return gap_holds_no_record(clusters[cluster].client_config(), cluster, tp[0], tp[1], start, end,
                                   timeout_s=timeout_s)

    out = {}
    for tp in wanted:
        a, b = ranges[active][tp], ranges[standby][tp]
        c = group.committed.get(tp)
        out[tp] = LivePartition(
            tp[0], tp[1], c, a.log_start, a.log_end, b.log_start, b.log_end, to_active.get(tp), to_standby.get(tp),
            no_record_from_committed=gap(active, tp, c, a.log_end),
            no_record_from_standby_mirror_position=gap(standby, tp, to_active.get(tp), b.log_end),
            no_record_from_active_mirror_position=gap(active, tp, to_standby.get(tp), a.log_end),
        )
    return LiveGroup(group_id, active, standby, group.member_count, out)
