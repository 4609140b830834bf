"""Sensors: the sync cadence, the stale low-traffic partitions' fast-forward, and run retention."""

from offset_pipeline.sensors.run_retention import dagster_run_retention
from offset_pipeline.sensors.stale_partitions import stale_partition_sensor
from offset_pipeline.sensors.sync_cadence import (
    offset_continuous_sync_sensor,
    offset_sync_sensor,
)
from offset_pipeline.storage.retention import clickhouse_retention

# The ClickHouse retention settings are checked when the code location loads: a TTL shorter than
# the audit horizon is an error here, before any table is touched.
clickhouse_retention()

all_sensors: list = [offset_continuous_sync_sensor, offset_sync_sensor, stale_partition_sensor, dagster_run_retention]
