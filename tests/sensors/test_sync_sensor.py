"""The sync sensors: deterministic run keys, one request per cycle (interval) or per run (continuous),
never overlapping runs of either job."""

import json
import uuid

import dagster as dg

from offset_pipeline.definitions import defs
from offset_pipeline.definitions import offset_sync_job
from offset_pipeline.sensors.sync_cadence import evaluate_continuous_tick, evaluate_sync_tick

INTERVAL = 30


def tick(instance, cursor, now_s):
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    return evaluate_sync_tick(context, now_s, INTERVAL), context.cursor


def test_one_request_per_cycle_with_deterministic_run_keys():
    with dg.instance_for_test() as instance:
        first, cursor = tick(instance, None, 1_000_025)
        assert isinstance(first, dg.RunRequest)
        assert first.run_key == f"offset-sync-{1_000_025 // INTERVAL}"
        assert json.loads(cursor)["last_cycle"] == 1_000_025 // INTERVAL

        again, cursor_again = tick(instance, cursor, 1_000_040)  # same 30 s cycle (1_000_020 .. 1_000_049)
        assert isinstance(again, dg.SkipReason)
        assert "already requested" in again.skip_message
        assert cursor_again == cursor

        later, _ = tick(instance, cursor, 1_000_055)  # next cycle
        assert isinstance(later, dg.RunRequest)
        assert later.run_key == f"offset-sync-{1_000_055 // INTERVAL}"
        assert later.run_key != first.run_key


def test_no_request_while_a_sync_run_is_in_flight():
    with dg.instance_for_test() as instance:
        run = instance.create_run_for_job(
            job_def=defs.resolve_job_def(offset_sync_job.name), run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED
        )
        skipped, cursor = tick(instance, None, 2_000_000)
        assert isinstance(skipped, dg.SkipReason)
        assert run.run_id in skipped.skip_message and "never overlap" in skipped.skip_message
        assert cursor is None  # the cycle stays requestable once the run ends

        instance.report_run_failed(instance.get_run_by_id(run.run_id))
        requested, _ = tick(instance, None, 2_000_000)
        assert isinstance(requested, dg.RunRequest)


def test_continuous_mode_keeps_one_run_going_with_counted_run_keys():
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, cursor=None)
        first = evaluate_continuous_tick(context, 1_000.0)
        assert isinstance(first, dg.RunRequest) and first.run_key == "offset-sync-continuous-1"
        second = evaluate_continuous_tick(dg.build_sensor_context(instance=instance, cursor=context.cursor), 1_005.0)
        assert isinstance(second, dg.RunRequest) and second.run_key == "offset-sync-continuous-2"

        for job_name in ("offset_sync_continuous", "offset_sync_cycle"):  # either job in flight: nothing
            run = instance.create_run_for_job(job_def=defs.resolve_job_def(job_name), run_id=str(uuid.uuid4()),
                                              status=dg.DagsterRunStatus.STARTED)
            busy_context = dg.build_sensor_context(instance=instance, cursor=context.cursor)
            skipped = evaluate_continuous_tick(busy_context, 1_010.0)
            assert isinstance(skipped, dg.SkipReason) and run.run_id in skipped.skip_message
            assert busy_context.cursor == context.cursor
            instance.report_run_failed(instance.get_run_by_id(run.run_id))


def test_an_interval_cycle_is_not_requested_while_a_continuous_run_is_in_flight():
    with dg.instance_for_test() as instance:
        run = instance.create_run_for_job(job_def=defs.resolve_job_def("offset_sync_continuous"),
                                          run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED)
        skipped, _ = tick(instance, None, 3_000_000)
        assert isinstance(skipped, dg.SkipReason) and run.run_id in skipped.skip_message


def test_the_sensors_of_both_modes_are_registered_the_continuous_one_running():
    continuous = defs.resolve_sensor_def("offset_continuous_sync_sensor")
    assert continuous.default_status == dg.DefaultSensorStatus.RUNNING
    assert continuous.job_name == "offset_sync_continuous" and continuous.minimum_interval_seconds == 5
    interval = defs.resolve_sensor_def("offset_sync_sensor")
    assert interval.default_status == dg.DefaultSensorStatus.STOPPED  # started by OFFSET_PIPELINE_SYNC_MODE=interval
    assert interval.job_name == "offset_sync_cycle" and interval.minimum_interval_seconds == 30
    assert defs.resolve_job_def("offset_sync_cycle").tags.get("offset_pipeline/sync") == "cycle"
    with dg.instance_for_test() as instance:  # started by hand in the other mode, it says why it does nothing
        result = interval(dg.build_sensor_context(instance=instance))
    assert "OFFSET_PIPELINE_SYNC_MODE is continuous" in str(result)


def test_the_instance_config_queues_sync_runs_one_at_a_time(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).parents[2] / "deploy" / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        config = instance.get_concurrency_config()
    assert {"key": "offset_pipeline/sync", "limit": 1} in config.run_queue_config.tag_concurrency_limits
    # and Dagster's pool: the sync assets' runs take pool "offset_sync", one run at a time
    assert (config.pool_config.pool_granularity.value, config.pool_config.default_pool_limit) == ("run", 1)
    for asset in ("offset_snapshot", "offset_standby_commits", "offset_continuous_sync", "offset_fast_forwards"):
        assert defs.resolve_assets_def(asset).op.pool == "offset_sync"
