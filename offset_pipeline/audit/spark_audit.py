"""The audit's Spark step: moments DataFrame -> cost DataFrame, one task per Kafka partition.

Rows of :data:`MOMENT_SCHEMA` (one per group and snapshot) are hash-partitioned by topic-partition
and direction, so each Kafka partition is read by one task, once for all its groups and moments
(``kafka_io/audit_records.PartitionRecordCache``), and each task audits its keys one after
another (``audit/moments.py``). Out: :data:`RESULT_SCHEMA`, one row per moment.
"""

from __future__ import annotations

from typing import Any

MOMENT_SCHEMA = (
    "window_date string, snapshot_id string, snapshot_time long, group_id string, topic string, partition int, "
    "active string, standby string, committed long, standby_committed long, active_end_at long, "
    "standby_end_at long, strategy string, shape string"
)
RESULT_SCHEMA = (
    "window_date string, snapshot_id string, snapshot_time long, group_id string, topic string, partition int, "
    "active string, standby string, committed long, standby_committed long, standby_end_at long, strategy string, "
    "status string, lost long, duplicated long, lost_offsets array<long>, duplicated_offsets array<long>, "
    "reason string, margin long, records_read long"
)
PARTITION_KEY = ("topic", "partition", "active", "standby")


def _names(schema: str) -> list[str]:
    return [part.strip().split(" ")[0] for part in schema.split(",")]


MOMENT_COLUMNS = _names(MOMENT_SCHEMA)
RESULT_COLUMNS = _names(RESULT_SCHEMA)


def audit_partition_rows(rows: list[dict[str, Any]], confs: dict[str, dict], *, exactly_once_mirror: bool,
                         timeout_s: float) -> list[dict[str, Any]]:
    """One topic-partition and direction: every moment's cost (plain dicts in and out)."""
    from offset_pipeline.audit.failover_cost import Shape
    from offset_pipeline.audit.moments import FIRST_MARGIN, Moment, audit_moment
    from offset_pipeline.audit.record_cache import PartitionRecordCache

    first = rows[0]
    active, standby, topic, partition = first["active"], first["standby"], first["topic"], int(first["partition"])
    shape = Shape(first["shape"]) if first.get("shape") in {s.value for s in Shape} else Shape.UNKNOWN

    def out(row, status, lost=None, duplicated=None, lost_offsets=(), duplicated_offsets=(), reason="", margin=0,
            records_read=0):
        return {
            **{k: row[k] for k in ("window_date", "snapshot_id", "snapshot_time", "group_id", "topic", "partition",
                                    "active", "standby", "committed", "standby_committed", "standby_end_at",
                                    "strategy")},
            "status": status, "lost": lost, "duplicated": duplicated, "lost_offsets": list(lost_offsets),
            "duplicated_offsets": list(duplicated_offsets), "reason": reason, "margin": margin,
            "records_read": records_read,
        }

    try:
        cache = PartitionRecordCache(active, standby, confs[active], confs[standby], topic, partition, shape=shape,
                                     exactly_once_mirror=exactly_once_mirror, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - the partition's status, not the job's
        return [out(r, "cluster_unavailable", reason=f"reading {topic}[{partition}] failed: {type(exc).__name__}: {exc}")
                for r in rows]
    results = []
    try:
        # Every moment's first region, read as one range per side (audit/moments.py widens the rare rest).
        both = [r for r in rows if r["committed"] is not None and r["standby_committed"] is not None]
        unreadable = ""  # why the prefetch failed: the moments that read records get it as their reason
        if both:
            margin = FIRST_MARGIN
            try:
                cache.prefetch(min(r["standby_committed"] for r in both) - margin,
                               max(max(r["standby_committed"], r["standby_end_at"]) for r in both),
                               min(r["committed"] for r in both) - margin,
                               max(max(r["committed"], r["active_end_at"]) for r in both))
            except Exception as exc:  # noqa: BLE001 - the partition's status, not the job's
                # e.g. a read refused on this one topic (no Read right): the day's other partitions
                # are still audited. Not retried per moment: a cluster that timed out would cost
                # one timeout per moment.
                unreadable = f"reading {topic}[{partition}] failed: {type(exc).__name__}: {exc}"
        reading = {id(r) for r in both}
        unattributed = cache.records_read  # the prefetch: counted on the partition's first moment
        for row in sorted(rows, key=lambda r: (r["snapshot_time"], r["group_id"])):
            if unreadable and id(row) in reading:
                results.append(out(row, "cluster_unavailable", reason=unreadable))
                continue
            moment = Moment(row["group_id"], row["snapshot_id"], row["snapshot_time"], row["committed"],
                            row["standby_committed"], row["active_end_at"], row["standby_end_at"], row["strategy"])
            before, unattributed = cache.records_read - unattributed, 0
            try:
                cost, margin = audit_moment(cache, moment)
            except Exception as exc:  # noqa: BLE001 - a read failed: said, not guessed
                results.append(out(row, "cluster_unavailable", reason=f"{type(exc).__name__}: {exc}"))
                continue
            results.append(out(row, cost.status.value, cost.lost, cost.duplicated, cost.lost_offsets,
                               cost.duplicated_offsets, cost.reason, margin, cache.records_read - before))
    finally:
        cache.close()
    assert len(results) == len(rows)  # one row per moment
    return results


def audit_moments_df(spark, moments_df, confs: dict[str, dict], *, exactly_once_mirror: bool, timeout_s: float = 30.0):
    """``moments_df`` (:data:`MOMENT_SCHEMA`) -> a DataFrame of :data:`RESULT_SCHEMA`."""
    confs = {name: dict(conf) for name, conf in confs.items()}

    def task(batches):
        import pyarrow as pa

        by_key: dict[tuple, list[dict[str, Any]]] = {}
        for batch in batches:
            for row in batch.to_pylist():
                by_key.setdefault(tuple(row[k] for k in PARTITION_KEY), []).append(row)
        out: list[dict[str, Any]] = []
        for rows in by_key.values():
            out += audit_partition_rows(rows, confs, exactly_once_mirror=exactly_once_mirror, timeout_s=timeout_s)
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=result_arrow_schema())

    tasks = int(spark.conf.get("spark.sql.shuffle.partitions"))
    return moments_df.repartition(tasks, *PARTITION_KEY).mapInArrow(task, schema=RESULT_SCHEMA)


def result_arrow_schema():
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "array<long>": pa.list_(pa.int64())}
    return pa.schema([(part.strip().split(" ")[0], types[part.strip().split(" ")[1]]) for part in RESULT_SCHEMA.split(",")])


def moments_dataframe(spark, rows: list[dict[str, Any]]):
    return spark.createDataFrame([tuple(r.get(n) for n in MOMENT_COLUMNS) for r in rows], schema=MOMENT_SCHEMA)
