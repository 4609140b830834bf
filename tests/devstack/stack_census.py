"""Which processes belong to a local stack started by ``bin/up`` (tests/devstack/test_clean_stop.py, and the
UI tests' stop of their session's ``bin/up``): a census before a stop, the survivors after it.

A process belongs to the stack when it descends from ``bin/up``, is named in one of the stack's pid
files, or carries the stack's folder in its command line or environment (the stack's parts are
started detached, so they are not all descendants).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: How long a stop may take. Its graces add up to 24 s (``devstack down``: two waves, 12 s per part;
#: dagster dev's 15 s run beside them); the rest is slack for a loaded machine, where starting
#: ``devstack down``'s interpreter and the JVMs' exits took 38 s in one run of the suite on a 2-core
#: machine (2026-12-01). A stop that waits on no grace ends in seconds; one that hangs is killed at its grace.
STOP_WITHIN_S = 60.0


@dataclass(frozen=True)
class Proc:
    pid: int
    start_ticks: int  # with the pid, names one process even if the pid is reused
    cmd: str


def read_proc(pid: int) -> tuple[int, str, int, str, bytes] | None:
    """(ppid, state, start ticks, command line, environment) of a live process, None if gone."""
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
        cmdline = (base / "cmdline").read_bytes()
        environ = (base / "environ").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19]), cmdline.replace(b"\0", b" ").decode(errors="replace"), environ


def stack_processes(stack_dir: Path, root_pid: int) -> dict[int, Proc]:
    """Every live (not zombie) process of the stack in ``stack_dir`` started by ``root_pid``."""
    marker = str(stack_dir).encode()
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            info = read_proc(int(entry.name))
            if info is not None and info[1] != "Z":
                table[int(entry.name)] = info
    from_pid_files = set()
    for pid_file in stack_dir.rglob("*.pid"):
        try:
            from_pid_files.add(int(pid_file.read_text().strip()))
        except (OSError, ValueError):
            pass
    members = {pid for pid, (_, _, _, cmd, environ) in table.items()
               if pid == root_pid or pid in from_pid_files or marker in cmd.encode() or marker in environ}
    grew = True
    while grew:  # descendants of members (a process may have dropped the environment it was given)
        children = {pid for pid, (ppid, *_) in table.items() if ppid in members} - members
        members |= children
        grew = bool(children)
    return {pid: Proc(pid, table[pid][2], table[pid][3]) for pid in members}


def survivors(census: dict[int, Proc], stack_dir: Path, root_pid: int) -> list[Proc]:
    """Those of ``census`` still running, and any process of the stack that appeared since."""
    now = stack_processes(stack_dir, root_pid)
    left = [p for p in census.values() if p.pid in now and now[p.pid].start_ticks == p.start_ticks]
    return left + [p for pid, p in now.items() if pid not in census]


def wait_for_survivors(census: dict[int, Proc], stack_dir: Path, root_pid: int, reap=lambda: None,
                       limit_s: float = STOP_WITHIN_S + 60) -> tuple[list[Proc], float]:
    """Poll until none of the stack is left or ``limit_s`` passed (past the stop's limit: to measure
    how long it took). ``reap``: called each round (a test's own child must be waited for to go).
    Returns the survivors and the seconds it took."""
    started = time.monotonic()
    left = list(census.values())
    while left and time.monotonic() - started < limit_s:
        reap()
        left = survivors(census, stack_dir, root_pid)
        if left:
            time.sleep(0.2)
    return left, time.monotonic() - started
