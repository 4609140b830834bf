"""``offset_failover_audit``: for every snapshot of a UTC day, what a failover then would have cost.

Daily partitions. A day is the unit a data engineer asks about ("what if we had failed over at 03:12
last Tuesday"), it holds 2,880 snapshots per group-partition, and one Spark job per day amortizes
the session and the consumers over all of them; hourly partitions would start 24 times as many runs
for the same reads. Backfill policy ``single_run``: a range of days is one run (one Spark job), each
day still written as its own window. A daily schedule (``offset_failover_audit_schedule``) audits the
latest complete day.

Per partition: the moments (group, snapshot, ``c``, ``t``, both log ends then, the cycle's strategy)
come from ``offset_snapshots`` and ``offset_translations``; Spark (``audit/spark_audit.py``) reads
per Kafka partition only the offset ranges the moments need and computes lost and duplicated
records (``audit/failover_cost.py``); a moment whose records are gone says ``records_deleted``.
Results replace the day's rows in ``offset_failover_audits`` (re-running never doubles). The asset
check ``no_loss_in_window`` (ERROR) fails on any moment with a lost record.
"""

import time
from collections import Counter
from datetime import date, datetime, timedelta, timezone

import dagster as dg
from pydantic import Field

from offset_pipeline.audit.failover_cost import Shape
from offset_pipeline.audit.spark_audit import RESULT_COLUMNS, audit_moments_df, moments_dataframe
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource, close_embedded_clients
from offset_pipeline.resources.spark import SparkUnavailable
from offset_pipeline.settings import audit_start_date, mirror_exactly_once, topic_shapes
from offset_pipeline.storage import audits, snapshots, translations

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


def _shape(shapes: dict[str, str], topic: str, active: str) -> str:
    text = shapes.get(topic, "")
    if text == "two_way":
        return Shape.TWO_WAY.value
    if text.startswith("one_way:"):
        return (Shape.ONE_WAY_FROM_ACTIVE if text.split(":", 1)[1] == active else Shape.ONE_WAY_FROM_STANDBY).value
    return Shape.UNKNOWN.value


def moments_of_day(client, day: date, shapes: dict[str, str]) -> list[dict]:
    lo = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    rows = audits.snapshot_moments(client, lo, lo + timedelta(days=1))
    out = []
    for sid, ms, group, topic, partition, active, standby, c, t, a_end, b_end, strategy in rows:
        if a_end is None or b_end is None:
            continue  # the topic was missing on one side then: nothing to fail over to
        out.append({
            "window_date": day.isoformat(), "snapshot_id": sid, "snapshot_time": int(ms), "group_id": group,
            "topic": topic, "partition": int(partition), "active": active, "standby": standby, "committed": c,
            "standby_committed": t, "active_end_at": int(a_end), "standby_end_at": int(b_end),
            "strategy": strategy or "none", "shape": _shape(shapes, topic, active),
        })
    return out


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
    days = []
    day = window.start.astimezone(timezone.utc).date()
    while datetime(day.year, day.month, day.day, tzinfo=timezone.utc) < window.end:
        days.append(day)
        day += timedelta(days=1)
    client = clickhouse.get_client()
    for module in (snapshots, audits):
        module.ensure_table(client)
    translations.ensure_tables(client)

    moments = [m for d in days for m in moments_of_day(client, d, dict(config.topic_shapes))]
    if clickhouse.embedded:
        # The embedded engine admits one process at a time: let the sync cycles use it while Spark
        # reads Kafka (minutes); it is opened again (waiting its turn) to write the results.
        close_embedded_clients(clickhouse.dsn)
    results: list[dict] = []
    spark_s = 0.0
    if moments:
        spark_started = time.monotonic()
        confs = {r.cluster_name: r.client_config() for r in (idc1, idc2)}

        def job(session):
            out = audit_moments_df(session, moments_dataframe(session, moments), confs,
                                   exactly_once_mirror=config.exactly_once_mirror, timeout_s=config.kafka_timeout_s)
            return [{c: row[c] for c in RESULT_COLUMNS} for row in (r.asDict() for r in out.collect())]

        try:
            results = spark.run_job(job, what=f"auditing {len(moments)} moments", timeout_s=config.spark_timeout_s)
        except SparkUnavailable as exc:
            # An audit is a backfill, not the 30-second path: the run fails, saying why, and is run again.
            raise dg.Failure(description=f"the audit's Spark job did not complete: {exc}") from exc
        spark_s = time.monotonic() - spark_started
    now_ms = int(time.time() * 1000)
    client = clickhouse.get_client()
    written = 0
    for d in days:
        written += audits.replace_window(client, d, [r for r in results if r["window_date"] == d.isoformat()], now_ms)

    statuses = Counter(r["status"] for r in results)
    strategies = Counter(r["strategy"] for r in results)
    audited = [r for r in results if r["status"] == "audited"]
    losing = [r for r in audited if r["lost"]]
    duplicated = [r["duplicated"] for r in audited]
    context.log.info(f"offset failover audit {days[0]}..{days[-1]}: {len(results)} moments; "
                     + ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())))
    check = dg.AssetCheckResult(
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
    return dg.MaterializeResult(
        metadata={
            "days": ", ".join(d.isoformat() for d in days),
            "moments": len(results),
            "rows_written": written,
            "group_partitions": len({(r["group_id"], r["topic"], r["partition"]) for r in results}),
            **{f"status_{k}": v for k, v in sorted(statuses.items())},
            **{f"strategy_{k}": v for k, v in sorted(strategies.items())},
            "records_lost": sum(r["lost"] for r in audited),
            "records_duplicated": sum(duplicated),
            "duplicated_max": max(duplicated, default=0),
            "duplicated_mean": round(sum(duplicated) / len(duplicated), 3) if duplicated else 0.0,
            "records_read": sum(r["records_read"] for r in results),
            "spark_seconds": round(spark_s, 3),
            "total_seconds": round(time.monotonic() - started, 3),
        },
        check_results=[check],
    )
