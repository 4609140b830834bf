"""``offset_translations``: each cycle, the standby offset of every synced group-partition.

Reads this run's ``offset_snapshot`` rows from ClickHouse, decides each group's direction (members,
then the group's own offset movement since the previous snapshot, then its previous direction:
``offset_pipeline/sync/work.py``; a group with members on both clusters is a split brain and is not
translated), detects the shape of topics without a configured one from the origin headers of their
newest records (``offset_pipeline/sync/shape_step.py``; a configured shape always wins),
translates on Spark grouped by topic-partition (each Kafka partition read once per cycle however
many groups read it), and appends the results to ``offset_translations`` and the anchors to keep to
``offset_anchors``. Every decision is logged in one line (``decision_log_line``) to the step's
stderr (``monitoring/decision_log.py``), with one summary event in the run's Dagster log. The
step's parts around the rules (snapshot rows, earlier cycles, the Spark job and its read window,
the writes) are in ``offset_pipeline/sync/translation_step.py``.

Spark is bounded (``SparkResource.run_job``: a Connect server is probed first, the job has a time
bound): when it refuses, fails or runs past its bound, the cycle's translatable group-partitions get
``spark_unavailable`` (nothing is committed for them, their anchors are kept) and check
``translation_engine_available`` (WARN) says why. The next cycle tries again by itself.

A cycle reads Kafka for at most ``read_budget_s`` (``OFFSET_PIPELINE_TRANSLATION_BUDGET_S``, kept
under the Spark bound): the partitions not read by then are ``translation_deferred`` (no commit,
anchors kept), recorded in ``offset_translation_deferrals`` and read first by the next cycle, and
check ``translation_complete`` (WARN) counts them. So an overloaded machine syncs what it can each
cycle instead of losing the whole cycle to the Spark bound and redoing it from the start.
"""

import time
from collections import Counter

import dagster as dg
from pydantic import Field

from offset_pipeline.assets.snapshot import OFFSET_SYNCS, SNAPSHOT_ROWS
from offset_pipeline.monitoring.decision_log import write_decision_lines
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.resources.spark import SparkResource, SparkUnavailable
from offset_pipeline.run_targets import SYNC_POOL
from offset_pipeline.settings import (
    kafka_timeout_s,
    mirror_writes_headers,
    topic_shapes,
    translation_budget_s,
)
from offset_pipeline.storage import deferrals, fast_forwards, snapshots, translations
from offset_pipeline.storage.deferred_writes import open_writer
from offset_pipeline.sync import cycle_carry
from offset_pipeline.sync.commit_checks import (
    WITHIN_BOUND_CHECK,
    evaluate_within_safe_bound,
)
from offset_pipeline.sync.gc_pause import cyclic_gc_paused
from offset_pipeline.sync.shape_step import ShapeSettings, ShapeStep, sample_and_detect
from offset_pipeline.sync.spark_translation import result_row, untranslated_rows
from offset_pipeline.sync.translation_step import (
    ReadSettings,
    TranslationJob,
    deferred_rows,
    partition_keys,
    read_earlier_cycles,
    snapshot_tuples,
    write_results,
)
from offset_pipeline.sync.work import CycleWork, build_work
from offset_pipeline.translation import TranslationStatus
from offset_pipeline.translation.log_line import log_line

# An outage (or a spent read budget) gives every row of the cluster (or of the cycle) the same status
# and reason: it is said once, by a Dagster warning and a WARN check, and each row is in ClickHouse.
# Per row at INFO it was 4 MB of compute log per cycle at 10,000 group-partitions for as long as the
# outage lasted.
_SAID_ONCE_STATUSES = (
    TranslationStatus.CLUSTER_UNAVAILABLE, TranslationStatus.SPARK_UNAVAILABLE, TranslationStatus.TRANSLATION_DEFERRED,
)


def is_routine_translation(row: dict) -> bool:
    """Logged at DEBUG (monitoring/decision_log.py): a translated offset with nothing to warn about, or a row
    of an outage or of a spent read budget (said once by the step)."""
    try:
        status = TranslationStatus(row["status"])
    except ValueError:
        return False
    if status in _SAID_ONCE_STATUSES:
        return True
    return status.translated and not row.get("timestamp_inversion") and "warnings=-" in (row.get("decision") or "")

ENGINE_AVAILABLE_CHECK = "translation_engine_available"
COMPLETE_CHECK = "translation_complete"
TRANSLATION_ROWS = "translation_rows"  # cycle_carry key: this run's result rows (RESULT_COLUMNS dicts)


class TranslationConfig(dg.Config):
    # topic -> "two_way" | "one_way:<producing cluster>"; unlisted topics are unknown (header
    # anchors only). Default from OFFSET_PIPELINE_TOPIC_SHAPES, which bin/up sets for its topics.
    topic_shapes: dict[str, str] = Field(default_factory=topic_shapes)
    window: int = 50
    refine_window: int = 200
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)
    # How long the cycle reads Kafka before deferring the partitions not read yet to the next cycle
    # (default from OFFSET_PIPELINE_TRANSLATION_BUDGET_S). Kept under the Spark bound: see
    # sync/translation_step.py read_window_s.
    read_budget_s: float = Field(default_factory=translation_budget_s, gt=0)
    # The mirrors mark every copy with its origin (IDC/Offset headers). Off for MirrorMaker 2, which
    # writes none: one-way topics then go by timestamp search alone. Default from
    # OFFSET_PIPELINE_MIRROR_WRITES_HEADERS (on).
    mirror_writes_headers: bool = Field(default_factory=mirror_writes_headers)
    # How a Spark task reads its Kafka partitions (sync/spark_translation.translate_keyed_rows):
    # read_batch_partitions are read together (kafka_io/batched_reads.py: one fetch per cluster
    # serves all their passes, one offsets_for_times call all their lookups; 1: a round trip per
    # pass), read_threads batches at once. Measured at 10k group-partitions on local[2]
    # (bench/scale_curve.py): one thread with batches of 256 used the least CPU (more threads
    # only add consumers fetching back to back). The read budget is checked per batch.
    read_threads: int = Field(default=1, ge=1, le=32)
    read_batch_partitions: int = Field(default=256, ge=1, le=4096)
    # Shape detection for topics not in topic_shapes (sync/shape_step.py): how many topics are sampled
    # per cycle, how many newest records per sample, how long evidence counts, how many records per
    # cluster a one-way verdict needs. Off: unconfigured topics stay unknown (header anchors only).
    detect_shapes: bool = True
    shape_topics_per_cycle: int = 20
    shape_records_per_sample: int = 50
    shape_evidence_hours: float = 24.0
    shape_min_evidence: int = 20


@dg.asset(
    pool=SYNC_POOL,
    group_name="offset_sync",
    deps=["offset_snapshot"],
    kinds={"spark", "kafka", "clickhouse"},
    check_specs=[
        dg.AssetCheckSpec(
            ENGINE_AVAILABLE_CHECK, asset="offset_translations",
            description="Spark translated this cycle's work (WARN: Spark refused, failed or ran past its time "
                        "bound; those group-partitions are spark_unavailable and not synced this cycle).",
        ),
        dg.AssetCheckSpec(
            WITHIN_BOUND_CHECK, asset="offset_translations", blocking=True,
            description="Every translated offset is at or below the safe bound its own facts prove (ERROR, blocking: "
                        "a translation that contradicts its proof is a bug, and no commit of the cycle runs).",
        ),
        dg.AssetCheckSpec(
            COMPLETE_CHECK, asset="offset_translations",
            description="Every Kafka partition of this cycle's work was read (WARN: the read budget ran out; the "
                        "rest are translation_deferred, not synced this cycle, and read first next cycle).",
        ),
    ],
)
@cyclic_gc_paused()  # row building makes no reference cycles: sync/gc_pause.py
def offset_translations(
    context: dg.AssetExecutionContext,
    config: TranslationConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
    spark: SparkResource,
) -> dg.MaterializeResult:
    """Standby offsets (or a named status) for every group-partition of this cycle's snapshot."""
    started = time.monotonic()
    snapshot_id = context.run.run_id
    cycle_time_ms = int(time.time() * 1000)
    writer = open_writer(clickhouse, snapshots.ensure_table, translations.ensure_tables, fast_forwards.ensure_table,
                         deferrals.ensure_table)
    client = writer.client if writer.outcome.error is None else None
    snapshot_rows = snapshot_tuples(cycle_carry.get(snapshot_id, SNAPSHOT_ROWS), client, snapshot_id,
                                    writer.outcome.error)
    clusters = (idc1.cluster_name, idc2.cluster_name)
    # What earlier cycles left (kept anchors and fast-forward points, directions). Without ClickHouse
    # the cycle goes on without them: fewer translations (no kept anchor; a group without members or
    # movement has no direction), never an unsafe one.
    earlier = read_earlier_cycles(client, writer.outcome.error, snapshot_id, snapshot_rows, cycle_time_ms)
    client = client if earlier.read else None  # a ClickHouse that failed the reads samples no shapes either
    if earlier.error:
        context.log.warning(f"offset-sync clickhouse unavailable: {earlier.error}; translating without kept "
                            "anchors, fast-forward points and earlier directions")
    confs = {r.cluster_name: r.client_config() for r in (idc1, idc2)}
    shape_step = _detect_shapes(context, config, client, snapshot_id, cycle_time_ms, snapshot_rows, clusters, confs)
    # MirrorMaker 2's stamped pairs, as the snapshot step read them (none when this step runs alone)
    syncs, syncs_default = cycle_carry.get(snapshot_id, OFFSET_SYNCS) or ({}, {})
    cycle = build_work(snapshot_rows, dict(config.topic_shapes), earlier.anchors, clusters, earlier.history,
                       shape_step.detected(), caught_up_points=earlier.points, offset_syncs=syncs,
                       offset_syncs_default=syncs_default)

    rows = [result_row(r, snapshot_id, cycle_time_ms) for r in cycle.undecided]
    job = TranslationJob(cycle.work, confs, snapshot_id, cycle_time_ms, _read_settings(config), spark.job_timeout_s,
                         earlier.first_keys & partition_keys(cycle.work))
    rows += translate_on_spark(context, spark, job)
    deferred = deferred_rows(rows)
    deferred_keys = partition_keys(deferred)
    _warn_deferred(context, job, deferred, deferred_keys)
    _log_decisions(context, snapshot_id, rows, cycle)
    cycle_carry.put(snapshot_id, TRANSLATION_ROWS, rows)  # the commit step reads them from here
    # Spark failing keeps the last cycle's leftovers first in line for the next.
    written, anchors_written = write_results(writer, snapshot_id, cycle_time_ms, rows, earlier.anchors,
                                             deferred_keys | (job.first_in_line if job.error else set()))
    return dg.MaterializeResult(
        metadata={
            "snapshot_id": snapshot_id, "group_partitions": written, **_row_metadata(rows, cycle),
            "anchors_written": anchors_written, **_shape_metadata(shape_step), **_spark_metadata(job, deferred_keys),
            "rows_spooled": writer.outcome.deferred, "history_unavailable": earlier.error or "none",
            "total_seconds": round(time.monotonic() - started, 3),
        },
        check_results=_check_results(job, deferred, deferred_keys) + [evaluate_within_safe_bound(rows).to_result()],
    )


def _read_settings(config: TranslationConfig) -> ReadSettings:
    return ReadSettings(config.window, config.refine_window, config.kafka_timeout_s, config.read_budget_s,
                        config.mirror_writes_headers, config.read_threads, config.read_batch_partitions)


def _detect_shapes(context: dg.AssetExecutionContext, config: TranslationConfig, client, snapshot_id: str,
                   cycle_time_ms: int, snapshot_rows: list[tuple], clusters: tuple[str, str],
                   confs: dict[str, dict]) -> ShapeStep:
    """The shapes of topics without a configured one (sync/shape_step.py); a sampling error is a warning."""
    # Detection reads origin headers: without them every record looks produced where it lies.
    if not (config.detect_shapes and config.mirror_writes_headers and client is not None):
        return ShapeStep()
    shape_step = sample_and_detect(
        client, snapshot_id, cycle_time_ms, snapshot_rows, config.topic_shapes, clusters, confs,
        ShapeSettings(config.shape_topics_per_cycle, config.shape_records_per_sample,
                      config.shape_evidence_hours * 3600, config.shape_min_evidence, config.kafka_timeout_s),
    )
    for error in shape_step.errors:
        context.log.warning(f"offset-sync shape sample failed: {error}")
    return shape_step


def translate_on_spark(context: dg.AssetExecutionContext, spark: SparkResource, job: TranslationJob) -> list[dict]:
    """The job's rows from Spark, bounded; when Spark refuses, fails or runs past its bound, a
    spark_unavailable row per work row (``job.error`` says why)."""
    if not job.work:
        return []
    job.start()
    error = None
    try:
        rows = spark.run_job(job, what=f"translating {len(job.work)} group-partitions on Spark")
    except SparkUnavailable as exc:
        error = str(exc)
        context.log.warning(f"offset-sync spark unavailable: {error}; nothing translated this cycle")
        rows = untranslated_rows(job.work, TranslationStatus.SPARK_UNAVAILABLE, error, job.snapshot_id,
                                 job.cycle_time_ms)
    job.finish(error)
    return rows


def _warn_deferred(context: dg.AssetExecutionContext, job: TranslationJob, deferred: list[dict],
                   deferred_keys: set[tuple]) -> None:
    if deferred:
        context.log.warning(
            f"offset-sync translation read budget of {job.window_s:g}s ran out: {len(deferred)} group-partitions "
            f"of {len(deferred_keys)} Kafka partitions are translation_deferred (not synced this cycle) and are "
            f"read first next cycle; {len(job.first_in_line)} partitions left by the last cycle were read first"
        )


def _log_decisions(context: dg.AssetExecutionContext, snapshot_id: str, rows: list[dict], cycle: CycleWork) -> None:
    """The cycle's decision lines and one summary event in the run's Dagster log."""
    # One line per decision to the run's stderr (monitoring/decision_log.py: not one Dagster event each); the
    # routine ones (translated, no warning) at DEBUG, left out by default.
    routine = [is_routine_translation(row) for row in rows]
    logged = write_decision_lines(
        [
            log_line("direction", [("group", group_id), ("active", direction.active), ("basis", direction.basis),
                                   ("reason", direction.reason)])
            for group_id, direction in sorted(cycle.directions.items())
        ]
        + [row["decision"] for row, r in zip(rows, routine) if not r]
    )
    logged += write_decision_lines([row["decision"] for row, r in zip(rows, routine) if r], routine=True)
    statuses = Counter(r["status"] for r in rows)
    context.log.info(
        f"offset-sync translations {snapshot_id}: {len(rows)} group-partitions, {len(cycle.directions)} groups; "
        f"{logged} decision lines on the step's stderr ({sum(routine)} routine, at DEBUG); statuses "
        + ", ".join(f"{k}={v}" for k, v in sorted(statuses.items()))
    )


def _row_metadata(rows: list[dict], cycle: CycleWork) -> dict:
    statuses = Counter(r["status"] for r in rows)
    strategies = Counter(r["strategy"] for r in rows)
    return {
        "translated": sum(1 for r in rows if r["standby_offset"] is not None),
        **{f"status_{k}": v for k, v in sorted(statuses.items())},
        **{f"strategy_{k}": v for k, v in sorted(strategies.items())},
        **{f"direction_{k}": v for k, v in sorted(cycle.basis_counts().items())},
    }


def _shape_metadata(shape_step: ShapeStep) -> dict:
    return {
        "shapes_detected": {t: s.value for t, s in sorted(shape_step.shapes.items())},
        "shape_topics_sampled": len(shape_step.sampled),
        "shape_sample_errors": len(shape_step.errors),
    }


def _spark_metadata(job: TranslationJob, deferred_keys: set[tuple]) -> dict:
    return {
        "spark_seconds": round(job.seconds, 3),
        "spark_error": job.error or "none",
        "read_window_seconds": round(job.window_s, 3),
        "deferred_partitions": len(deferred_keys),
        "first_in_line_partitions": len(job.first_in_line),
    }


def _check_results(job: TranslationJob, deferred: list[dict], deferred_keys: set[tuple]) -> list[dg.AssetCheckResult]:
    work, spark_error, window_s = job.work, job.error, job.window_s
    return [
        dg.AssetCheckResult(
            check_name=ENGINE_AVAILABLE_CHECK,
            passed=spark_error is None,
            severity=dg.AssetCheckSeverity.WARN,
            description=(
                (f"Spark translated {len(work)} group-partitions" if work else "nothing needed Spark this cycle")
                if spark_error is None else
                f"{len(work)} group-partitions spark_unavailable: {spark_error}"
            ),
            metadata={"group_partitions_untranslated": len(work) if spark_error else 0},
        ),
        dg.AssetCheckResult(
            check_name=COMPLETE_CHECK,
            passed=not deferred,
            severity=dg.AssetCheckSeverity.WARN,
            description=(
                f"read every Kafka partition of the cycle within {window_s:g}s" if not deferred else
                f"the read budget ({window_s:g}s) ran out: {len(deferred)} group-partitions of "
                f"{len(deferred_keys)} Kafka partitions translation_deferred, read first next cycle"
            ),
            metadata={"group_partitions_deferred": len(deferred), "partitions_deferred": len(deferred_keys),
                      "partitions_read_first": len(job.first_in_line)},
        ),
    ]
