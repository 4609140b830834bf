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
  evaluating sensors does not lock the run workers out; and opening waits (``OPEN_WAIT_S``) while
  another process holds the path, so a run starting during a sensor's tick takes its turn.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import clickhouse_connect
import dagster as dg
from clickhouse_connect.driver.client import Client
from pydantic import Field

from offset_pipeline.settings import (
    clickhouse_spool_dir,
    clickhouse_spool_max_mb,
    clickhouse_timeout_s,
    default_clickhouse_dsn,
)
from offset_pipeline.storage.deferred_writes import DeferredWrites

_lock = threading.Lock()
_embedded_clients: dict[tuple[str, Optional[str]], Client] = {}
_embedded_users: Counter[tuple[str, Optional[str]]] = Counter()


def is_embedded(dsn: str) -> bool:
    return dsn.startswith("chdb:")


#: How long opening an embedded engine waits for another process to release its data path: a
#: sensor tick reading the history (the code server) and a run starting meanwhile take turns.
OPEN_WAIT_S = 60.0
_HELD_ELSEWHERE = "Unable to open the chdb engine"


def embedded_client(dsn: str, database: Optional[str] = None, *, wait_s: float = OPEN_WAIT_S) -> Client:
    """The process-wide client for an embedded (chdb) DSN, created on first use. When another
    process holds the data path, opening is retried for up to ``wait_s`` (processes hold it only
    for a run or a tick), then the engine's error is raised."""
    key = (dsn, database)
    deadline = time.monotonic() + wait_s
    with _lock:
        client = _embedded_clients.get(key)
        while client is None:
            try:
                client = clickhouse_connect.get_client(dsn=dsn, database=database)
            except Exception as exc:  # noqa: BLE001 - only "held by another process" is retried
                if _HELD_ELSEWHERE not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
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
    # A secret: pass dg.EnvVar(...), never a literal; out of the repr (a resolved resource printed).
    password: Optional[str] = Field(default=None, repr=False)
    database: Optional[str] = None
    timeout_s: float = Field(
        default_factory=clickhouse_timeout_s, gt=0,
        description="connect and query bound of a ClickHouse server (OFFSET_PIPELINE_CLICKHOUSE_TIMEOUT_S)",
    )
    spool_dir: Optional[str] = Field(
        default_factory=clickhouse_spool_dir,
        description="where inserts wait while ClickHouse is unavailable (OFFSET_PIPELINE_CLICKHOUSE_SPOOL_DIR; "
                    "default: beside the embedded engine's folder, or clickhouse-spool in the data folder)",
    )
    spool_max_mb: float = Field(
        default_factory=clickhouse_spool_max_mb, gt=0,
        description="bound of the spool; past it the oldest inserts are dropped and counted",
    )

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
        return clickhouse_connect.get_client(
            dsn=self.dsn, database=self.database, connect_timeout=self.timeout_s,
            send_receive_timeout=self.timeout_s, **extra,
        )

    def try_client(self) -> tuple[Optional[Client], Optional[str]]:
        """``(client, None)``, or ``(None, why)`` when ClickHouse cannot be reached: the sync goes on
        without it (``deferred_writes``)."""
        try:
            return self.get_client(), None
        except Exception as exc:  # noqa: BLE001 - any failure means "not now"
            return None, f"opening ClickHouse ({self.dsn.split('@')[-1]}) failed: {type(exc).__name__}: {str(exc)[:300]}"

    def deferred_writes(self) -> DeferredWrites:
        """The spool where inserts wait while ClickHouse is unavailable."""
        folder = self.spool_dir
        if not folder:
            # The embedded engine's spool sits beside its data (a test's tmp folder, the stack's data).
            folder = self.dsn.removeprefix("chdb://").rstrip("/") + "-spool" if self.embedded else clickhouse_spool_dir(
                {"OFFSET_PIPELINE_CLICKHOUSE_SPOOL_DIR": "", **os.environ}, default=True)
        return DeferredWrites(Path(folder), max_bytes=int(self.spool_max_mb * 1024 * 1024))

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
