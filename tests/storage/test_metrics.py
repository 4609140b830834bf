"""storage/metrics.py on the embedded ClickHouse: idempotent creation, migration of older tables
and views, TTLs, and the rollup filled by the materialized view."""

from __future__ import annotations

import time
from offset_pipeline.monitoring.metric_rules import MetricRow
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage import metrics


def row(ms: int, group: str, dd: int, **kw) -> MetricRow:
    values = dict(cycle_time_ms=ms, group_id=group, topic="t", partition=0, active="idc1", standby="idc2", f=100,
                  g=90, d=10, dd=dd, synced=True, last_synced_ms=ms, sync_age_s=0.0, translated=True, exact=False,
                  header_hit=True, status="header_anchor", strategy="header_anchor", sync_status="Mirroring")
    values.update(kw)
    return MetricRow(**values)


def test_tables_are_created_once_with_ttls_and_the_view_fills_the_rollup(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    metrics.ensure_tables(client)
    metrics.ensure_tables(client)  # idempotent
    for table in (metrics.TABLE, metrics.ROLLUP):
        ddl = client.query(f"SHOW CREATE TABLE {table}").result_rows[0][0]
        assert "TTL" in ddl, table
    # a whole minute ten minutes ago: rows older than the tables' TTL (storage/retention.py) expire
    minute = (int(time.time()) // 60 - 10) * 60_000
    g = "g 'quoted' \\ ü"
    metrics.insert_rows(client, [row(minute, g, 5), row(minute + 30_000, g, -5, sync_status="InSync", exact=True),
                                 row(minute + 60_000, g, 7, mirror_stalled=True)])
    rolled = client.query(
        f"SELECT minute, sum(rows), sum(dd_sum), sum(in_sync_rows), sum(mirror_stalled_rows) FROM {metrics.ROLLUP} "
        "WHERE group_id = {g:String} GROUP BY minute ORDER BY minute",
        parameters={"g": g},
    ).result_rows
    assert [(r[1], r[2], r[3], r[4]) for r in rolled] == [(2, 0, 1, 0), (1, 7, 0, 1)]


def test_an_older_table_and_view_are_migrated(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    old_raw = metrics.DDL.replace(",\n    mirror_stalled  Bool", "")
    assert "mirror_stalled" not in old_raw
    client.command(old_raw)
    client.command(metrics.ROLLUP_DDL)
    old_view = metrics.ROLLUP_VIEW_DDL.replace(metrics.ROLLUP_VIEW, f"{metrics.ROLLUP_VIEW_PREFIX}_v0").replace(
        "    toUInt64(countIf(mirror_stalled)) AS mirror_stalled_rows,\n", "")
    client.command(old_view)
    metrics.ensure_tables(client)
    columns = {name for (name,) in client.query(
        "SELECT name FROM system.columns WHERE table = {t:String}", parameters={"t": metrics.TABLE}).result_rows}
    assert "mirror_stalled" in columns
    views = {name for (name,) in client.query(
        "SELECT name FROM system.tables WHERE startsWith(name, {p:String})",
        parameters={"p": metrics.ROLLUP_VIEW_PREFIX}).result_rows}
    assert views == {metrics.ROLLUP_VIEW}  # the old view is gone: rows are not rolled up twice
    metrics.insert_rows(client, [row(int(time.time()) * 1000, "g", 3, mirror_stalled=True)])
    assert client.query(f"SELECT sum(rows), sum(mirror_stalled_rows) FROM {metrics.ROLLUP}").result_rows == [(1, 1)]
