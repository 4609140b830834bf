"""What the stale-partition sensor reads from ClickHouse: per group-partition, its newest decided
direction and offsets (``offset_translations``) and the log ends of its partition on both clusters
in every snapshot since ``since_ms`` (``offset_snapshots``). Plain data out
(``stale_candidates.PartitionHistory``, mirror positions left for the caller to fill in).
Parameterized queries only."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone

from offset_pipeline.fast_forward.stale_candidates import LogEnds, PartitionHistory
from offset_pipeline.storage import snapshots, translations

_NEWEST_DIRECTIONS = (
    "SELECT group_id, topic, partition, argMax(active, cycle_time), argMax(standby, cycle_time), "
    "argMax(committed, cycle_time), argMax(standby_committed, cycle_time) "
    f"FROM {translations.TRANSLATIONS_TABLE} WHERE cycle_time >= {{since:DateTime64(3, 'UTC')}} "
    "GROUP BY group_id, topic, partition"
)
_LOG_ENDS = (
    "SELECT cluster, topic, partition, toUnixTimestamp64Milli(snapshot_time), any(log_end) "
    f"FROM {snapshots.TABLE} WHERE snapshot_time >= {{since:DateTime64(3, 'UTC')}} AND topic_present "
    "AND log_end IS NOT NULL GROUP BY cluster, topic, partition, snapshot_time"
)


def partition_histories(client, since_ms: int) -> list[PartitionHistory]:
    since = datetime.fromtimestamp(since_ms / 1000, tz=timezone.utc)
    ends: dict[tuple[str, int], dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for cluster, topic, partition, ms, end in client.query(_LOG_ENDS, parameters={"since": since}).result_rows:
        ends[(topic, int(partition))][int(ms)][cluster] = int(end)
    out = []
    for group, topic, partition, active, standby, c, g in client.query(
        _NEWEST_DIRECTIONS, parameters={"since": since}
    ).result_rows:
        if not active or not standby:
            continue  # undecided (split brain, ...): never fast-forwarded
        by_time = ends.get((topic, int(partition)), {})
        points = tuple(
            LogEnds(ms, sides[active], sides[standby])
            for ms, sides in sorted(by_time.items())
            if active in sides and standby in sides
        )
        out.append(PartitionHistory(group, topic, int(partition), active, standby, c, g, points))
    return out
