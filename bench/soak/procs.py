"""Processes by role, their RSS (from /proc: psutil is not in the venv), and bytes of folders.

A role is a root pid and its descendants: a devstack part's pid file names its log wrapper, whose
child is the part itself (a mirror, the Spark Connect JVM and its Python workers), so a role's RSS
is its whole tree. Dagster's daemon tree is split by command line: the daemon, its code server
(``api grpc``), and the run workers (``execute_run``), which come and go with each run.
"""

from __future__ import annotations

import os
from pathlib import Path


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return None


def cmdline(pid: int) -> str:
    text = _read(f"/proc/{pid}/cmdline")
    return text.replace("\0", " ").strip() if text else ""


def rss_bytes(pid: int) -> int:
    return memory(pid)[0]


def memory(pid: int) -> tuple[int, int]:
    """``(RSS, anonymous RSS)`` in bytes. RSS also counts the pages of mapped files (a broker's
    index files, jars, chdb's parts), which the kernel may drop at any time; the anonymous part
    (heaps, stacks) is what a leak grows."""
    text = _read(f"/proc/{pid}/status")
    if not text:
        return 0, 0
    values = {}
    for line in text.splitlines():
        if line.startswith(("VmRSS:", "RssAnon:")):
            values[line.split(":")[0]] = int(line.split()[1]) * 1024
    return values.get("VmRSS", 0), values.get("RssAnon", 0)


def memory_of(pids) -> tuple[int, int]:
    """``(RSS, anonymous RSS)`` summed over ``pids``."""
    pairs = [memory(p) for p in pids]
    return sum(r for r, _ in pairs), sum(a for _, a in pairs)


def children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read(f"/proc/{entry}/stat")
        if not stat:
            continue
        # the command may hold spaces and parentheses: the fields after the last ')' are fixed
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[0] != "Z":
            out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def tree(pid: int, kids: dict[int, list[int]]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(")", 1)[-1].split()[0] != "Z"


def dagster_roles(prefix: str, root: int | None, kids: dict[int, list[int]]) -> dict[str, tuple[int, int, int]]:
    """``{role: (segment pid, RSS, anonymous RSS)}`` for a dagster-daemon or webserver tree."""
    if not alive(root):
        return {}
    roles: dict[str, tuple[int, int, int]] = {}
    code_pid = 0
    own, code, runs = [root], [], []
    for pid in tree(root, kids)[1:]:
        cmd = cmdline(pid)
        if "multiprocessing.spawn" in cmd or "execute_run" in cmd:
            runs.append(pid)  # a run worker (the code server starts one per run)
        elif "grpc" in cmd or "resource_tracker" in cmd:
            code_pid = code_pid or pid
            code.append(pid)
        else:
            own.append(pid)
    roles[prefix] = (root, *memory_of(own))
    if code_pid:
        # The daemon replaces its code server every minute or so (Dagster's own reload), the old one
        # ending on its heartbeat: one series (pid 0) for all of them. Their sum is a sawtooth of
        # overlapping lives, so its growth is judged per instance (code_server_instances).
        roles[f"{prefix}-code-server"] = (0, *memory_of(code))
    if runs:
        roles[f"{prefix}-run-workers"] = (0, *memory_of(runs))  # short-lived: no slope fitted
    return roles


def holders_of(path: Path) -> list[int]:
    """Processes with a file open under ``path`` (the embedded ClickHouse engine's data folder)."""
    prefix = str(path.resolve())
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(prefix):
                    out.append(int(entry))
                    break
            except OSError:
                continue
    return out


def du(path: Path) -> int:
    """Bytes of the files under ``path`` (files vanishing meanwhile are skipped)."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512  # on disk: Kafka preallocates its index files sparse
            except OSError:
                pass
    return total


def code_server_instances(root: int | None, kids: dict[int, list[int]]) -> dict[int, tuple[int, int]]:
    """``{pid: (RSS, anonymous RSS)}`` of each code server (``api grpc``) under a dagster-daemon or
    webserver tree, each with its own children (its resource tracker, its Kafka call children)."""
    if not alive(root):
        return {}
    out = {}
    for pid in tree(root, kids)[1:]:
        cmd = cmdline(pid)
        if "grpc" in cmd and "multiprocessing" not in cmd and "execute_run" not in cmd:
            parent_is_server = any(pid in kids.get(p, []) for p in out)
            if not parent_is_server:
                out[pid] = memory_of(tree(pid, kids))
    return out
