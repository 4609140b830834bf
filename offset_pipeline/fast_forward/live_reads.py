"""The fast-forward job's live re-read (docs/operating/fast-forward.md): what the stale-partition sensor saw may be
old, so every fact the caught-up rule needs is read again from Kafka just before committing.

Per partition of one group: both clusters' log ranges (admin ``list_offsets``), the group's
committed offset on the active cluster, both mirrors' positions (``resources/mirrors.py``), and --
only where the group or a mirror stops at most ``marker_slack`` offsets short of a log end -- whether
that gap holds a real record (``partition_records.gap_holds_no_record``). Plain data out.

Read order: both clusters' log ranges first, then the mirror positions, the group's committed
offset and the gaps, then the log ranges again. Logs only grow: equal log ends before and after
mean nothing was written while the reads were taken, so they all describe one state of both logs
(so the order of the reads within the bracket does not matter). Without the bracket, a mirror copying a
standby record to the active cluster between the range read and the position read would make a
fast-forward lose it. The re-check rejects moved ends (``fast_forward/recheck.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from offset_pipeline.fast_forward.recheck import LivePartition
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.kafka_io.partition_records import gap_holds_no_record
from offset_pipeline.kafka_io.standby_groups import read_live_group_state

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
    admins = {cluster: clusters[cluster].admin() for cluster in (active, standby)}

    def read_ranges() -> dict:
        return {cluster: {(r.topic, r.partition): r for r in read_partition_ranges(admin, cluster, wanted, timeout_s)}
                for cluster, admin in admins.items()}

    ranges = read_ranges()
    to_active = mirrors.positions(clusters, standby, active, wanted)  # read on the standby
    to_standby = mirrors.positions(clusters, active, standby, wanted)  # read on the active
    group = read_live_group_state(clusters[active], group_id, wanted, timeout_s=timeout_s)

    def gap(cluster: str, tp: TP, start: int | None, end: int) -> bool:
        if start is None or start >= end or end - start > marker_slack:
            return False  # nothing to prove (at the end), or too far behind to be markers only
        return gap_holds_no_record(clusters[cluster].client_config(), cluster, tp[0], tp[1], start, end,
                                   timeout_s=timeout_s)

    gaps = {}
    for tp in wanted:
        a, b, c = ranges[active][tp], ranges[standby][tp], group.committed.get(tp)
        gaps[tp] = (gap(active, tp, c, a.log_end), gap(standby, tp, to_active.get(tp), b.log_end),
                    gap(active, tp, to_standby.get(tp), a.log_end))
    after = read_ranges()
    out = {}
    for tp in wanted:
        a, b = ranges[active][tp], ranges[standby][tp]
        out[tp] = LivePartition(
            tp[0], tp[1], group.committed.get(tp), a.log_start, a.log_end, b.log_start, b.log_end, to_active.get(tp),
            to_standby.get(tp), *gaps[tp],
            active_log_end_after=after[active][tp].log_end, standby_log_end_after=after[standby][tp].log_end,
        )
    return LiveGroup(group_id, active, standby, group.member_count, out)
