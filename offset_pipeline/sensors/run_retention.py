"""``dagster_run_retention``: deletes old finished runs with their event logs and compute logs, so
``DAGSTER_HOME`` stays bounded (the rule and the deletion: ``offset_pipeline/housekeeping/run_retention.py``).

It launches no run: the deletion happens in the tick itself, bounded per tick (runs and seconds),
every ``OFFSET_PIPELINE_RUN_RETENTION_INTERVAL_S`` (default 600 s); a backlog drains over the next
ticks. The tick's skip reason and the JSON cursor say what was deleted (counts per job and status,
totals since the sensor started).
"""

import json
import time

import dagster as dg

from offset_pipeline.housekeeping.run_retention import (
    apply_run_retention,
    run_retention,
)
from offset_pipeline.settings import positive_number

# Read at load: a bad value fails the code location, not a tick an hour later.
RUN_RETENTION = run_retention()


def retention_interval_s() -> int:
    return positive_number(None, "OFFSET_PIPELINE_RUN_RETENTION_INTERVAL_S", 600, whole=True)


def evaluate_retention_tick(context: dg.SensorEvaluationContext, now_s: float, policy=RUN_RETENTION) -> dg.SkipReason:
    """The tick, apart from the decorator so tests can pass the clock and the policy."""
    done = apply_run_retention(context.instance, now_s, policy)
    previous = json.loads(context.cursor) if context.cursor else {}
    summary = done.summary()
    total = int(previous.get("deleted_total", 0)) + done.total
    context.update_cursor(json.dumps({"last_tick": summary, "at": int(now_s), "deleted_total": total}))
    kept = (f"kept: successes {policy.success_days:g} d, failures {policy.failure_days:g} d, "
            f"audits {policy.audit_days:g} d")
    if not done.total:
        return dg.SkipReason(f"no run to delete ({kept}); {done.scanned} old runs looked at")
    more = "" if done.stopped_by == "done" else f"; stopped by {done.stopped_by}, the rest next tick"
    return dg.SkipReason(f"deleted {done.total} runs with their event and compute logs "
                         f"{json.dumps(summary['by_job_status'])} ({kept}){more}")


@dg.sensor(
    minimum_interval_seconds=retention_interval_s(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Deletes finished runs older than their retention (successes 1 day, failures 14 days, audits 400 "
                "days by default) with their event logs and compute logs; launches no run.",
)
def dagster_run_retention(context: dg.SensorEvaluationContext):
    return evaluate_retention_tick(context, time.time())
