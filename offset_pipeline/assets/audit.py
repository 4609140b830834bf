"""``offset_failover_audit``: for every snapshot of a UTC day, what a failover then would have cost.

Daily partitions. A day is the unit a data engineer asks about ("what if we had failed over at 03:12
last Tuesday"), it holds 2,880 snapshots per group-partition, and one Spark job per day amortizes
the session and the consumers over all of them; hourly partitions would start 24 times as many runs
for the same reads. Backfill policy ``single_run``: a range of days is one run (one Spark job), each
day still written as its own window. A daily schedule (``offset_failover_audit_schedule``) audits the
latest complete day.

Per partition (the steps in ``audit/day_audit.py``): the moments (group, snapshot, ``c``, ``t``, both
log ends then, the cycle's strategy) come from ``offset_snapshots`` and ``offset_translations``;
Spark (``audit/spark_audit.py``) reads per Kafka partition only the offset ranges the moments need
and computes lost and duplicated records (``audit/failover_cost.py``); a moment whose records are
gone says ``records_deleted``. Results replace the day's rows in ``offset_failover_audits``
(re-running never doubles). The asset check ``no_loss_in_window`` (ERROR) fails on any moment with a
lost record.
"""

import time
from datetime import date

import dagster as dg
from pydantic import Field

from offset_pipeline.audit.day_audit import (
    AuditTotals,
    audit_results,
    audit_totals,
    days_of_window,
    ensure_audit_tables,
    moments_of_day,
    write_days,
)
from offset_pipeline.resources import (
    ClickHouseResource,
    KafkaClusterResource,
    SparkResource,
    close_embedded_clients,
)
from offset_pipeline.resources.spark import SparkUnavailable
from offset_pipeline.settings import audit_start_date, mirror_exactly_once, topic_shapes

# end_offset=1: today is offered too (audited so far, on demand); the schedule audits yesterday.
AUDIT_PARTITIONS = dg.DailyPartitionsDefinition(start_date=audit_start_date(), timezone="UTC", end_offset=1)
NO_LOSS_CHECK = "no_loss_in_window"
LISTED = 50


class AuditConfig(dg.Config):
    # The mirrors copy each record once, in order (the devstack mirror; MirrorMaker 2 with
    # exactly-once): lets the audit read small regions. Off: regions of the active log are read
    # whole where a standby record's copy must be found. Default from OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE.
    exactly_once_mirror: bool = Field(default_factory=mirror_exactly_once)
    # topic -> "two_way" | "one_way:<producing cluster>" (as the translation's; default from the environment)
    topic_shapes: dict[str, str] = Field(default_factory=topic_shapes)
    kafka_timeout_s: float = Field(default=30.0, gt=0)
    # The whole Spark job of the run (a day at 1,000 group-partitions takes minutes: bench/audit_benchmark.py);
    # past it the job is interrupted and the run fails, naming the bound.
    spark_timeout_s: float = Field(default=3600.0, gt=0)


@dg.asset(
    group_name="audits",
    partitions_def=AUDIT_PARTITIONS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    kinds={"spark", "kafka", "clickhouse"},
    check_specs=[dg.AssetCheckSpec(
        NO_LOSS_CHECK, asset="offset_failover_audit",
        description="No snapshot of the audited days would have lost a record in a failover.",
    )],
)
def offset_failover_audit(
    context: dg.AssetExecutionContext,
    config: AuditConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
    spark: SparkResource,
) -> dg.MaterializeResult:
    """Lost and duplicated records of a failover at every snapshot of the day(s), per group-partition."""
    started = time.monotonic()
    window = context.partition_time_window
    days = days_of_window(window.start, window.end)
    client = clickhouse.get_client()
    ensure_audit_tables(client)

    moments = [m for d in days for m in moments_of_day(client, d, dict(config.topic_shapes))]
    if clickhouse.embedded:
        # The embedded engine admits one process at a time: let the sync cycles use it while Spark
        # reads Kafka (minutes); it is opened again (waiting its turn) to write the results.
        close_embedded_clients(clickhouse.dsn)
    results, spark_s = _audit_in_spark(spark, config, moments, (idc1, idc2))
    now_ms = int(time.time() * 1000)
    written = write_days(clickhouse.get_client(), days, results, now_ms)

    totals = audit_totals(results)
    context.log.info(f"offset failover audit {days[0]}..{days[-1]}: {len(results)} moments; "
                     + ", ".join(f"{k}={v}" for k, v in sorted(totals.statuses.items())))
    check = _no_loss_check(totals)
    return dg.MaterializeResult(
        metadata=_audit_metadata(days, totals, written, spark_s, started),
        check_results=[check],
    )


def _audit_in_spark(
    spark: SparkResource, config: AuditConfig, moments: list[dict], clusters: tuple[KafkaClusterResource, ...],
) -> tuple[list[dict], float]:
    """Every moment's cost, and the Spark job's seconds (no moments: no job, ``[]`` and 0.0)."""
    if not moments:
        return [], 0.0
    spark_started = time.monotonic()
    confs = {r.cluster_name: r.client_config() for r in clusters}

    def job(session):
        return audit_results(session, moments, confs, exactly_once_mirror=config.exactly_once_mirror,
                             timeout_s=config.kafka_timeout_s)

    try:
        results = spark.run_job(job, what=f"auditing {len(moments)} moments", timeout_s=config.spark_timeout_s)
    except SparkUnavailable as exc:
        # An audit is a backfill, not the 30-second path: the run fails, saying why, and is run again.
        raise dg.Failure(description=f"the audit's Spark job did not complete: {exc}") from exc
    return results, time.monotonic() - spark_started


def _no_loss_check(totals: AuditTotals) -> dg.AssetCheckResult:
    losing, audited = totals.losing, totals.audited
    return dg.AssetCheckResult(
        check_name=NO_LOSS_CHECK, passed=not losing, severity=dg.AssetCheckSeverity.ERROR,
        description=(f"{len(losing)} of {len(audited)} audited moments would have lost records" if losing
                     else f"0 of {len(audited)} audited moments would have lost a record"),
        metadata={
            "moments_with_loss": len(losing),
            "records_lost": sum(r["lost"] for r in losing),
            "first_losses": dg.MetadataValue.json([
                {"group": r["group_id"], "topic": r["topic"], "partition": r["partition"],
                 "snapshot_time_ms": r["snapshot_time"], "c": r["committed"], "t": r["standby_committed"],
                 "lost": r["lost"], "lost_standby_offsets": r["lost_offsets"]}
                for r in losing[:LISTED]
            ]),
        },
    )


def _audit_metadata(days: list[date], totals: AuditTotals, written: int, spark_s: float, started: float) -> dict:
    """The materialization's metadata (``started``: the step's ``time.monotonic()`` at its start)."""
    return {
        "days": ", ".join(d.isoformat() for d in days),
        "moments": len(totals.results),
        "rows_written": written,
        "group_partitions": totals.group_partitions,
        **{f"status_{k}": v for k, v in sorted(totals.statuses.items())},
        **{f"strategy_{k}": v for k, v in sorted(totals.strategies.items())},
        "records_lost": totals.records_lost,
        "records_duplicated": sum(totals.duplicated),
        "duplicated_max": max(totals.duplicated, default=0),
        "duplicated_mean": totals.duplicated_mean,
        "records_read": totals.records_read,
        "spark_seconds": round(spark_s, 3),
        "total_seconds": round(time.monotonic() - started, 3),
    }
