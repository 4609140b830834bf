"""offset_snapshot -> offset_translations -> offset_standby_commits against real clusters, the real
session mirrors, chdb and local Spark. Kafka state is always read back with plain consumers."""

from __future__ import annotations

import dagster as dg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from offset_pipeline.assets.metrics import offset_sync_metrics
from offset_pipeline.assets.snapshot import KAFKA_CHILDREN
from offset_pipeline.kafka_io import isolated
from offset_pipeline.sync import cycle_carry
from offset_pipeline.sync.commit_rules import parse_commit_log_line
from tests.conftest import wait_for
from tests.helpers.dashboards import check_every_panel
from tests.helpers.groups import Member, odd_group
from tests.helpers.records import read_values
from tests.helpers.sync_cycles import Cycles, checks
from tests.helpers.topics import PARTITIONS

pytestmark = pytest.mark.kafka


def metadata(result) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node("offset_standby_commits")[0].metadata.items()}


def test_dry_run_then_commit_then_unchanged(kafka_pair, chdb_dsn, mirrored_topic):
    topic, per_partition = mirrored_topic
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    group = odd_group()
    c = {p: per_partition - 7 for p in range(PARTITIONS)}
    member = Member(b1, group, topic)  # the group runs on idc1: its active cluster
    member.commit(topic, c)
    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    try:
        # 1. dry run: every partition decided and recorded, nothing written to Kafka
        dry = cycles.run(dry_run=True)
        translated = cycles.translations(dry)
        rows = cycles.commits(dry)
        assert sorted(rows) == list(range(PARTITIONS))
        for p, r in rows.items():
            t, bound, status = translated[p]
            assert t is not None and bound is not None and t <= bound, (p, translated[p])
            assert (r["decision"], r["dry_run"], r["applied"], r["new_offset"]) == ("dry_run", True, False, t)
            assert (r["active"], r["standby"], r["previous_offset"], r["safe_bound"]) == ("idc1", "idc2", None, bound)
            assert "would commit" in r["reason"]
        assert cycles.standby_committed() == {}
        assert metadata(dry)["decision_dry_run"] == PARTITIONS
        assert metadata(dry)["partitions_written"] == 0
        dry_checks = checks(dry)
        assert dry_checks["no_loss"].passed  # nothing written
        assert not dry_checks["sync_freshness"].passed  # never synced
        assert dry_checks["sync_freshness"].severity is dg.AssetCheckSeverity.WARN

        # 2. the real cycle: the standby group ends at the translated offsets
        real = cycles.run()
        translated = cycles.translations(real)
        rows = cycles.commits(real)
        expected = {p: translated[p][0] for p in range(PARTITIONS)}
        assert cycles.standby_committed() == expected
        for p, r in rows.items():
            assert (r["decision"], r["applied"], r["error"], r["dry_run"]) == ("commit", True, None, False), r
            assert r["new_offset"] == r["committed_after"] == expected[p] <= r["safe_bound"]
        # NO-LOSS against the real data: every idc2 record below t is an idc1 record below c
        for p, t in expected.items():
            idc1_offset = {v: o for o, v in read_values(b1, topic, p, per_partition).items()}
            idc2_values = read_values(b2, topic, p, per_partition)
            assert 0 < t and all(idc1_offset[v] < c[p] for o, v in idc2_values.items() if o < t), (p, t)
        real_checks = checks(real)
        assert real_checks["no_loss"].passed
        assert real_checks["no_loss"].metadata["written_partitions"].value == PARTITIONS
        assert real_checks["sync_freshness"].passed
        assert (metadata(real)["decision_commit"], metadata(real)["groups_written"]) == (PARTITIONS, 1)
        lines = cycles.log_lines(real, "offset-sync commit ")
        assert sorted(parse_commit_log_line(line)["partition"] for line in lines) == list(range(PARTITIONS))
        assert {parse_commit_log_line(line)["group"] for line in lines} == {group}
        # Not one Dagster event per decision (monitoring/decision_log.py): one summary event per step.
        events = [e.user_message for e in cycles.instance.all_logs(real.run_id)]
        assert not [m for m in events if m.startswith(("offset-sync commit ", "offset-sync decision "))]
        assert len([m for m in events if m.startswith("offset-sync commits ")]) == 1

        # 3. nothing new: unchanged, nothing written
        again = cycles.run()
        rows = cycles.commits(again)
        assert {r["decision"] for r in rows.values()} == {"unchanged"}
        assert all(not r["applied"] and r["committed_after"] == expected[p] for p, r in rows.items())
        assert cycles.standby_committed() == expected
        assert checks(again)["sync_freshness"].passed
    finally:
        member.close()


def test_a_group_moving_to_its_standby_mid_cycle_gets_refused_members(kafka_pair, chdb_dsn, mirrored_topic):
    """Translated with idc1 active; before the commit step the group leaves idc1 and starts on idc2
    (a switchover). The re-read sees the live member: nothing is written to it."""
    topic, per_partition = mirrored_topic
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    group = odd_group()
    members = {"idc1": Member(b1, group, topic)}
    members["idc1"].commit(topic, {p: per_partition - 5 for p in range(PARTITIONS)})

    # Runs after offset_translations and, by its higher priority, before offset_standby_commits.
    @dg.asset(deps=["offset_translations"], op_tags={"dagster/priority": "10"})
    def group_moves_to_idc2() -> None:
        members.pop("idc1").close()
        admin = AdminClient({"bootstrap.servers": b1, "log_level": 3})
        wait_for(lambda: not admin.describe_consumer_groups([group])[group].result(10).members, timeout=30,
                 what="the group left idc1")
        members["idc2"] = Member(b2, group, topic)

    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    try:
        result = cycles.run(extra_assets=[group_moves_to_idc2])
        assert "idc2" in members  # the move ran before the commit step
        rows = cycles.commits(result)
        translated = cycles.translations(result)
        assert sorted(rows) == list(range(PARTITIONS))
        for p, r in rows.items():
            assert translated[p][0] is not None  # there was something to commit
            assert (r["decision"], r["applied"], r["committed_after"]) == ("refused_members", False, None), r
        assert cycles.standby_committed() == {}
        assert metadata(result)["partitions_written"] == 0
    finally:
        for member in members.values():
            member.close()


def test_members_on_both_clusters_are_a_split_brain_and_nothing_is_written(kafka_pair, chdb_dsn, mirrored_topic):
    topic, per_partition = mirrored_topic
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    group = odd_group()
    c = {p: per_partition - 5 for p in range(PARTITIONS)}
    members = [Member(b1, group, topic), Member(b2, group, topic)]
    members[0].commit(topic, c)
    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    try:
        result = cycles.run(extra_assets=[offset_sync_metrics])
        rows = cycles.commits(result)
        assert sorted(rows) == list(range(PARTITIONS))
        for r in rows.values():
            assert (r["decision"], r["applied"], r["active"], r["standby"]) == ("split_brain", False, "", ""), r
        # the monitoring shows it, in the Grafana status table too (check_every_panel, below)
        status = cycles.client.query(
            "SELECT DISTINCT sync_status FROM offset_sync_metrics WHERE group_id = {g:String}", parameters={"g": group},
        ).result_rows
        assert status == [("SplitBrain",)]
        # no active cluster: not in the per-cluster series, but in the status table and the broken count
        status_title = "Status per group and topic (newest cycle)"
        broken_title = "InSync, broken, timestamp inversions, stalled mirror"
        panels = check_every_panel(cycles.client, group, topic, with_rows={status_title, broken_title})
        (status_row,) = panels[status_title]
        assert (status_row[0], status_row[4], status_row[5]) == (group, "SplitBrain", PARTITIONS)
        assert sum(r[2] for r in panels[broken_title]) == PARTITIONS
        assert cycles.standby_committed("idc2") == {}
        assert cycles.standby_committed("idc1") == c
        assert not checks(result)["sync_freshness"].passed
    finally:
        for member in members:
            member.close()


def test_a_standby_ahead_is_rewound_only_after_a_reset_on_the_active_cluster(kafka_pair, chdb_dsn, mirrored_topic):
    topic, per_partition = mirrored_topic
    b1 = kafka_pair.bootstrap("idc1")
    group = odd_group()
    member = Member(b1, group, topic)
    member.commit(topic, {p: per_partition - 7 for p in range(PARTITIONS)})
    # The standby group is ahead of any translation: at the standby's log end.
    ahead = {p: per_partition for p in range(PARTITIONS)}
    writer = Consumer({"bootstrap.servers": kafka_pair.bootstrap("idc2"), "group.id": group, "log_level": 3})
    writer.commit(offsets=[TopicPartition(topic, p, o) for p, o in ahead.items()], asynchronous=False)
    writer.close()
    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    try:
        first = cycles.run()
        rows = cycles.commits(first)
        for p, r in rows.items():
            assert r["new_offset"] is not None and r["new_offset"] < ahead[p]
            assert (r["decision"], r["previous_offset"], r["applied"]) == ("refused_rewind", ahead[p], False), r
        assert cycles.standby_committed() == ahead

        member.commit(topic, {p: per_partition - 17 for p in range(PARTITIONS)})  # the group is reset backwards
        second = cycles.run()
        rows = cycles.commits(second)
        translated = cycles.translations(second)
        for p, r in rows.items():
            assert (r["decision"], r["applied"], r["previous_offset"]) == ("rewind_after_reset", True, ahead[p]), r
            assert r["new_offset"] == r["committed_after"] == translated[p][0] < ahead[p]
        assert cycles.standby_committed() == {p: translated[p][0] for p in range(PARTITIONS)}
        assert checks(second)["no_loss"].passed
    finally:
        member.close()


def test_a_sync_run_starts_one_kafka_child_per_cluster_and_stops_them(kafka_pair, chdb_dsn, mirrored_topic,
                                                                       monkeypatch):
    """The snapshot step's child processes (kafka_io/isolated.py) serve the commit step too, which
    closes them: two children per run, none left running, and the commit still lands."""
    topic, per_partition = mirrored_topic
    group = odd_group()
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    member.commit(topic, {p: per_partition - 3 for p in range(PARTITIONS)})
    started = []
    real_init = isolated._Child.__init__

    def counted(self, what):
        real_init(self, what)
        started.append(self)

    monkeypatch.setattr(isolated._Child, "__init__", counted)
    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    try:
        result = cycles.run()
        assert sorted(child.what for child in started) == ["idc1", "idc2"]
        assert all(child.proc.wait(timeout=10) is not None for child in started)  # closed by the commit step
        assert {r["decision"] for r in cycles.commits(result).values()} == {"commit"}
        assert cycle_carry.get(result.run_id, KAFKA_CHILDREN) is None  # taken, not left behind
    finally:
        member.close()
