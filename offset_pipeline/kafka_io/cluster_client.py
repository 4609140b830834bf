"""One cluster's librdkafka settings as plain data (:class:`ClusterClient`): what a Kafka call in a
child process (``kafka_io/isolated.py``) needs, where a Dagster resource does not travel. It
answers the three things the group reads and writes ask of a cluster: its name, a consumer config
for a group, an admin client.

Light on purpose: a child imports this module, not Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

_ADMINS: dict[tuple, AdminClient] = {}  # per process: a child's calls of a cycle share one


def consumer_settings(client_config: dict[str, Any], group_id: str, **overrides: Any) -> dict[str, Any]:
    """Consumer settings of ``group_id``: never commit by itself (the pipeline commits exactly what
    it computed) and skip aborted transactions by default. ``overrides`` win."""
    config = {**client_config, "group.id": group_id, "enable.auto.commit": False, "isolation.level": "read_committed"}
    return {**config, **overrides}


@dataclass(frozen=True)
class ClusterClient:
    cluster_name: str
    # librdkafka settings, a secured cluster's sasl.password included: out of the repr, so a client
    # printed (a log line, an error, a traceback's locals) shows no password.
    client_config: dict[str, Any] = field(hash=False, repr=False)
    admin_config: dict[str, Any] = field(hash=False, repr=False)

    def consumer_config(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        return consumer_settings(self.client_config, group_id, **overrides)

    def admin(self) -> AdminClient:
        return shared_admin(self.admin_config)


def shared_admin(admin_config: dict[str, Any]) -> AdminClient:
    """This process's admin client for ``admin_config`` (made on first use, then reused)."""
    key = tuple(sorted((k, str(v)) for k, v in admin_config.items()))
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(admin_config)
    return _ADMINS[key]
