"""A continuous run through a standby cluster that stops and comes back (the soak's fault, short):
the run goes on, the group's partitions are cluster_unavailable meanwhile (nothing committed), and the
same run syncs again by itself once the cluster answers. Real brokers, chdb, local Spark."""

from __future__ import annotations

import threading
import time
import uuid

import dagster as dg
import pytest

from offset_pipeline.assets.continuous import offset_continuous_sync
from tests.conftest import wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.outages import resources, serves
from tests.helpers.run_logs import CLUSTER_UNAVAILABLE, logged, request_stop
from tests.helpers.topics import PARTITIONS

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

RUN_FOR_S = 120  # at most: the test ends the run once it has seen the sync after the outage


def test_a_standby_cluster_down_mid_run_costs_cycles_not_the_run(kafka_pair, own_idc2, outage_topic, chdb_dsn):
    topic, group = outage_topic, f"continuous-outage-{uuid.uuid4().hex[:8]}"
    b1, b2 = kafka_pair.bootstrap("idc1"), own_idc2.spec.bootstrap_servers
    res = resources(chdb_dsn, b1, b2)
    config = {"ops": {"offset_continuous_sync": {"config": {
        "run_for_s": RUN_FOR_S, "checkpoint_s": 5,
        "snapshot": {"group_include": f"^{group}$", "kafka_timeout_s": 3.0},
        "translation": {"topic_shapes": {topic: "one_way:idc1"}},
    }}}}
    outcome: dict = {}
    member = Member(b1, group, topic)
    instance = dg.DagsterInstance.ephemeral()  # its event log says when a cycle has met the fault
    runner = threading.Thread(target=lambda: outcome.update(result=dg.materialize(
        [offset_continuous_sync], resources=res, run_config=config, instance=instance, raise_on_error=False)))
    try:
        member.commit(topic, {p: 10 for p in range(PARTITIONS)})
        runner.start()
        wait_for(lambda: committed(b2, group, topic) == {p: 10 for p in range(PARTITIONS)}, timeout=45,
                 what="the first sync")

        own_idc2.stop()
        member.commit(topic, {p: 15 for p in range(PARTITIONS)})
        # a cycle without idc2, however long this machine takes for one, then a few more seconds of them
        wait_for(lambda: logged(instance, CLUSTER_UNAVAILABLE) or not runner.is_alive(), timeout=60,
                 what="a cycle without idc2")
        time.sleep(3)
        assert runner.is_alive()
        own_idc2.start()
        wait_for(lambda: serves(b2, topic), timeout=60, what=f"{topic} readable on the restarted idc2")
        # the same run syncs the group's new offsets by itself
        wait_for(lambda: committed(b2, group, topic) == {p: 15 for p in range(PARTITIONS)}, timeout=30,
                 what="the sync after idc2's return")
        assert runner.is_alive(), "the run ended before idc2 came back: make RUN_FOR_S longer"
        request_stop(instance)  # all seen: the run ends at its next checkpoint, its last one written
        runner.join(RUN_FOR_S + 120)
    finally:
        member.close()
        own_idc2.start()

    result = outcome["result"]
    assert result.success, "a cluster down must not fail the run"
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    readable = checks["clusters_readable"]
    assert not readable.passed and readable.severity == dg.AssetCheckSeverity.WARN
    assert "idc2 did not answer in" in readable.description
    assert readable.metadata["cycles_unavailable_idc2"].value >= 1
    assert checks["no_loss"].passed
    [materialization] = result.asset_materializations_for_node("offset_continuous_sync")
    meta = {k: v.value for k, v in materialization.metadata.items()}
    assert meta["status_cluster_unavailable"] >= PARTITIONS  # named, never committed
    assert meta["stopped_by"] == "stop requested (run canceling)"  # ended at a checkpoint, asked to
    client = res["clickhouse"].get_client()
    wrote_while_down = client.query(
        "SELECT count() FROM offset_commits WHERE group_id = {g:String} AND applied AND translation_status = "
        "'cluster_unavailable'", parameters={"g": group}).result_rows[0][0]
    assert wrote_while_down == 0
