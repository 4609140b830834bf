"""``offset_snapshot``: each cycle, what both clusters say about every synced consumer group.

For every group matching the include/exclude patterns on either cluster: committed offsets per
partition, group state and member count, and the log start, log end and last stable offset of
every partition involved, on both clusters. Appended to ClickHouse (``offset_snapshots``) under
the run id, which later steps of the cycle read.

A cluster, group or partition that cannot be read is a fact of the snapshot, not a failure of the
run (issue 14): its rows carry ``read_error`` (state ``UNAVAILABLE`` for a cluster that did not
answer), the translation gives them ``cluster_unavailable`` and nothing is committed for them,
while everything that was read is synced as usual. Check ``clusters_readable`` (WARN) names the
clusters and counts the groups and partitions whose facts are missing.
"""


import time
from concurrent.futures import ThreadPoolExecutor

import dagster as dg
from pydantic import Field

from offset_pipeline.kafka_io.cluster_snapshot import ClusterRanges, cluster_groups, cluster_ranges
from offset_pipeline.kafka_io.group_offsets import DEFAULT_GROUP_EXCLUDE, GroupFilter, describe_error
from offset_pipeline.kafka_io.isolated import IsolatedCalls
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.settings import kafka_timeout_s
from offset_pipeline.sync.snapshot_rows import build_snapshot_rows, involved_partitions
from offset_pipeline.sync import cycle_carry
from offset_pipeline.storage import snapshots
from offset_pipeline.storage.deferred_writes import open_writer

CLUSTERS_READABLE_CHECK = "clusters_readable"
SNAPSHOT_ROWS = "snapshot_rows"  # cycle_carry key: this run's SnapshotRow list
CHILD_START_S = 30.0  # beyond the Kafka bound: starting the child process that reads a cluster


class SnapshotConfig(dg.Config):
    group_include: str = ".*"
    group_exclude: str = DEFAULT_GROUP_EXCLUDE
    # Every Kafka wait of the snapshot, per cluster (default OFFSET_PIPELINE_KAFKA_TIMEOUT_S, 10 s).
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)


@dg.asset(
    group_name="offset_sync",
    kinds={"kafka", "clickhouse"},
    check_specs=[
        dg.AssetCheckSpec(
            CLUSTERS_READABLE_CHECK, asset="offset_snapshot",
            description="Both clusters answered, and every group and partition of the snapshot was read "
                        "(WARN: names the clusters whose facts are missing; those groups are not synced).",
        ),
    ],
)
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
    timeout_s = config.kafka_timeout_s

    # Each cluster's reads in a child process of its own (kafka_io/isolated.py): librdkafka can
    # abort its process when admin requests time out around a broker restart; so it costs only that
    # cluster's facts. Both clusters are read at once.
    groups, unavailable, ranges, timestamp_types, range_errors = {}, {}, {}, {}, {}
    calls = {name: IsolatedCalls(name) for name in clusters}
    try:
        def read_groups_of(name: str):
            try:
                return calls[name].call(cluster_groups, clusters[name].admin_config(), name, group_filter, timeout_s,
                                        timeout_s=timeout_s + CHILD_START_S)
            except Exception as exc:  # noqa: BLE001 - this cluster's facts are unknown; the other's are not
                return exc

        with ThreadPoolExecutor(max_workers=len(clusters), thread_name_prefix="offset-snapshot") as pool:
            for name, result in zip(clusters, pool.map(read_groups_of, clusters)):
                if isinstance(result, Exception):
                    groups[name] = []
                    unavailable[name] = f"listing consumer groups on {name} failed: {describe_error(result)}"
                else:
                    groups[name] = result
            partitions = sorted(involved_partitions(g for states in groups.values() for g in states))

            def read_ranges_of(name: str):
                try:
                    # three bounded requests: metadata, offsets (one deadline), topic configs
                    return calls[name].call(cluster_ranges, clusters[name].admin_config(), name, partitions, timeout_s,
                                            timeout_s=3 * timeout_s + CHILD_START_S)
                except Exception as exc:  # noqa: BLE001 - no log range of this cluster is known
                    return ClusterRanges(unavailable=f"reading topic metadata on {name} failed: {describe_error(exc)}")

            readable = [name for name in clusters if name not in unavailable]
            for name, result in zip(readable, pool.map(read_ranges_of, readable)):
                if result.unavailable:
                    unavailable[name] = result.unavailable
                    groups[name] = []
                    continue
                ranges[name] = result.ranges
                timestamp_types[name] = result.timestamp_types
                range_errors[name] = result.errors
    finally:
        for c in calls.values():
            c.close()
    kafka_s = time.monotonic() - started

    rows = build_snapshot_rows(
        context.run.run_id, snapshot_time_ms, groups, ranges, timestamp_types,
        unavailable=unavailable, range_errors=range_errors,
    )
    cycle_carry.put(context.run.run_id, SNAPSHOT_ROWS, rows)  # the next steps read them from here
    writer = open_writer(clickhouse, snapshots.ensure_table)
    written = snapshots.insert_rows(writer, rows)
    if writer.outcome.deferred:
        context.log.warning(f"offset-sync clickhouse unavailable: {writer.outcome.deferred} snapshot rows spooled "
                            f"({writer.outcome.error}); the cycle goes on")
    unreadable_groups = sorted({(r.cluster, r.group_id) for r in rows if r.read_error and r.cluster not in unavailable})
    unreadable_partitions = sum(1 for r in rows if r.read_error)
    for name, reason in sorted(unavailable.items()):
        context.log.warning(f"offset-sync cluster unavailable: {reason}; its groups are not synced this cycle")
    context.log.info(
        f"snapshot {context.run.run_id}: {written} rows, "
        + ", ".join(f"{name}: {len(states)} groups" for name, states in groups.items())
    )
    readable = not unavailable and not unreadable_partitions
    return dg.MaterializeResult(
        metadata={
            "snapshot_id": context.run.run_id,
            "rows": written,
            "rows_spooled": writer.outcome.deferred,
            "group_partitions": len({(r.group_id, r.topic, r.partition) for r in rows}),
            **{f"groups_{name}": len(states) for name, states in groups.items()},
            "unavailable_clusters": ", ".join(sorted(unavailable)) or "none",
            "rows_with_read_error": unreadable_partitions,
            "partitions_missing_somewhere": sum(1 for r in rows if not r.topic_present and not r.read_error),
            "log_append_time_topics": sorted(
                {f"{r.cluster}:{r.topic}" for r in rows if r.timestamp_type == "LogAppendTime"}
            ),
            "kafka_read_seconds": round(kafka_s, 3),
            "total_seconds": round(time.monotonic() - started, 3),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=CLUSTERS_READABLE_CHECK,
                passed=readable,
                severity=dg.AssetCheckSeverity.WARN,
                description=(
                    "both clusters answered; every group and partition was read" if readable else
                    "; ".join(
                        [f"{name} unavailable" for name in sorted(unavailable)]
                        + ([f"{len(unreadable_groups)} groups unreadable"] if unreadable_groups else [])
                        + [f"{unreadable_partitions} snapshot rows without facts: not synced this cycle"]
                    )
                ),
                metadata={
                    "unavailable_clusters": ", ".join(sorted(unavailable)) or "none",
                    **{f"reason_{name}": reason[:500] for name, reason in sorted(unavailable.items())},
                    "unreadable_groups": len(unreadable_groups),
                    "rows_with_read_error": unreadable_partitions,
                },
            )
        ],
    )
