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

from offset_pipeline.kafka_io.connection_probe import ErrorRecorder, recent_failure

_ADMINS: dict[tuple, AdminClient] = {}  # per process: a child's calls of a cycle share one
_RECORDERS: dict[tuple, ErrorRecorder] = {}  # the connection errors each of them reported


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


def _key(admin_config: dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in admin_config.items()))


def shared_admin(admin_config: dict[str, Any]) -> AdminClient:
    """This process's admin client for ``admin_config`` (made on first use, then reused), its
    connection errors recorded for :func:`shared_admin_failure`."""
    key = _key(admin_config)
    if key not in _ADMINS:
        _RECORDERS[key] = ErrorRecorder()
        _ADMINS[key] = AdminClient({**admin_config, "error_cb": _RECORDERS[key]})
    return _ADMINS[key]


def release_shared_admins() -> int:
    """Drop this process's shared admin clients (each is destroyed with its last reference) and
    return how many there were. A process whose clusters went away calls it, so no client keeps
    reconnecting to them (and logging it) for the rest of its life."""
    released = len(_ADMINS)
    _ADMINS.clear()
    _RECORDERS.clear()
    return released


def shared_admin_failure(admin_config: dict[str, Any], cluster: str):
    """Why the shared admin client of ``admin_config`` could not reach ``cluster`` lately (a
    ``ConnectionDiagnosis``), or None when its recent errors explain nothing."""
    key = _key(admin_config)
    if key not in _ADMINS:
        return None
    return recent_failure(_ADMINS[key], _RECORDERS.get(key), admin_config, cluster)
