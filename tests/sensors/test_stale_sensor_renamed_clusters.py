"""The stale sensor after a deployment renamed its clusters (OFFSET_PIPELINE_CLUSTERS idc1,idc2 ->
us-east,dc-a): the history of the window still holds quiet, caught-up rows under the old names. They
are skipped with one named count, never read from Kafka (no client exists under those names), never
a warning; rows under the configured names are classified as before (the unit table below)."""

from __future__ import annotations

import time
import types

import dagster as dg
import pytest

from offset_pipeline.fast_forward.stale_candidates import LogEnds, PartitionHistory
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.resources.mirrors import MirrorsResource
from offset_pipeline.sensors.stale_partitions import evaluate_stale_tick, under_configured_clusters
from offset_pipeline.storage import snapshots, translations
from offset_pipeline.storage.snapshots import SnapshotRow


class RecordingLog:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, message: str) -> None:
        self.lines.append(("info", message))

    def warning(self, message: str) -> None:
        self.lines.append(("warning", message))


def quiet_history_under(client, active: str, standby: str, group: str, now_ms: int) -> None:
    """A caught-up group-partition (lag 0, standby behind its end) whose log ends did not move for 30 s."""
    translations.ensure_tables(client)
    snapshots.ensure_table(client)
    translations.insert_translations(client, [{
        "snapshot_id": f"s{now_ms}", "cycle_time": now_ms - 1_000, "group_id": group, "topic": "t", "partition": 0,
        "active": active, "standby": standby, "committed": 20, "standby_committed": None, "strategy": "none",
        "standby_offset": None, "status": "no_anchor", "reason": "", "expected_duplicates": None,
        "timestamp_inversion": False, "anchor_active_offset": None, "anchor_standby_offset": None, "safe_bound": None,
    }])
    snapshots.insert_rows(client, [
        SnapshotRow(f"s{ms}", ms, cluster, group, "Empty", 0, "t", 0, 20 if cluster == active else None,
                    True, 0, 20, 20)
        for ms in (now_ms - 30_000, now_ms - 15_000, now_ms - 1_000) for cluster in (active, standby)
    ])


def test_history_under_the_old_names_is_skipped_and_named_never_read(chdb_dsn):
    now_ms = int(time.time() * 1000)
    clickhouse = ClickHouseResource(dsn=chdb_dsn)
    quiet_history_under(clickhouse.get_client(), "idc1", "idc2", "renamed-away", now_ms)
    # Nothing answers at these addresses: any read under the new names would fail and say so.
    clusters = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=f"127.0.0.1:{port}")
                for name, port in (("us-east", 1), ("dc-a", 2))}
    log = RecordingLog()
    with dg.instance_for_test() as instance:
        context = types.SimpleNamespace(cursor=None, instance=instance, log=log)
        result = evaluate_stale_tick(context, now_ms, clickhouse, clusters, MirrorsResource(), window_s=6.0)
    assert isinstance(result, dg.SensorResult) and not result.run_requests
    message = result.skip_reason.skip_message
    assert "1 group-partitions under unconfigured clusters skipped" in message, message
    assert [line for line in log.lines if line[0] == "warning"] == []
    assert not any("renamed-away" in text for _, text in log.lines)  # never classified, never rejected
    assert "under unconfigured clusters" in result.cursor


def history(active: str, standby: str) -> PartitionHistory:
    return PartitionHistory("g", "t", 0, active, standby, 5, None, (LogEnds(0, 5, 5),))


@pytest.mark.parametrize(
    ("active", "standby", "kept"),
    [
        ("us-east", "dc-a", True),
        ("dc-a", "us-east", True),
        ("idc1", "idc2", False),  # both old names
        ("us-east", "idc2", False),  # one renamed
        ("idc1", "dc-a", False),
    ],
)
def test_only_configured_clusters_are_kept(active, standby, kept):
    histories = [history(active, standby)]
    assert under_configured_clusters(histories, {"us-east": object(), "dc-a": object()}) == (
        (histories, 0) if kept else ([], 1))
