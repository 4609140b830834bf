"""The project's code location without the fast-forward (asset, its check and job) and without the
stale-partition sensor: what the UI test must report missing (test_project_parts.py)."""

import dagster as dg

from offset_pipeline.assets import all_assets
from offset_pipeline.definitions import build_resources
from offset_pipeline.definitions import (
    offset_failover_audit_job,
    offset_failover_audit_schedule,
    offset_mirror_check_job,
    offset_mirror_check_schedule,
    offset_sync_continuous_job,
    offset_sync_job,
)
from offset_pipeline.sensors import all_sensors
from offset_pipeline.settings import read_settings

REMOVED = {"asset offset_fast_forwards", "check offset_fast_forwards:no_loss", "job offset_fast_forward",
           "sensor stale_partition_sensor"}

defs = dg.Definitions(
    assets=[a for a in all_assets if dg.AssetKey("offset_fast_forwards") not in a.keys],
    jobs=[offset_sync_job, offset_sync_continuous_job, offset_failover_audit_job, offset_mirror_check_job],
    schedules=[offset_failover_audit_schedule, offset_mirror_check_schedule],
    sensors=[s for s in all_sensors if s.name != "stale_partition_sensor"],  # every other sensor stays
    resources=build_resources(read_settings()),
)
