"""storage/stale_history.py on the embedded ClickHouse: the sensor's view of the snapshot history."""

from __future__ import annotations

import time

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.fast_forward.stale_candidates import LogEnds
from offset_pipeline.storage import snapshots, translations
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.fast_forward.stale_candidates import partition_histories
from offset_pipeline.storage.stale_history import read_stale_history

G = "g 'q' ü"
T0 = int(time.time()) * 1000  # recent: rows older than the tables' TTL (storage/retention.py) expire


def translation(sid, ms, group, active, standby, c, g):
    return {"snapshot_id": sid, "cycle_time": ms, "group_id": group, "topic": "low", "partition": 0, "active": active,
            "standby": standby, "committed": c, "standby_committed": g, "strategy": "none", "standby_offset": None,
            "status": "no_anchor", "reason": "", "expected_duplicates": None, "timestamp_inversion": False,
            "anchor_active_offset": None, "anchor_standby_offset": None, "safe_bound": None}


def test_histories_pair_both_log_ends_per_snapshot_in_the_newest_direction(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    snapshots.ensure_table(client)
    translations.ensure_tables(client)
    rows = []
    for i, (end1, end2) in enumerate([(10, 7), (12, 9), (12, 9)]):
        ms = T0 + i * 30_000
        for cluster, end in (("idc1", end1), ("idc2", end2)):
            for group in (G, "other"):  # two groups: one log end per snapshot all the same
                rows.append(SnapshotRow(f"s{i}", ms, cluster, group, "Stable", 1, "low", 0, 12, True, 0, end, end))
    snapshots.insert_rows(client, rows)
    translations.insert_translations(client, [
        translation("s0", T0, G, "idc2", "idc1", 5, 3),
        translation("s2", T0 + 60_000, G, "idc1", "idc2", 12, 8),  # the newest direction wins
        translation("s2", T0 + 60_000, "other", "", "", 12, None),  # undecided: left out
    ])
    (history,) = partition_histories(*read_stale_history(client, 0))
    assert (history.group_id, history.active, history.standby, history.committed, history.standby_committed) == (
        G, "idc1", "idc2", 12, 8)
    assert history.points == (LogEnds(T0, 10, 7), LogEnds(T0 + 30_000, 12, 9), LogEnds(T0 + 60_000, 12, 9))
    assert partition_histories(*read_stale_history(client, T0 + 50_000))[0].points == (LogEnds(T0 + 60_000, 12, 9),)
