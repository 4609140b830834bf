"""ClickHouse as a Dagster resource, on clickhouse-connect.

``chdb:///path`` (the default) is the real ClickHouse engine embedded in this process; an
``http(s)://host:8123`` DSN is a ClickHouse server. Both give the same clickhouse-connect client API.

The embedded engine has two process-level limits (checked against chdb 4.4 / clickhouse-connect
1.12):

* one data path per process: opening a second path while any client is open fails, so clients are
  cached per (DSN, database) here and shared;
* one process per data path: a second process cannot open a path another process holds. The
  resource therefore closes its cached client when Dagster tears it down after a run or sensor
  tick (once no other execution in this process still uses it), so a long-lived code server
  evaluating sensors does not lock the run workers out.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Optional

import clickhouse_connect
import dagster as dg
from clickhouse_connect.driver.client import Client
from pydantic import Field

from offset_pipeline.settings import default_clickhouse_dsn

_lock = threading.Lock()
_embedded_clients: dict[tuple[str, Optional[str]], Client] = {}
_embedded_users: Counter[tuple[str, Optional[str]]] = Counter()


def is_embedded(dsn: str) -> bool:
    return dsn.startswith("chdb:")


def embedded_client(dsn: str, database: Optional[str] = None) -> Client:
    """The process-wide client for an embedded (chdb) DSN, created on first use."""
    key = (dsn, database)
    with _lock:
        client = _embedded_clients.get(key)
        if client is None:
            client = clickhouse_connect.get_client(dsn=dsn, database=database)
            _embedded_clients[key] = client
        return client


def close_embedded_clients(dsn: Optional[str] = None) -> None:
    """Close cached embedded clients (all, or those of ``dsn``), releasing the engine's data path."""
    with _lock:
        for key in [k for k in _embedded_clients if dsn is None or k[0] == dsn]:
            _embedded_clients.pop(key).close()


class ClickHouseResource(dg.ConfigurableResource):
    """Where ClickHouse is; ``get_client()`` returns a clickhouse-connect client for it."""

    dsn: str = Field(
        default_factory=default_clickhouse_dsn,
        description="chdb:///abs/path (embedded engine) or http(s)://host:8123 (server)",
    )
    username: Optional[str] = None  # server only; chdb has no users
    password: Optional[str] = None  # a secret: pass dg.EnvVar(...), never a literal
    database: Optional[str] = None

    @property
    def embedded(self) -> bool:
        return is_embedded(self.dsn)

    def get_client(self) -> Client:
        if self.embedded:
            return embedded_client(self.dsn, self.database)
        if not self.dsn.startswith(("http://", "https://")):
            raise ValueError(f"ClickHouse dsn must start with chdb://, http:// or https://, got {self.dsn!r}")
        # Credentials given as fields override any in the URL; unset ones leave the URL's in place.
        extra = {k: v for k, v in (("username", self.username), ("password", self.password)) if v}
        return clickhouse_connect.get_client(dsn=self.dsn, database=self.database, **extra)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if self.embedded:
            with _lock:
                _embedded_users[(self.dsn, self.database)] += 1

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if not self.embedded:
            return
        key = (self.dsn, self.database)
        with _lock:
            _embedded_users[key] -= 1
            if _embedded_users[key] > 0:
                return
            del _embedded_users[key]
            client = _embedded_clients.pop(key, None)
        if client is not None:
            client.close()
