"""The cyclic garbage collector paused while a sync step builds its rows.

A step at 100,000 group-partitions allocates millions of small dicts and tuples (snapshot rows, work
rows, results, metric rows) that refer to nothing that refers back: reference counting frees them
all. The cyclic collector does not know that; it ran a full collection of the whole, growing heap
every few hundred thousand allocations: 3 to 4 s of each 100,000-row cycle and 0.3 to 0.5 s of a
10,000-row one (``bench/scale_cycles.py``'s driver GC seconds by generation), for no garbage.

Paused per step, not for the process: the cycles a step does make (tracebacks, Dagster's own) are
collected after it, as before. Nested and concurrent pauses count: the collector runs again when
the last one ends, and only if it ran when the first one began.
"""

from __future__ import annotations

import gc
import threading
from contextlib import ContextDecorator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


class cyclic_gc_paused(ContextDecorator):
    """``with cyclic_gc_paused():`` or ``@cyclic_gc_paused()``: no cyclic collection inside."""

    def __enter__(self) -> "cyclic_gc_paused":
        global _depth, _was_enabled
        with _lock:
            if _depth == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _depth += 1
        return self

    def __exit__(self, *exc) -> bool:
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
        return False
