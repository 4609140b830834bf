"""Thread pools kept for a process's life, one per purpose.

A continuous run calls Kafka from threads several times a cycle (both clusters read at once, the
groups committed in parallel, the partitions of a small cycle translated in parallel). A pool made
for each call starts its threads each time, and under load that cost more than the calls: in the
continuous translation child, profiled behind MirrorMaker 2, starting the threads took about as
long as the reads they ran. :func:`shared_pool` hands the same pool to every call of one purpose.

* **No deadlock by sharing:** a task never waits on a task of its own pool; a purpose whose tasks
  call on into another pooled purpose uses another name.
* **Fork-safe:** threads do not survive ``fork`` (a Spark Python worker is forked): a pool made in
  another process is never handed out, a new one is made in this one.
* **Bounded:** ``workers`` threads at most per purpose, started as the calls need them; they are
  daemon-like pool threads the interpreter joins at exit.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_POOLS: dict[tuple[str, int], tuple[int, ThreadPoolExecutor]] = {}
_LOCK = threading.Lock()


def shared_pool(purpose: str, workers: int) -> ThreadPoolExecutor:
    """The pool of ``purpose`` with ``workers`` threads at most, made once per process."""
    key = (purpose, max(1, workers))
    pid = os.getpid()
    with _LOCK:
        held = _POOLS.get(key)
        if held is None or held[0] != pid:
            held = _POOLS[key] = (pid, ThreadPoolExecutor(max_workers=key[1], thread_name_prefix=purpose))
        return held[1]
