"""Kafka calls in a child process of their own, so a crash of the Kafka client costs one cluster's
reads, never the run.

Why: librdkafka (2.16, the newest) can abort the whole process on an internal assertion when admin
requests time out while a broker is down or restarting (``rd_kafka_enq_once_del_source_return:
Assertion `eonce->refcnt > 0' failed``; confluentinc/librdkafka#4605, open). The soak
(bench/soak.py) saw four sync runs in a row die with SIGABRT in the snapshot step after a broker was
killed and started again: every group's cycle lost to one broker. In a child, such an abort is a
named reason on that cluster's rows (``cluster_unavailable``) and the run goes on.

Invariants:

* The child is a fresh interpreter (``python -m offset_pipeline.kafka_reads.isolated``): no copy of
  the parent's Kafka client threads, and nothing of the parent's ``__main__`` runs again.
* Every call has a bound: a child that does not answer in time is killed (``TimeoutError``); one that
  dies gives :class:`KafkaClientDied` with its exit status. Either way the child is gone, and the next
  call starts a new one.
* One child serves every call of its owner (a cycle's calls to one cluster), so a cycle pays the
  start of a child (about a second) once per cluster; :meth:`IsolatedCalls.close` ends it.
* Only module-level functions are called, by name; arguments and results are pickled. An exception
  in the call comes back as :class:`KafkaCallFailed` with the original's one-line description.
* The child dies with its parent (Linux's parent-death signal): a stopped run leaves none behind.
* The protocol runs on the child's own copy of its stdout; its file descriptor 1 points at stderr,
  so librdkafka's and Python's output cannot corrupt it.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import pickle
import signal
import subprocess
import sys
import threading
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


class IsolatedCalls:
    """Calls to one cluster's Kafka client in a child process (see the module's invariants)."""

    def __init__(self, what: str):
        self.what = what  # e.g. "idc1": named in errors
        self._proc: subprocess.Popen | None = None

    def _child(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=None, close_fds=True,
            )
        return self._proc

    def call(self, fn: Callable[..., Any], *args: Any, timeout_s: float, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the child; its result, or the error that ended it."""
        proc = self._child()
        answer: list = []

        def exchange() -> None:
            try:
                pickle.dump((fn.__module__, fn.__qualname__, args, kwargs), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                proc.stdin.flush()
                answer.append(pickle.load(proc.stdout))
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                answer.append(("died", repr(exc)))

        worker = threading.Thread(target=exchange, name=f"kafka-isolated-{self.what}", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive() or not answer:
            self._kill()
            worker.join(5)
            raise TimeoutError(f"the Kafka client process for {self.what} did not answer within {timeout_s:.0f}s")
        kind, value = answer[0]
        if kind == "ok":
            return value
        if kind == "error":
            raise KafkaCallFailed(value)
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = proc.returncode
        self._proc = None
        raise KafkaClientDied(f"the Kafka client process for {self.what} ended ({_exit_status(code)}) "
                              "without answering (librdkafka aborts on some timeouts: confluentinc/librdkafka#4605)")

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # the child ends on end of input
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> "IsolatedCalls":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _die_with_parent() -> None:
    """SIGKILL when the parent (the run worker) dies, even in the middle of a Kafka call: a stop of
    the run must leave no child behind (tests/test_clean_stop.py)."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the end of input still ends the child between calls
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)


def _serve() -> None:
    """The child: answer calls until the end of input."""
    _die_with_parent()
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the channel
    sys.stdout = sys.stderr
    channel_in = sys.stdin.buffer
    while True:
        try:
            module, name, args, kwargs = pickle.load(channel_in)
        except EOFError:
            return
        try:
            target = importlib.import_module(module)
            for part in name.split("."):
                target = getattr(target, part)
            reply = ("ok", target(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - every failure of the call goes back to the caller
            quiet_timeout = isinstance(exc, TimeoutError) and not str(exc)
            reply = ("error", "TimeoutError: no answer in time" if quiet_timeout else f"{type(exc).__name__}: {exc}")
        try:
            pickle.dump(reply, channel_out, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result is the call's failure
            pickle.dump(("error", f"the result could not be sent back: {type(exc).__name__}: {exc}"), channel_out)
        channel_out.flush()


if __name__ == "__main__":
    _serve()
