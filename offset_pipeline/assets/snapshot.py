"""``offset_snapshot``: each cycle, what both clusters say about every synced consumer group.

For every group matching the include/exclude patterns on either cluster: committed offsets per
partition, group state and member count, and the log start, log end and last stable offset of
every partition involved, on both clusters. Appended to ClickHouse (``offset_snapshots``) under
the run id, which later steps of the cycle read.

A cluster, group or partition that cannot be read is a fact of the snapshot, not a failure of the run
(unattended, a cluster down must not stop the others): its rows carry ``read_error`` (state
``UNAVAILABLE`` for a cluster that did not answer), the translation gives them ``cluster_unavailable``
and nothing is committed for them, while everything that was read is synced as usual. Check
``clusters_readable`` (WARN) names the clusters and counts the groups and partitions whose facts are
missing.
"""


import time

import dagster as dg
from pydantic import Field

from offset_pipeline.kafka_io.group_offsets import DEFAULT_GROUP_EXCLUDE, GroupFilter
from offset_pipeline.kafka_io.isolated import ClusterChildren
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.run_targets import SYNC_POOL
from offset_pipeline.settings import kafka_timeout_s, offset_syncs_topics
from offset_pipeline.storage import offset_sync_pairs, snapshots
from offset_pipeline.storage.deferred_writes import WriteOutcome, open_writer
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.sync import cycle_carry
from offset_pipeline.sync.gc_pause import cyclic_gc_paused
from offset_pipeline.sync.offset_sync_step import OffsetSyncsReader, restored_reader, store_new_pairs
from offset_pipeline.sync.snapshot_step import (
    ClusterReads,
    UnreadFacts,
    read_clusters,
    unread_facts,
)

CLUSTERS_READABLE_CHECK = "clusters_readable"
SNAPSHOT_ROWS = "snapshot_rows"  # cycle_carry key: this run's SnapshotRow list
KAFKA_CHILDREN = "kafka_children"  # cycle_carry key: the snapshot's ClusterChildren, taken by the commit step
OFFSET_SYNCS = "offset_syncs"  # cycle_carry key: (pairs per partition and direction, facts per direction)


class SnapshotConfig(dg.Config):
    group_include: str = ".*"
    group_exclude: str = DEFAULT_GROUP_EXCLUDE
    # Every Kafka wait of the snapshot, per cluster (default OFFSET_PIPELINE_KAFKA_TIMEOUT_S, 10 s).
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)


@dg.asset(
    pool=SYNC_POOL,
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
@cyclic_gc_paused()  # row building makes no reference cycles: sync/gc_pause.py
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
    # A child process per cluster, both at once (sync/snapshot_step.py): a cluster that cannot be
    # read is named in reads.unavailable, never an exception. The children go on to the commit step.
    children = ClusterChildren(clusters)
    # MirrorMaker 2's offset syncs go on from what earlier cycles stored (sync/offset_sync_step.py):
    # read before the log ranges, stamped with the ends read after them, the additions stored below.
    writer = open_writer(clickhouse, snapshots.ensure_table, offset_sync_pairs.ensure_table)
    syncs, syncs_unrestored = restored_reader(
        offset_syncs_topics(), {name: resource.client_config for name, resource in clusters.items()},
        writer.client if writer.outcome.error is None else None)
    try:
        reads = read_clusters({name: resource.admin_config for name, resource in clusters.items()},
                              group_filter, config.kafka_timeout_s, calls=children.calls,
                              offset_syncs=syncs if syncs.topics else None)
    except BaseException:
        children.close()
        raise
    kafka_s = time.monotonic() - started

    run_id = context.run.run_id
    for name in reads.unavailable:  # its client may be stuck after the outage: the commit step gets a new one
        children.calls[name].discard(f"{name} did not answer the snapshot")
    cycle_carry.put(run_id, KAFKA_CHILDREN, children)
    rows = reads.rows(run_id, snapshot_time_ms)
    cycle_carry.put(run_id, SNAPSHOT_ROWS, rows)  # the next steps read them from here
    cycle_carry.put(run_id, OFFSET_SYNCS, (syncs.facts(), syncs.direction_facts()))
    written = snapshots.insert_rows(writer, rows)
    syncs_stored = store_new_pairs(writer, syncs, snapshot_time_ms)
    _log_offset_syncs(context.log, syncs, syncs_unrestored)
    unread = unread_facts(rows, reads.unavailable)
    _log_snapshot(context.log, run_id, written, writer.outcome, reads)
    return dg.MaterializeResult(
        metadata={**_snapshot_metadata(run_id, rows, written, writer.outcome, reads, unread, kafka_s, started),
                  **_offset_syncs_metadata(syncs, syncs_stored, syncs_unrestored)},
        check_results=[_clusters_readable_check(reads.unavailable, unread)],
    )


def _log_snapshot(
    log: dg.DagsterLogManager, run_id: str, written: int, outcome: WriteOutcome, reads: ClusterReads,
) -> None:
    if outcome.deferred:
        log.warning(f"offset-sync clickhouse unavailable: {outcome.deferred} snapshot rows spooled "
                    f"({outcome.error}); the cycle goes on")
    for name, reason in sorted(reads.unavailable.items()):
        log.warning(f"offset-sync cluster unavailable: {reason}; its groups are not synced this cycle")
    log.info(
        f"snapshot {run_id}: {written} rows, "
        + ", ".join(f"{name}: {len(states)} groups" for name, states in reads.groups.items())
    )


def _log_offset_syncs(log: dg.DagsterLogManager, syncs: OffsetSyncsReader, unrestored: str | None) -> None:
    if unrestored:
        log.warning(f"offset-sync pairs not restored: {unrestored}")
    for (source, target), why in sorted(syncs.unreadable().items()):
        log.warning(f"offset-sync offset-syncs topic of {source}->{target} not read: {why}; its one-way "
                    "topics without origin headers are offset_syncs_unreadable this cycle")


def _offset_syncs_metadata(syncs: OffsetSyncsReader, stored: int, unrestored: str | None) -> dict:
    if not syncs.topics:
        return {}
    facts = syncs.facts()
    return {
        "offset_syncs_topics": ", ".join(f"{t.source}->{t.target}: {t.stored_on}:{t.topic}" for t in syncs.topics),
        "offset_syncs_partitions": len(facts),
        "offset_syncs_pairs_stamped": sum(1 for f in facts.values() for p in f.pairs if p.active_end_after is not None),
        "offset_syncs_unreadable": "; ".join(f"{s}->{t}: {why}" for (s, t), why in sorted(syncs.unreadable().items()))
                                   or "none",
        "offset_syncs_rows_stored": stored,
        "offset_syncs_restored": unrestored or "yes",
    }


def _snapshot_metadata(
    run_id: str, rows: list[SnapshotRow], written: int, outcome: WriteOutcome, reads: ClusterReads,
    unread: UnreadFacts, kafka_s: float, started: float,
) -> dict:
    return {
        "snapshot_id": run_id,
        "rows": written,
        "rows_spooled": outcome.deferred,
        "group_partitions": len({(r.group_id, r.topic, r.partition) for r in rows}),
        **{f"groups_{name}": len(states) for name, states in reads.groups.items()},
        "unavailable_clusters": ", ".join(sorted(reads.unavailable)) or "none",
        "rows_with_read_error": unread.rows,
        "partitions_missing_somewhere": sum(1 for r in rows if not r.topic_present and not r.read_error),
        "log_append_time_topics": sorted(
            {f"{r.cluster}:{r.topic}" for r in rows if r.timestamp_type == "LogAppendTime"}
        ),
        "kafka_read_seconds": round(kafka_s, 3),
        "total_seconds": round(time.monotonic() - started, 3),
    }


def _clusters_readable_check(unavailable: dict[str, str], unread: UnreadFacts) -> dg.AssetCheckResult:
    readable = not unavailable and not unread.rows
    return dg.AssetCheckResult(
        check_name=CLUSTERS_READABLE_CHECK,
        passed=readable,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            "both clusters answered; every group and partition was read" if readable else
            "; ".join(
                # the reason names the cause and its fix when the client reported one (a wrong CA, ...)
                [f"{name} unavailable ({reason[:300]})" for name, reason in sorted(unavailable.items())]
                + ([f"{len(unread.groups)} groups unreadable"] if unread.groups else [])
                + [f"{unread.rows} snapshot rows without facts: not synced this cycle"]
            )
        ),
        metadata={
            "unavailable_clusters": ", ".join(sorted(unavailable)) or "none",
            **{f"reason_{name}": reason[:500] for name, reason in sorted(unavailable.items())},
            "unreadable_groups": len(unread.groups),
            "rows_with_read_error": unread.rows,
        },
    )
