"""``offset_sync_sensor``: launches the sync cycle every ``OFFSET_PIPELINE_SYNC_INTERVAL_S`` (30 s).

Run keys are the cycle number (``offset-sync-<epoch seconds // interval>``), so one cycle is
requested at most once however often the sensor ticks. A cycle is never requested while an
earlier sync run is queued or running: runs must not overlap and commit out of order.
"""

import json
import os
import time

import dagster as dg

from offset_pipeline.sensors.run_targets import SYNC_JOB

IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def sync_interval_s() -> int:
    return int(os.environ.get("OFFSET_PIPELINE_SYNC_INTERVAL_S", "30"))


def evaluate_sync_tick(context: dg.SensorEvaluationContext, now_s: float, interval_s: int):
    """The tick's decision, apart from the decorator so tests can pass the clock."""
    cycle = int(now_s // interval_s)
    cursor = json.loads(context.cursor) if context.cursor else {}
    in_flight = context.instance.get_runs(
        filters=dg.RunsFilter(job_name=SYNC_JOB, statuses=IN_FLIGHT), limit=1
    )
    if in_flight:
        run = in_flight[0]
        return dg.SkipReason(
            f"cycle {cycle} not requested: sync run {run.run_id} is still {run.status.value}; "
            "sync runs never overlap"
        )
    if cursor.get("last_cycle") == cycle:
        return dg.SkipReason(f"cycle {cycle} was already requested; next one in {interval_s - now_s % interval_s:.0f}s")
    context.update_cursor(json.dumps({"last_cycle": cycle, "requested_at": int(now_s)}))
    return dg.RunRequest(run_key=f"offset-sync-{cycle}", tags={"offset_pipeline/cycle": str(cycle)})


@dg.sensor(
    job_name=SYNC_JOB,
    minimum_interval_seconds=sync_interval_s(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests one sync cycle per interval (default 30 s), never while one is in flight.",
)
def offset_sync_sensor(context: dg.SensorEvaluationContext):
    return evaluate_sync_tick(context, time.time(), sync_interval_s())
