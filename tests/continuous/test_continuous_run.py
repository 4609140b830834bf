"""``offset_continuous_sync`` on the real session clusters and mirrors, chdb and local Spark: one run
follows a group's commits cycle after cycle, and leaves checkpoints in ClickHouse.

Kafka state is read back with plain consumers; NO-LOSS and exactness are checked on the records."""

from __future__ import annotations

import re
import threading
import uuid

import dagster as dg
import pytest

from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.resources import (
    ClickHouseResource,
    KafkaClusterResource,
    SparkResource,
)
from tests.conftest import wait_for
from tests.helpers.dashboards import check_every_panel
from tests.helpers.groups import Member, committed
from tests.helpers.records import read_values
from tests.helpers.run_logs import request_stop, times_logged
from tests.helpers.topics import PARTITIONS

pytestmark = pytest.mark.kafka

RUN_FOR_S = 25


def run_config(group: str, topic: str, run_for_s: float = RUN_FOR_S, **more) -> dict:
    return {"ops": {"offset_continuous_sync": {"config": {
        "run_for_s": run_for_s, "checkpoint_s": 5, "reconcile_s": 6, **more,
        "snapshot": {"group_include": f"^{re.escape(group)}$"},
        "translation": {"topic_shapes": {topic: "one_way:idc1"}},
    }}}}


def copy_of(idc1: dict[int, bytes], idc2: dict[int, bytes], c: int) -> int:
    """The idc2 offset of the copy of idc1's record at ``c``."""
    return next(o for o, v in idc2.items() if v == idc1[c])


def assert_exact_and_loss_free(b1, b2, topic, per_partition, c: dict[int, int], t: dict[int, int]) -> None:
    for p in range(PARTITIONS):
        idc1 = read_values(b1, topic, p, per_partition)
        idc2 = read_values(b2, topic, p, per_partition)
        offset_on_idc1 = {v: o for o, v in idc1.items()}
        # NO-LOSS: every standby record below t is the copy of a record the group processed (below c)
        assert all(offset_on_idc1[v] < c[p] for o, v in idc2.items() if o < t[p]), (p, t, c)
        assert t[p] == copy_of(idc1, idc2, c[p]), (p, t, c)  # exact: no duplicate either


def test_one_run_follows_the_group_commit_after_commit(kafka_pair, chdb_dsn, one_way_topic):
    topic, per_partition = one_way_topic
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    group = f'continuous {uuid.uuid4().hex[:8]} "q" ü'
    member = Member(b1, group, topic)  # the group lives on idc1: its active cluster
    resources = {
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=b1),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=b2),
        "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        "spark": SparkResource(),
    }
    instance = dg.DagsterInstance.ephemeral()  # the test ends the run through it once it saw what it needs
    outcome: dict = {}

    def materialize() -> None:
        outcome["result"] = dg.materialize([offset_continuous_sync], resources=resources, instance=instance,
                                           run_config=run_config(group, topic, run_for_s=RUN_FOR_S + 90),
                                           raise_on_error=False)

    try:
        first = {p: per_partition - 30 for p in range(PARTITIONS)}
        member.commit(topic, first)
        runner = threading.Thread(target=materialize)
        runner.start()
        # the first cycle syncs what the group committed before the run
        expected = {}
        for p in range(PARTITIONS):
            expected[p] = copy_of(read_values(b1, topic, p, per_partition), read_values(b2, topic, p, per_partition),
                                  first[p])
        wait_for(lambda: committed(b2, group, topic) == expected, timeout=RUN_FOR_S, what="the first sync")

        # then, in the same run, each new commit of the group reaches the standby by itself
        for step in (7, 19):
            moved = {p: first[p] + step for p in range(PARTITIONS)}
            member.commit(topic, moved)
            want = {p: copy_of(read_values(b1, topic, p, per_partition), read_values(b2, topic, p, per_partition),
                               moved[p]) for p in range(PARTITIONS)}
            assert runner.is_alive(), "the run ended before the group's later commits"
            wait_for(lambda: committed(b2, group, topic) == want, timeout=10, what=f"the sync of {moved}")
            assert_exact_and_loss_free(b1, b2, topic, per_partition, moved, want)
        # a reconciliation after the last commit: the followed state was compared with a listing, and the
        # followed cycles since then had nothing new of the group to read
        reconciled = "offset-sync followed state reconciled with a listing on idc1"
        seen = times_logged(instance, reconciled)
        wait_for(lambda: times_logged(instance, reconciled) > seen, timeout=60,
                 what="a reconciliation after the last commit")
        request_stop(instance)
        runner.join(RUN_FOR_S + 150)
        assert not runner.is_alive()
    finally:
        member.close()

    result = outcome["result"]
    assert result.success
    [materialization] = result.asset_materializations_for_node("offset_continuous_sync")
    meta = {k: v.value for k, v in materialization.metadata.items()}
    # the first cycle, a cycle for each move, a reconciliation after them; ended by the test, not the bound
    assert meta["cycles"] >= 4 and meta["stopped_by"] == "stop requested (run canceling)", meta
    # the first cycle's partitions, then each move (offset_moved, or group_changed when the member's
    # group state changed in the same cycle)
    revisits = sum(v for k, v in meta.items() if k.startswith("revisited_"))
    assert meta["revisited_new"] >= PARTITIONS and revisits >= 3 * PARTITIONS
    assert meta["partitions_written"] >= 3 * PARTITIONS
    # the first cycle's checkpoint and the last one at least; how many periodic ones fit between depends
    # on how long this machine takes for the first cycle (a count here would be a timed assertion). A
    # periodic one is skipped while the previous write is still going (a loaded machine: the next one
    # carries the newest state); the last one never is, so ClickHouse holds the run's final answers.
    assert meta["checkpoints"] >= 2
    client = resources["clickhouse"].get_client()
    stored = client.query(
        "SELECT partition, argMax(committed, cycle_time), argMax(standby_offset, cycle_time) FROM offset_translations "
        "WHERE group_id = {g:String} AND topic = {t:String} GROUP BY partition ORDER BY partition",
        parameters={"g": group, "t": topic}).result_rows
    assert [(p, c, s) for p, c, s in stored] == [(p, moved[p], want[p]) for p in range(PARTITIONS)]
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["no_loss"].passed and checks["no_loss"].metadata["written_partitions"].value >= 3 * PARTITIONS
    # the later commits were followed on the commit logs: cycles that read only the groups that
    # committed, both clusters followed to the end, no listing that differed from what was followed
    assert meta["reads_followed"] >= 2 and meta["reads_listed_first"] == 1, meta
    assert (meta["commit_log_idc1"], meta["commit_log_idc2"]) == ("following", "following"), meta
    # every reconcile_s a listing anyway, compared with what was followed: the group's partitions
    assert meta["reads_listed_reconciliation"] >= 1 and meta["followed_compared"] >= PARTITIONS, meta
    assert meta["followed_differences"] == 0 and checks["commit_log_followed"].passed
    # a followed cycle the group did not commit in read no log facts anew: they were carried (and the
    # syncs above were exact all the same); listings and checkpoints read every partition's
    assert meta["log_facts_carried"] > 0 and meta["log_facts_read"] >= 2 * PARTITIONS, meta
    # the run's own standby commits came back through idc2's commit log and were taken as they are:
    # no cycle woken and no read for them (the standby offsets above were checked all the same)
    assert meta["own_commits_followed"] >= PARTITIONS, meta
    # the group's own later commits were taken from idc1's commit log into the group as read: no
    # read of the group for them (the standby offsets above are exact all the same)
    assert meta["group_commits_followed"] >= 2, meta
    print(f"\ncycles {meta['cycles']}: " + ", ".join(f"{k} {v}" for k, v in meta.items() if k.startswith(("reads_", "revisited_")))
          + f"; cycle p50 {meta['cycle_seconds_p50']}s")
    assert checks["sync_freshness"].passed and checks["clusters_readable"].passed
    assert checks["checkpoints_written"].passed

    # The checkpoints are cycles of the interval mode's tables: a snapshot with both clusters' rows,
    # one translation and one commit row per group-partition, the monitoring rows; the newest says
    # where the standby is now.
    client = resources["clickhouse"].get_client()
    run_id = result.run_id
    def per_checkpoint(table: str, key: str = "snapshot_id") -> dict:
        return dict(client.query(f"SELECT {key}, count() FROM {table} WHERE group_id = {{g:String}} GROUP BY {key}",
                                 parameters={"g": group}).result_rows)

    snapshots, translated, commit_rows = (per_checkpoint(t) for t in
                                          ("offset_snapshots", "offset_translations", "offset_commits"))
    assert len(snapshots) == meta["checkpoints"]
    assert all(sid.startswith(run_id + ":") for sid in snapshots)
    assert set(snapshots.values()) == {2 * PARTITIONS} and translated == commit_rows == {s: PARTITIONS for s in snapshots}
    metric_rows = per_checkpoint("offset_sync_metrics", "cycle_time")  # one row per partition per checkpoint
    assert len(metric_rows) == meta["checkpoints"] and set(metric_rows.values()) == {PARTITIONS}
    # Grafana's readiness panel, as the plugin runs it, shows the group ready to switch
    following, contradicted = ("Commit logs: how each cluster is read (newest checkpoint)",
                               "Commit logs: followed offsets a listing contradicted")
    panels = check_every_panel(client, group, topic, with_rows={"Switch readiness per group (newest)", following,
                                                                contradicted})
    [readiness_row] = panels["Switch readiness per group (newest)"]
    assert readiness_row[:4] == (group, "idc1", "idc2", True) and readiness_row[4] == 0  # exact: 0 duplicates
    # and how the run read each cluster: following, no listing contradicted what it followed
    assert [row[:3] for row in panels[following]] == [("idc1", "following", ""), ("idc2", "following", "")]
    assert sum(row[2] for row in panels[contradicted]) == 0 and sum(row[3] for row in panels[contradicted]) >= PARTITIONS
    newest = dict(client.query(
        "SELECT partition, argMax(committed_after, cycle_time) FROM offset_commits WHERE group_id = {g:String} "
        "GROUP BY partition", parameters={"g": group}).result_rows)
    assert newest == committed(b2, group, topic)
    # A checkpoint keeps each partition's newest commit row (run_state.py's invariants): two writes of
    # one partition between two checkpoints leave one applied row, so the rows are at most the writes.
    # A write is applied in one checkpoint only; the later ones carry it as unchanged.
    applied = client.query(
        "SELECT partition, committed_after FROM offset_commits WHERE group_id = {g:String} AND applied",
        parameters={"g": group}).result_rows
    assert len(applied) == len(set(applied)), applied  # no write counted twice
    assert {p for p, _ in applied} == set(range(PARTITIONS)) and len(applied) <= meta["partitions_written"]
    assert {(p, want[p]) for p in range(PARTITIONS)} <= set(applied)  # the last write of each partition


def test_with_following_off_every_cycle_lists_the_groups_and_still_syncs(kafka_pair, chdb_dsn, one_way_topic):
    topic, per_partition = one_way_topic
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    group = f"continuous polled {uuid.uuid4().hex[:8]}"
    member = Member(b1, group, topic)
    resources = {
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=b1),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=b2),
        "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        "spark": SparkResource(),
    }
    instance = dg.DagsterInstance.ephemeral()  # the test ends the run through it once it saw two syncs
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(result=dg.materialize(
        [offset_continuous_sync], resources=resources, instance=instance, raise_on_error=False,
        run_config=run_config(group, topic, run_for_s=RUN_FOR_S + 60, follow_commit_log=False))))

    def copies(c: dict[int, int]) -> dict[int, int]:
        return {p: copy_of(read_values(b1, topic, p, per_partition), read_values(b2, topic, p, per_partition), c[p])
                for p in range(PARTITIONS)}

    try:
        first = {p: per_partition - 10 for p in range(PARTITIONS)}
        member.commit(topic, first)
        runner.start()
        wait_for(lambda: committed(b2, group, topic) == copies(first), timeout=RUN_FOR_S, what="the first sync")
        # a later commit reaches the standby through a later cycle's listing: at least two cycles, however
        # long this machine takes for the first one
        moved = {p: first[p] + 4 for p in range(PARTITIONS)}
        member.commit(topic, moved)
        assert runner.is_alive(), "the run ended before the group's later commit"
        wait_for(lambda: committed(b2, group, topic) == copies(moved), timeout=30, what=f"the sync of {moved}")
        request_stop(instance)
        runner.join(RUN_FOR_S + 120)
        assert not runner.is_alive()
    finally:
        member.close()
    result = outcome["result"]
    assert result.success
    [materialization] = result.asset_materializations_for_node("offset_continuous_sync")
    meta = {k: v.value for k, v in materialization.metadata.items()}
    assert meta["cycles"] >= 2 and meta["reads_listed_first"] == 1, meta
    assert meta["reads_listed_commit_log_off"] == meta["cycles"] - 1 and "reads_followed" not in meta, meta
    assert (meta["commit_log_idc1"], meta["commit_log_idc2"]) == ("commit_log_off", "commit_log_off")
    assert meta["log_facts_carried"] == 0, meta  # a listing reads every partition's log facts
    check = {e.check_name: e for e in result.get_asset_check_evaluations()}["commit_log_followed"]
    assert check.passed and "off" in check.description
