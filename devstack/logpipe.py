"""Run a command with its output in a size-bounded, rotated log:
``python -m devstack.logpipe --log FILE -- COMMAND ARGS...``.

Every long-running part of the stack (mirrors, traffic, consumers, the Spark Connect server) runs
under this wrapper, so its log never grows past ``max_bytes * (backups + 1)`` however long the
stack runs. The command's stdout and stderr both go through the pipe: Python tracebacks,
librdkafka's own messages and the JVM's output land in the current log like any other line, and
when the command exits the wrapper writes its exit code after them, so a crash is visible at the
end of ``FILE``.

Invariants:

* The wrapper and its command live and die together. The command gets ``SIGKILL`` if the wrapper
  dies (Linux parent-death signal), and the wrapper exits when the command does (with its code),
  so a pid file naming the wrapper tells whether the part runs.
* ``SIGTERM``/``SIGINT`` sent to the wrapper alone are passed on to the command, which shuts down
  on its own terms; the wrapper keeps writing its output until it exits.

Sizes: ``OFFSET_PIPELINE_LOG_MAX_BYTES`` (default 20 MB) per file and
``OFFSET_PIPELINE_LOG_BACKUPS`` (default 5) rotated files ``FILE.1`` .. ``FILE.5``.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from logging.handlers import RotatingFileHandler

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_BACKUPS = 5
MAX_LINE_BYTES = 64 * 1024  # a longer line is written in pieces, never held whole
_PR_SET_PDEATHSIG = 1


def log_limits(env=None) -> tuple[int, int]:
    """``(max_bytes, backups)`` from ``OFFSET_PIPELINE_LOG_MAX_BYTES`` / ``OFFSET_PIPELINE_LOG_BACKUPS``."""
    env = os.environ if env is None else env
    max_bytes = int(env.get("OFFSET_PIPELINE_LOG_MAX_BYTES") or DEFAULT_MAX_BYTES)
    backups = int(env.get("OFFSET_PIPELINE_LOG_BACKUPS") or DEFAULT_BACKUPS)
    if max_bytes <= 0 or backups < 1:
        raise ValueError("OFFSET_PIPELINE_LOG_MAX_BYTES must be > 0 and OFFSET_PIPELINE_LOG_BACKUPS >= 1")
    return max_bytes, backups


def rotating_writer(path: str, max_bytes: int, backups: int) -> logging.Logger:
    """A logger writing each line as is into ``path``, rotated by size."""
    handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    writer = logging.getLogger(f"offset_pipeline.logpipe.{path}")
    writer.propagate = False
    writer.setLevel(logging.INFO)
    writer.addHandler(handler)
    return writer


def _die_with_parent(parent: int):
    """In the child before exec: SIGKILL when the wrapper dies, even by ``kill -9``."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        prctl = None  # not Linux: the wrapper's own signal handling is all there is

    def set_death_signal() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the wrapper died before the signal was armed
            os._exit(1)

    return set_death_signal


def _copy_lines(stream, writer: logging.Logger) -> None:
    for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
        writer.info(raw.decode("utf-8", errors="replace").rstrip("\n"))


def run(log_path: str, command: list[str], max_bytes: int, backups: int) -> int:
    writer = rotating_writer(log_path, max_bytes, backups)
    stamp = lambda: time.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
    writer.info(f"\n=== starting {' '.join(command)} at {stamp()} (wrapper pid {os.getpid()}) ===")
    # The handlers are in place before the command exists: a stop that comes while it is being
    # started (the child is forked, the handler not yet set) must neither kill the wrapper alone,
    # leaving the command to die by the parent-death signal after the stopper stopped waiting, nor
    # be lost. It is passed on as soon as there is a command to pass it to.
    started: list[subprocess.Popen] = []
    pending: list[int] = []

    def on_signal(signum, _frame) -> None:
        if started:
            _forward(started[0], signum)
        else:
            pending.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_die_with_parent(os.getpid()),
        )
    except OSError as exc:
        writer.info(f"=== could not start: {exc} ===")
        return 127
    started.append(child)
    for signum in pending:
        _forward(child, signum)
    reader = threading.Thread(target=_copy_lines, args=(child.stdout, writer), daemon=True)
    reader.start()
    code = child.wait()
    # Grandchildren holding the pipe open must not keep the wrapper alive: drain briefly, then go.
    reader.join(timeout=5)
    how = f"signal {-code}" if code < 0 else f"code {code}"
    writer.info(f"=== exited with {how} at {stamp()} ===")
    return 128 - code if code < 0 else code


def _forward(child: subprocess.Popen, signum: int) -> None:
    try:
        child.send_signal(signum)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a command with its output in a rotated log.")
    parser.add_argument("--log", required=True, help="the log file (rotated to FILE.1, FILE.2, ...)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    max_bytes, backups = log_limits()
    return run(args.log, command, max_bytes, backups)


if __name__ == "__main__":
    sys.exit(main())
