"""Readiness after a cluster outage and its recovery, on real brokers (chdb, local Spark): sync cycles
before, during and after a standby cluster's outage write the group ready, undecided, then ready
again; ``offset-pipeline readiness``, the cycle's Dagster metadata and Grafana's panel then show one
verdict per group and direction, the newest, with the outage's verdict gone and plain figures."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from devstack.grafana_sql import expand
from offset_pipeline.cli import main
from offset_pipeline.readiness import report
from offset_pipeline.resources.clickhouse import close_embedded_clients
from offset_pipeline.storage import dashboards, readiness
from tests.conftest import wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.outages import cycle, resources, serves
from tests.helpers.topics import PARTITIONS

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]


def verdicts_written(res, group: str) -> list[tuple]:
    """Every verdict the cycles wrote for ``group``, oldest first: (checked_at ms, active, standby, ready)."""
    return [(int(at), a, s, bool(ready)) for at, a, s, ready in res["clickhouse"].get_client().query(
        f"SELECT toUnixTimestamp64Milli(checked_at), active, standby, ready FROM {readiness.TABLE} "
        "WHERE group_id = {g:String} ORDER BY checked_at", parameters={"g": group}).result_rows]


def metadata_table(result) -> list[list[str]]:
    [materialization] = result.asset_materializations_for_node("offset_sync_metrics")
    markdown = materialization.metadata["readiness"].value
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in markdown.splitlines() if line.startswith("|")]


def test_after_an_outage_and_its_recovery_readiness_shows_the_present(kafka_pair, own_idc2, outage_topic, chdb_dsn,
                                                                      monkeypatch, capsys):
    topic, group = outage_topic, f"readiness-outage-{uuid.uuid4().hex[:8]}"
    b1, b2 = kafka_pair.bootstrap("idc1"), own_idc2.spec.bootstrap_servers
    res = resources(chdb_dsn, b1, b2)
    active, standby = res["idc1"].cluster_name, res["idc2"].cluster_name
    instance = dg.DagsterInstance.ephemeral()
    member = Member(b1, group, topic)  # live on the active cluster
    try:
        member.commit(topic, {p: 10 for p in range(PARTITIONS)})
        cycle(res, group, topic, instance)
        assert committed(b2, group, topic) == {p: 10 for p in range(PARTITIONS)}

        own_idc2.stop()
        member.commit(topic, {p: 15 for p in range(PARTITIONS)})
        cycle(res, group, topic, instance)
        # during the outage the present is the undecided verdict: the "yes" before it is not in force
        [during] = readiness.newest(res["clickhouse"].get_client(), [group])
        assert (during.active, during.standby, during.ready) == ("", "", False)
        assert "cluster_unavailable" in during.reasons

        own_idc2.start()
        wait_for(lambda: serves(b2, topic), timeout=60, what=f"{topic} readable on the restarted {standby}")
        back = cycle(res, group, topic, instance)
        assert committed(b2, group, topic) == {p: 15 for p in range(PARTITIONS)}
    finally:
        member.close()
        own_idc2.start()

    written = verdicts_written(res, group)
    assert [(a, s, ready) for _, a, s, ready in written] == [
        (active, standby, True), ("", "", False), (active, standby, True)], written
    newest_cycle = written[-1][0]

    # the query: exactly one current row, the newest cycle's, in the group's direction
    [now] = readiness.newest(res["clickhouse"].get_client(), [group], within_s=3600)
    assert (now.checked_at_ms, now.active, now.standby, now.ready) == (newest_cycle, active, standby, True)
    assert now.expected_duplicates == now.duplicates_at_most == 0  # exact, the group at its synced offset

    # the Dagster UI: the cycle's readiness table, one row, figures as numbers under their headers
    table = metadata_table(back)
    assert table[0] == report.HEADER
    [shown] = [r for r in table[2:] if r[0] == group]
    cells = dict(zip(report.HEADER, shown))
    assert (cells["direction"], cells["safe to switch"]) == (f"{active} -> {standby}", "yes")
    assert (cells["expected duplicates"], cells["duplicates at most"]) == ("0", "0")

    # Grafana's panel: the same one row
    [panel] = [p for p in dashboards.OVERVIEW if p.title.startswith("Switch readiness")]
    at = datetime.now(timezone.utc)
    sql = expand(panel.sql, time_from=at - timedelta(hours=1), time_to=at + timedelta(minutes=1), interval_s=60,
                 variables={"cluster": [active, standby], "group": [group]})
    [graf] = res["clickhouse"].get_client().query(sql).result_rows
    assert graf[:6] == (group, active, standby, True, 0, 0)

    # the CLI, as a person runs it: one line for the group, the present one
    close_embedded_clients(chdb_dsn)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    assert main(["readiness", "--group", group]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if not line.startswith(("mirror", "commit logs"))]  # the mirror check's and the reads' lines
    [line] = [line for line in lines[1:] if line.startswith(group)]
    assert len(lines) == 2 and f"{active} -> {standby}" in line and " yes " in line
    assert "undecided" not in line and "<=" not in line and "is the sync running" not in line
    assert main(["readiness", "--group", group, "--json"]) == 0
    [as_json] = json.loads(capsys.readouterr().out)
    assert (as_json["active"], as_json["safe_to_switch"], as_json["expected_duplicates"]) == (active, True, 0)
