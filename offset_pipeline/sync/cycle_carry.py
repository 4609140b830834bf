"""What one step of a sync run hands the next, in the run's own process.

The sync job runs its steps in one process (``definitions.py``), so the snapshot's rows, the translations
and the commit decisions need not make a round trip through ClickHouse to reach the next step. Each
step puts its rows here under the run id and reads its input from here first, from ClickHouse only
when they are not here (a step re-executed alone). So a ClickHouse that is down costs late history
rows (``storage/deferred_writes.py``), never the cycle's commits (issue 14).

Bounded: only the newest ``KEEP_RUNS`` runs are kept (a code server or a test process runs many).
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
            _runs.popitem(last=False)


def get(run_id: str, key: str) -> Any | None:
    with _lock:
        return _runs.get(run_id, {}).get(key)
