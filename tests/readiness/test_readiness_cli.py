"""offset_group_readiness in the embedded ClickHouse, and ``offset-pipeline readiness`` reading it:
the newest row per group and direction, odd group ids, the table and JSON, the exit codes."""

from __future__ import annotations

import json
import time

import pytest

from offset_pipeline.cli import main
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage import readiness
from offset_pipeline.storage.readiness import ReadinessRow

ODD = "g'; DROP TABLE x; -- \"q\" ü|pipe"


def row(group, at_ms, ready=True, reasons=None, dup=0, since=0.8, problem=""):
    return ReadinessRow("cp", at_ms, group, "idc1", "idc2", 4, ready, dup if ready else None, dup, since,
                        reasons or {}, problem)


@pytest.fixture
def stored(chdb_dsn, monkeypatch):
    resource = ClickHouseResource(dsn=chdb_dsn)
    client = resource.get_client()
    readiness.ensure_table(client)
    now = int(time.time() * 1000)
    readiness.insert_rows(client, [
        row(ODD, now - 60_000, ready=False, reasons={"no_anchor": 4}),
        row(ODD, now - 2_000, dup=3),  # the newest: ready
        row("lagging", now - 1_000, ready=False, reasons={"mirror_lag": 1, "no_standby_offset": 2},
            problem="t[2]: no committed offset on idc2"),
        row("old", now - 900_000),  # ready, but 15 minutes old
    ])
    from offset_pipeline.resources.clickhouse import close_embedded_clients

    close_embedded_clients(chdb_dsn)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    return resource


def test_newest_row_per_group(stored):
    rows = {r.group_id: r for r in readiness.newest(stored.get_client())}
    assert set(rows) == {ODD, "lagging", "old"}
    assert rows[ODD].ready and rows[ODD].expected_duplicates == 3
    assert rows["lagging"].reasons == {"mirror_lag": 1, "no_standby_offset": 2}
    assert [r.group_id for r in readiness.newest(stored.get_client(), [ODD])] == [ODD]


def test_cli_json_and_exit_codes(stored, capsys):
    assert main(["readiness", "--group", ODD, "--json"]) == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert (shown["group_id"], shown["safe_to_switch"], shown["expected_duplicates"]) == (ODD, True, 3)

    assert main(["readiness", "--group", ODD, "--group", "lagging"]) == 1  # one is not ready
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["group", "direction"]
    lagging = next(line for line in out.splitlines() if line.startswith("lagging"))
    assert " NO " in lagging and "mirror_lag (1), no_standby_offset (2)" in lagging and "t[2]" in lagging

    assert main(["readiness", "--group", "old", "--json"]) == 1  # too old to vouch for
    [old] = json.loads(capsys.readouterr().out)
    assert not old["safe_to_switch"] and "sync_not_running" in old["reasons"]

    assert main(["readiness", "--group", "no such group"]) == 2
