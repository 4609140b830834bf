"""Column-oriented inserts (``storage/row_inserts.py``) on the embedded ClickHouse engine: epoch
milliseconds land as the same ``DateTime64(3, 'UTC')`` instants, NULLs stay NULL, and an insert that
fails goes to the spool as rows and replays into the table whole."""

from __future__ import annotations

from dataclasses import dataclass

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage.deferred_writes import DeferredWrites, SpoolingClient
from offset_pipeline.storage.row_inserts import column_values, insert_dataclass_rows

DDL = """CREATE TABLE {name} (
    at DateTime64(3, 'UTC'), group_id String, partition UInt32, side LowCardinality(String),
    offset Nullable(Int64), last Nullable(DateTime64(3, 'UTC'))
) ENGINE = MergeTree ORDER BY (group_id, partition)"""
COLUMNS = ["at", "group_id", "partition", "side", "offset", "last"]
SELECT = ("SELECT toUnixTimestamp64Milli(at), group_id, partition, side, offset, toUnixTimestamp64Milli(last) "
          "FROM {name} ORDER BY group_id, partition")


@dataclass(frozen=True)
class Row:
    at_ms: int
    group_id: str
    partition: int
    side: str
    offset: int | None
    last_ms: int | None


ROWS = [
    Row(1_795_700_000_123, "g'1\"\\", 0, "idc1", 5, None),  # quotes and a backslash in the group id
    Row(1_795_700_000_123, "g2", 7, "idc2", None, 1_795_600_000_999),
    Row(1, "g3", 2**31, "idc1", -(2**40), 0),  # the epoch's first milliseconds: 0 is an instant, not NULL
]
EXPECTED = [(r.at_ms, r.group_id, r.partition, r.side, r.offset, r.last_ms) for r in ROWS]


def test_column_values_are_the_fields_column_by_column():
    assert column_values(ROWS) == [list(c) for c in zip(*EXPECTED)]
    assert column_values([]) == [] and column_values(iter(ROWS)) == column_values(ROWS)


def test_a_column_oriented_insert_keeps_every_instant_null_and_string(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    client.command(DDL.format(name="t"))
    assert insert_dataclass_rows(client, "t", ROWS, COLUMNS) == 3
    assert insert_dataclass_rows(client, "t", [], COLUMNS) == 0
    assert [tuple(r) for r in client.query(SELECT.format(name="t")).result_rows] == EXPECTED


def test_a_failed_column_insert_is_spooled_as_rows_and_replays_whole(chdb_dsn, tmp_path):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    spool = DeferredWrites(tmp_path / "spool")
    writer = SpoolingClient(spool, client)
    insert_dataclass_rows(writer, "later", ROWS, COLUMNS)  # no such table yet: the insert fails
    assert writer.outcome.error and "later" in writer.outcome.error
    assert (writer.outcome.written, writer.outcome.deferred) == (0, 3)
    assert spool.pending()[0] == 1
    client.command(DDL.format(name="later"))
    replayed = spool.replay(client)
    assert replayed.error is None and replayed.rows == 3
    assert [tuple(r) for r in client.query(SELECT.format(name="later")).result_rows] == EXPECTED


def test_a_spooling_client_counts_the_rows_of_a_column_insert(chdb_dsn, tmp_path):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    client.command(DDL.format(name="t"))
    writer = SpoolingClient(DeferredWrites(tmp_path / "spool"), client)
    insert_dataclass_rows(writer, "t", ROWS, COLUMNS)
    assert (writer.outcome.written, writer.outcome.deferred, writer.outcome.error) == (3, 0, None)
    assert [tuple(r) for r in client.query(SELECT.format(name="t")).result_rows] == EXPECTED
