"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here.

Connections come from the environment (offset_pipeline/settings.py); with nothing set they point
at the local stack (bin/up), the embedded ClickHouse engine and local Spark.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import dagster as dg

from offset_pipeline.assets import all_assets
from offset_pipeline.monitoring.decision_log import decision_log_level
from offset_pipeline.resources import CLUSTER_RESOURCE_KEYS, ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.resources.mirrors import MirrorPositionGroup, MirrorsResource
from offset_pipeline.sensors import all_sensors
from offset_pipeline.run_targets import (
    AUDIT_JOB,
    CONTINUOUS_JOB,
    CONTINUOUS_MAX_RUNTIME_MARGIN_S,
    FAST_FORWARD_JOB,
    MIRROR_CHECK_JOB,
    SYNC_CONCURRENCY_TAG,
    SYNC_JOB,
    SYNC_MAX_RUNTIME_TAGS,
)
from offset_pipeline.settings import (
    KafkaSettings,
    Settings,
    audit_schedule_cron,
    mirror_check_cron,
    cluster_names,
    continuous_run_s,
    kafka_timeout_s,
    read_settings,
    sync_mode,
    offset_syncs_topics,
    topic_shapes,
    translation_budget_s,
)


def _secret(env_var: str | None) -> dg.EnvVar | None:
    # Only reference a variable that is set: Dagster fails a run on an unset EnvVar, and a
    # cluster without SASL has no password at all.
    return dg.EnvVar(env_var) if env_var else None


def _kafka(settings: KafkaSettings) -> KafkaClusterResource:
    return KafkaClusterResource(
        cluster_name=settings.cluster_name,
        bootstrap_servers=settings.bootstrap_servers,
        security_protocol=settings.security_protocol,
        sasl_mechanism=settings.sasl_mechanism,
        sasl_username=settings.sasl_username,
        sasl_password=_secret(settings.sasl_password_env),
        ssl_ca_location=settings.ssl_ca_location,
        # librdkafka's own request and socket bounds follow OFFSET_PIPELINE_KAFKA_TIMEOUT_S
        request_timeout_ms=int(kafka_timeout_s() * 1000),
        socket_timeout_ms=int(kafka_timeout_s() * 1000),
    )


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resource key -> resource. Keys are what assets and sensors name as parameters: the two
    clusters sit in fixed slots (``CLUSTER_RESOURCE_KEYS``: ``idc1`` holds the first configured
    cluster, ``idc2`` the second), each resource carrying its configured name as ``cluster_name``."""
    return {
        **dict(zip(CLUSTER_RESOURCE_KEYS, (_kafka(kafka) for kafka in settings.kafka.values()), strict=True)),
        "clickhouse": ClickHouseResource(
            dsn=settings.clickhouse.dsn,
            username=settings.clickhouse.username,
            password=_secret(settings.clickhouse.password_env),
            database=settings.clickhouse.database,
        ),
        "spark": SparkResource(master=settings.spark.master, connect_url=settings.spark.connect_url,
                               spark_config=settings.spark.conf),
        "mirrors": MirrorsResource(position_groups=[MirrorPositionGroup(**g) for g in settings.mirror_positions]),
    }


# The sync cycle as one job: every asset of the ``offset_sync`` group, in one process. In-process
# because the embedded ClickHouse engine (chdb) admits one process per data folder, and because a
# cycle's steps read each other's rows in order. The concurrency tag lets the run queue hold every
# sync run behind the one in progress (deploy/dagster.yaml), manual launches included.
offset_sync_job = dg.define_asset_job(
    SYNC_JOB,
    selection=dg.AssetSelection.groups("offset_sync"),
    executor_def=dg.in_process_executor,
    tags={SYNC_CONCURRENCY_TAG: "cycle", **SYNC_MAX_RUNTIME_TAGS},
    description="One sync cycle: snapshot offsets on both clusters, translate, commit to standbys, monitoring rows.",
)

# The default mode: one long run of back-to-back incremental cycles (assets/continuous.py), rolled
# over every OFFSET_PIPELINE_CONTINUOUS_RUN_S. The same concurrency tag as the cycle: a continuous run,
# an interval cycle and a fast-forward never overlap.
offset_sync_continuous_job = dg.define_asset_job(
    CONTINUOUS_JOB,
    selection=dg.AssetSelection.groups("offset_sync_continuous"),
    executor_def=dg.in_process_executor,
    tags={SYNC_CONCURRENCY_TAG: "continuous",
          "dagster/max_runtime": str(int(continuous_run_s() + CONTINUOUS_MAX_RUNTIME_MARGIN_S))},
    description="Continuous sync: back-to-back incremental cycles (about one a second) for OFFSET_PIPELINE_CONTINUOUS_RUN_S, "
                "the state written to ClickHouse every OFFSET_PIPELINE_CHECKPOINT_S.",
)

offset_fast_forward_job = dg.define_asset_job(
    FAST_FORWARD_JOB,
    selection=dg.AssetSelection.assets("offset_fast_forwards"),
    executor_def=dg.in_process_executor,
    # The same tag as the cycle: a fast-forward never overlaps a sync run (both commit to standby
    # groups; with the embedded ClickHouse, one process at a time).
    tags={SYNC_CONCURRENCY_TAG: "fast_forward", **SYNC_MAX_RUNTIME_TAGS},
    description="Fast-forward one group's quiet low-traffic partitions to the standby log end, re-checked live "
                "(requested by stale_partition_sensor).",
)

offset_failover_audit_job = dg.define_asset_job(
    AUDIT_JOB,
    selection=dg.AssetSelection.assets("offset_failover_audit"),
    executor_def=dg.in_process_executor,
    description="Audit what a failover at every snapshot of the selected day(s) would have cost.",
)


offset_mirror_check_job = dg.define_asset_job(
    MIRROR_CHECK_JOB,
    selection=dg.AssetSelection.assets("offset_mirror_proofs"),
    executor_def=dg.in_process_executor,
    description="Which proof the mirror gives each topic and direction (origin headers, offset syncs, none), and why.",
)


@dg.schedule(
    job=offset_mirror_check_job, cron_schedule=mirror_check_cron(), execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Checks the mirror every 10 minutes by default (OFFSET_PIPELINE_MIRROR_CHECK_CRON).",
)
def offset_mirror_check_schedule(context: dg.ScheduleEvaluationContext):
    return dg.RunRequest(run_key=f"mirror-check-{context.scheduled_execution_time.isoformat()}")


def latest_complete_day(scheduled: datetime) -> str:
    """The partition key of the last UTC day complete at ``scheduled``."""
    return (scheduled.astimezone(timezone.utc).date() - timedelta(days=1)).isoformat()


@dg.schedule(
    job=offset_failover_audit_job, cron_schedule=audit_schedule_cron(), execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Audits the latest complete UTC day, by default 20 minutes after midnight (its snapshots are all "
                "in; OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON).",
)
def offset_failover_audit_schedule(context: dg.ScheduleEvaluationContext):
    day = latest_complete_day(context.scheduled_execution_time)
    return dg.RunRequest(run_key=f"audit-{day}", partition_key=day)


# A bad value fails the load, not the first cycle (the run configs read these when a run starts).
cluster_names()
topic_shapes()
decision_log_level()
translation_budget_s()
sync_mode()
offset_syncs_topics()

defs = dg.Definitions(
    assets=all_assets,
    jobs=[offset_sync_job, offset_sync_continuous_job, offset_fast_forward_job, offset_failover_audit_job,
          offset_mirror_check_job],
    schedules=[offset_failover_audit_schedule, offset_mirror_check_schedule],
    sensors=all_sensors,
    resources=build_resources(read_settings()),
)
