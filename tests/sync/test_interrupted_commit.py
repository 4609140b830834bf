"""A sync run killed (kill -9) while it commits: every group is at its old standby offset or
at the killed run's new one, never anywhere else; the next run re-reads, commits the rest, and
reports the standby offsets it finds moved without a record. Real brokers, chdb, local Spark; the
killed run is a separate process, as the daemon's run worker is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Producer

from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.resources.clickhouse import close_embedded_clients
from tests.conftest import wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.records import log_end
from tests.helpers.sync_cycles import SYNC_ASSETS

pytestmark = pytest.mark.kafka

GROUPS, RECORDS = 24, 40

# The run worker: one sync cycle, groups committed one after another (parallel_groups=1), the first
# group's commit real and then the worker held before the next group's, so the kill lands between two
# groups' commits and before the cycle records them, on any machine (a group's commit is one admin
# request: a poll from the test could see all 24 done and recorded first).
WORKER = """
import sys, time, dagster as dg
import offset_pipeline.sync.commit_cycle as commit_cycle
from tests.helpers.sync_cycles import SYNC_ASSETS
from tests.sync.test_interrupted_commit import cycle_config, resources_for
real_commit_group, done = commit_cycle.commit_group, []
def commit_group_then_hold(*args, **kwargs):
    if done:
        time.sleep(600)  # held here until the test kills the worker
    outcome = real_commit_group(*args, **kwargs)
    done.append(outcome)
    return outcome
commit_cycle.commit_group = commit_group_then_hold
b1, b2, dsn, prefix, topic = sys.argv[1:6]
result = dg.materialize(SYNC_ASSETS, resources=resources_for(b1, b2, dsn), run_config=cycle_config(prefix, topic))
print("finished", result.success, flush=True)
"""


def resources_for(b1: str, b2: str, dsn: str) -> dict:
    return {
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=b1),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=b2),
        "clickhouse": ClickHouseResource(dsn=dsn),
        "spark": SparkResource(),
    }


def cycle_config(prefix: str, topic: str) -> dict:
    return {"ops": {
        "offset_snapshot": {"config": {"group_include": f"^{prefix}"}},
        "offset_translations": {"config": {"topic_shapes": {topic: "one_way:idc1"}}},
        "offset_standby_commits": {"config": {"parallel_groups": 1}},
    }}


def test_a_run_killed_mid_commit_leaves_each_group_old_or_new_and_the_next_run_repairs_and_reports(
    kafka_pair, session_mirrors, topic_name, chdb_dsn, tmp_path,
):
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    topic = kafka_pair.create_topic(topic_name, partitions=1)
    producer = Producer({"bootstrap.servers": b1, "log_level": 3})
    for i in range(RECORDS):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    producer.flush(30)
    wait_for(lambda: log_end(b2, topic, 0) >= RECORDS, timeout=60, what="mirrored")
    prefix = f"killed-{uuid.uuid4().hex[:6]}-"
    groups = [f"{prefix}{i:02d}" for i in range(GROUPS)]
    members = [Member(b1, g, topic) for g in groups]  # every group live on idc1, its active cluster
    res = resources_for(b1, b2, chdb_dsn)
    try:
        for m in members:
            m.commit(topic, {0: 10})
        first = dg.materialize(SYNC_ASSETS, resources=res, run_config=cycle_config(prefix, topic))
        assert first.success
        old = {g: committed(b2, g, topic).get(0) for g in groups}
        assert set(old.values()) == {10}  # one-way: the copy of record 10, exactly

        for m in members:
            m.commit(topic, {0: 30})
        close_embedded_clients()  # the worker process takes the embedded engine's data path
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        log = open(tmp_path / "worker.log", "wb")
        worker = subprocess.Popen([sys.executable, "-c", WORKER, b1, b2, chdb_dsn, prefix, topic],
                                  stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            # groups commit in name order: kill as soon as the first one moved
            wait_for(lambda: worker.poll() is not None or committed(b2, groups[0], topic).get(0) == 30,
                     timeout=240, what="the worker's first commit")
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
            log.close()
        assert b"finished" not in (tmp_path / "worker.log").read_bytes(), "the worker finished before the kill"

        after_kill = {g: committed(b2, g, topic).get(0) for g in groups}
        assert set(after_kill.values()) <= {10, 30}, after_kill  # old, or the killed run's safe new one
        moved = sorted(g for g, offset in after_kill.items() if offset == 30)
        assert moved == [groups[0]], after_kill  # the worker was held after the first group's commit

        time.sleep(1)  # the kill released the data path
        repair = dg.materialize(SYNC_ASSETS, resources=res, run_config=cycle_config(prefix, topic))
        assert repair.success
        assert {g: committed(b2, g, topic).get(0) for g in groups} == {g: 30 for g in groups}
        meta = {k: v.value for k, v in repair.asset_materializations_for_node("offset_standby_commits")[0].metadata.items()}
        assert meta["unrecorded_standby_changes"] == len(moved)
        reported = meta.get("unrecorded_standby_changes_first") or []
        assert sorted(c["group_id"] for c in reported) == moved[:20]
        assert all((c["recorded"], c["found"]) == (10, 30) for c in reported)
        checks = {e.check_name: e for e in repair.get_asset_check_evaluations()}
        assert checks["no_loss"].passed
    finally:
        for m in members:
            m.close()
