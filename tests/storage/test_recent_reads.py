"""The per-cycle reads that look at recent rows first (storage/recent.py) return exactly what a read
of the whole table returns: keys whose newest row is inside the window, keys whose rows are all
older, and keys with rows on both sides. Each case is checked against the whole-table form of the same reader (or, where the
reader has none, against the value written).
"""

from __future__ import annotations

import time

from offset_pipeline.sync.commit_step import TranslatedRow
from offset_pipeline.monitoring.metric_rules import MetricRow
from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.storage import commits, metrics, snapshots, translations
from offset_pipeline.storage.history import (
    committed_offsets,
    previous_directions,
    previous_snapshot,
    previous_snapshot_id,
    sync_writes,
)
from offset_pipeline.storage.recent import RECENT_HOURS
from offset_pipeline.storage.snapshots import SnapshotRow

NOW_MS = int(time.time()) * 1000
OLD_MS = NOW_MS - (RECENT_HOURS + 2) * 3600 * 1000  # outside the window, inside the TTL
CLUSTERS = ("idc1", "idc2")


def client_of(dsn):
    return ClickHouseResource(dsn=dsn).get_client()


def snapshot_row(sid, ms, cluster, group, committed, partition=0):
    return SnapshotRow(sid, ms, cluster, group, "Empty", 0, "t", partition, committed, True, 0, 20, 20)


def test_previous_snapshot_and_its_offsets_inside_and_outside_the_window(chdb_dsn):
    client = client_of(chdb_dsn)
    snapshots.ensure_table(client)
    snapshots.insert_rows(client, [
        snapshot_row("old", OLD_MS, "idc1", "g", 3),
        snapshot_row("new", NOW_MS, "idc1", "g", 5), snapshot_row("new", NOW_MS, "idc2", "g", 4),
    ])
    # the newest snapshot before "new" is hours older: found by the fallback, with its offsets
    assert previous_snapshot_id(client, "new") == "old"
    ref = previous_snapshot(client, "new")
    assert ref.time_ms == OLD_MS
    assert committed_offsets(client, ref) == committed_offsets(client, "old") == {("idc1", "g"): {("t", 0): 3}}
    assert previous_snapshot(client, "old") is None and previous_snapshot(client, "missing") is None
    snapshots.insert_rows(client, [snapshot_row("mid", NOW_MS - 60_000, "idc1", "g", 4)])
    assert previous_snapshot_id(client, "new") == "mid"


def test_previous_committed_offsets_fall_back_per_group_and_cluster(chdb_dsn):
    client = client_of(chdb_dsn)
    snapshots.ensure_table(client)
    snapshots.insert_rows(client, [
        # "g": recent on idc1, only old on idc2 (its standby copy was last seen hours ago)
        snapshot_row("a", OLD_MS, "idc2", "g", 1), snapshot_row("a", OLD_MS, "idc1", "g", 2),
        snapshot_row("b", NOW_MS - 30_000, "idc1", "g", 7),
        # "quiet": only old snapshots
        snapshot_row("a", OLD_MS, "idc1", "quiet", 9),
        snapshot_row("c", NOW_MS, "idc1", "g", 8), snapshot_row("c", NOW_MS, "idc1", "quiet", 9),
    ])
    assert snapshots.previous_committed_offsets(client, "c", ["g", "quiet"], CLUSTERS) == {
        ("idc1", "g"): {("t", 0): 7},
        ("idc2", "g"): {("t", 0): 1},
        ("idc1", "quiet"): {("t", 0): 9},
    }


def translation(group, active, ms, sid=None):
    return {"snapshot_id": sid or f"s{ms}", "cycle_time": ms, "group_id": group, "topic": "t", "partition": 0,
            "active": active, "standby": "", "committed": 1, "standby_committed": None, "strategy": "none",
            "standby_offset": None, "status": "no_anchor", "reason": "", "expected_duplicates": None,
            "timestamp_inversion": False, "anchor_active_offset": None, "anchor_standby_offset": None,
            "safe_bound": None}


def test_previous_directions_of_groups_equal_the_whole_table_read(chdb_dsn):
    client = client_of(chdb_dsn)
    translations.ensure_tables(client)
    translations.insert_translations(client, [
        translation("recent", "idc2", OLD_MS), translation("recent", "idc1", NOW_MS - 60_000),
        translation("old", "idc2", OLD_MS),
        translation("undecided-now", "idc1", OLD_MS), translation("undecided-now", "", NOW_MS - 30_000),
        translation("this-cycle", "idc1", OLD_MS), translation("this-cycle", "idc2", NOW_MS, sid="current"),
    ])
    groups = ["recent", "old", "undecided-now", "this-cycle", "never"]
    whole = previous_directions(client, "current")
    assert previous_directions(client, "current", groups, NOW_MS) == {g: whole[g] for g in groups if g in whole}
    assert whole["recent"] == "idc1" and whole["old"] == "idc2" and whole["this-cycle"] == "idc1"


def commit_row(group, partition, ms, *, sid=None, decision="commit", applied=True, committed_after=5,
               standby="idc2", new_offset=5):
    return commits.CommitRow(
        snapshot_id=sid or f"s{ms}", cycle_time_ms=ms, group_id=group, topic="t", partition=partition,
        active="idc1", standby=standby, previous_offset=1, new_offset=new_offset, safe_bound=None,
        decision=decision, reason="", translation_status="translated", strategy="header_anchor", dry_run=False,
        applied=applied, error=None, committed_after=committed_after,
    )


def test_commit_history_reads_equal_the_whole_table_reads(chdb_dsn):
    client = client_of(chdb_dsn)
    commits.ensure_table(client)
    commits.insert_rows(client, [
        commit_row("g", 0, OLD_MS, committed_after=3), commit_row("g", 0, NOW_MS - 60_000, committed_after=6),
        commit_row("g", 1, OLD_MS, committed_after=4),  # a quiet partition: only old rows
        commit_row("quiet", 0, OLD_MS, committed_after=2),
        commit_row("failing", 0, OLD_MS),  # synced hours ago, failing since
        commit_row("failing", 0, NOW_MS - 60_000, decision="error", applied=False, committed_after=None),
    ])
    by_group = {
        "g": [TranslatedRow("g", "t", 0, "idc1", "idc2", *[None] * 6), TranslatedRow("g", "t", 1, "idc1", "idc2", *[None] * 6)],
        "quiet": [TranslatedRow("quiet", "t", 0, "idc1", "idc2", *[None] * 6)],
        "failing": [TranslatedRow("failing", "t", 0, "idc1", "idc2", *[None] * 6)],
    }
    recorded = commits.last_recorded_offsets(client, by_group)
    assert recorded == commits.last_recorded_offsets(client, list(by_group))
    assert recorded == {("g", "t", 0, "idc2"): 6, ("g", "t", 1, "idc2"): 4, ("quiet", "t", 0, "idc2"): 2,
                        ("failing", "t", 0, "idc2"): 5}
    newest = commits.newest_synced_cycle_times(client, list(by_group))
    assert newest == {"g": (NOW_MS - 60_000) / 1000, "quiet": OLD_MS / 1000, "failing": OLD_MS / 1000}


def test_sync_writes_are_read_from_the_runs_own_time_on(chdb_dsn):
    client = client_of(chdb_dsn)
    snapshots.ensure_table(client)
    commits.ensure_table(client)
    snapshots.insert_rows(client, [snapshot_row("run-1", OLD_MS, "idc1", "g", 3)])
    commits.insert_rows(client, [commit_row("g", 0, OLD_MS + 5_000, sid="run-1", new_offset=7),
                                 commit_row("g", 1, OLD_MS + 5_000, sid="run-1", applied=False, new_offset=8)])
    assert sync_writes(client, "run-1") == {("idc2", "g"): {("t", 0): 7}}  # applied writes only
    # a write stamped before the run's snapshot cannot be the run's: the time bound leaves it out
    commits.insert_rows(client, [commit_row("g", 2, OLD_MS - 5_000, sid="run-1", new_offset=9)])
    assert sync_writes(client, "run-1") == {("idc2", "g"): {("t", 0): 7}}


def metric_row(group, ms, d, last_synced_ms, *, partition=0, active="idc1", standby="idc2"):
    return MetricRow(
        cycle_time_ms=ms, group_id=group, topic="t", partition=partition, active=active, standby=standby, f=None,
        g=None, d=d, dd=None, synced=last_synced_ms == ms, last_synced_ms=last_synced_ms, sync_age_s=None,
        translated=True, exact=False, header_hit=False, status="header_anchor", strategy="header_anchor",
        sync_status="Mirroring",
    )


def test_previous_metric_state_of_the_wanted_keys_equals_the_whole_table_read(chdb_dsn):
    client = client_of(chdb_dsn)
    metrics.ensure_tables(client)
    recent = NOW_MS - 60_000
    metrics.insert_rows(client, [
        # newest d and sync in the window (this cycle's own row, at NOW_MS, is not "before")
        metric_row("g", OLD_MS, 3, OLD_MS), metric_row("g", recent, 5, recent), metric_row("g", NOW_MS, 99, NOW_MS),
        metric_row("g", OLD_MS, 8, OLD_MS, active="idc2", standby="idc1"),  # the other direction: only old rows
        metric_row("g", recent, 1, recent, partition=1),  # not wanted
        metric_row("quiet", OLD_MS, 2, OLD_MS),  # only old rows
        # carried forward: the window's rows hold the old sync, as metric_rows writes them
        metric_row("carried", OLD_MS - 60_000, 1, OLD_MS - 60_000), metric_row("carried", recent, 2, OLD_MS - 60_000),
        metric_row("never", OLD_MS, None, None), metric_row("never", recent, None, None),  # no d, no sync ever
    ])
    wanted = [(g, "t", 0, "idc1", "idc2") for g in ("g", "quiet", "carried", "never", "nobody")]
    wanted.append(("g", "t", 0, "idc2", "idc1"))
    groups = sorted({k[0] for k in wanted})
    whole_d, whole_synced = metrics.previous_state(client, groups, NOW_MS)
    previous_d, last_synced = metrics.previous_state(client, groups, NOW_MS, keys=wanted)
    assert previous_d == {k: v for k, v in whole_d.items() if k in wanted}
    assert last_synced == {k: v for k, v in whole_synced.items() if k in wanted}
    key = {g: (g, "t", 0, "idc1", "idc2") for g in ("g", "quiet", "carried")}
    assert previous_d == {key["g"]: 5, ("g", "t", 0, "idc2", "idc1"): 8, key["quiet"]: 2, key["carried"]: 2}
    assert last_synced == {key["g"]: recent, ("g", "t", 0, "idc2", "idc1"): OLD_MS, key["quiet"]: OLD_MS,
                           key["carried"]: OLD_MS - 60_000}
    assert metrics.previous_state(client, groups, NOW_MS, keys=[]) == ({}, {})


def test_previous_metric_state_of_a_key_with_recent_rows_comes_from_the_window_alone(chdb_dsn):
    # What the window changes on purpose (storage/metrics.py): a key with rows in the last hours is
    # answered from them; its older rows are not read.
    client = client_of(chdb_dsn)
    metrics.ensure_tables(client)
    recent = NOW_MS - 60_000
    metrics.insert_rows(client, [
        # no d in the window: no previous d, rather than one of hours ago
        metric_row("no-d-now", OLD_MS, 4, OLD_MS), metric_row("no-d-now", recent, None, OLD_MS),
        # a window row that did not carry the old sync (written before the old row was replayed)
        metric_row("late", OLD_MS, 6, OLD_MS), metric_row("late", recent, 7, None),
    ])
    wanted = [("no-d-now", "t", 0, "idc1", "idc2"), ("late", "t", 0, "idc1", "idc2")]
    previous_d, last_synced = metrics.previous_state(client, ["late", "no-d-now"], NOW_MS, keys=wanted)
    assert previous_d == {wanted[1]: 7}
    assert last_synced == {wanted[0]: OLD_MS}
