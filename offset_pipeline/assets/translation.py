"""``offset_translations``: each cycle, the standby offset of every synced group-partition.

Reads this run's ``offset_snapshot`` rows from ClickHouse, decides each group's direction (members,
then the group's own offset movement since the previous snapshot, then its previous direction:
``offset_pipeline/sync/work.py``; a group with members on both clusters is a split brain and is not
translated), detects the shape of topics without a configured one from the origin headers of their
newest records (``offset_pipeline/sync/shape_step.py``; a configured shape always wins),
translates on Spark grouped by topic-partition (each Kafka partition read once per cycle however
many groups read it), and appends the results to ``offset_translations`` and the anchors to keep to
``offset_anchors``. Every decision is logged in one line (``decision_log_line``) to the step's
stderr (``monitoring/decision_log.py``), with one summary event in the run's Dagster log.

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

from offset_pipeline.monitoring.decision_log import write_decision_lines
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.resources.spark import SparkResource, SparkUnavailable
from offset_pipeline.sync.spark_translation import (
    PARTITION_KEY,
    RESULT_COLUMNS,
    result_row,
    translate_groups,
    untranslated_rows,
    work_dataframe,
)
from offset_pipeline.settings import kafka_timeout_s, mirror_writes_headers, topic_shapes, translation_budget_s
from offset_pipeline.sync.shape_step import ShapeSettings, ShapeStep, sample_and_detect
from offset_pipeline.sync import cycle_carry
from offset_pipeline.assets.snapshot import SNAPSHOT_ROWS
from offset_pipeline.storage import cycle_rows, deferrals, fast_forwards, snapshots, translations
from offset_pipeline.storage.deferred_writes import open_writer
from offset_pipeline.storage.history import direction_history, previous_snapshot
from offset_pipeline.sync.work import SNAPSHOT_COLUMNS, build_work
from offset_pipeline.translation.direction import DirectionHistory
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
    # (default from OFFSET_PIPELINE_TRANSLATION_BUDGET_S). Kept under the Spark bound: see read_window_s.
    read_budget_s: float = Field(default_factory=translation_budget_s, gt=0)
    # The mirrors mark every copy with its origin (IDC/Offset headers). Off for MirrorMaker 2, which
    # writes none: one-way topics then go by timestamp search alone. Default from
    # OFFSET_PIPELINE_MIRROR_WRITES_HEADERS (on).
    mirror_writes_headers: bool = Field(default_factory=mirror_writes_headers)
    # Shape detection for topics not in topic_shapes (sync/shape_step.py): how many topics are sampled
    # per cycle, how many newest records per sample, how long evidence counts, how many records per
    # cluster a one-way verdict needs. Off: unconfigured topics stay unknown (header anchors only).
    detect_shapes: bool = True
    shape_topics_per_cycle: int = 20
    shape_records_per_sample: int = 50
    shape_evidence_hours: float = 24.0
    shape_min_evidence: int = 20


SNAPSHOT_GROUP = SNAPSHOT_COLUMNS.index("group_id")


@dg.asset(
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
            COMPLETE_CHECK, asset="offset_translations",
            description="Every Kafka partition of this cycle's work was read (WARN: the read budget ran out; the "
                        "rest are translation_deferred, not synced this cycle, and read first next cycle).",
        ),
    ],
)
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
    carried = cycle_carry.get(snapshot_id, SNAPSHOT_ROWS)
    if carried is not None:
        snapshot_rows = [tuple(getattr(row, c) for c in SNAPSHOT_COLUMNS) for row in carried]
    elif client is not None:
        snapshot_rows = cycle_rows.snapshot_rows(client, snapshot_id, SNAPSHOT_COLUMNS)
    else:
        raise RuntimeError(f"this run's snapshot is neither in this process nor readable: {writer.outcome.error}")
    clusters = (idc1.cluster_name, idc2.cluster_name)
    # What earlier cycles left (kept anchors and fast-forward points, directions). Without ClickHouse
    # the cycle goes on without them: fewer translations (no kept anchor; a group without members or
    # movement has no direction), never an unsafe one.
    history_error = None
    anchors, points, history, first_keys = {}, {}, DirectionHistory(), set()
    if client is not None:
        try:
            # The snapshot's groups: the recent history is read first and only the groups it lacks
            # are looked up further back (storage/recent.py).
            group_ids = {row[SNAPSHOT_GROUP] for row in snapshot_rows}
            anchors = translations.latest_anchors(client)
            points = fast_forwards.latest_points(client)  # kept fast-forwards (stale partitions)
            previous = previous_snapshot(client, snapshot_id)
            history = direction_history(client, snapshot_id, previous, group_ids, cycle_time_ms)
            # what the last cycle did not reach
            first_keys = deferrals.deferred_by(client, previous.snapshot_id if previous else None)
        except Exception as exc:  # noqa: BLE001 - the history is an aid, not a requirement
            history_error = f"reading earlier cycles failed: {type(exc).__name__}: {str(exc)[:300]}"
            anchors, points, history, first_keys, client = {}, {}, DirectionHistory(), set(), None
    else:
        history_error = writer.outcome.error
    if history_error:
        context.log.warning(f"offset-sync clickhouse unavailable: {history_error}; translating without kept "
                            "anchors, fast-forward points and earlier directions")
    confs = {r.cluster_name: r.client_config() for r in (idc1, idc2)}
    shape_step = ShapeStep()
    # Detection reads origin headers: without them every record looks produced where it lies.
    if config.detect_shapes and config.mirror_writes_headers and client is not None:
        shape_step = sample_and_detect(
            client, snapshot_id, cycle_time_ms, snapshot_rows, config.topic_shapes, clusters, confs,
            ShapeSettings(config.shape_topics_per_cycle, config.shape_records_per_sample,
                          config.shape_evidence_hours * 3600, config.shape_min_evidence, config.kafka_timeout_s),
        )
        for error in shape_step.errors:
            context.log.warning(f"offset-sync shape sample failed: {error}")
    cycle = build_work(snapshot_rows, dict(config.topic_shapes), anchors, clusters, history, shape_step.detected(),
                       caught_up_points=points)
    work, undecided = cycle.work, cycle.undecided

    rows = [result_row(r, snapshot_id, cycle_time_ms) for r in undecided]
    spark_s, spark_error = 0.0, None
    work_keys = {tuple(w[k] for k in PARTITION_KEY) for w in work}
    first_in_line = first_keys & work_keys
    window_s = read_window_s(config.read_budget_s, spark.job_timeout_s, config.kafka_timeout_s)
    if work:
        spark_started = time.monotonic()

        def job(session):
            # The window opens once the session is there (a cold JVM or Python worker start-up is
            # not reading) and is cut to what is left of the Spark bound.
            nonlocal window_s
            left_s = spark.job_timeout_s - (time.monotonic() - spark_started)
            window_s = read_window_s(config.read_budget_s, left_s, config.kafka_timeout_s)
            read_until = time.time() + window_s
            out = translate_groups(
                session, work_dataframe(session, work), confs, snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms,
                window=config.window, refine_window=config.refine_window, timeout_s=config.kafka_timeout_s,
                mirror_writes_headers=config.mirror_writes_headers, read_until=read_until,
                first_keys=first_in_line, salt=snapshot_id,
            )
            return [{c: row[c] for c in RESULT_COLUMNS} for row in (r.asDict() for r in out.collect())]

        try:
            rows += spark.run_job(job, what=f"translating {len(work)} group-partitions on Spark")
        except SparkUnavailable as exc:
            spark_error = str(exc)
            context.log.warning(f"offset-sync spark unavailable: {spark_error}; nothing translated this cycle")
            rows += untranslated_rows(work, TranslationStatus.SPARK_UNAVAILABLE, spark_error, snapshot_id,
                                      cycle_time_ms)
        spark_s = time.monotonic() - spark_started
    deferred_rows = [r for r in rows if r["status"] == TranslationStatus.TRANSLATION_DEFERRED.value]
    deferred_keys = {tuple(r[k] for k in PARTITION_KEY) for r in deferred_rows}
    if deferred_rows:
        context.log.warning(
            f"offset-sync translation read budget of {window_s:g}s ran out: {len(deferred_rows)} group-partitions "
            f"of {len(deferred_keys)} Kafka partitions are translation_deferred (not synced this cycle) and are "
            f"read first next cycle; {len(first_in_line)} partitions left by the last cycle were read first"
        )

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
    cycle_carry.put(snapshot_id, TRANSLATION_ROWS, rows)  # the commit step reads them from here
    written = translations.insert_translations(writer, rows)
    kept = [
        {
            "group_id": r["group_id"], "topic": r["topic"], "partition": r["partition"], "active": r["active"],
            "standby": r["standby"], "active_offset": r["keep_active_offset"],
            "standby_offset": r["keep_standby_offset"], "snapshot_id": snapshot_id, "kept_at": cycle_time_ms,
        }
        for r in rows
        if r["active"] and r["standby"]
        # store a change only: a new anchor, or the drop of one that was kept
        and (r["keep_active_offset"], r["keep_standby_offset"]) != _kept(anchors, r)
    ]
    anchors_written = translations.insert_anchors(writer, kept)
    # Spark failing keeps the last cycle's leftovers first in line for the next.
    deferrals.insert_deferred(writer, snapshot_id, cycle_time_ms,
                              deferred_keys | (first_in_line if spark_error else set()))

    strategies = Counter(r["strategy"] for r in rows)
    return dg.MaterializeResult(
        metadata={
            "snapshot_id": snapshot_id,
            "group_partitions": written,
            "translated": sum(1 for r in rows if r["standby_offset"] is not None),
            **{f"status_{k}": v for k, v in sorted(statuses.items())},
            **{f"strategy_{k}": v for k, v in sorted(strategies.items())},
            **{f"direction_{k}": v for k, v in sorted(cycle.basis_counts().items())},
            "anchors_written": anchors_written,
            "shapes_detected": {t: s.value for t, s in sorted(shape_step.shapes.items())},
            "shape_topics_sampled": len(shape_step.sampled),
            "shape_sample_errors": len(shape_step.errors),
            "spark_seconds": round(spark_s, 3),
            "spark_error": spark_error or "none",
            "read_window_seconds": round(window_s, 3),
            "deferred_partitions": len(deferred_keys),
            "first_in_line_partitions": len(first_in_line),
            "rows_spooled": writer.outcome.deferred,
            "history_unavailable": history_error or "none",
            "total_seconds": round(time.monotonic() - started, 3),
        },
        check_results=[
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
                passed=not deferred_rows,
                severity=dg.AssetCheckSeverity.WARN,
                description=(
                    f"read every Kafka partition of the cycle within {window_s:g}s" if not deferred_rows else
                    f"the read budget ({window_s:g}s) ran out: {len(deferred_rows)} group-partitions of "
                    f"{len(deferred_keys)} Kafka partitions translation_deferred, read first next cycle"
                ),
                metadata={"group_partitions_deferred": len(deferred_rows), "partitions_deferred": len(deferred_keys),
                          "partitions_read_first": len(first_in_line)},
            ),
        ],
    )


def read_window_s(budget_s: float, spark_bound_s: float, kafka_timeout_s: float) -> float:
    """How long the cycle's translation reads Kafka: the budget, cut to leave room under the Spark
    bound for a read begun just before the end (a few Kafka timeouts) and for collecting results,
    so a slow cycle defers its last partitions instead of losing everything to the bound. Never
    below half the bound, so a small bound still reads."""
    return min(budget_s, max(spark_bound_s - 3 * kafka_timeout_s, spark_bound_s / 2))


def _kept(anchors: dict, row: dict):
    anchor = anchors.get((row["group_id"], row["topic"], row["partition"], row["active"], row["standby"]))
    return (anchor.active_offset, anchor.standby_offset) if anchor else (None, None)
