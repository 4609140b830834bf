"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here.

Connections come from the environment (offset_pipeline/settings.py); with nothing set they point
at the local stack (bin/up), the embedded ClickHouse engine and local Spark.
"""

from __future__ import annotations

import dagster as dg

from offset_pipeline.assets import all_assets
from offset_pipeline.decision_log import decision_log_level
from offset_pipeline.jobs import (
    offset_failover_audit_job,
    offset_failover_audit_schedule,
    offset_fast_forward_job,
    offset_sync_job,
)
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.sensors import all_sensors
from offset_pipeline.resources.mirrors import MirrorPositionGroup, MirrorsResource
from offset_pipeline.settings import (
    KafkaSettings,
    Settings,
    kafka_timeout_s,
    mirror_position_groups,
    read_settings,
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
        # librdkafka's own request and socket bounds follow OFFSET_PIPELINE_KAFKA_TIMEOUT_S
        request_timeout_ms=int(kafka_timeout_s() * 1000),
        socket_timeout_ms=int(kafka_timeout_s() * 1000),
    )


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resource key -> resource. Keys are what assets and sensors name as parameters."""
    return {
        **{name: _kafka(kafka) for name, kafka in settings.kafka.items()},
        "clickhouse": ClickHouseResource(
            dsn=settings.clickhouse.dsn,
            username=settings.clickhouse.username,
            password=_secret(settings.clickhouse.password_env),
            database=settings.clickhouse.database,
        ),
        "spark": SparkResource(master=settings.spark.master, connect_url=settings.spark.connect_url),
        "mirrors": MirrorsResource(position_groups=[MirrorPositionGroup(**g) for g in mirror_position_groups()]),
    }


# A bad value fails the load, not the first cycle (the run configs read these when a run starts).
decision_log_level()
translation_budget_s()

defs = dg.Definitions(
    assets=all_assets,
    jobs=[offset_sync_job, offset_fast_forward_job, offset_failover_audit_job],
    schedules=[offset_failover_audit_schedule],
    sensors=all_sensors,
    resources=build_resources(read_settings()),
)
