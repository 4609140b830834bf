"""What one step of a sync run hands the next, in the run's own process.

The sync job runs its steps in one process (``definitions.py``), so the snapshot's rows, the translations
and the commit decisions need not make a round trip through ClickHouse to reach the next step. Each
step puts its rows here under the run id and reads its input from here first, from ClickHouse only
when they are not here (a step re-executed alone). So a ClickHouse that is down costs late history
rows (``storage/deferred_writes.py``), never the cycle's commits.

Bounded: only the newest ``KEEP_RUNS`` runs are kept (a code server or a test process runs many);
a value with a ``close`` method (the run's Kafka child processes) is closed when its run is let go.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

KEEP_RUNS = 4

_lock = threading.Lock()
_runs: "OrderedDict[str, dict[str, Any]]" = OrderedDict()


def put(run_id: str, key: str, value: Any) -> None:
    with _lock:
        _runs.setdefault(run_id, {})[key] = value
        _runs.move_to_end(run_id)
        while len(_runs) > KEEP_RUNS:
            _, evicted = _runs.popitem(last=False)
            for left in evicted.values():
                _close(left)


def take(run_id: str, key: str) -> Any | None:
    """``get``, and the value is no longer carried: the caller owns it (and closes it)."""
    with _lock:
        return _runs.get(run_id, {}).pop(key, None)


def _close(value: Any) -> None:
    close = getattr(value, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 - letting go of a run never fails a later one
            pass


def get(run_id: str, key: str) -> Any | None:
    with _lock:
        return _runs.get(run_id, {}).get(key)
