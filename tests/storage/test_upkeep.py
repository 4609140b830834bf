"""Codecs and prompt cleanup of replaced parts on every project table (storage/upkeep.py), on the
real engine (chdb)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import time

import pytest

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.resources.clickhouse import close_embedded_clients
from offset_pipeline.storage import snapshots
from offset_pipeline import storage as storage_pkg
from offset_pipeline.storage import upkeep
from tests.conftest import wait_for


@pytest.fixture
def client(chdb_dsn):
    return ClickHouseResource(dsn=chdb_dsn).get_client()


def _ensure_everything(client) -> None:
    for info in pkgutil.iter_modules(storage_pkg.__path__):
        module = importlib.import_module(f"{storage_pkg.__name__}.{info.name}")
        for name in ("ensure_table", "ensure_tables"):
            if callable(getattr(module, name, None)):
                getattr(module, name)(client)


def _merge_tree_tables(client) -> list[str]:
    return [name for (name,) in client.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree%'"
    ).result_rows]


@pytest.mark.parametrize(("column_type", "codec"), [
    ("Int64", upkeep.OFFSET_CODEC), ("Nullable(Int64)", upkeep.OFFSET_CODEC), ("UInt64", upkeep.OFFSET_CODEC),
    ("DateTime64(3, 'UTC')", upkeep.OFFSET_CODEC), ("Nullable(DateTime64(3, 'UTC'))", upkeep.OFFSET_CODEC),
    ("DateTime('UTC')", upkeep.OFFSET_CODEC),
    ("String", upkeep.TEXT_CODEC), ("Nullable(String)", upkeep.TEXT_CODEC),
    ("LowCardinality(String)", upkeep.LABEL_CODEC),
    ("UInt32", None), ("Bool", None), ("Date", None), ("Float64", None), ("Nullable(Float64)", None),
    ("SimpleAggregateFunction(sum, UInt64)", None),
])
def test_each_type_gets_its_codec(column_type, codec):
    assert upkeep.codec_for(column_type) == codec


def test_every_project_table_has_its_codecs_and_cleanup_and_a_second_pass_alters_nothing(client):
    _ensure_everything(client)
    tables = _merge_tree_tables(client)
    assert len(tables) >= 10
    for table in tables:
        for name, column_type, codec in client.query(
            "SELECT name, type, compression_codec FROM system.columns "
            "WHERE database = currentDatabase() AND table = {t:String}", parameters={"t": table},
        ).result_rows:
            wanted = upkeep.codec_for(column_type)
            if wanted is not None:
                assert re.sub(r"Delta\(\d+\)", "Delta", codec) == f"CODEC({wanted})", (table, name)
        create = client.query("SELECT create_table_query FROM system.tables WHERE name = {t:String}",
                              parameters={"t": table}).result_rows[0][0]
        assert "cleanup_delay_period = 1" in create, table
    assert {table: upkeep.ensure_upkeep(client, table) for table in tables} == {table: [] for table in tables}
    # a codec is metadata: no mutation rewrote a part for it (the TTLs' own mutations aside)
    assert client.query("SELECT count() FROM system.mutations WHERE database = currentDatabase() "
                        "AND positionCaseInsensitive(command, 'CODEC') > 0").result_rows[0][0] == 0


def test_an_older_table_gains_the_codecs_without_rewriting_and_keeps_its_rows(client):
    old_ddl = snapshots.DDL  # the release before had no codecs
    client.command(old_ddl)
    client.command(f"INSERT INTO {snapshots.TABLE} (snapshot_id, snapshot_time, cluster, group_id, topic, partition) "
                   "SELECT 's', now64(3), 'idc1', concat('g', toString(number)), 't', 0 FROM numbers(1000)")
    assert upkeep.ensure_upkeep(client, snapshots.TABLE)  # altered
    assert client.query(f"SELECT count() FROM {snapshots.TABLE}").result_rows[0][0] == 1000
    assert client.query("SELECT count() FROM system.mutations WHERE database = currentDatabase()").result_rows[0][0] == 0
    assert upkeep.ensure_upkeep(client, snapshots.TABLE) == []


def _outdated_parts(client, table: str) -> int:
    return client.query(
        "SELECT count() FROM system.parts WHERE database = currentDatabase() AND table = {t:String} AND NOT active",
        parameters={"t": table},
    ).result_rows[0][0]


def test_parts_replaced_by_a_merge_are_deleted_within_seconds(client, chdb_dsn):
    for table in ("kept_tidy", "left_alone"):
        client.command(f"CREATE TABLE {table} (k UInt64, v String) ENGINE = MergeTree ORDER BY k")
        for batch in range(5):
            client.command(f"INSERT INTO {table} SELECT number + {batch * 100}, 'x' FROM numbers(100)")
    upkeep.ensure_upkeep(client, "kept_tidy")
    # The engine reads the cleanup period when it loads a table: a step's process opens it anew,
    # as here.
    close_embedded_clients()
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    for table in ("kept_tidy", "left_alone"):
        client.command(f"OPTIMIZE TABLE {table} FINAL")
        assert _outdated_parts(client, table) == 5
    started = time.monotonic()
    wait_for(lambda: _outdated_parts(client, "kept_tidy") == 0, timeout=30, what="replaced parts deleted")
    # the control: a table at the default cleanup period still holds them (it would have to be
    # open about 30 s longer)
    if time.monotonic() - started < 20:
        assert _outdated_parts(client, "left_alone") == 5
    assert client.query("SELECT count() FROM kept_tidy").result_rows[0][0] == 500
