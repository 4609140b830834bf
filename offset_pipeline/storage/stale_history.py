"""What the stale-partition sensor reads from ClickHouse: per group-partition, its newest decided
direction and offsets (``offset_translations``) and the log ends of its partition on both clusters
in every snapshot since ``since_ms`` (``offset_snapshots``). Plain rows out: the stale rule builds
its histories from them (``fast_forward/stale_candidates.partition_histories``). Parameterized
queries only."""

from __future__ import annotations

from datetime import datetime, timezone

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


def read_stale_history(client, since_ms: int) -> tuple[list[tuple], list[tuple]]:
    """``(directions, log_ends)`` since ``since_ms``: per group-partition its newest
    ``(group_id, topic, partition, active, standby, committed, standby_committed)``, and every
    snapshot's ``(cluster, topic, partition, snapshot_ms, log_end)``."""
    since = datetime.fromtimestamp(since_ms / 1000, tz=timezone.utc)
    log_ends = client.query(_LOG_ENDS, parameters={"since": since}).result_rows
    directions = client.query(_NEWEST_DIRECTIONS, parameters={"since": since}).result_rows
    return directions, log_ends
