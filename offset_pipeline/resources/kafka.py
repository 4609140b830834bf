"""One Kafka cluster (one of the two ``OFFSET_PIPELINE_CLUSTERS``) as a Dagster resource, on
confluent-kafka (librdkafka).

The resource only holds connection settings and hands out fresh clients; callers own (and close)
the consumers and producers they create. Its ``cluster_name`` is the configured name, the one every
row, log line, check and command shows; the resource *key* is a fixed slot (:data:`CLUSTER_RESOURCE_KEYS`).
"""

from __future__ import annotations

from typing import Any, Optional

import dagster as dg
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from pydantic import Field, field_validator

from offset_pipeline.kafka_io.cluster_client import ClusterClient, consumer_settings
from offset_pipeline.kafka_io.connection_errors import ConnectionDiagnosis
from offset_pipeline.kafka_io.connection_probe import ErrorRecorder, recent_failure

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: The Dagster resource keys of the two clusters, in the order of ``settings.cluster_names``: slots,
#: not names. A resource key is a Python identifier that every asset and sensor names as a parameter,
#: and a configured name (``us-east``) is none; so the keys stay fixed and the configured name is the
#: resource's ``cluster_name``, which is all the product ever shows or stores. The slots keep the
#: default names' spelling so configurations and runs written before names were configurable still load.
CLUSTER_RESOURCE_KEYS = ("idc1", "idc2")

# librdkafka syslog level: 3 = errors only. Its default (6) prints every connection event to stderr.
QUIET_LOG_LEVEL = 3


class KafkaClusterUnreachable(RuntimeError):
    """The cluster did not answer a metadata request in time; ``diagnosis`` says why when the client
    reported a cause (a wrong CA, password, SASL mechanism, ...), else None."""

    def __init__(self, message: str, diagnosis: ConnectionDiagnosis | None = None):
        super().__init__(message)
        self.diagnosis = diagnosis


class KafkaClusterResource(dg.ConfigurableResource):
    """Connection settings for one Kafka cluster, and factories for its clients."""

    cluster_name: str
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: Optional[str] = None
    sasl_username: Optional[str] = None
    # A secret: pass dg.EnvVar(...), never a literal. Out of the repr: a resolved resource printed
    # (a log line, an error, a traceback's locals) shows no password.
    sasl_password: Optional[str] = Field(default=None, repr=False)
    # PEM file of the CA(s) that signed the brokers' certificates (librdkafka ssl.ca.location), for
    # SSL/SASL_SSL; unset: the system's CA store. A path on every host that runs a Kafka client
    # (Spark executors included), not the certificate itself.
    ssl_ca_location: Optional[str] = None
    client_id: str = "offset-pipeline"
    request_timeout_ms: int = 10000
    socket_timeout_ms: int = 10000

    @field_validator("security_protocol")
    @classmethod
    def _known_security_protocol(cls, value: str) -> str:
        # Fail at definition load, not at the first librdkafka call deep inside a run.
        if isinstance(value, dg.EnvVar):  # resolved later by Dagster; checked again in client_config
            return value
        return _checked_security_protocol(value)

    def client_config(self) -> dict[str, Any]:
        """The librdkafka settings shared by every client of this cluster."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": _checked_security_protocol(self.security_protocol),
            "client.id": self.client_id,
            "socket.timeout.ms": self.socket_timeout_ms,
            "log_level": QUIET_LOG_LEVEL,
        }
        # Only keys with values: a PLAINTEXT cluster gets no sasl.* or ssl.* settings at all.
        for key, value in (
            ("sasl.mechanism", self.sasl_mechanism),
            ("sasl.username", self.sasl_username),
            ("sasl.password", self.sasl_password),
            ("ssl.ca.location", self.ssl_ca_location),
        ):
            if value:
                config[key] = value
        return config

    def admin_config(self) -> dict[str, Any]:
        # request.timeout.ms is a producer-side property: the admin client is one, a consumer is not
        # (librdkafka would warn that it ignores it).
        return {**self.client_config(), "request.timeout.ms": self.request_timeout_ms}

    def consumer_config(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        """Consumer settings (``cluster_client.consumer_settings``). ``overrides`` win."""
        return consumer_settings(self.client_config(), group_id, **overrides)

    def plain(self) -> ClusterClient:
        """The settings as plain data, for Kafka calls in a child process."""
        return ClusterClient(self.cluster_name, self.client_config(), self.admin_config())

    def producer_config(self, **overrides: Any) -> dict[str, Any]:
        return {**self.client_config(), "request.timeout.ms": self.request_timeout_ms, **overrides}

    def admin(self) -> AdminClient:
        return AdminClient(self.admin_config())

    def consumer(self, group_id: str, **overrides: Any) -> Consumer:
        """A new consumer in ``group_id``; the caller closes it.

        ``overrides`` are librdkafka keys, which contain dots, so pass them as
        ``**{"auto.offset.reset": "earliest"}``.
        """
        return Consumer(self.consumer_config(group_id, **overrides))

    def producer(self, **overrides: Any) -> Producer:
        """A new producer; the caller flushes it."""
        return Producer(self.producer_config(**overrides))

    def describe(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Plain facts from one metadata request: cluster id, broker count, non-internal topic count.

        Raises :class:`KafkaClusterUnreachable` naming the cluster and its bootstrap servers when
        no broker answers within ``timeout_s`` (default: ``request_timeout_ms``), with the cause and
        its fix when the client reported one (``kafka_io/connection_errors.py``).
        """
        timeout = self.request_timeout_ms / 1000 if timeout_s is None else timeout_s
        recorder = ErrorRecorder()
        admin = AdminClient({**self.admin_config(), "error_cb": recorder})
        try:
            metadata = admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            diagnosis = recent_failure(admin, recorder, self.admin_config(), self.cluster_name)
            raise KafkaClusterUnreachable(
                f"Kafka cluster {self.cluster_name!r} at {self.bootstrap_servers} did not answer a "
                f"metadata request within {timeout:g}s: "
                + (diagnosis.message if diagnosis else str(exc.args[0] if exc.args else exc)),
                diagnosis,
            ) from exc
        return {
            "cluster_name": self.cluster_name,
            "bootstrap_servers": self.bootstrap_servers,
            "cluster_id": metadata.cluster_id,
            "broker_count": len(metadata.brokers),
            # "__consumer_offsets", "__transaction_state": broker bookkeeping, not data topics.
            "topic_count": sum(1 for name in metadata.topics if not name.startswith("__")),
        }


def _checked_security_protocol(value: str) -> str:
    normalized = value.strip().upper()
    if normalized not in SECURITY_PROTOCOLS:
        raise ValueError(
            f"Unknown Kafka security_protocol {value!r}; expected one of {', '.join(SECURITY_PROTOCOLS)}"
        )
    return normalized
