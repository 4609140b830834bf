"""The sync cycle as one job: every asset of the ``offset_sync`` group, in one process.

In-process because the embedded ClickHouse engine (chdb) admits one process per data folder, and
because a cycle's steps read each other's rows in order. The concurrency tag lets the run queue
hold every sync run behind the one in progress (deploy/dagster.yaml), manual launches included.
"""

from datetime import datetime, timedelta, timezone

import dagster as dg

SYNC_CONCURRENCY_TAG = "offset_pipeline/sync"
# Dagster's run monitoring (deploy/dagster.yaml) fails a run still going after this long: a cycle
# takes seconds, and a run worker killed mid-cycle would otherwise hold the sync sensor for ever.
SYNC_MAX_RUNTIME_TAGS = {"dagster/max_runtime": "300"}

offset_sync_job = dg.define_asset_job(
    "offset_sync_cycle",
    selection=dg.AssetSelection.groups("offset_sync"),
    executor_def=dg.in_process_executor,
    tags={SYNC_CONCURRENCY_TAG: "cycle", **SYNC_MAX_RUNTIME_TAGS},
    description="One sync cycle: snapshot offsets on both clusters, translate, commit to standbys, monitoring rows.",
)

offset_fast_forward_job = dg.define_asset_job(
    "offset_fast_forward",
    selection=dg.AssetSelection.assets("offset_fast_forwards"),
    executor_def=dg.in_process_executor,
    # The same tag as the cycle: a fast-forward never overlaps a sync run (both commit to standby
    # groups; with the embedded ClickHouse, one process at a time).
    tags={SYNC_CONCURRENCY_TAG: "fast_forward", **SYNC_MAX_RUNTIME_TAGS},
    description="Fast-forward one group's quiet low-traffic partitions to the standby log end, re-checked live "
                "(requested by stale_partition_sensor).",
)

offset_failover_audit_job = dg.define_asset_job(
    "offset_failover_audit_job",
    selection=dg.AssetSelection.assets("offset_failover_audit"),
    executor_def=dg.in_process_executor,
    description="Audit what a failover at every snapshot of the selected day(s) would have cost.",
)



def latest_complete_day(scheduled: datetime) -> str:
    """The partition key of the last UTC day complete at ``scheduled``."""
    return (scheduled.astimezone(timezone.utc).date() - timedelta(days=1)).isoformat()


@dg.schedule(
    job=offset_failover_audit_job, cron_schedule="20 0 * * *", execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Audits the latest complete UTC day, 20 minutes after midnight (its snapshots are all in).",
)
def offset_failover_audit_schedule(context: dg.ScheduleEvaluationContext):
    day = latest_complete_day(context.scheduled_execution_time)
    return dg.RunRequest(run_key=f"audit-{day}", partition_key=day)
