"""storage/fast_forwards.py on the embedded ClickHouse: rows in, the sync cycle's kept points out."""

from __future__ import annotations

import time
import dataclasses

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage import fast_forwards as ff
from offset_pipeline.translation import CaughtUpPoint

G = "g 'quoted' \\ ü"
BASE = ff.FastForwardRow(
    run_id="r1", checked_at_ms=int(time.time()) * 1000 - 3_600_000,  # recent: within the TTL
    group_id=G, topic="low", partition=0, active="idc1",
    standby="idc2", outcome=ff.FAST_FORWARDED, rejection="", decision="commit", reason="caught up",
    committed=50, expected_active_end=50, expected_standby_end=45, active_log_end=50, standby_log_end=45,
    standby_mirror_position=45, active_mirror_position=50, stable_for_s=700.0, previous_offset=40, new_offset=45,
    committed_after=45, dry_run=False, applied=True,
)


def test_latest_points_are_the_newest_applied_fast_forwards(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    ff.ensure_table(client)
    later = BASE.checked_at_ms + 60_000
    rows = [
        BASE,
        # newer and applied: wins for partition 0
        dataclasses.replace(BASE, run_id="r2", checked_at_ms=later, committed=60, new_offset=52, committed_after=52,
                            outcome=ff.UNCHANGED, decision="unchanged"),
        # newest for partition 0, but left alone / a dry run / not landed: never a point
        dataclasses.replace(BASE, run_id="r3", checked_at_ms=later + 1, outcome=ff.LEFT_ALONE, rejection="group_has_lag",
                            new_offset=None, committed_after=52),
        dataclasses.replace(BASE, run_id="r4", checked_at_ms=later + 2, outcome=ff.DRY_RUN, dry_run=True, new_offset=70,
                            committed=70, committed_after=52),
        dataclasses.replace(BASE, run_id="r5", checked_at_ms=later + 3, outcome=ff.FAILED, committed=80, new_offset=80,
                            committed_after=52, error="timeout"),
        # the other direction of partition 1
        dataclasses.replace(BASE, partition=1, active="idc2", standby="idc1", committed=9, new_offset=7,
                            committed_after=7),
    ]
    assert ff.insert_rows(client, rows) == len(rows)
    assert ff.latest_points(client) == {
        (G, "low", 0, "idc1", "idc2"): CaughtUpPoint("idc1", "idc2", 60, 52),
        (G, "low", 1, "idc2", "idc1"): CaughtUpPoint("idc2", "idc1", 9, 7),
    }
    stored = client.query(f"SELECT group_id, checked_at FROM {ff.TABLE} WHERE run_id = 'r1'").result_rows
    assert stored[0][0] == G and int(stored[0][1].timestamp() * 1000) == BASE.checked_at_ms
