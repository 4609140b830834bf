"""Kafka calls in a child process of their own, so a crash of the Kafka client costs one cluster's
reads, never the run.

Why: librdkafka (2.16, the newest) can abort the whole process on an internal assertion when admin
requests time out while a broker is down or restarting (``rd_kafka_enq_once_del_source_return:
Assertion `eonce->refcnt > 0' failed``; confluentinc/librdkafka#4605, open). The soak
(docs/results/soak.md) saw four sync runs in a row die with SIGABRT in the snapshot step after a broker was
killed and started again: every group's cycle lost to one broker. In a child, such an abort is a
named reason on that cluster's rows (``cluster_unavailable``) and the run goes on.

Invariants:

* The child is a fresh interpreter (``python -m offset_pipeline.kafka_io.isolated``): no copy of
  the parent's Kafka client threads, and nothing of the parent's ``__main__`` runs again.
* Every call has a bound: a child that does not answer in time is killed (``TimeoutError``); one that
  dies gives :class:`KafkaClientDied` with its exit status. Either way the child is gone, and the next
  call starts a new one.
* One child serves every call of its owner (a cycle's calls to one cluster, or a continuous run's),
  so its owner pays the start of a child (about a second) once per cluster;
  :meth:`IsolatedCalls.close` ends it. Children are started from one long-lived thread
  (:class:`_Spawner`): the death signal follows the starting thread, not the process. Calls
  from several threads run at once in it (each answer carries its call's id); a call past its bound
  kills the child, and the other calls in flight in it end with :class:`KafkaClientDied`.
* Only module-level functions are called, by name; arguments and results are pickled. An exception
  in the call comes back as :class:`KafkaCallFailed` with the original's one-line description.
* The child dies with its parent (Linux's parent-death signal): a stopped run leaves none behind.
* The protocol runs on the child's own copy of its stdout; its file descriptor 1 points at stderr,
  so librdkafka's and Python's output cannot corrupt it.
"""

from __future__ import annotations

import ctypes
import importlib
import itertools
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class KafkaClientDied(RuntimeError):
    """The child process running the Kafka client ended without answering (a crash of librdkafka)."""


class KafkaCallFailed(RuntimeError):
    """The call raised in the child; the message is the original's ``Type: message``."""


def _exit_status(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Spawner:
    """Starts the children from one thread that lives as long as this process.

    Linux sends the parent-death signal when the *thread* that started the child ends, not the
    process. A child started from a short-lived thread (a thread pool's worker, gone at the end of
    the ``with`` block) was killed with it: a continuous run paid a new child, about a second of
    CPU, per cluster and cycle. Started from here, a child lives until it is closed or this process
    ends."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue | None = None
        self._pid: int | None = None  # the process whose thread serves the requests (a fork has none)

    def popen(self, args: list[str]) -> subprocess.Popen:
        with self._lock:
            if self._requests is None or self._pid != os.getpid():
                self._requests, self._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(target=self._serve, args=(self._requests,), name="kafka-isolated-spawner",
                                 daemon=True).start()
            requests = self._requests
        done, slot = threading.Event(), []
        requests.put((args, done, slot))
        done.wait()
        if isinstance(slot[0], BaseException):
            raise slot[0]
        return slot[0]

    @staticmethod
    def _serve(requests: queue.SimpleQueue) -> None:
        while True:
            args, done, slot = requests.get()
            try:
                slot.append(subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                             close_fds=True))
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                slot.append(exc)
            done.set()


_SPAWNER = _Spawner()


class _Child:
    """One child process and the calls waiting for its answers (by call id)."""

    def __init__(self, what: str):
        self.proc = _SPAWNER.popen([sys.executable, "-m", __name__])
        self.what = what
        self.lock = threading.Lock()  # pending, ended
        self.write_lock = threading.Lock()  # one request at a time on the pipe
        self.pending: dict[int, list] = {}  # call id -> [threading.Event, reply]
        self.ended: str | None = None  # why no more answers come (set once)
        threading.Thread(target=self._read, name=f"kafka-isolated-{what}-reader", daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                call_id, reply = pickle.load(self.proc.stdout)
                with self.lock:
                    slot = self.pending.pop(call_id, None)
                if slot is not None:
                    slot[1] = reply
                    slot[0].set()
        except (EOFError, OSError, pickle.UnpicklingError, ValueError):
            pass
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        with self.lock:
            self.ended = self.ended or _exit_status(code)
            waiting, self.pending = list(self.pending.values()), {}
        for slot in waiting:
            slot[1] = ("died", self.ended)
            slot[0].set()

    def send(self, call_id: int, request: tuple) -> list:
        slot: list = [threading.Event(), None]
        with self.lock:
            if self.ended is not None:
                slot[1] = ("died", self.ended)
                slot[0].set()
                return slot
            self.pending[call_id] = slot
        try:
            with self.write_lock:
                pickle.dump((call_id, *request), self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self.proc.stdin.flush()
        except OSError:
            pass  # the child is gone: the reader answers the slot when it sees the end
        return slot

    def kill(self, why: str) -> None:
        with self.lock:
            self.ended = self.ended or why
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)  # reaped: no zombie outlives the call that killed it
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # the child ends on end of input, after its calls in flight
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill("closed")
            self.proc.wait(timeout=5)


class IsolatedCalls:
    """Calls to one cluster's Kafka client in a child process (see the module's invariants).
    Thread-safe: calls from several threads run at once in the one child."""

    def __init__(self, what: str):
        self.what = what  # e.g. "idc1": named in errors
        self._lock = threading.Lock()
        self._current: _Child | None = None
        self._ids = itertools.count()

    def _child(self) -> _Child:
        with self._lock:
            if self._current is None or self._current.ended is not None:
                self._current = _Child(self.what)
            return self._current

    def call(self, fn: Callable[..., Any], *args: Any, timeout_s: float, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the child; its result, or the error that ended it."""
        child = self._child()
        slot = child.send(next(self._ids), (fn.__module__, fn.__qualname__, args, kwargs))
        if not slot[0].wait(timeout_s):
            # The whole child goes: a call stuck in librdkafka cannot be taken back otherwise.
            # Calls of other threads in flight in it end with KafkaClientDied naming this.
            child.kill(f"killed: a call did not answer within {timeout_s:.0f}s")
            self._forget(child)
            raise TimeoutError(f"the Kafka client process for {self.what} did not answer within {timeout_s:.0f}s")
        kind, value = slot[1]
        if kind == "ok":
            return value
        if kind == "error":
            raise KafkaCallFailed(value)
        self._forget(child)
        raise KafkaClientDied(f"the Kafka client process for {self.what} ended ({value}) "
                              "without answering (librdkafka aborts on some timeouts: confluentinc/librdkafka#4605)")

    def _forget(self, child: _Child) -> None:
        with self._lock:
            if self._current is child:
                self._current = None

    def close(self) -> None:
        with self._lock:
            child, self._current = self._current, None
        if child is not None:
            child.close()

    def discard(self, why: str) -> None:
        """Kill the child now (calls in flight end with :class:`KafkaClientDied` naming ``why``); the
        next call starts a new one. For a long-lived owner whose cluster stopped answering: a client
        that lived through an outage can stay stuck after the cluster is back (seen after a broker
        restart: its requests timed out for as long as the client lived), a new one connects."""
        with self._lock:
            child, self._current = self._current, None
        if child is not None:
            child.kill(why)

    def __enter__(self) -> "IsolatedCalls":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _die_with_parent() -> None:
    """SIGKILL when the parent (the run worker) dies, even in the middle of a Kafka call: a stop of
    the run must leave no child behind (tests/devstack/test_clean_stop.py)."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the end of input still ends the child between calls
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)


_CHILD_THREADS = 32  # calls served at once (the commit step's groups run in parallel)


def _answer(call_id: int, module: str, name: str, args, kwargs, channel_out, write_lock: threading.Lock) -> None:
    try:
        target = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        reply = ("ok", target(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - every failure of the call goes back to the caller
        quiet_timeout = isinstance(exc, TimeoutError) and not str(exc)
        reply = ("error", "TimeoutError: no answer in time" if quiet_timeout else f"{type(exc).__name__}: {exc}")
    try:
        data = pickle.dumps((call_id, reply), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result is the call's failure
        data = pickle.dumps((call_id, ("error", f"the result could not be sent back: {type(exc).__name__}: {exc}")))
    with write_lock:
        channel_out.write(data)
        channel_out.flush()


def _serve() -> None:
    """The child: answer calls (several at once) until the end of input, then finish those in flight."""
    _die_with_parent()
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the channel
    sys.stdout = sys.stderr
    channel_in = sys.stdin.buffer
    write_lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=_CHILD_THREADS, thread_name_prefix="isolated-call") as pool:
        while True:
            try:
                call_id, module, name, args, kwargs = pickle.load(channel_in)
            except EOFError:
                return
            pool.submit(_answer, call_id, module, name, args, kwargs, channel_out, write_lock)


class ClusterChildren:
    """An :class:`IsolatedCalls` per cluster that outlives one step: the sync run's snapshot step
    starts them and hands them (``sync/cycle_carry.py``) to its commit step, which closes them, so
    a run starts one child per cluster instead of two (about 0.2 s and 0.15 CPU-s each)."""

    def __init__(self, clusters):
        self.calls = {name: IsolatedCalls(name) for name in clusters}

    def close(self) -> None:
        for calls in self.calls.values():
            calls.close()


if __name__ == "__main__":
    _serve()
