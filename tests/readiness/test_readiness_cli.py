"""offset_group_readiness in the embedded ClickHouse, and ``offset-pipeline readiness`` reading it:
the verdicts in force (each group's newest cycle, one row per direction), odd group ids, the table and
JSON, the figures, the exit codes; Grafana's readiness panel choosing the same rows."""

from __future__ import annotations

import json
import time

import pytest

from datetime import datetime, timedelta, timezone

from devstack.grafana_sql import expand
from offset_pipeline.cli import main
from offset_pipeline.readiness import report
from offset_pipeline.readiness.current import in_force
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.resources.clickhouse import close_embedded_clients
from offset_pipeline.storage import commit_log_follow, dashboards, readiness
from offset_pipeline.storage.commit_log_follow import CommitLogFollowRow
from offset_pipeline.storage.readiness import ReadinessRow

ODD = "g'; DROP TABLE x; -- \"q\" ü|pipe"


def row(group, at_ms, ready=True, reasons=None, dup=0, since=0.8, problem="", direction=("idc1", "idc2"),
        at_most=None):
    return ReadinessRow(f"cp{at_ms}", at_ms, group, *direction, 4, ready, dup if ready else None,
                        dup if at_most is None else at_most, since, reasons or {}, problem)


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
    commit_log_follow.ensure_table(client)
    commit_log_follow.insert_rows(client, [
        CommitLogFollowRow("c1", now - 40_000, "r", "idc2", "following", "", 5, 1, 0, 0, 9),
        CommitLogFollowRow("c2", now - 5_000, "r", "idc1", "following", "", 20, 1, 12, 0, 30),
        CommitLogFollowRow("c2", now - 5_000, "r", "idc2", "commit_log_not_authorized",
                           "idc2 gave no __consumer_offsets to read (Broker: Topic authorization failed)", 0, 21, 0, 0, 0),
    ])
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
    # how the sync reads each cluster, from its newest checkpoint: idc2 polled, and why
    assert out.splitlines()[-1] == ("commit logs: idc1 following; idc2 polled (commit_log_not_authorized): idc2 gave "
                                    "no __consumer_offsets to read (Broker: Topic authorization failed)")

    assert main(["readiness", "--group", "old", "--json"]) == 1  # too old to vouch for
    [old] = json.loads(capsys.readouterr().out)
    assert not old["safe_to_switch"] and "sync_not_running" in old["reasons"]

    assert main(["readiness", "--group", "no such group"]) == 2


UNDECIDED = ("", "")
RECOVERED, MOVED, DOWN, BOUNDED = "recovered", 'moved "q"', "down now", "anchored"


@pytest.fixture
def history(chdb_dsn, monkeypatch):
    """Verdicts of several cycles: an outage and its recovery, a group that moved, a group whose
    cluster is down now, a group whose duplicates are only bounded. Returns (rows written, now ms)."""
    now = int(time.time() * 1000)
    written = [
        row(RECOVERED, now - 1_200_000),
        row(RECOVERED, now - 1_065_000, ready=False, reasons={"cluster_unavailable": 4}, direction=UNDECIDED,
            since=None, problem="t[0]: idc2: timed out"),
        row(RECOVERED, now - 2_000),  # the first cycle after the return: the present
        row(MOVED, now - 30_000, dup=5),
        row(MOVED, now - 3_000, ready=False, reasons={"no_standby_offset": 4}, direction=("idc2", "idc1")),
        row(DOWN, now - 20_000),
        row(DOWN, now - 5_000, ready=False, reasons={"cluster_unavailable": 4}, direction=UNDECIDED, since=None),
        row(BOUNDED, now - 4_000, ready=True, dup=None, at_most=7),
        row(BOUNDED, now - 4_000, ready=True, dup=None, at_most=7),  # a replayed spool wrote it twice
    ]
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    readiness.ensure_table(client)
    readiness.insert_rows(client, written)
    close_embedded_clients(chdb_dsn)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    return written, now


def key(r: ReadinessRow) -> tuple:
    return r.group_id, r.active, r.standby, r.checked_at_ms


def test_the_query_keeps_the_verdicts_in_force_as_the_rule_does(history, chdb_dsn):
    written, now = history
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    stored = readiness.newest(client, within_s=3600)
    assert stored == in_force(written)  # the same rows, whole
    assert [key(r) for r in stored] == [
        (BOUNDED, "idc1", "idc2", now - 4_000),  # once
        (DOWN, "", "", now - 5_000),  # the cluster is down now: its earlier "yes" is no longer in force
        (MOVED, "idc2", "idc1", now - 3_000),  # its old direction is gone
        (RECOVERED, "idc1", "idc2", now - 2_000),  # the outage's undecided verdict is gone
    ]
    # a group filter and a window change which groups, not which of their rows
    assert [key(r) for r in readiness.newest(client, [RECOVERED, MOVED])] == [key(r) for r in stored[2:]]
    # a window that holds the outage's verdict but not the cycle before it: still the present one
    assert [key(r) for r in readiness.newest(client, [RECOVERED], within_s=1_100)] == [key(stored[3])]


def test_the_cli_lists_one_current_row_per_group_and_direction_with_plain_figures(history, capsys):
    written, now = history
    assert main(["readiness"]) == 1  # two groups are not ready now
    lines = capsys.readouterr().out.splitlines()
    header, shown = lines[0], [line for line in lines[1:] if not line.startswith(("mirror", "commit logs"))]
    assert lines[-2].startswith("mirror: not checked yet")  # what the mirror check said: nothing yet
    assert lines[-1].startswith("commit logs: no continuous checkpoint yet")
    assert header.split("  ")[:1] == ["group"] and "expected duplicates" in header and "duplicates at most" in header
    assert "<=" not in "\n".join(lines)
    assert sorted(line.split("  ")[0] for line in shown) == sorted([RECOVERED, MOVED, DOWN, BOUNDED])
    recovered = next(line for line in shown if line.startswith(RECOVERED))
    assert "idc1 -> idc2" in recovered and " yes " in recovered and "undecided" not in recovered
    assert "is the sync running" not in "\n".join(lines)
    moved = next(line for line in shown if line.startswith(MOVED))
    assert "idc2 -> idc1" in moved and " NO " in moved

    assert main(["readiness", "--json", "--group", RECOVERED, "--group", BOUNDED]) == 0
    shown = {r["group_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert (shown[RECOVERED]["active"], shown[RECOVERED]["expected_duplicates"]) == ("idc1", 0)
    assert (shown[BOUNDED]["expected_duplicates"], shown[BOUNDED]["duplicates_at_most"]) == (None, 7)


@pytest.mark.parametrize("name, figures, cells", [
    ("exact", (0, 0), ["0", "0"]),
    ("exact, records processed since", (4, 4), ["4", "4"]),
    ("a bound only", (None, 7), ["unknown", "7"]),
    ("neither", (None, None), ["unknown", "unknown"]),
])
def test_figures_are_plain_numbers_under_headers_that_say_what_they_are(name, figures, cells):
    shown = dict(zip(report.HEADER, report.cells(row("g", 1, dup=figures[0], at_most=figures[1]))))
    assert [shown["expected duplicates"], shown["duplicates at most"]] == cells, name
    table = report.markdown([row("g", 1, dup=figures[0], at_most=figures[1])]).splitlines()
    assert table[0] == "| " + " | ".join(report.HEADER) + " |"
    assert table[2].split(" | ")[3:5] == cells


def test_the_tables_show_only_the_verdicts_in_force(history):
    written, _ = history
    for table in (report.text(written), report.markdown(written)):
        lines = [line for line in table.splitlines() if RECOVERED in line]
        assert len(lines) == 1 and "undecided" not in lines[0], table
    assert len(json.loads(report.as_json(written))) == len(in_force(written)) == 4


def test_grafana_shows_the_verdicts_in_force(history, chdb_dsn):
    written, now = history
    [panel] = [p for p in dashboards.OVERVIEW if p.title.startswith("Switch readiness")]
    at = datetime.fromtimestamp(now / 1000, timezone.utc)

    def shown(clusters, groups=(RECOVERED, MOVED, DOWN, BOUNDED)):
        sql = expand(panel.sql, time_from=at - timedelta(hours=1), time_to=at + timedelta(seconds=1), interval_s=60,
                     variables={"cluster": clusters, "group": list(groups)})
        result = ClickHouseResource(dsn=chdb_dsn).get_client().query(sql)
        assert not result.result_rows or tuple(result.column_names) == panel.columns
        return result.result_rows

    rows = shown(["idc1", "idc2"])
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
        (r.group_id, r.active, r.standby) for r in in_force(written))
    by_group = {r[0]: r for r in rows}
    assert by_group[BOUNDED][4:6] == (None, 7) and by_group[RECOVERED][3:6] == (True, 0, 0)
    # the cluster filter picks among the verdicts in force: the group that moved to idc2 is not shown
    # under its old active cluster
    assert sorted(r[0] for r in shown(["idc1"])) == sorted([RECOVERED, DOWN, BOUNDED])
    # the outage as the panel showed it then: the undecided verdict, not the "yes" before it
    then = datetime.fromtimestamp((now - 1_000_000) / 1000, timezone.utc)
    sql = expand(panel.sql, time_from=then - timedelta(hours=1), time_to=then, interval_s=60,
                 variables={"cluster": ["idc1", "idc2"], "group": [RECOVERED]})
    [(group, active, standby, safe, *_)] = ClickHouseResource(dsn=chdb_dsn).get_client().query(sql).result_rows
    assert (group, active, standby, safe) == (RECOVERED, "", "", False)
