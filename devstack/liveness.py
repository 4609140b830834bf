"""Is the process a pid file names still the one the stack started?

A pid file outlives its process: after a crash, a ``kill -9`` or a reboot it names a process that
is gone, a zombie nobody reaped yet, or, once pids wrap, some unrelated program. Each of those is
*dead* for the stack, so ``bin/stack up`` restarts the part and ``status`` says so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); check its state where /proc tells.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def command_line(pid: int) -> list[str] | None:
    """The process's argv from /proc, or None where /proc does not tell (not Linux, gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def pid_runs(pid: int, *arguments: str) -> bool:
    """``pid`` is alive and its command line holds every one of ``arguments`` (whole arguments,
    e.g. a module name and a file path unique to the part). Where /proc is missing, a living pid
    is trusted."""
    if not pid_alive(pid):
        return False
    argv = command_line(pid)
    # A process that is exec'ing its program (just started) shows an empty command line for a
    # moment: look again before judging.
    deadline = time.monotonic() + 2.0
    while argv == [] and time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.02)
        argv = command_line(pid)
    if argv is None:
        return not Path("/proc/self/cmdline").exists()
    return all(argument in argv for argument in arguments)
