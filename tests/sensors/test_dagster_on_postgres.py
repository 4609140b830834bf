"""Dagster on PostgreSQL (docs/operating/postgres.md): the real ``dagster-daemon run`` on the
project's ``workspace.yaml`` with DAGSTER_HOME's storage on a real PostgreSQL server
(devstack/postgres.py), written by ``python -m devstack instance-config --postgres`` as bin/up writes
it, against two clusters of this test's own (the sensors commit standby offsets for every group they
see) with the data mirror both ways.

In one daemon session:

* the sync sensor's runs (interval mode) commit a group's standby offset;
* the stale sensor finds a quiet low-traffic partition (two-way topic, every record from the active
  side: no anchor, the cycles cannot sync it) and its fast-forward run commits the standby log end;
* the audit schedule (``OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON``, every minute here) launches
  ``audit-<yesterday>`` and it succeeds;
* an asset backfill of the audit over two days completes;

and all of it is in PostgreSQL: its runs, ticks, backfill and the daemon's heartbeats are rows of the
server's tables, and DAGSTER_HOME holds no SQLite storage.

The instance admits one run at a time (``max_concurrent_runs: 1``): the runs share the embedded
ClickHouse, which one process holds at a time, and the test is about where Dagster keeps its state.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import dagster as dg
import psycopg2
import pytest
import yaml

from devstack.instance_config import PG_URL_ENV
from devstack.mirror import DataMirror, MirrorConfig
from devstack.paths import REPO_ROOT
from devstack.postgres import LocalPostgres, connection_url
from offset_pipeline.definitions import latest_complete_day
from offset_pipeline.run_targets import AUDIT_JOB, FAST_FORWARD_JOB, SYNC_JOB
from tests.conftest import wait_for
from tests.helpers.dagster_daemon import Daemon
from tests.helpers.groups import Member
from tests.helpers.one_partition import committed, produce
from tests.helpers.records import log_end

pytestmark = [pytest.mark.kafka, pytest.mark.whole_stack]

PREFIX = "pgstore."
SYNCED_TOPIC, SYNCED_GROUP = f"{PREFIX}orders", "payments-on-postgres"
QUIET_TOPIC, QUIET_GROUP = f"{PREFIX}quiet", "quiet-on-postgres"
SCHEDULE = "offset_failover_audit_schedule"


@pytest.fixture
def postgres(tmp_path):
    server = LocalPostgres(tmp_path / "postgres")
    with server.running():
        yield server


def mirrors_both_ways(pair, stop: threading.Event) -> list[threading.Thread]:
    threads = []
    for source, target in (("idc1", "idc2"), ("idc2", "idc1")):
        mirror = DataMirror(MirrorConfig(pair.endpoint(source), pair.endpoint(target),
                                         topic_pattern=rf"^{PREFIX.replace('.', '[.]')}", metadata_refresh_s=0.5))
        thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True, name=f"mirror-{source}")
        thread.start()
        threads.append(thread)
    return threads


def runs_of(instance: dg.DagsterInstance, job: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=100))


def succeeded(instance: dg.DagsterInstance, job: str, **tags: str) -> dg.DagsterRun | None:
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job, statuses=[dg.DagsterRunStatus.SUCCESS],
                                                   tags=tags), limit=1)
    return runs[0] if runs else None


def fast_forward_of(instance: dg.DagsterInstance, group: str) -> dg.DagsterRun | None:
    """The stale sensor's successful fast-forward run of ``group`` (one run per group)."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=FAST_FORWARD_JOB, statuses=[dg.DagsterRunStatus.SUCCESS]))
    return next((r for r in runs if r.run_config["ops"]["offset_fast_forwards"]["config"]["group_id"] == group), None)


def backfill_ended(instance: dg.DagsterInstance, backfill_id: str):
    from dagster._core.execution.backfill import BulkActionStatus

    backfill = instance.get_backfill(backfill_id)
    return backfill if backfill.status is not BulkActionStatus.REQUESTED else None


def pg_rows(server: LocalPostgres, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows straight from the server (parameters bound by the driver, never formatted into the SQL)."""
    with psycopg2.connect(connection_url(server.socket_dir, scheme="postgresql")) as connection, \
            connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def write_instance_config(home, env: dict[str, str]) -> None:
    """``dagster.yaml`` as bin/up writes it with OFFSET_PIPELINE_DAGSTER_STORAGE=postgres, then one run at a time."""
    done = subprocess.run([sys.executable, "-m", "devstack", "instance-config", str(home), "--postgres"],
                          check=False, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    assert config["storage"] == {"postgres": {"postgres_url": {"env": PG_URL_ENV}}}
    config["concurrency"]["runs"]["max_concurrent_runs"] = 1
    (home / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def request_audit_backfill(instance: dg.DagsterInstance, days: list[str]) -> str:
    """An asset backfill of the audit over ``days``, as the UI launches it; the daemon processes it."""
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from offset_pipeline.definitions import defs

    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(), asset_graph=defs.resolve_asset_graph(), partition_names=days,
        asset_selection=[dg.AssetKey("offset_failover_audit")], backfill_timestamp=time.time(), tags={},
        dynamic_partitions_store=instance, all_partitions=False, title="audit backfill on postgres",
        description="two days, as launched from the UI", run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def test_the_daemon_runs_sensors_schedule_and_a_backfill_on_postgres(own_pair, postgres, tmp_path, monkeypatch):
    from dagster._core.execution.backfill import BulkActionStatus

    started = time.monotonic()
    idc1, idc2 = own_pair.bootstrap("idc1"), own_pair.bootstrap("idc2")
    for topic in (SYNCED_TOPIC, QUIET_TOPIC):
        own_pair.create_topic(topic)
    stop = threading.Event()
    mirror_threads = mirrors_both_ways(own_pair, stop)

    home = tmp_path / "dagster_home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OFFSET_PIPELINE_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), PYSPARK_PYTHON=sys.executable, **{PG_URL_ENV: postgres.url},
               OFFSET_PIPELINE_DEVSTACK_DIR=str(tmp_path / "stack"),
               OFFSET_PIPELINE_IDC1_BOOTSTRAP=idc1, OFFSET_PIPELINE_IDC2_BOOTSTRAP=idc2,
               OFFSET_PIPELINE_CLICKHOUSE_DSN=f"chdb://{tmp_path / 'clickhouse'}",
               OFFSET_PIPELINE_SYNC_MODE="interval", OFFSET_PIPELINE_SYNC_INTERVAL_S="10",
               # the quiet topic is two-way: every record from idc1 leaves the cycles no anchor
               OFFSET_PIPELINE_TOPIC_SHAPES=f"{QUIET_TOPIC}=two_way",
               OFFSET_PIPELINE_STALE_WINDOW_S="15", OFFSET_PIPELINE_STALE_SENSOR_INTERVAL_S="5",
               OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON="* * * * *",
               # local Spark starts a JVM in every run worker: slow on a loaded 2-core machine
               OFFSET_PIPELINE_SPARK_TIMEOUT_S="300")
    write_instance_config(home, env)
    monkeypatch.setenv(PG_URL_ENV, postgres.url)
    instance = dg.DagsterInstance.from_config(str(home))
    instance.get_runs(limit=1)  # the schema made before the daemon starts (as on a fresh server)
    daemon = Daemon(env, tmp_path / "dagster-daemon.log")
    members = []
    try:
        produce(idc1, SYNCED_TOPIC, [f"r{i}" for i in range(50)])
        produce(idc1, QUIET_TOPIC, [f"q{i}" for i in range(3)])
        members.append(Member(idc1, SYNCED_GROUP, SYNCED_TOPIC))
        members[-1].commit(SYNCED_TOPIC, {0: 50})
        members.append(Member(idc1, QUIET_GROUP, QUIET_TOPIC))
        members[-1].commit(QUIET_TOPIC, {0: 3})
        today = datetime.now(timezone.utc).date()
        backfill_days = [(today - timedelta(days=n)).isoformat() for n in (2, 1)]
        backfill_id = request_audit_backfill(instance, backfill_days)
        daemon.start()
        daemon_started = time.monotonic()

        # the sync sensor's cycles commit the synced group on its standby
        wait_for(lambda: (committed(idc2, SYNCED_GROUP, SYNCED_TOPIC) or -1) >= 50, timeout=480,
                 what="the sync cycles' standby commit")
        wait_for(lambda: succeeded(instance, SYNC_JOB), timeout=120, what="a successful sync run")
        synced_s = time.monotonic() - daemon_started

        # the stale sensor's fast-forward moves the quiet group to the standby's log end
        fast_forward = wait_for(lambda: fast_forward_of(instance, QUIET_GROUP), timeout=480,
                                what=f"a successful fast-forward run of {QUIET_GROUP}")
        assert fast_forward.tags["dagster/sensor_name"] == "stale_partition_sensor"
        assert committed(idc2, QUIET_GROUP, QUIET_TOPIC) == log_end(idc2, QUIET_TOPIC)
        fast_forwarded_s = time.monotonic() - daemon_started

        # the schedule's run, and the backfill
        audit = wait_for(lambda: succeeded(instance, AUDIT_JOB, **{"dagster/schedule_name": SCHEDULE}),
                         timeout=150, what="the audit schedule's run to succeed")
        created = instance.get_run_record_by_id(audit.run_id).create_timestamp
        assert audit.tags["dagster/run_key"] == f"audit-{audit.tags['dagster/partition']}"
        assert audit.tags["dagster/partition"] in {latest_complete_day(created - timedelta(minutes=1)),
                                                   latest_complete_day(created)}
        final = wait_for(lambda: backfill_ended(instance, backfill_id), timeout=180, what="the audit backfill to end")
        assert final.status is BulkActionStatus.COMPLETED_SUCCESS, final.status
        backfill_runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        # the audit's single-run backfill policy: the whole range in one run
        assert [r.status for r in backfill_runs] == [dg.DagsterRunStatus.SUCCESS], backfill_runs
        assert (backfill_runs[0].tags["dagster/asset_partition_range_start"],
                backfill_runs[0].tags["dagster/asset_partition_range_end"]) == (backfill_days[0], backfill_days[-1])
        print(f"on PostgreSQL: standby commit {synced_s:.0f}s after the daemon's start, fast-forward at "
              f"{fast_forwarded_s:.0f}s, schedule and backfill by {time.monotonic() - daemon_started:.0f}s; "
              f"{len(runs_of(instance, SYNC_JOB))} sync runs")

        # ... and it is all in PostgreSQL
        in_pg = {(job, status) for job, status in pg_rows(postgres, "SELECT pipeline_name, status FROM runs")}
        assert {(SYNC_JOB, "SUCCESS"), (FAST_FORWARD_JOB, "SUCCESS"), (AUDIT_JOB, "SUCCESS")} <= in_pg
        assert pg_rows(postgres, "SELECT status FROM bulk_actions WHERE key = %s", (backfill_id,)) == [
            ("COMPLETED_SUCCESS",)]
        ticks = {status for (status,) in pg_rows(
            postgres, "SELECT t.status FROM job_ticks t JOIN jobs j ON j.job_origin_id = t.job_origin_id "
                      "WHERE j.job_type = %s", ("SCHEDULE",))}
        assert "SUCCESS" in ticks, ticks
        beating = {daemon_type for (daemon_type,) in pg_rows(postgres, "SELECT daemon_type FROM daemon_heartbeats")}
        assert {"SENSOR", "SCHEDULER", "BACKFILL", "QUEUED_RUN_COORDINATOR"} <= beating, beating
        sqlite_files = [str(p.relative_to(home)) for p in home.rglob("*") if p.suffix in (".db", ".sqlite")]
        assert sqlite_files == [], f"SQLite storage beside PostgreSQL: {sqlite_files}"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- dagster-daemon log (tail) ---\n{daemon.tail()}") from None
    finally:
        daemon.kill_group()
        for member in members:
            member.close()
        stop.set()
        for thread in mirror_threads:
            thread.join(timeout=30)
        instance.dispose()
        print(f"test took {time.monotonic() - started:.0f}s")
