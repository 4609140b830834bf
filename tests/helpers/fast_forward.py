"""The stale-partition path run in this process in order, as the daemon would launch it: sync cycles
(with monitoring rows), sensor ticks and fast-forward runs; and a failover afterwards."""

from __future__ import annotations

import re
import time

import dagster as dg
from confluent_kafka import Consumer

from offset_pipeline.assets import (
    offset_fast_forwards,
    offset_snapshot,
    offset_standby_commits,
    offset_sync_metrics,
    offset_translations,
)
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.resources.mirrors import MirrorsResource
from offset_pipeline.sensors.stale_partitions import evaluate_stale_tick
from tests.helpers.one_partition import committed, produce, read_values
from tests.helpers.sync_cycles import decision_lines

#: The stale window, shortened to seconds.
WINDOW_S = 6.0


class StaleStack:
    """Sync cycles (with monitoring rows), sensor ticks and fast-forward runs for some groups."""

    def __init__(self, kafka_pair, chdb_dsn, groups: list[str], topics: list[str], mirrors: MirrorsResource,
                 window_s: float = WINDOW_S):
        self.kafka_pair, self.window_s = kafka_pair, window_s
        self.groups, self.topics = groups, topics
        self.clusters = {
            name: KafkaClusterResource(cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(name))
            for name in ("idc1", "idc2")
        }
        self.clickhouse = ClickHouseResource(dsn=chdb_dsn)
        self.mirrors = mirrors
        self.resources = {**self.clusters, "clickhouse": self.clickhouse, "spark": SparkResource(), "mirrors": mirrors}
        self.instance = dg.DagsterInstance.ephemeral()
        self.cursor: str | None = None
        self.lines: list[str] = []

    @property
    def client(self):
        return self.clickhouse.get_client()

    def cycle(self) -> dg.ExecuteInProcessResult:
        include = "^(" + "|".join(re.escape(g) for g in self.groups) + ")$"
        with decision_lines() as lines:
            result = dg.materialize(
                [offset_snapshot, offset_translations, offset_standby_commits, offset_sync_metrics],
                resources=self.resources, instance=self.instance,
                run_config={"ops": {
                    "offset_snapshot": {"config": {"group_include": include}},
                    "offset_translations": {"config": {"topic_shapes": {t: "two_way" for t in self.topics},
                                                       "detect_shapes": False}},
                }},
            )
        self.lines += lines
        assert result.success
        return result

    def tick(self):
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursor)
        result = evaluate_stale_tick(context, int(time.time() * 1000), self.clickhouse, self.clusters, self.mirrors,
                                     window_s=self.window_s)
        if isinstance(result, dg.SensorResult) and result.cursor is not None:
            self.cursor = result.cursor
        return result

    def fast_forward(self, run_config: dict) -> dg.ExecuteInProcessResult:
        with decision_lines() as lines:
            result = dg.materialize([offset_fast_forwards], resources=self.resources, instance=self.instance,
                                    run_config=run_config)
        self.lines += lines
        assert result.success
        return result

    def fast_forward_rows(self, run_id: str) -> dict[tuple[str, int], dict]:
        names = ["topic", "partition", "outcome", "rejection", "decision", "reason", "committed", "new_offset",
                 "committed_after", "applied"]
        rows = self.client.query(
            f"SELECT {', '.join(names)} FROM offset_fast_forwards WHERE run_id = {{r:String}}",
            parameters={"r": run_id},
        ).result_rows
        return {(r[0], r[1]): dict(zip(names, r)) for r in rows}

    def metric_rows(self, group: str) -> list[dict]:
        names = ["cycle_time", "synced", "sync_age_s", "strategy", "status", "sync_status", "g"]
        rows = self.client.query(
            f"SELECT {', '.join(names)} FROM offset_sync_metrics WHERE group_id = {{g:String}} ORDER BY cycle_time",
            parameters={"g": group},
        ).result_rows
        return [dict(zip(names, r)) for r in rows]


def fail_over(kafka_pair, group: str, topic: str, c: int, new_values: list[str]) -> tuple[list[str], list[str]]:
    """The group, having processed idc1 below ``c``, resumes on idc2 from its synced offset ``t``
    after ``new_values`` were produced on idc2. Returns (records of idc2 below ``t`` the group never
    processed: lost, what the resumed group reads until it has seen every new value)."""
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    processed = {v for _, v in read_values(idc1, topic, 0, c)}
    t = committed(idc2, group, topic)
    lost = [v for _, v in read_values(idc2, topic, 0, t or 0) if v not in processed]
    produce(idc2, topic, new_values)
    resumed = Consumer({"bootstrap.servers": idc2, "group.id": group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
    read_again: list[str] = []
    try:
        resumed.subscribe([topic])
        deadline = time.monotonic() + 30
        while not set(new_values) <= set(read_again) and time.monotonic() < deadline:
            msg = resumed.poll(0.5)
            if msg is not None and not msg.error():
                read_again.append(msg.value().decode())
    finally:
        resumed.close()
    return lost, read_again


def skip_message(result) -> str:
    return result.skip_reason.skip_message if isinstance(result, dg.SensorResult) else result.skip_message


def run_until_requested(stack: StaleStack, max_s: float):
    """Cycles and sensor ticks in turn until the sensor requests runs; returns (requests, skip reasons)."""
    reasons = []
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        stack.cycle()
        result = stack.tick()
        if isinstance(result, dg.SensorResult) and result.run_requests:
            return result.run_requests, reasons
        reasons.append(result.skip_reason.skip_message if isinstance(result, dg.SensorResult) else result.skip_message)
    raise AssertionError(f"no fast-forward requested within {max_s}s; skip reasons: {reasons[-3:]}")

