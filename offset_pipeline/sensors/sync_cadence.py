"""The sync sensors: they keep the sync going, in the mode ``OFFSET_PIPELINE_SYNC_MODE`` names (the
sensor of the other mode is stopped by default, and skips saying so when started).

* ``continuous`` (the default), ``offset_continuous_sync_sensor``: one run of job ``offset_sync_continuous`` at a time. A run syncs
  for ``OFFSET_PIPELINE_CONTINUOUS_RUN_S`` and ends; the sensor (every 5 s) starts the next, so the
  sync pauses only for a run's start. Run keys count the runs (``offset-sync-continuous-<n>``, the
  number kept in the cursor): each request is a new run, never a replay of an old key.
* ``interval``, ``offset_sync_sensor``: job ``offset_sync_cycle`` every ``OFFSET_PIPELINE_SYNC_INTERVAL_S`` (30 s). Run keys
  are the cycle number (``offset-sync-<epoch seconds // interval>``), so one cycle is requested at
  most once however often the sensor ticks.

Either way, nothing is requested while an earlier sync run (of either job) is queued or running:
runs must not overlap and commit out of order.
"""

import json
import time

import dagster as dg

from offset_pipeline.run_targets import CONTINUOUS_JOB, SYNC_JOB
from offset_pipeline.settings import positive_number, sync_mode

IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
#: How often the sensor looks in continuous mode: the gap between one run's end and the next's start.
CONTINUOUS_TICK_S = 5


def sync_interval_s() -> int:
    return positive_number(None, "OFFSET_PIPELINE_SYNC_INTERVAL_S", 30, whole=True)


def _in_flight(context: dg.SensorEvaluationContext) -> dg.SkipReason | None:
    for job in (SYNC_JOB, CONTINUOUS_JOB):
        runs = context.instance.get_runs(filters=dg.RunsFilter(job_name=job, statuses=IN_FLIGHT), limit=1)
        if runs:
            return dg.SkipReason(f"sync run {runs[0].run_id} ({job}) is still {runs[0].status.value}; "
                                 "sync runs never overlap")
    return None


def evaluate_sync_tick(context: dg.SensorEvaluationContext, now_s: float, interval_s: int):
    """The interval mode's decision, apart from the decorator so tests can pass the clock."""
    cycle = int(now_s // interval_s)
    cursor = json.loads(context.cursor) if context.cursor else {}
    busy = _in_flight(context)
    if busy is not None:
        return dg.SkipReason(f"cycle {cycle} not requested: {busy.skip_message}")
    if cursor.get("last_cycle") == cycle:
        return dg.SkipReason(f"cycle {cycle} was already requested; next one in {interval_s - now_s % interval_s:.0f}s")
    context.update_cursor(json.dumps({"last_cycle": cycle, "requested_at": int(now_s)}))
    return dg.RunRequest(run_key=f"offset-sync-{cycle}", tags={"offset_pipeline/cycle": str(cycle)})


def evaluate_continuous_tick(context: dg.SensorEvaluationContext, now_s: float):
    """The continuous mode's decision: a new run whenever none is in flight."""
    cursor = json.loads(context.cursor) if context.cursor else {}
    busy = _in_flight(context)
    if busy is not None:
        return busy
    number = int(cursor.get("continuous_runs", 0)) + 1
    context.update_cursor(json.dumps({**cursor, "continuous_runs": number, "requested_at": int(now_s)}))
    return dg.RunRequest(run_key=f"offset-sync-continuous-{number}",
                         tags={"offset_pipeline/continuous_run": str(number)})


MODE = sync_mode()


def _other_mode(wanted: str) -> dg.SkipReason | None:
    if MODE != wanted:
        return dg.SkipReason(f"OFFSET_PIPELINE_SYNC_MODE is {MODE}: this sensor keeps the {wanted} mode going; "
                             "stop it and run the other sync sensor")
    return None


@dg.sensor(
    job_name=CONTINUOUS_JOB,
    minimum_interval_seconds=CONTINUOUS_TICK_S,
    default_status=dg.DefaultSensorStatus.RUNNING if MODE == "continuous" else dg.DefaultSensorStatus.STOPPED,
    description="Keeps one continuous sync run going (OFFSET_PIPELINE_SYNC_MODE=continuous, the default): a new run "
                "whenever none is in flight.",
)
def offset_continuous_sync_sensor(context: dg.SensorEvaluationContext):
    return _other_mode("continuous") or evaluate_continuous_tick(context, time.time())


@dg.sensor(
    job_name=SYNC_JOB,
    minimum_interval_seconds=sync_interval_s(),
    default_status=dg.DefaultSensorStatus.RUNNING if MODE == "interval" else dg.DefaultSensorStatus.STOPPED,
    description="Requests one sync cycle per OFFSET_PIPELINE_SYNC_INTERVAL_S (default 30 s) in the interval mode "
                "(OFFSET_PIPELINE_SYNC_MODE=interval), never while a sync run is in flight.",
)
def offset_sync_sensor(context: dg.SensorEvaluationContext):
    return _other_mode("interval") or evaluate_sync_tick(context, time.time(), sync_interval_s())
