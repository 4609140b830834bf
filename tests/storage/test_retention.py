"""ClickHouse retention on the embedded engine: every table has a TTL, old rows go, the current
anchor / fast-forward point / shape evidence stays, tables of older versions gain the TTL, and a
TTL shorter than the audit horizon is refused."""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import subprocess
import sys
import time
from datetime import date, timedelta

import pytest

import offset_pipeline.storage as storage_pkg
from devstack.paths import REPO_ROOT
from offset_pipeline.monitoring.metric_rules import MetricRow
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage import (
    audits,
    commits,
    fast_forwards as ff,
    metrics,
    retention,
    shape_observations,
    snapshots,
    translations,
)
from offset_pipeline.translation.shape import HeaderObservation

DAY_MS = 86_400_000
TTL_DAYS = retention.DEFAULT_HISTORY_TTL_DAYS
PROJECT_TABLES = {
    "offset_snapshots", "offset_translations", "offset_anchors", "offset_commits", "offset_fast_forwards",
    "topic_shape_observations", "offset_failover_audits", "offset_sync_metrics", "offset_sync_metrics_1m",
    "offset_translation_deferrals",
}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _days_ago_ms(days: float) -> int:
    return _now_ms() - int(days * DAY_MS)


def _ensure_everything(client) -> list[str]:
    """Call every ``ensure_table``/``ensure_tables`` of every storage module (a new module's table
    is covered without editing this test). Returns the modules called."""
    called = []
    for info in pkgutil.iter_modules(storage_pkg.__path__):
        module = importlib.import_module(f"{storage_pkg.__name__}.{info.name}")
        for name in ("ensure_table", "ensure_tables"):
            if callable(getattr(module, name, None)):
                getattr(module, name)(client)
                called.append(f"{info.name}.{name}")
    return called


def _merge_tree_tables(client) -> dict[str, str]:
    rows = client.query(
        "SELECT name, create_table_query FROM system.tables "
        "WHERE database = currentDatabase() AND engine LIKE '%MergeTree%'"
    ).result_rows
    return dict(rows)


def _optimize(client, *tables: str) -> None:
    for table in tables:
        client.command(f"OPTIMIZE TABLE {table} FINAL")


@pytest.fixture
def client(chdb_dsn, monkeypatch):
    for name in (retention.AUDIT_HORIZON_ENV, retention.HISTORY_TTL_ENV, retention.ROLLUP_TTL_ENV):
        monkeypatch.delenv(name, raising=False)
    return ClickHouseResource(dsn=chdb_dsn).get_client()


def test_every_table_the_project_creates_has_a_ttl(client):
    _ensure_everything(client)
    tables = _merge_tree_tables(client)
    assert PROJECT_TABLES <= set(tables)
    without_ttl = {name for name, create in tables.items() if " TTL " not in create}
    # the one-row-per-key state tables, and no other, go without: replacing merges bound them
    assert without_ttl == set(retention.UNEXPIRED_STATE_TABLES)
    for name in retention.UNEXPIRED_STATE_TABLES:
        assert "ReplacingMergeTree" in tables[name]
    # the TTLs follow the settings: history tables keep TTL_DAYS whole days after their day
    assert f"toIntervalDay({TTL_DAYS + 1})" in tables["offset_snapshots"]
    assert f"toIntervalDay({retention.DEFAULT_ROLLUP_TTL_DAYS + 1})" in tables["offset_sync_metrics_1m"]


def test_ensuring_again_alters_nothing(client):
    _ensure_everything(client)
    before = client.query("SELECT count() FROM system.mutations WHERE database = currentDatabase()").result_rows
    _ensure_everything(client)
    after = client.query("SELECT count() FROM system.mutations WHERE database = currentDatabase()").result_rows
    assert after == before
    for table in PROJECT_TABLES:
        assert retention.current_ttl(client, table) != ""
    assert retention.ensure_ttl(client, snapshots.TABLE, retention.delete_ttl("snapshot_time", TTL_DAYS)) is False


def test_a_changed_setting_changes_the_ttl(client, monkeypatch):
    _ensure_everything(client)
    monkeypatch.setenv(retention.HISTORY_TTL_ENV, "50")
    snapshots.ensure_table(client)
    assert "toIntervalDay(51)" in retention.current_ttl(client, snapshots.TABLE)


# The first releases' DDL: no TTL, no day partitions; fast-forwards sorted without the direction.
OLD_DDL = {
    snapshots.TABLE: snapshots.DDL.replace("PARTITION BY toYYYYMMDD(snapshot_time)\n", ""),
    translations.TRANSLATIONS_TABLE: translations.TRANSLATIONS_DDL.replace("PARTITION BY toYYYYMMDD(cycle_time)\n", ""),
    translations.ANCHORS_TABLE: translations.ANCHORS_DDL,
    commits.TABLE: commits.DDL.replace("PARTITION BY toYYYYMMDD(cycle_time)\n", ""),
    ff.TABLE: ff.DDL.replace("ORDER BY (group_id, topic, partition, active, standby, checked_at)",
                             "ORDER BY (group_id, topic, partition, checked_at)"),
    shape_observations.TABLE: shape_observations.DDL.replace("PARTITION BY toYYYYMMDD(observed_at)\n", ""),
    audits.TABLE: audits.DDL,
    metrics.TABLE: metrics.DDL + "TTL toDateTime(cycle_time) + INTERVAL 35 DAY\n",
    metrics.ROLLUP: metrics.ROLLUP_DDL + "TTL minute + INTERVAL 400 DAY\n",
}


def _point(**changes) -> ff.FastForwardRow:
    base = ff.FastForwardRow(
        run_id="r", checked_at_ms=_now_ms(), group_id="g", topic="low", partition=0, active="idc1", standby="idc2",
        outcome=ff.FAST_FORWARDED, rejection="", decision="commit", reason="caught up", committed=50,
        expected_active_end=50, expected_standby_end=45, active_log_end=50, standby_log_end=45,
        standby_mirror_position=45, active_mirror_position=50, stable_for_s=700.0, previous_offset=40, new_offset=45,
        committed_after=45, dry_run=False, applied=True,
    )
    return dataclasses.replace(base, **changes)


def test_tables_of_an_older_version_gain_the_ttl_and_keep_their_rows(client):
    for table, ddl in OLD_DDL.items():
        assert "PARTITION BY toYYYYMMDD" not in ddl or table == metrics.TABLE
        client.command(ddl)
    assert all(" TTL " not in c for t, c in _merge_tree_tables(client).items() if t not in (metrics.TABLE, metrics.ROLLUP))
    points = [_point(checked_at_ms=_days_ago_ms(2)), _point(partition=1, active="idc2", standby="idc1")]
    ff.insert_rows(client, points)
    before = ff.latest_points(client)
    assert len(before) == 2

    _ensure_everything(client)

    tables = _merge_tree_tables(client)
    assert {name for name in PROJECT_TABLES if " TTL " not in tables[name]} == set()
    assert "toIntervalDay(36)" in tables[metrics.TABLE]  # the raw metrics' old 35-day TTL now follows the setting
    assert "ORDER BY (group_id, topic, partition, active, standby, checked_at)" in tables[ff.TABLE]
    assert ff.latest_points(client) == before
    assert client.query(f"SELECT count() FROM {ff.TABLE}").result_rows[0][0] == 2
    assert client.query("SELECT count() FROM system.tables WHERE name LIKE '%resorting%'").result_rows[0][0] == 0


def _snapshot(ms: int, group="g") -> snapshots.SnapshotRow:
    return snapshots.SnapshotRow(f"s{ms}", ms, "idc1", group, "Stable", 1, "t", 0, 10, True, 0, 20, 20, "CreateTime")


def _translation(ms: int) -> dict:
    return {c: None for c in translations.TRANSLATION_COLUMNS} | {
        "snapshot_id": f"s{ms}", "cycle_time": ms, "group_id": "g", "topic": "t", "partition": 0, "active": "idc1",
        "standby": "idc2", "strategy": "none", "status": "no_anchor", "reason": "", "timestamp_inversion": False,
    }


def _commit(ms: int) -> commits.CommitRow:
    return commits.CommitRow(f"s{ms}", ms, "g", "t", 0, "idc1", "idc2", 1, 2, 2, "commit", "", "header_exact",
                             "header", False, True, None, 2)


def _metric(ms: int) -> MetricRow:
    return MetricRow(ms, "g", "t", 0, "idc1", "idc2", 10, 9, 1, 0, True, ms, 0.0, True, True, True,
                     "header_exact", "header", "InSync")


def test_history_rows_older_than_the_ttl_are_removed_and_the_horizon_is_kept(client):
    _ensure_everything(client)
    old, edge, recent = _days_ago_ms(TTL_DAYS + 3), _days_ago_ms(TTL_DAYS), _days_ago_ms(1)
    snapshots.insert_rows(client, [_snapshot(ms) for ms in (old, edge, recent)])
    translations.insert_translations(client, [_translation(ms) for ms in (old, edge, recent)])
    commits.insert_rows(client, [_commit(ms) for ms in (old, edge, recent)])
    metrics.insert_rows(client, [_metric(ms) for ms in (old, edge, recent)])
    shape_observations.insert_rows(client, [
        shape_observations.ShapeObservationRow(f"s{ms}", ms, "t", 0, HeaderObservation("idc1", 5, 5, 0))
        for ms in (old, edge, recent)])
    today = date.today()
    for days in (TTL_DAYS + 3, TTL_DAYS, 1):
        audits.replace_window(client, today - timedelta(days=days), [{
            "snapshot_id": "s", "snapshot_time": _days_ago_ms(days), "group_id": "g", "topic": "t", "partition": 0,
            "active": "idc1", "standby": "idc2", "committed": 1, "standby_committed": 1, "standby_end_at": 1,
            "strategy": "header", "status": "audited", "lost": 0, "duplicated": 0, "lost_offsets": [],
            "duplicated_offsets": [], "reason": "", "margin": 0, "records_read": 0}], _now_ms())
    tables = [snapshots.TABLE, translations.TRANSLATIONS_TABLE, commits.TABLE, metrics.TABLE,
              shape_observations.TABLE, audits.TABLE]
    _optimize(client, *tables, metrics.ROLLUP)

    time_of = {snapshots.TABLE: "snapshot_time", translations.TRANSLATIONS_TABLE: "cycle_time",
               commits.TABLE: "cycle_time", metrics.TABLE: "cycle_time", shape_observations.TABLE: "observed_at",
               audits.TABLE: "window_date"}
    for table in tables:
        days_left = sorted(
            (today - d).days for (d,) in client.query(f"SELECT toDate({time_of[table]}) FROM {table}").result_rows
        )
        # the day exactly TTL_DAYS back (the audit horizon's oldest day) is still whole; older days are gone
        assert days_left == [1, TTL_DAYS], table
    # the rollup keeps its 400 days
    assert client.query(f"SELECT count() FROM {metrics.ROLLUP}").result_rows[0][0] == 3


def _anchor(key: tuple, ms: int, offsets: tuple | None) -> dict:
    group, topic, partition, active, standby = key
    a, s = offsets if offsets else (None, None)
    return {"group_id": group, "topic": topic, "partition": partition, "active": active, "standby": standby,
            "active_offset": a, "standby_offset": s, "snapshot_id": f"s{ms}", "kept_at": ms}


def test_the_current_anchor_of_every_key_survives_the_ttl(client):
    _ensure_everything(client)
    long_ago, less_long_ago, recent = _days_ago_ms(200), _days_ago_ms(100), _days_ago_ms(1)
    unchanged, superseded_old, dropped, superseded_new, back = (("g", "t", p, "idc1", "idc2") for p in range(5))
    other_direction = ("g", "t", 0, "idc2", "idc1")
    translations.insert_anchors(client, [
        _anchor(unchanged, long_ago, (10, 7)),  # never changed in 200 days: still the anchor
        _anchor(superseded_old, long_ago, (1, 1)), _anchor(superseded_old, less_long_ago, (5, 4)),
        _anchor(dropped, long_ago, (3, 3)), _anchor(dropped, less_long_ago, None),  # dropped: must stay dropped
        _anchor(superseded_new, long_ago, (1, 1)), _anchor(superseded_new, recent, (9, 9)),
        _anchor(back, long_ago, None), _anchor(back, recent, (2, 2)),
        _anchor(other_direction, less_long_ago, (20, 30)),
    ])
    # and one more part, so the roll-up meets rows of the same key in several parts
    translations.insert_anchors(client, [_anchor(superseded_old, _days_ago_ms(90), (6, 5))])
    before = translations.latest_anchors(client)
    assert set(before) == {unchanged, superseded_old, superseded_new, back, other_direction}

    _optimize(client, translations.ANCHORS_TABLE, translations.ANCHORS_CURRENT_TABLE)

    assert translations.latest_anchors(client) == before
    # the current table: one row per key, the drop included (a drop never expires, see translations.py)
    assert client.query(f"SELECT count() FROM {translations.ANCHORS_CURRENT_TABLE}").result_rows[0][0] == 6
    rows = client.query(
        f"SELECT partition, active, count() FROM {translations.ANCHORS_TABLE} GROUP BY partition, active"
    ).result_rows
    per_key = {(int(p), a): n for p, a, n in rows}
    # expired rows rolled up to one per key; the recent rows of keys 3 and 4 stay as they were
    assert per_key == {(0, "idc1"): 1, (1, "idc1"): 1, (2, "idc1"): 1, (3, "idc1"): 2, (4, "idc1"): 2,
                       (0, "idc2"): 1}


def test_the_kept_fast_forward_point_survives_and_other_rows_expire(client):
    _ensure_everything(client)
    long_ago = _days_ago_ms(120)
    rows = [
        _point(run_id="old", checked_at_ms=long_ago - 1000, committed=40, new_offset=30, committed_after=30),
        _point(run_id="kept", checked_at_ms=long_ago, committed=50, new_offset=45, committed_after=45),
        # newer but never points: they expire, and never hide the point
        _point(run_id="left", checked_at_ms=long_ago + 1000, outcome=ff.LEFT_ALONE, rejection="group_has_lag",
               new_offset=None, committed_after=45),
        _point(run_id="dry", checked_at_ms=long_ago + 2000, outcome=ff.DRY_RUN, dry_run=True, committed=60,
               new_offset=60, committed_after=45),
        _point(run_id="lost", checked_at_ms=long_ago + 3000, committed=61, new_offset=61, committed_after=None,
               outcome=ff.FAILED, error="x"),
        # the other direction of the same partition keeps its own point
        _point(run_id="back", checked_at_ms=long_ago, active="idc2", standby="idc1", committed=9, new_offset=7,
               committed_after=7),
        # a recent left-alone row stays (not expired)
        _point(run_id="recent", checked_at_ms=_days_ago_ms(1), outcome=ff.LEFT_ALONE, rejection="receiving_data",
               new_offset=None),
    ]
    ff.insert_rows(client, rows)
    before = ff.latest_points(client)
    assert {(k[3], p.standby_offset) for k, p in before.items()} == {("idc1", 45), ("idc2", 7)}

    _optimize(client, ff.TABLE)

    assert ff.latest_points(client) == before
    left = sorted(r for (r,) in client.query(f"SELECT run_id FROM {ff.TABLE}").result_rows)
    assert left == ["back", "kept", "recent"]


def test_shape_evidence_of_the_horizon_survives(client):
    _ensure_everything(client)
    rows = [shape_observations.ShapeObservationRow(f"s{d}", _days_ago_ms(d), "t", 0, HeaderObservation("idc1", 7, 0, 0))
            for d in (0.1, 0.5, TTL_DAYS + 5)]
    shape_observations.insert_rows(client, rows)
    since = _days_ago_ms(1)
    before = shape_observations.observations_since(client, ["t"], since)
    _optimize(client, shape_observations.TABLE)
    assert shape_observations.observations_since(client, ["t"], since) == before
    assert before[("t", "idc1")].local == 14
    assert shape_observations.observations_since(client, ["t"], 0)[("t", "idc1")].local == 14  # the old one is gone


SETTINGS_CASES = [
    ({}, retention.ClickHouseRetention(35, 35, 400)),
    ({retention.HISTORY_TTL_ENV: "90"}, retention.ClickHouseRetention(35, 90, 400)),
    ({retention.AUDIT_HORIZON_ENV: "7", retention.HISTORY_TTL_ENV: "7"}, retention.ClickHouseRetention(7, 7, 400)),
    ({retention.ROLLUP_TTL_ENV: " 35 "}, retention.ClickHouseRetention(35, 35, 35)),
    ({retention.HISTORY_TTL_ENV: ""}, retention.ClickHouseRetention(35, 35, 400)),
]


@pytest.mark.parametrize("env, expected", SETTINGS_CASES)
def test_retention_settings(env, expected):
    assert retention.clickhouse_retention(env) == expected


@pytest.mark.parametrize("env, message", [
    ({retention.HISTORY_TTL_ENV: "10"}, "OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS=10 is shorter than the audit horizon"),
    ({retention.AUDIT_HORIZON_ENV: "60"}, "OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS=35 is shorter than the audit horizon"),
    ({retention.ROLLUP_TTL_ENV: "30"}, "OFFSET_PIPELINE_METRICS_ROLLUP_TTL_DAYS=30 is shorter than"),
    ({retention.HISTORY_TTL_ENV: "a month"}, "expected a positive whole number of days"),
    ({retention.AUDIT_HORIZON_ENV: "0"}, "expected a positive whole number of days"),
])
def test_bad_retention_settings_are_refused(env, message):
    with pytest.raises(ValueError, match=message):
        retention.clickhouse_retention(env)


def test_a_ttl_below_the_audit_horizon_fails_the_code_location_at_load():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSET_PIPELINE_")}
    env[retention.HISTORY_TTL_ENV] = "20"
    done = subprocess.run([sys.executable, "-c", "import offset_pipeline.definitions"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS=20 is shorter than the audit horizon" in done.stderr


def test_a_table_refused_at_run_time_too(client, monkeypatch):
    monkeypatch.setenv(retention.HISTORY_TTL_ENV, "3")
    with pytest.raises(ValueError, match="shorter than the audit horizon"):
        snapshots.ensure_table(client)
