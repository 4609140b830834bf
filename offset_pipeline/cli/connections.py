"""The commands' connections, from the same environment as the code location (``settings.py``);
secrets are read from the variables the settings name, here, when a command runs."""

from __future__ import annotations

import os

from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.settings import kafka_timeout_s, read_settings


def kafka_clusters() -> dict[str, KafkaClusterResource]:
    out = {}
    for name, k in read_settings().kafka.items():
        out[name] = KafkaClusterResource(
            cluster_name=k.cluster_name, bootstrap_servers=k.bootstrap_servers, security_protocol=k.security_protocol,
            sasl_mechanism=k.sasl_mechanism, sasl_username=k.sasl_username,
            sasl_password=os.environ.get(k.sasl_password_env) if k.sasl_password_env else None,
            ssl_ca_location=k.ssl_ca_location,
            request_timeout_ms=int(kafka_timeout_s() * 1000), socket_timeout_ms=int(kafka_timeout_s() * 1000),
        )
    return out


def clickhouse() -> ClickHouseResource:
    settings = read_settings().clickhouse
    password = os.environ.get(settings.password_env) if settings.password_env else None
    return ClickHouseResource(dsn=settings.dsn, username=settings.username, password=password,
                              database=settings.database)
