"""The Dagster daemon restarted while a sync run is in flight (the soak's fault ``daemon_restart``,
short): the real ``dagster-daemon run`` with the real ``offset_sync_sensor`` on the project's
``workspace.yaml``, against two real clusters of this test's own (its sensors commit standby offsets
for every group they see, so not the session's shared pair) with the data mirror copying a topic.

The daemon is stopped with SIGTERM (as a service manager does) while a sync run is STARTED, and
started again. The run in flight ends (it is never left STARTED), the sensor's cursor carries on
(every run key once), and a commit made on the active cluster after the restart reaches the standby
within a few cycles: the sync resumed by itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import dagster as dg
import pytest
from confluent_kafka import Producer

from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint
from devstack.paths import REPO_ROOT
from tests.conftest import wait_for
from tests.helpers.dagster_daemon import Daemon
from tests.helpers.groups import Member, committed

pytestmark = [pytest.mark.kafka, pytest.mark.whole_stack]

TOPIC, GROUP = "orders.restart", "payments-restart"
INTERVAL_S = 10
SYNC_JOB = "offset_sync_cycle"


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(TOPIC, value=f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def sync_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(job_name=SYNC_JOB), limit=100))


def failure_messages(instance: dg.DagsterInstance, run_id: str) -> str:
    """Why a run failed: its failure events' messages, for the assertion that names it."""
    return " | ".join(e.message[:400] for e in instance.all_logs(run_id)
                      if e.dagster_event is not None and e.dagster_event.is_failure) or "no failure event"


def test_a_restarted_daemon_ends_the_run_in_flight_and_resumes_the_sync(own_pair, tmp_path):
    for cluster in ("idc1", "idc2"):
        own_pair.create_topic(TOPIC, on=(cluster,))
    stop = threading.Event()
    mirror = DataMirror(MirrorConfig(MirrorEndpoint("idc1", own_pair.bootstrap("idc1")),
                                     MirrorEndpoint("idc2", own_pair.bootstrap("idc2")),
                                     topic_pattern=r"^orders[.]", metadata_refresh_s=0.5))
    mirror_thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True)
    mirror_thread.start()

    home = tmp_path / "dagster_home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OFFSET_PIPELINE_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), PYSPARK_PYTHON=sys.executable,
               OFFSET_PIPELINE_DEVSTACK_DIR=str(tmp_path / "stack"),
               OFFSET_PIPELINE_IDC1_BOOTSTRAP=own_pair.bootstrap("idc1"),
               OFFSET_PIPELINE_IDC2_BOOTSTRAP=own_pair.bootstrap("idc2"),
               OFFSET_PIPELINE_CLICKHOUSE_DSN=f"chdb://{tmp_path / 'clickhouse'}",
               OFFSET_PIPELINE_SYNC_MODE="interval", OFFSET_PIPELINE_SYNC_INTERVAL_S=str(INTERVAL_S),
               # local Spark starts a JVM in every run worker: slow on a loaded 2-core machine
               OFFSET_PIPELINE_SPARK_TIMEOUT_S="300")
    subprocess.run([sys.executable, "-m", "devstack", "instance-config", str(home)], check=True,
                   cwd=REPO_ROOT, env=env, capture_output=True)
    instance = dg.DagsterInstance.from_config(str(home))
    instance.get_runs(limit=1)  # the SQLite schema made before the daemon starts (as bin/up does)
    daemon = Daemon(env, tmp_path / "dagster-daemon.log")
    member = None
    try:
        produce(own_pair.bootstrap("idc1"), 50)
        # The group's live consumer on idc1 (its members tell the sync which cluster is active).
        member = Member(own_pair.bootstrap("idc1"), GROUP, TOPIC)
        member.commit(TOPIC, {0: 50})
        daemon.start()
        # (>=: an at-least-once mirror may have copied a record twice, so the copy of idc1:49 is at 49 or later)
        wait_for(lambda: committed(own_pair.bootstrap("idc2"), GROUP, TOPIC).get(0, -1) >= 50, timeout=600,
                 what="the first standby commit")  # the first run worker's local Spark: a JVM's start

        # Stop the daemon while a sync run is in flight.
        in_flight = wait_for(lambda: next((r for r in sync_runs(instance) if r.status == dg.DagsterRunStatus.STARTED),
                                          None), timeout=120, what="a sync run in flight")
        assert daemon.terminate() is not None
        stopped_at = time.time()
        time.sleep(INTERVAL_S * 2)  # a daemon that is down launches nothing
        launched_while_down = [r for r in sync_runs(instance)
                               if (instance.get_run_record_by_id(r.run_id).create_timestamp.timestamp()) > stopped_at + 2]
        assert launched_while_down == [], "runs were launched with the daemon stopped"

        daemon.start()
        produce(own_pair.bootstrap("idc1"), 30)
        member.commit(TOPIC, {0: 80})
        restarted_at = time.time()
        wait_for(lambda: committed(own_pair.bootstrap("idc2"), GROUP, TOPIC).get(0, -1) >= 80, timeout=300,
                 what="the standby commit after the restart")
        resumed_s = time.time() - restarted_at

        ended = wait_for(lambda: (lambda r: r if r.is_finished else None)(instance.get_run_by_id(in_flight.run_id)),
                         timeout=120, what=f"run {in_flight.run_id} (in flight at the stop) to end")

        def launched_after_restart() -> list[dg.DagsterRun]:
            return [r for r in sync_runs(instance)
                    if instance.get_run_record_by_id(r.run_id).create_timestamp.timestamp() > restarted_at - 5]

        # the standby may have caught up through the run in flight at the stop (its worker survives
        # the daemon); the restarted daemon's sensor must launch runs of its own that succeed
        wait_for(lambda: any(r.status == dg.DagsterRunStatus.SUCCESS for r in launched_after_restart()), timeout=300,
                 what="a sync run launched by the restarted daemon to succeed")
        runs = sync_runs(instance)
        keys = [r.tags.get("dagster/run_key") for r in runs]
        print(f"run in flight at the stop ended {ended.status.value}; {len(runs)} sync runs; "
              f"standby caught up {resumed_s:.0f}s after the restart")
        assert ended.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)
        assert len(keys) == len(set(keys)), f"a run key was requested twice: {keys}"
        failed = [r for r in runs if r.status == dg.DagsterRunStatus.FAILURE and r.run_id != in_flight.run_id]
        assert not failed, ("a sync run other than the one in flight at the stop failed: "
                            + "; ".join(f"{r.run_id}: {failure_messages(instance, r.run_id)}" for r in failed))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- dagster-daemon log (tail) ---\n{daemon.tail()}") from None
    finally:
        daemon.kill_group()
        if member is not None:
            member.close()
        stop.set()
        mirror_thread.join(timeout=30)
        instance.dispose()
