"""``offset_snapshot``: each cycle, what both clusters say about every synced consumer group.

For every group matching the include/exclude patterns on either cluster: committed offsets per
partition, group state and member count, and the log start, log end and last stable offset of
every partition involved, on both clusters. Appended to ClickHouse (``offset_snapshots``) under
the run id, which later steps of the cycle read.
"""


import time

import dagster as dg

from offset_pipeline.kafka_reads.group_offsets import (
    DEFAULT_GROUP_EXCLUDE,
    GroupFilter,
    read_groups,
    read_partition_ranges,
    topic_partition_counts,
    topic_timestamp_types,
)
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.snapshot_rows import build_snapshot_rows, involved_partitions
from offset_pipeline.storage import snapshots


class SnapshotConfig(dg.Config):
    group_include: str = ".*"
    group_exclude: str = DEFAULT_GROUP_EXCLUDE


@dg.asset(group_name="offset_sync", kinds={"kafka", "clickhouse"})
def offset_snapshot(
    context: dg.AssetExecutionContext,
    config: SnapshotConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
) -> dg.MaterializeResult:
    """Committed offsets, group states and log ranges of both clusters, appended to ClickHouse."""
    started = time.monotonic()
    snapshot_time_ms = int(time.time() * 1000)
    group_filter = GroupFilter(config.group_include, config.group_exclude)
    clusters = {resource.cluster_name: resource for resource in (idc1, idc2)}
    admins = {name: resource.admin() for name, resource in clusters.items()}

    groups = {name: read_groups(admin, name, group_filter) for name, admin in admins.items()}
    partitions = involved_partitions(g for states in groups.values() for g in states)
    ranges, timestamp_types = {}, {}
    for name, admin in admins.items():
        counts = topic_partition_counts(admin)
        present = [(t, p) for t, p in partitions if p < counts.get(t, 0)]
        ranges[name] = read_partition_ranges(admin, name, present)
        timestamp_types[name] = topic_timestamp_types(admin, sorted({t for t, _ in present}))
    kafka_s = time.monotonic() - started

    rows = build_snapshot_rows(context.run.run_id, snapshot_time_ms, groups, ranges, timestamp_types)
    client = clickhouse.get_client()
    snapshots.ensure_table(client)
    written = snapshots.insert_rows(client, rows)
    context.log.info(
        f"snapshot {context.run.run_id}: {written} rows, "
        + ", ".join(f"{name}: {len(states)} groups" for name, states in groups.items())
    )
    return dg.MaterializeResult(
        metadata={
            "snapshot_id": context.run.run_id,
            "rows": written,
            "group_partitions": len({(r.group_id, r.topic, r.partition) for r in rows}),
            **{f"groups_{name}": len(states) for name, states in groups.items()},
            "partitions_missing_somewhere": sum(1 for r in rows if not r.topic_present),
            "log_append_time_topics": sorted(
                {f"{r.cluster}:{r.topic}" for r in rows if r.timestamp_type == "LogAppendTime"}
            ),
            "kafka_read_seconds": round(kafka_s, 3),
            "total_seconds": round(time.monotonic() - started, 3),
        }
    )
