"""Run retention: the pure rule (table-driven), and deleting real runs of a SQLite DagsterInstance
with their event logs, event shard files and compute logs, bounded per pass; the sensor's tick;
the instance's tick retention in deploy/dagster.yaml."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from devstack.paths import REPO_ROOT
from offset_pipeline.housekeeping.run_retention import (
    AUDIT_JOB,
    delete_run_completely,
    DAY_S,
    RunFacts,
    RunRetention,
    apply_run_retention,
    run_retention,
    runs_to_delete,
    should_delete,
)
from offset_pipeline.sensors.run_retention import evaluate_retention_tick

POLICY = RunRetention(success_days=1, failure_days=14, audit_days=400)
NOW = 1_800_000_000.0

# (job, status, days since it ended (None: never started; created that long ago), deleted?)
RULE_CASES = [
    ("offset_sync_cycle", "SUCCESS", 0.5, False),
    ("offset_sync_cycle", "SUCCESS", 1.0, True),
    ("offset_sync_cycle", "SUCCESS", 3.0, True),
    ("offset_fast_forward", "SUCCESS", 1.5, True),
    ("__ASSET_JOB", "SUCCESS", 1.5, True),
    ("offset_sync_cycle", "FAILURE", 3.0, False),
    ("offset_sync_cycle", "FAILURE", 14.0, True),
    ("offset_fast_forward", "CANCELED", 13.9, False),
    ("offset_fast_forward", "CANCELED", 20.0, True),
    (AUDIT_JOB, "SUCCESS", 30.0, False),
    (AUDIT_JOB, "FAILURE", 399.0, False),
    (AUDIT_JOB, "SUCCESS", 400.0, True),
    # never deleted while not finished, however old
    ("offset_sync_cycle", "STARTED", 900.0, False),
    ("offset_sync_cycle", "QUEUED", 900.0, False),
    ("offset_sync_cycle", "NOT_STARTED", 900.0, False),
    ("offset_sync_cycle", "STARTING", 900.0, False),
    ("offset_sync_cycle", "CANCELING", 900.0, False),
    (AUDIT_JOB, "STARTED", 900.0, False),
]


@pytest.mark.parametrize("job, status, days, deleted", RULE_CASES)
def test_the_rule(job, status, days, deleted):
    run = RunFacts("r", job, status, created_s=NOW - days * DAY_S - 60, ended_s=NOW - days * DAY_S)
    assert should_delete(run, NOW, POLICY) is deleted


def test_the_age_counts_from_the_end_and_from_the_creation_when_never_ended():
    long_run = RunFacts("long", "offset_sync_cycle", "SUCCESS", created_s=NOW - 3 * DAY_S, ended_s=NOW - 0.5 * DAY_S)
    never_started = RunFacts("never", "offset_sync_cycle", "FAILURE", created_s=NOW - 15 * DAY_S)
    assert runs_to_delete([long_run, never_started], NOW, POLICY) == ["never"]


def test_settings_from_the_environment():
    assert run_retention({}) == RunRetention()
    assert run_retention({"OFFSET_PIPELINE_RUN_RETENTION_SUCCESS_DAYS": "0.25",
                          "OFFSET_PIPELINE_RUN_RETENTION_MAX_RUNS_PER_TICK": "50"}) == RunRetention(
        success_days=0.25, max_runs_per_tick=50)
    for bad in ({"OFFSET_PIPELINE_RUN_RETENTION_FAILURE_DAYS": "0"},
                {"OFFSET_PIPELINE_RUN_RETENTION_AUDIT_DAYS": "a year"},
                {"OFFSET_PIPELINE_RUN_RETENTION_MAX_RUNS_PER_TICK": "1.5"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            run_retention(bad)


# -- real runs on a SQLite instance ----------------------------------------------------------------

@dg.op
def talk() -> int:
    print("some stdout of the step")  # a compute log with content
    return 1


@dg.op
def fail() -> None:
    raise RuntimeError("this run fails")


sync_like = dg.GraphDefinition(name="offset_sync_cycle", node_defs=[talk]).to_job()
failing_sync = dg.GraphDefinition(name="offset_fast_forward", node_defs=[fail]).to_job()
audit_like = dg.GraphDefinition(name=AUDIT_JOB, node_defs=[talk]).to_job()


@pytest.fixture
def instance(tmp_path):
    """A DAGSTER_HOME as bin/up makes it: deploy/dagster.yaml, SQLite storage, local compute logs."""
    (tmp_path / "dagster.yaml").write_text((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        yield instance


def _execute(instance, job) -> str:
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    return result.run_id


def _storage(instance) -> Path:
    return Path(instance.root_directory) / "storage"  # compute logs: storage/<run_id>/compute_logs/


def _left_behind(instance, run_id: str) -> dict:
    """Everything a run leaves in the instance, by kind."""
    storage = _storage(instance)
    left = {  # files first: reading a run's events opens (creates) its shard file
        "shard_file": (Path(instance.root_directory) / "history" / "runs" / f"{run_id}.db").exists(),
        "compute_logs": any((storage / run_id).rglob("*.out")) if (storage / run_id).exists() else False,
        "run": instance.get_run_by_id(run_id) is not None,
        "index_events": bool(instance.get_records_for_run(run_id, limit=1).records),
    }
    left["events"] = bool(instance.all_logs(run_id))
    return left


def test_old_runs_are_deleted_with_their_event_logs_and_compute_logs(instance):
    ok, failed, audit = _execute(instance, sync_like), _execute(instance, failing_sync), _execute(instance, audit_like)
    in_flight = instance.create_run_for_job(sync_like, status=dg.DagsterRunStatus.STARTED).run_id
    for run_id in (ok, failed, audit):
        left = _left_behind(instance, run_id)
        assert left == {"run": True, "events": True, "index_events": True, "shard_file": True,
                        "compute_logs": True}, (run_id, left)
    assert instance.get_run_by_id(failed).status == dg.DagsterRunStatus.FAILURE
    now = time.time()

    # 2 days on: the successful sync run goes, the failure, the audit and the in-flight run stay
    done = apply_run_retention(instance, now + 2 * DAY_S, POLICY)
    assert done.total == 1 and dict(done.deleted) == {("offset_sync_cycle", "SUCCESS"): 1}
    assert not (_storage(instance) / ok).exists()
    assert not any(_left_behind(instance, ok).values())
    for kept in (failed, audit):
        assert all(_left_behind(instance, kept).values())
    assert instance.get_run_by_id(in_flight) is not None

    # 15 days on: the failure goes too
    done = apply_run_retention(instance, now + 15 * DAY_S, POLICY)
    assert dict(done.deleted) == {("offset_fast_forward", "FAILURE"): 1}
    assert not any(_left_behind(instance, failed).values())
    assert all(_left_behind(instance, audit).values())

    # 401 days on: the audit run goes; the run still in flight never does
    done = apply_run_retention(instance, now + 401 * DAY_S, POLICY)
    assert dict(done.deleted) == {(AUDIT_JOB, "SUCCESS"): 1}
    assert not any(_left_behind(instance, audit).values())
    assert [r.run_id for r in instance.get_runs()] == [in_flight]


def test_a_pass_is_bounded_and_the_next_one_goes_on(instance):
    runs = [_execute(instance, sync_like) for _ in range(3)]
    kept_audit = _execute(instance, audit_like)  # an older kept run before the deletable ones must not block
    runs.append(_execute(instance, sync_like))
    bounded = RunRetention(success_days=1, failure_days=14, audit_days=400, max_runs_per_tick=2)
    later = time.time() + 2 * DAY_S

    first = apply_run_retention(instance, later, bounded)
    assert (first.total, first.stopped_by) == (2, "max_runs")
    second = apply_run_retention(instance, later, bounded)
    assert (second.total, second.stopped_by) == (2, "done")  # the last two: nothing left when the bound came
    third = apply_run_retention(instance, later, bounded)
    assert (third.total, third.stopped_by) == (0, "done")
    assert [r.run_id for r in instance.get_runs()] == [kept_audit]
    assert all(instance.get_run_by_id(r) is None for r in runs)


def test_the_sensor_tick_says_what_it_deleted_in_its_skip_reason_and_cursor(instance):
    for _ in range(2):
        _execute(instance, sync_like)
    _execute(instance, failing_sync)
    with dg.build_sensor_context(instance=instance) as context:
        result = evaluate_retention_tick(context, time.time() + 2 * DAY_S, POLICY)
        assert "deleted 2 runs" in result.skip_message
        assert '"offset_sync_cycle:SUCCESS": 2' in result.skip_message
        cursor = json.loads(context.cursor)
        assert cursor["deleted_total"] == 2 and cursor["last_tick"]["by_job_status"] == {"offset_sync_cycle:SUCCESS": 2}
        result = evaluate_retention_tick(context, time.time() + 2 * DAY_S, POLICY)
        assert result.skip_message.startswith("no run to delete")
        assert json.loads(context.cursor)["deleted_total"] == 2


def test_the_sensor_is_in_the_code_location_and_running_by_default():
    from offset_pipeline.definitions import defs

    sensor = defs.resolve_sensor_def("dagster_run_retention")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.minimum_interval_seconds == 600


def test_the_instance_purges_sensor_and_schedule_ticks(tmp_path):
    """deploy/dagster.yaml is a valid instance config whose tick retention Dagster reads."""
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.scheduler.instigation import TickStatus

    config = yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        sensor = instance.get_tick_retention_settings(InstigatorType.SENSOR)
        schedule = instance.get_tick_retention_settings(InstigatorType.SCHEDULE)
    assert sensor[TickStatus.SKIPPED] == 1 and sensor[TickStatus.SUCCESS] == 2 and sensor[TickStatus.FAILURE] == 14
    assert all(0 < days <= 90 for days in schedule.values())
    assert os.path.exists(tmp_path / "dagster.yaml")


@dg.asset(check_specs=[dg.AssetCheckSpec("always_fine", asset="checked")])
def checked() -> dg.MaterializeResult:
    return dg.MaterializeResult(check_results=[dg.AssetCheckResult(check_name="always_fine", passed=True)])


def test_a_deleted_runs_asset_check_executions_go_with_it(instance):
    # Dagster's delete_run leaves them in the index: five per sync run, ~28 MB a day if nothing did.
    key = dg.AssetCheckKey(dg.AssetKey("checked"), "always_fine")
    old, new = (dg.materialize([checked], instance=instance).run_id for _ in range(2))

    def executions() -> list[str]:
        return [e.run_id for e in instance.event_log_storage.get_asset_check_execution_history(key, limit=10)]

    assert sorted(executions()) == sorted([old, new])
    delete_run_completely(instance, old)
    assert executions() == [new]
