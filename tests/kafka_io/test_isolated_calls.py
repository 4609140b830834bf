"""kafka_io/isolated.py: calls run in a real child process; an abort of that process (as
librdkafka's assertion failures do, confluentinc/librdkafka#4605) or a hang becomes an error for
that call alone, and the next call gets a new child. The functions below run in the child (it
imports this module by name)."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from offset_pipeline.kafka_io.isolated import IsolatedCalls, KafkaCallFailed, KafkaClientDied


def child_pid() -> int:
    return os.getpid()


def echo_after_printing(value):
    print("noise on stdout", flush=True)  # must not reach the channel
    os.write(1, b"more noise on fd 1\n")
    return value


def refuse(what: str):
    raise ValueError(f"no {what}")


def abort():
    os.abort()  # SIGABRT, as librdkafka's failed assertions end a process


def hang(seconds: float):
    time.sleep(seconds)
    return "woke up"


_MEETING = threading.Barrier(2)


def meet() -> int:
    """Returns only once a second call has arrived too: two calls in one child at once."""
    _MEETING.wait(timeout=60)
    return os.getpid()


@pytest.fixture
def calls():
    with IsolatedCalls("idc1") as c:
        yield c


def test_calls_run_in_one_child_and_return_their_results(calls):
    first = calls.call(child_pid, timeout_s=30)
    assert first != os.getpid()
    assert calls.call(child_pid, timeout_s=30) == first  # the same child serves the next call
    payload = {("orders", 3): 17, "text": "결제 | \"quoted\""}
    assert calls.call(echo_after_printing, payload, timeout_s=30) == payload


def test_an_exception_in_the_child_comes_back_with_its_description(calls):
    pid = calls.call(child_pid, timeout_s=30)
    with pytest.raises(KafkaCallFailed, match="ValueError: no offsets"):
        calls.call(refuse, "offsets", timeout_s=30)
    assert calls.call(child_pid, timeout_s=30) == pid  # an exception does not end the child


def test_an_aborted_child_is_an_error_of_that_call_and_the_next_call_starts_a_new_one(calls):
    pid = calls.call(child_pid, timeout_s=30)
    with pytest.raises(KafkaClientDied, match=r"idc1 ended \(killed by SIGABRT\)"):
        calls.call(abort, timeout_s=30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone
    assert calls.call(child_pid, timeout_s=30) not in (pid, os.getpid())


def test_a_child_that_does_not_answer_in_time_is_killed(calls):
    pid = calls.call(child_pid, timeout_s=30)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="idc1 did not answer within 2s"):
        calls.call(hang, 60, timeout_s=2)
    assert time.monotonic() - started < 15
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert calls.call(hang, 0, timeout_s=30) == "woke up"


def test_close_ends_the_child():
    calls = IsolatedCalls("idc2")
    pid = calls.call(child_pid, timeout_s=30)
    calls.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    calls.close()  # twice is fine


def test_the_child_dies_with_its_parent(tmp_path):
    # A parent process holding a child in a long call, then killed with -9: the child goes too.
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from offset_pipeline.kafka_io.isolated import IsolatedCalls\n"
        "from tests.kafka_io.test_isolated_calls import child_pid, hang\n"
        "c = IsolatedCalls('idc1')\n"
        "print(c.call(child_pid, timeout_s=30), flush=True)\n"
        "c.call(hang, 120, timeout_s=300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    os.kill(parent.pid, 9)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the child {child} outlived its parent")


def test_a_child_started_from_a_thread_that_ended_keeps_serving(calls):
    """Linux's parent-death signal follows the thread that started the child: a child started from a
    thread pool's worker died with the worker, and every continuous cycle paid a new one."""
    with ThreadPoolExecutor(1) as pool:
        pid = pool.submit(calls.call, child_pid, timeout_s=30).result()
    time.sleep(1.0)  # the worker thread has ended; a death signal would have arrived
    os.kill(pid, 0)  # still alive
    assert calls.call(child_pid, timeout_s=30) == pid


def test_calls_from_several_threads_run_at_once_in_the_one_child(calls):
    pid = calls.call(child_pid, timeout_s=30)
    with ThreadPoolExecutor(2) as pool:
        # Served one after another, the first would wait for the second until its barrier broke.
        met = list(pool.map(lambda _: calls.call(meet, timeout_s=90), range(2)))
    assert met == [pid, pid]


def test_a_call_past_its_bound_ends_the_calls_in_flight_with_it_and_names_why(calls):
    pid = calls.call(child_pid, timeout_s=30)
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(calls.call, hang, 60, timeout_s=120)
        deadline = time.monotonic() + 30
        while len(calls._current.pending) < 1:  # the other call is in flight in the child
            assert time.monotonic() < deadline, "the first call never reached the child"
            time.sleep(0.05)
        with pytest.raises(TimeoutError, match="did not answer within 2s"):
            calls.call(hang, 60, timeout_s=2)
        with pytest.raises(KafkaClientDied, match=r"killed: a call did not answer within 2s"):
            other.result(timeout=30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert calls.call(child_pid, timeout_s=30) not in (pid, os.getpid())


def test_a_forked_process_starts_children_of_its_own(calls):
    """A fork has no copy of the spawning thread: its first call must not wait for it forever."""
    import multiprocessing

    calls.call(child_pid, timeout_s=30)  # the spawning thread runs in this process now

    def in_fork(out):
        forked = IsolatedCalls("forked")
        try:
            out.put(forked.call(child_pid, timeout_s=30))
        finally:
            forked.close()

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=in_fork, args=(out,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert out.get(timeout=5) > 0
