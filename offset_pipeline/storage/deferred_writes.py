"""Inserts that never block the sync: a ClickHouse that is down or slow costs late rows, not offsets.

The sync cycle commits offsets from what it read from Kafka; ClickHouse only records it, so an outage
of ClickHouse must never cost a commit. When an insert fails (or no client could be opened), the rows
go to a spool folder on local disk, one file per insert, and are inserted, oldest first, by the next
cycle that reaches ClickHouse (:meth:`DeferredWrites.replay`). The spool is bounded (``max_bytes``):
past it the oldest files are dropped, and every dropped row is counted in ``dropped.json``, so a long
outage costs history, never disk space or the sync, and always says what it cost.

Invariants: a spooled insert is replayed at most once after it succeeds (its file is deleted right
after the insert; a crash between the two may insert it twice, never lose it); files are replayed
in the order they were written; a replay stops at the first failure, leaving the rest for later.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
_SUFFIX = ".insert"


@dataclass
class WriteOutcome:
    """What the inserts of one step did: rows written now, rows spooled, and the first error."""

    written: int = 0
    deferred: int = 0
    error: str | None = None

    def add(self, other: "WriteOutcome") -> None:
        self.written += other.written
        self.deferred += other.deferred
        self.error = self.error or other.error


@dataclass
class ReplayResult:
    files: int = 0
    rows: int = 0
    error: str | None = None
    pending_files: int = 0
    pending_bytes: int = 0
    dropped_rows_total: int = 0


@dataclass
class SpoolingClient:
    """Stands in for a clickhouse-connect client where the storage modules only ``insert``: each
    insert goes to ClickHouse, or (failing that, or with no client) to the spool. ``outcome`` sums
    what happened."""

    spool: "DeferredWrites"
    client: object | None
    outcome: WriteOutcome = field(default_factory=WriteOutcome)
    target: tuple | None = None  # open_writer's ClickHouse target (its ensured tables are forgotten on a failure)

    def insert(self, table: str, data, column_names=None, column_oriented: bool = False, **kwargs) -> None:
        data = list(data)
        count = (len(data[0]) if data else 0) if column_oriented else len(data)
        if self.client is not None and self.outcome.error is None:
            try:
                self.client.insert(table, data, column_names=column_names, column_oriented=column_oriented, **kwargs)
                self.outcome.written += count
                return
            except Exception as exc:  # noqa: BLE001 - any failure defers, the sync goes on
                self.outcome.error = f"inserting into {table} failed: {type(exc).__name__}: {str(exc)[:300]}"
                forget_ensured(self.target)  # the table may be gone: the next writer makes it again
        # the spool holds rows (files of earlier versions too): columns are turned into rows here
        self.spool.put(table, [list(row) for row in zip(*data)] if column_oriented else data, column_names)
        self.outcome.deferred += count


class DeferredWrites:
    """The spool folder: ``put`` an insert, ``replay`` them into a client."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES):
        self.folder = Path(folder)
        self.max_bytes = max_bytes

    def writer(self, client) -> SpoolingClient:
        return SpoolingClient(self, client)

    def _files(self) -> list[Path]:
        if not self.folder.exists():
            return []
        return sorted(self.folder.glob(f"*{_SUFFIX}"))

    def put(self, table: str, rows: list, column_names) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{table}{_SUFFIX}"
        payload = pickle.dumps({"table": table, "column_names": list(column_names or []), "rows": rows})
        tmp = self.folder / (name + ".tmp")
        tmp.write_bytes(payload)
        tmp.rename(self.folder / name)  # whole files only: a crash mid-write leaves a .tmp, never half an insert
        self._bound()
        return self.folder / name

    def _bound(self) -> None:
        files = self._files()
        sizes = {f: f.stat().st_size for f in files}
        total = sum(sizes.values())
        dropped_rows, dropped_files = 0, 0
        for oldest in files:
            if total <= self.max_bytes:
                break
            try:
                dropped_rows += len(pickle.loads(oldest.read_bytes())["rows"])
            except Exception:  # noqa: BLE001 - an unreadable file is dropped all the same
                pass
            oldest.unlink(missing_ok=True)
            total -= sizes[oldest]
            dropped_files += 1
        if dropped_files:
            counts = self.dropped()
            counts["rows"] += dropped_rows
            counts["files"] += dropped_files
            (self.folder / "dropped.json").write_text(json.dumps(counts))

    def dropped(self) -> dict[str, int]:
        """Rows and files dropped so far because the spool was full (since the folder was made)."""
        try:
            return json.loads((self.folder / "dropped.json").read_text())
        except (OSError, ValueError):
            return {"rows": 0, "files": 0}

    def pending(self) -> tuple[int, int]:
        files = self._files()
        return len(files), sum(f.stat().st_size for f in files)

    def replay(self, client, max_files: int = 200) -> ReplayResult:
        """Insert spooled files into ``client``, oldest first, up to ``max_files``; stop at the first
        failure (ClickHouse still unwell). Unknown tables are created by the assets' ``ensure_table``
        before this runs."""
        result = ReplayResult()
        for path in self._files()[:max_files]:
            try:
                insert = pickle.loads(path.read_bytes())
                client.insert(insert["table"], insert["rows"], column_names=insert["column_names"] or None)
            except Exception as exc:  # noqa: BLE001 - left for a later cycle
                result.error = f"replaying {path.name} failed: {type(exc).__name__}: {str(exc)[:300]}"
                break
            path.unlink(missing_ok=True)
            result.files += 1
            result.rows += len(insert["rows"])
        result.pending_files, result.pending_bytes = self.pending()
        result.dropped_rows_total = self.dropped()["rows"]
        return result


# (ClickHouse target, ensure function) pairs that succeeded in this process. Every step of a sync run
# opens a writer for its tables, and most tables are a table of several steps: at 10,000
# group-partitions a cycle spent about 0.3 s on the same 50 DDL and system-table queries four times
# over. Forgotten for a target whose insert or ensure failed, so a ClickHouse that lost its tables
# (a new server, a dropped database) gets them again at the next writer, before its spool is replayed.
_ENSURED: set[tuple[tuple, Callable]] = set()
_ENSURED_LOCK = threading.Lock()


def _target(clickhouse) -> tuple | None:
    dsn = getattr(clickhouse, "dsn", None)
    return (dsn, getattr(clickhouse, "database", None)) if isinstance(dsn, str) else None


def forget_ensured(target: tuple | None) -> None:
    """The tables of ``target`` are ensured again by the next writer (all of them, when None)."""
    with _ENSURED_LOCK:
        if target is None:
            _ENSURED.clear()
        else:
            _ENSURED.difference_update({done for done in _ENSURED if done[0] == target})


def open_writer(clickhouse, *ensure) -> SpoolingClient:
    """A writer for one step: ClickHouse's client (after the ``ensure`` functions created the
    step's tables, once per process and target while its writes succeed) or, when it cannot be
    opened or the tables cannot be ensured, the spool alone. ``writer.client`` is None then, and
    ``writer.outcome.error`` says why."""
    client, error = clickhouse.try_client()
    target = _target(clickhouse)
    if client is not None:
        try:
            for ensure_tables in ensure:
                if target is not None and (target, ensure_tables) in _ENSURED:
                    continue
                ensure_tables(client)
                if target is not None:
                    with _ENSURED_LOCK:
                        _ENSURED.add((target, ensure_tables))
        except Exception as exc:  # noqa: BLE001 - ClickHouse unwell: the step goes on without it
            forget_ensured(target)
            client, error = None, f"preparing ClickHouse tables failed: {type(exc).__name__}: {str(exc)[:300]}"
    writer = clickhouse.deferred_writes().writer(client)
    writer.outcome.error = error
    writer.target = target
    return writer
