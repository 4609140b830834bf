"""``shape_observations.last_sampled`` reads the recent rows first and falls back for the topics it
did not find there: the result equals the whole-table read (storage/recent.py's invariant)."""

from __future__ import annotations

import time

from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.storage import shape_observations as shapes
from offset_pipeline.storage.recent import RECENT_HOURS
from offset_pipeline.translation.shape import HeaderObservation

NOW_MS = int(time.time()) * 1000
OLD_MS = NOW_MS - (RECENT_HOURS + 2) * 3600 * 1000  # outside the window, inside the TTL


def _row(topic: str, ms: int, cluster: str = "idc1") -> shapes.ShapeObservationRow:
    return shapes.ShapeObservationRow(f"s{ms}", ms, topic, 0, HeaderObservation(cluster, 3, 2, 0))


def _whole_table(client, topics: list[str]) -> dict[str, int]:
    rows = client.query(
        f"SELECT topic, toUnixTimestamp64Milli(max(observed_at)) FROM {shapes.TABLE} "
        "WHERE topic IN {topics:Array(String)} GROUP BY topic",
        parameters={"topics": topics},
    ).result_rows
    return {t: int(ms) for t, ms in rows}


def test_last_sampled_equals_the_whole_table_read_inside_and_outside_the_window(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    shapes.ensure_table(client)
    shapes.insert_rows(client, [
        _row("recent", OLD_MS), _row("recent", NOW_MS - 60_000), _row("recent", NOW_MS - 30_000, "idc2"),
        _row("only old 'q'", OLD_MS - 5_000), _row("only old 'q'", OLD_MS),  # found by the fallback alone
        _row("other", NOW_MS - 1_000),
    ])
    topics = ["recent", "only old 'q'", "never sampled"]
    got = shapes.last_sampled(client, topics, at_ms=NOW_MS)
    assert got == _whole_table(client, topics)
    assert got == {"recent": NOW_MS - 30_000, "only old 'q'": OLD_MS}
