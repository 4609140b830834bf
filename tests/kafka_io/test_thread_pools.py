"""The process's shared thread pools (kafka_io/thread_pools.py): one per purpose and size, bounded,
never one made in another process."""

from __future__ import annotations

import multiprocessing
import threading
import time

from offset_pipeline.kafka_io import thread_pools
from offset_pipeline.kafka_io.thread_pools import shared_pool


def test_one_pool_per_purpose_and_size():
    a = shared_pool("test-a", 3)
    assert shared_pool("test-a", 3) is a
    assert shared_pool("test-b", 3) is not a
    assert shared_pool("test-a", 4) is not a
    assert shared_pool("test-a", 0) is shared_pool("test-a", 1)  # at least one thread


def test_threads_are_kept_from_call_to_call_and_bounded():
    pool = shared_pool("test-kept", 2)
    names = set()
    for _ in range(5):
        names |= set(pool.map(lambda _: threading.current_thread().name, range(4)))
    assert 1 <= len(names) <= 2  # the same at most two threads served twenty tasks
    assert all(n.startswith("test-kept") for n in names)


def test_the_workers_run_at_once():
    pool = shared_pool("test-parallel", 4)
    barrier = threading.Barrier(4, timeout=10)  # broken (raises) unless four tasks wait together
    assert list(pool.map(lambda i: (barrier.wait(), i)[1], range(4))) == [0, 1, 2, 3]


def _pool_pid_in_child(queue) -> None:
    pool = shared_pool("test-fork", 2)
    queue.put((thread_pools._POOLS[("test-fork", 2)][0], pool.submit(lambda: 7).result(timeout=10)))


def test_a_forked_process_gets_a_pool_of_its_own():
    parent = shared_pool("test-fork", 2)
    parent.submit(time.sleep, 0).result()  # its thread exists, and would not survive a fork
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_pool_pid_in_child, args=(queue,))
    child.start()
    pid, answer = queue.get(timeout=30)
    child.join(30)
    assert answer == 7  # a pool whose threads died with the fork would never answer
    assert pid == child.pid
    assert thread_pools._POOLS[("test-fork", 2)][1] is parent
