"""The translation step as DataFrame-to-DataFrame functions on one Spark session.

:func:`translate_groups` takes one row per group-partition whose direction is decided, groups the
rows by ``(topic, partition, active, standby)`` and, per group of rows, inside a Spark task, reads
the Kafka partition once with :func:`read_translation_facts` (for all its groups) and translates
every group with :func:`translate_partition`. Kafka errors or timeouts inside a task become
``cluster_unavailable`` rows for that partition's groups: one partition never fails the others.

Everything the task needs travels in the closure as plain data (librdkafka config dicts, numbers),
never Dagster resources or clients.
"""

from __future__ import annotations

import math
from typing import Any

from offset_pipeline.translation import (
    Anchor,
    TopicShape,
    TranslationResult,
    TranslationStatus,
    decision_log_line,
    parse_shape,
    translate_partition,
    untranslatable,
)

#: Input columns of :func:`translate_groups` (one row per group-partition, direction decided).
WORK_SCHEMA = (
    "group_id string, topic string, partition int, active string, standby string, "
    "committed long, standby_committed long, "
    "active_log_start long, active_log_end long, standby_log_start long, standby_log_end long, "
    "anchor_active_offset long, anchor_standby_offset long, shape string"
)

#: Output columns: the ``offset_translations`` columns, plus the anchor to keep and the decision line.
RESULT_SCHEMA = (
    "snapshot_id string, cycle_time long, group_id string, topic string, partition int, active string, "
    "standby string, committed long, standby_committed long, strategy string, standby_offset long, "
    "status string, reason string, expected_duplicates long, timestamp_inversion boolean, "
    "anchor_active_offset long, anchor_standby_offset long, keep_active_offset long, keep_standby_offset long, "
    "decision string"
)
RESULT_COLUMNS = [part.strip().split(" ")[0] for part in RESULT_SCHEMA.split(",")]
_INT_COLUMNS = [part.strip().split(" ")[0] for part in RESULT_SCHEMA.split(",") if part.strip().endswith(("long", "int"))]


def _int(value) -> int | None:
    """A nullable long from pandas (None, NaN, numpy or pandas NA) as a Python int or None."""
    if value is None:
        return None
    try:
        if math.isnan(value):
            return None
    except TypeError:
        if str(value) == "<NA>":
            return None
    return int(value)


def result_row(result: TranslationResult, snapshot_id: str, cycle_time_ms: int) -> dict[str, Any]:
    """One output row (a dict of :data:`RESULT_COLUMNS`) for a result."""
    used, keep = result.anchor_used, result.anchor_to_keep
    return {
        "snapshot_id": snapshot_id,
        "cycle_time": cycle_time_ms,
        "group_id": result.group_id,
        "topic": result.topic,
        "partition": result.partition,
        "active": result.active or "",
        "standby": result.standby or "",
        "committed": result.committed,
        "standby_committed": result.standby_committed,
        "strategy": result.strategy.value if result.strategy is not None else "none",
        "standby_offset": result.standby_offset,
        "status": result.status.value,
        "reason": result.reason,
        "expected_duplicates": result.expected_duplicates,
        "timestamp_inversion": bool(result.timestamp_inversion),
        "anchor_active_offset": used.active_offset if used else None,
        "anchor_standby_offset": used.standby_offset if used else None,
        "keep_active_offset": keep.active_offset if keep else None,
        "keep_standby_offset": keep.standby_offset if keep else None,
        "decision": decision_log_line(result),
    }


def translate_partition_rows(
    rows: list[dict[str, Any]],
    active_confs: dict[str, dict],
    *,
    snapshot_id: str,
    cycle_time_ms: int,
    window: int = 50,
    refine_window: int = 200,
    timeout_s: float = 10.0,
) -> list[dict[str, Any]]:
    """The work of one task: rows of ONE (topic, partition, active, standby), read once, translated
    per group. Plain Python (no Spark), so it can run and be tested outside a Spark task."""
    from offset_pipeline.kafka_reads.partition_records import (
        GroupPartitionInput,
        PartitionLogs,
        read_translation_facts,
    )

    if not rows:
        return []
    first = rows[0]
    topic, partition = first["topic"], int(first["partition"])
    active, standby = first["active"], first["standby"]

    def failed(status: TranslationStatus, reason: str) -> list[dict[str, Any]]:
        return [
            result_row(
                untranslatable(
                    r["group_id"], topic, partition, status, reason, active=active, standby=standby,
                    committed=_int(r["committed"]), standby_committed=_int(r["standby_committed"]),
                    anchor_to_keep=_kept_anchor(r, active, standby),
                ),
                snapshot_id, cycle_time_ms,
            )
            for r in rows
        ]

    a_start, a_end = _int(first["active_log_start"]), _int(first["active_log_end"])
    if a_start is None or a_end is None:
        return failed(TranslationStatus.INCONSISTENT_FACTS, f"the snapshot has no log range of {topic}[{partition}] on {active}")
    if active not in active_confs or standby not in active_confs:
        return failed(TranslationStatus.CLUSTER_UNAVAILABLE, f"no client configuration for {active} or {standby}")
    try:
        shape = parse_shape(first["shape"]) or TopicShape.unknown()
    except ValueError as exc:
        shape = TopicShape.unknown(str(exc))
    logs = PartitionLogs(
        active_log_start=a_start, active_log_end=a_end,
        standby_log_start=_int(first["standby_log_start"]), standby_log_end=_int(first["standby_log_end"]),
    )
    inputs = [
        GroupPartitionInput(
            group_id=r["group_id"], committed=_int(r["committed"]), standby_committed=_int(r["standby_committed"]),
            kept_anchor=_kept_anchor(r, active, standby),
        )
        for r in rows
    ]
    try:
        facts = read_translation_facts(
            active, standby, active_confs[active], active_confs[standby], topic, partition, logs, inputs,
            shape=shape, window=window, refine_window=refine_window, timeout_s=timeout_s,
        )
    except Exception as exc:  # noqa: BLE001 - any read failure is this partition's status, not the job's
        return failed(
            TranslationStatus.CLUSTER_UNAVAILABLE,
            f"reading {topic}[{partition}] ({active} -> {standby}) failed: {type(exc).__name__}: {exc}",
        )
    out = []
    for fact in facts:
        try:
            result = translate_partition(fact)
        except Exception as exc:  # noqa: BLE001 - translate_partition should never raise; if it does, say so
            result = untranslatable(
                fact.group_id, topic, partition, TranslationStatus.INCONSISTENT_FACTS,
                f"translation raised {type(exc).__name__}: {exc}", active=active, standby=standby,
                committed=fact.committed, standby_committed=fact.standby_committed, anchor_to_keep=fact.kept_anchor,
            )
        out.append(result_row(result, snapshot_id, cycle_time_ms))
    return out


def _kept_anchor(row: dict[str, Any], active: str, standby: str) -> Anchor | None:
    a, s = _int(row.get("anchor_active_offset")), _int(row.get("anchor_standby_offset"))
    return Anchor(active, standby, a, s) if a is not None and s is not None else None


def translate_groups(
    spark,
    work_df,
    active_confs: dict[str, dict],
    *,
    snapshot_id: str,
    cycle_time_ms: int,
    window: int = 50,
    refine_window: int = 200,
    timeout_s: float = 10.0,
):
    """``work_df`` (:data:`WORK_SCHEMA`) to a DataFrame of :data:`RESULT_SCHEMA`, one row per input
    row. ``active_confs``: librdkafka client config per cluster name (plain dicts)."""
    confs = {name: dict(conf) for name, conf in active_confs.items()}  # plain data for the closure

    def task(pdf):
        import pandas as pd

        rows = translate_partition_rows(
            pdf.to_dict("records"), confs, snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms,
            window=window, refine_window=refine_window, timeout_s=timeout_s,
        )
        frame = pd.DataFrame(rows, columns=RESULT_COLUMNS)
        for column in _INT_COLUMNS:
            frame[column] = pd.array([_int(v) for v in frame[column]], dtype="Int64")
        return frame

    return work_df.groupBy("topic", "partition", "active", "standby").applyInPandas(task, schema=RESULT_SCHEMA)


def work_dataframe(spark, rows: list[dict[str, Any]]):
    """A :data:`WORK_SCHEMA` DataFrame from plain dicts (built on the driver from the snapshot)."""
    names = [part.strip().split(" ")[0] for part in WORK_SCHEMA.split(",")]
    return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], schema=WORK_SCHEMA)
