"""Sensors: the sync cadence, and the stale low-traffic partitions' fast-forward."""

from offset_pipeline.sensors.stale_partitions import stale_partition_sensor
from offset_pipeline.sensors.sync_cadence import offset_sync_sensor

all_sensors: list = [offset_sync_sensor, stale_partition_sensor]
