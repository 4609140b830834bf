"""Sensors: the sync cadence (the stale-topic fast-forward sensor comes with its issue)."""

from offset_pipeline.sensors.sync_cadence import offset_sync_sensor

all_sensors: list = [offset_sync_sensor]
