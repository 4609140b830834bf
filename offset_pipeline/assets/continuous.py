"""``offset_continuous_sync``: one continuous sync run, the default mode (docs/operating/sync-modes.md).

The run syncs for ``run_for_s`` (``OFFSET_PIPELINE_CONTINUOUS_RUN_S``, 900 s) in back-to-back
incremental cycles, about one a second: each reads both clusters, translates and commits only the
group-partitions that may have a new answer, and every ``checkpoint_s`` the state goes to the same
ClickHouse tables as a cycle of the interval mode (``continuous/loop.py``). Then the run ends with
one materialization, and ``offset_sync_sensor`` starts the next: Dagster's storage grows by one run
per ``run_for_s``, new code takes effect at the next run, and a fast-forward queued meanwhile runs in
between.

Faults cost cycles, never the run: a cluster that does not answer gives its groups
``cluster_unavailable`` until it answers again, checked every cycle; Spark, the translation child
or ClickHouse failing are named statuses or late rows. The checks say what the run saw.
"""

import time
from datetime import timedelta

import dagster as dg
from pydantic import Field

from offset_pipeline.assets.commit import CommitConfig
from offset_pipeline.assets.metrics import MetricsConfig
from offset_pipeline.assets.readiness_checks import (
    READINESS_CHECK,
    READINESS_CHECK_DESCRIPTION,
    readiness_check,
    readiness_metadata,
)
from offset_pipeline.assets.snapshot import SnapshotConfig
from offset_pipeline.assets.translation import TranslationConfig, translate_on_spark
from offset_pipeline.continuous.checkpoint import CheckpointSettings
from offset_pipeline.continuous.cycle_reads import FollowSettings, FollowStatus
from offset_pipeline.continuous.loop import (
    ContinuousIO,
    ContinuousSettings,
    ContinuousSync,
    RunSummary,
)
from offset_pipeline.kafka_io.group_offsets import GroupFilter
from offset_pipeline.resources import (
    ClickHouseResource,
    KafkaClusterResource,
    SparkResource,
)
from offset_pipeline.resources.clickhouse import close_embedded_clients
from offset_pipeline.run_targets import FAST_FORWARD_JOB, SYNC_POOL
from offset_pipeline.settings import checkpoint_s, continuous_run_s, follow_commit_log, offset_syncs_topics, reconcile_s
from offset_pipeline.sync.commit_checks import (
    FRESHNESS_CHECK,
    MAX_LISTED,
    NO_LOSS_CHECK,
)
from offset_pipeline.sync.shape_step import ShapeSettings
from offset_pipeline.sync.translation_step import ReadSettings

ASSET = "offset_continuous_sync"
CLUSTERS_READABLE_CHECK = "clusters_readable"
CHECKPOINTS_CHECK = "checkpoints_written"
COMMIT_LOG_CHECK = "commit_log_followed"


class ContinuousSyncConfig(dg.Config):
    run_for_s: float = Field(default_factory=continuous_run_s, gt=0,
                             description="how long this run syncs before it ends (OFFSET_PIPELINE_CONTINUOUS_RUN_S)")
    checkpoint_s: float = Field(default_factory=checkpoint_s, gt=0,
                                description="how often the state goes to ClickHouse (OFFSET_PIPELINE_CHECKPOINT_S)")
    revisit_s: float = Field(default=2.0, gt=0,
                             description="an unsettled group-partition is read again at most this long after its "
                                         "last translation when a log end moved")
    revisit_first_s: float = Field(default=2.0, gt=0,
                                   description="... and this soon the first time, when below revisit_s: the wait "
                                               "doubles while it stays unsettled, up to revisit_s (default: off)")
    retry_s: float = Field(default=300.0, gt=0,
                           description="an unsettled group-partition is read again after this (spread up to twice), "
                                       "whatever happened")
    local_max_partitions: int = Field(default=1000, ge=0,
                                      description="a cycle with more Kafka partitions to translate uses Spark")
    follow_commit_log: bool = Field(default_factory=follow_commit_log,
                                    description="follow both clusters' __consumer_offsets and read only the groups "
                                                "that committed (OFFSET_PIPELINE_FOLLOW_COMMIT_LOG)")
    reconcile_s: float = Field(default_factory=reconcile_s, gt=0,
                               description="while following, list every group this often and compare "
                                           "(OFFSET_PIPELINE_RECONCILE_S)")
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    translation: TranslationConfig = Field(default_factory=TranslationConfig)
    commit: CommitConfig = Field(default_factory=CommitConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)


def _freshness_fail_window() -> timedelta:
    # A run materializes once, at its end: the asset is late when no run ended for two run lengths.
    return timedelta(seconds=2 * continuous_run_s() + 300)


@dg.asset(
    name=ASSET,
    pool=SYNC_POOL,
    group_name="offset_sync_continuous",
    kinds={"kafka", "spark", "clickhouse"},
    freshness_policy=dg.FreshnessPolicy.time_window(fail_window=_freshness_fail_window()),
    check_specs=[
        dg.AssetCheckSpec(NO_LOSS_CHECK, asset=ASSET,
                          description="Every standby offset this run wrote, read back, is at or below its proven safe bound."),
        dg.AssetCheckSpec(FRESHNESS_CHECK, asset=ASSET,
                          description="Every group ended the run fully synced within max_sync_age_s."),
        dg.AssetCheckSpec(CLUSTERS_READABLE_CHECK, asset=ASSET,
                          description="Both clusters answered every cycle (WARN: names the clusters and how many "
                                      "cycles their groups were not synced)."),
        dg.AssetCheckSpec(READINESS_CHECK, asset=ASSET, description="At the run's end: " + READINESS_CHECK_DESCRIPTION),
        dg.AssetCheckSpec(COMMIT_LOG_CHECK, asset=ASSET,
                          description="Both clusters' commit logs were followed and every listing matched what was "
                                      "followed (WARN: names the cluster polled and why, or the differences)."),
        dg.AssetCheckSpec(CHECKPOINTS_CHECK, asset=ASSET,
                          description="ClickHouse took every checkpoint (WARN: rows spooled or monitoring rows dropped; "
                                      "the sync committed anyway)."),
    ],
)
def offset_continuous_sync(
    context: dg.AssetExecutionContext,
    config: ContinuousSyncConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
    spark: SparkResource,
) -> dg.MaterializeResult:
    """Standby offsets kept in sync continuously for ``run_for_s``; one materialization at the end."""
    started = time.monotonic()
    sync = ContinuousSync(context.run.run_id, _io(context, idc1, idc2, clickhouse, spark), _settings(config, idc1, idc2),
                          context.log)
    context.log.info(f"offset-sync continuous run for {config.run_for_s:g}s, a checkpoint every {config.checkpoint_s:g}s")
    summary = sync.run(config.run_for_s)
    freshness = sync.freshness()
    readiness = sync.last_readiness
    followed = sync.follow_status
    return dg.MaterializeResult(
        metadata={**_metadata(summary, time.monotonic() - started), **_follow_metadata(followed),
                  **readiness_metadata(readiness)},
        check_results=[_no_loss(summary), freshness.to_result(), _clusters_readable(summary), readiness_check(readiness),
                       _commit_log(followed), _checkpoints(summary)],
    )


def _io(context, idc1: KafkaClusterResource, idc2: KafkaClusterResource, clickhouse: ClickHouseResource,
        spark: SparkResource) -> ContinuousIO:
    def release() -> None:
        # The embedded engine admits one process per data folder: between checkpoints the sensors
        # and other runs read it.
        if clickhouse.embedded:
            close_embedded_clients(clickhouse.dsn)

    def stop_reason() -> str | None:
        # A stop asked of this run through the instance (its status set to CANCELING) ends it at this
        # checkpoint, with its final checkpoint written, instead of at its rollover.
        own = context.instance.get_run_by_id(context.run.run_id)
        if own is not None and own.status == dg.DagsterRunStatus.CANCELING:
            return "stop requested (run canceling)"
        # A fast-forward waits for the sync run (one run with the sync tag at a time): the run ends
        # at this checkpoint instead of at its rollover, the queue starts the fast-forward, the
        # sensor the next continuous run.
        queued = context.instance.get_runs(
            filters=dg.RunsFilter(job_name=FAST_FORWARD_JOB, statuses=[dg.DagsterRunStatus.QUEUED]), limit=1)
        return f"fast-forward run {queued[0].run_id} queued" if queued else None

    return ContinuousIO(
        clusters={r.cluster_name: r for r in (idc1, idc2)}, clickhouse=clickhouse,
        run_spark=lambda job: translate_on_spark(context, spark, job), spark_bound_s=spark.job_timeout_s,
        release_clickhouse=release, yield_to=stop_reason,
    )


def _settings(config: ContinuousSyncConfig, idc1: KafkaClusterResource, idc2: KafkaClusterResource) -> ContinuousSettings:
    t = config.translation
    reads = ReadSettings(t.window, t.refine_window, config.snapshot.kafka_timeout_s, t.read_budget_s,
                         t.mirror_writes_headers)
    shapes = (ShapeSettings(t.shape_topics_per_cycle, t.shape_records_per_sample, t.shape_evidence_hours * 3600,
                            t.shape_min_evidence, t.kafka_timeout_s)
              if t.detect_shapes and t.mirror_writes_headers else None)
    return ContinuousSettings(
        group_filter=GroupFilter(config.snapshot.group_include, config.snapshot.group_exclude),
        shapes=dict(t.topic_shapes), reads=reads, dry_run=config.commit.dry_run,
        # a cycle's commits are a few groups' each: twice the interval mode's parallelism
        parallel_groups=2 * config.commit.parallel_groups, checkpoint_s=config.checkpoint_s, revisit_s=config.revisit_s,
        revisit_first_s=config.revisit_first_s,
        retry_s=config.retry_s,
        local_max_partitions=config.local_max_partitions, max_sync_age_s=config.commit.max_sync_age_s,
        offset_syncs_topics=tuple(offset_syncs_topics(writes_headers=t.mirror_writes_headers)),
        follow=FollowSettings(config.follow_commit_log, config.reconcile_s),
        checkpoint=CheckpointSettings(
            mirror_window_s=config.metrics.mirror_window_s, lagging_after_s=config.metrics.lagging_after_s,
            shapes=shapes, configured_shapes=dict(t.topic_shapes), clusters=(idc1.cluster_name, idc2.cluster_name),
            confs={r.cluster_name: r.client_config() for r in (idc1, idc2)},
        ),
    )


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _metadata(summary: RunSummary, seconds: float) -> dict:
    checkpoints = summary.checkpoints
    last = checkpoints[-1] if checkpoints else None
    return {
        "cycles": summary.cycles,
        "cycle_seconds_p50": _seconds(summary.cycle_quantile(0.5)),
        "cycle_seconds_p99": _seconds(summary.cycle_quantile(0.99)),
        "cycle_seconds_max": _seconds(max(summary.cycle_seconds, default=None) if summary.cycle_seconds else None),
        **{f"revisited_{reason}": n for reason, n in sorted(summary.revisited.items())},
        **{f"status_{status}": n for status, n in sorted(summary.statuses.items())},
        **{f"cycles_translated_{engine}": n for engine, n in sorted(summary.engines.items())},
        "partitions_written": summary.partitions_written,
        "commit_errors": summary.commit_errors,
        "unrecorded_standby_changes": len(summary.unrecorded),
        **({"unrecorded_standby_changes_first": dg.MetadataValue.json(summary.unrecorded[:20])}
           if summary.unrecorded else {}),
        "checkpoints": len(checkpoints),
        "checkpoints_skipped": summary.checkpoints_skipped,
        "checkpoint_seconds_max": _seconds(max((c.seconds for c in checkpoints), default=None)),
        "rows_spooled": sum(c.rows_spooled for c in checkpoints),
        **({f"partitions_{s}": n for s, n in sorted(last.metric_statuses.items())} if last else {}),
        "history_unavailable": summary.history_error or "none",
        "stopped_by": summary.stopped_by,
        "total_seconds": round(seconds, 3),
    }


def _no_loss(summary: RunSummary) -> dg.AssetCheckResult:
    offenders = summary.no_loss_offenders + [{**o, "why": "translated above its own safe bound: not committed"}
                                             for o in summary.bound_offenders]
    return dg.AssetCheckResult(
        check_name=NO_LOSS_CHECK, passed=not offenders, severity=dg.AssetCheckSeverity.ERROR,
        description=(f"{summary.no_loss_checked} written partition(s), each at or below its safe bound" if not offenders
                     else f"{len(offenders)} written partition(s) not shown loss-free"),
        metadata={"written_partitions": summary.no_loss_checked, "offenders": len(offenders),
                  "writes_not_landed": summary.writes_not_landed,
                  "offending_partitions": dg.MetadataValue.json(offenders[:MAX_LISTED])},
    )


def _clusters_readable(summary: RunSummary) -> dg.AssetCheckResult:
    down = summary.unavailable_cycles
    return dg.AssetCheckResult(
        check_name=CLUSTERS_READABLE_CHECK, passed=not down, severity=dg.AssetCheckSeverity.WARN,
        description=("both clusters answered every cycle" if not down else "; ".join(
            f"{name} did not answer in {n} of {summary.cycles} cycles (its groups not synced then)"
            for name, n in sorted(down.items()))),
        metadata={"cycles": summary.cycles, **{f"cycles_unavailable_{name}": n for name, n in sorted(down.items())},
                  **{f"reason_{name}": why[:500] for name, why in sorted(summary.last_unavailable.items())}},
    )


def _follow_metadata(followed: FollowStatus) -> dict:
    return {
        **{f"reads_{kind.replace(': ', '_').replace(' ', '_')}": n for kind, n in sorted(followed.reads.items())},
        **{f"commit_log_{cluster}": mode for cluster, (mode, _why) in sorted(followed.modes.items())},
        **{f"commit_log_reason_{cluster}": why[:500] for cluster, (_mode, why) in sorted(followed.modes.items()) if why},
        **{f"commit_log_records_{cluster}": sum(n.values()) for cluster, n in sorted(followed.records.items())},
        "followed_reconciliations": followed.reconciliations,
        "followed_compared": followed.compared,
        "followed_differences": followed.differences,
        # partitions (per cluster) whose log facts the cycles read, and those followed cycles carried
        "log_facts_read": followed.ranges_read,
        "log_facts_carried": followed.ranges_carried,
        # the run's own standby commits seen in the commit logs: applied to the groups as read, no read
        "own_commits_followed": followed.echoes,
        # groups' commits taken from the commit logs into the groups as read (a group per cluster and cycle)
        "group_commits_followed": followed.followed_commits,
    }


def _commit_log(followed: FollowStatus) -> dg.AssetCheckResult:
    polled = {c: (mode, why) for c, (mode, why) in followed.modes.items() if mode != "following"}
    off = bool(polled) and all(mode == "commit_log_off" for mode, _ in polled.values())
    passed = not followed.differences and (not polled or off)
    if followed.differences:
        description = (f"{followed.differences} difference(s) between the followed offsets and a listing "
                       f"(of {followed.compared} compared): {'; '.join(followed.examples[:3])}")
    elif off:
        description = "following the commit logs is off: every cycle lists every group"
    elif polled:
        description = "; ".join(f"{c} polled ({mode}): {why}" for c, (mode, why) in sorted(polled.items()))
    else:
        description = (f"both commit logs followed; {followed.reconciliations} listing(s) compared, "
                       f"{followed.compared} group-partitions, no difference")
    return dg.AssetCheckResult(
        check_name=COMMIT_LOG_CHECK, passed=passed, severity=dg.AssetCheckSeverity.WARN, description=description[:1000],
        metadata={"differences": followed.differences, "compared": followed.compared,
                  "reconciliations": followed.reconciliations,
                  **{f"mode_{c}": mode for c, (mode, _why) in sorted(followed.modes.items())},
                  "first_differences": dg.MetadataValue.json(followed.examples[:MAX_LISTED])},
    )


def _checkpoints(summary: RunSummary) -> dg.AssetCheckResult:
    failed = [c for c in summary.checkpoints if c.error]
    return dg.AssetCheckResult(
        check_name=CHECKPOINTS_CHECK, passed=not failed and bool(summary.checkpoints),
        severity=dg.AssetCheckSeverity.WARN,
        description=(f"{len(summary.checkpoints)} checkpoints written" if not failed and summary.checkpoints else
                     f"{len(failed)} of {len(summary.checkpoints)} checkpoints without ClickHouse: "
                     f"{(failed[-1].error or '')[:200] if failed else 'none written'}"),
        metadata={"checkpoints": len(summary.checkpoints), "checkpoints_without_clickhouse": len(failed),
                  "checkpoints_skipped": summary.checkpoints_skipped,
                  "rows_spooled": sum(c.rows_spooled for c in summary.checkpoints)},
    )
