"""``open_writer`` ensures a step's tables once per process and ClickHouse target, and again after
a failure (embedded engine, real DDL): a ClickHouse that lost a table gets it back at the next writer
and the spooled rows replay into it."""

from __future__ import annotations

import pytest

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage.deferred_writes import forget_ensured, open_writer

TABLE = "ensured_once_probe"


class CountingEnsure:
    """An ensure function that creates the probe table and counts its calls (or fails when told)."""

    def __init__(self):
        self.calls = 0
        self.fail = False

    def __call__(self, client) -> None:
        self.calls += 1
        if self.fail:
            raise RuntimeError("ClickHouse refused the DDL")
        client.command(f"CREATE TABLE IF NOT EXISTS {TABLE} (id UInt32) ENGINE = MergeTree ORDER BY id")


@pytest.fixture
def clickhouse(chdb_dsn, tmp_path):
    forget_ensured(None)
    yield ClickHouseResource(dsn=chdb_dsn, spool_dir=str(tmp_path / "spool"))
    forget_ensured(None)


def count(clickhouse) -> int:
    return clickhouse.get_client().query(f"SELECT count() FROM {TABLE}").result_rows[0][0]


def test_tables_are_ensured_once_per_target_while_writes_succeed(clickhouse):
    ensure = CountingEnsure()
    for i in range(3):
        writer = open_writer(clickhouse, ensure)
        writer.insert(TABLE, [[i]], column_names=["id"])
        assert writer.outcome.error is None and writer.outcome.written == 1
    assert ensure.calls == 1
    assert count(clickhouse) == 3


def test_a_lost_table_is_made_again_after_the_failed_insert_and_nothing_is_lost(clickhouse):
    ensure = CountingEnsure()
    open_writer(clickhouse, ensure).insert(TABLE, [[1]], column_names=["id"])
    clickhouse.get_client().command(f"DROP TABLE {TABLE}")  # ClickHouse lost it behind our back

    failed = open_writer(clickhouse, ensure)
    assert ensure.calls == 1  # still remembered: this writer does not know yet
    failed.insert(TABLE, [[2]], column_names=["id"])
    assert failed.outcome.deferred == 1 and "inserting into" in failed.outcome.error

    again = open_writer(clickhouse, ensure)
    assert ensure.calls == 2 and again.client is not None
    replayed = clickhouse.deferred_writes().replay(again.client)
    assert replayed.error is None and replayed.rows == 1
    assert count(clickhouse) == 1  # the spooled row, in the table made again


def test_a_failed_ensure_is_not_remembered(clickhouse):
    ensure = CountingEnsure()
    ensure.fail = True
    writer = open_writer(clickhouse, ensure)
    assert writer.client is None and "preparing ClickHouse tables failed" in writer.outcome.error
    ensure.fail = False
    assert open_writer(clickhouse, ensure).client is not None
    assert ensure.calls == 2
    open_writer(clickhouse, ensure)
    assert ensure.calls == 2
