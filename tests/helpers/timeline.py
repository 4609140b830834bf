"""Where a test run's time went, per worker: each worker writes when each test began and ended
(setup and teardown included) to ``<artifacts>/timeline/<worker>.tsv``; at the end the controller
prints each worker's busy time and each work unit's span (the chains of tests/conftest.py, the
longest modules), so a change to the work units can be judged from one run's output.

Each line also carries the CPU-seconds the worker spent during the test, its own and its reaped
children's (``os.times``: a broker, a ``bin/up`` or a child process counts when its test or fixture
waits for its end, so a module's own clusters count at its teardown). The summary lists the modules
that cost the workers most CPU: on a 2-core machine the run's time follows its CPU."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest


class Timeline:
    def __init__(self, folder: Path, unit_of):
        self.folder = folder
        self.unit_of = unit_of  # node id -> its work unit (tests/conftest.py, xdist_work_unit)
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.core_speed_s = float("nan")  # measured by the main process at the session's start

    def pytest_sessionstart(self, session):
        if self.worker == "main" or self.worker == "gw0":
            self.folder.mkdir(parents=True, exist_ok=True)
        if self.worker == "main":
            for old in self.folder.glob("*.tsv"):
                old.unlink()
            self.core_speed_s = core_speed_s()  # before the workers start: the machine still idle

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        started, cpu = time.time(), os.times()
        yield
        after = os.times()
        own = after.user + after.system - cpu.user - cpu.system
        children = after.children_user + after.children_system - cpu.children_user - cpu.children_system
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f"{self.worker}.tsv", "a") as out:
            out.write(f"{started:.3f}\t{time.time():.3f}\t{own:.2f}\t{children:.2f}\t{item.nodeid}\n")

    def pytest_terminal_summary(self, terminalreporter):
        if self.worker != "main":
            return
        rows = []
        for path in sorted(self.folder.glob("*.tsv")):
            for line in path.read_text().splitlines():
                start, end, own, children, nodeid = line.split("\t", 4)
                rows.append((path.stem, float(start), float(end), float(own), float(children), nodeid))
        if not rows or {r[0] for r in rows} == {"main"}:
            return
        first = min(r[1] for r in rows)
        busy, units = defaultdict(float), {}
        for worker, start, end, _own, _children, nodeid in rows:
            busy[worker] += end - start
            unit = self.unit_of(nodeid)
            s, e, w = units.get(unit, (start, end, worker))
            units[unit] = (min(s, start), max(e, end), w)
        write = terminalreporter.write_line
        terminalreporter.section("time per worker and work unit (tests/helpers/timeline.py)")
        write(f"this machine: {CORE_SPEED_STEPS // 1_000_000}M steps of a Python loop in "
              f"{self.core_speed_s:.2f}s on one idle core (runs compare on like machines)")
        for worker in sorted(busy):
            last = max(r[2] for r in rows if r[0] == worker)
            write(f"{worker}: busy {busy[worker] / 60:.1f} min, last test ended {(last - first) / 60:.1f} min in")
        for unit, (s, e, w) in sorted(units.items(), key=lambda kv: kv[1][0] - kv[1][1])[:12]:
            write(f"{(e - s) / 60:5.1f} min  {unit}  ({w}, {(s - first) / 60:.1f}-{(e - first) / 60:.1f} min)")
        own, children = module_cpu(rows)
        write(f"workers' CPU: {sum(own.values()):,.0f} s their own, {sum(children.values()):,.0f} s their reaped "
              "children's (brokers, stacks, child processes: counted when waited for); the costliest modules:")
        for module in sorted(own, key=lambda m: -(own[m] + children[m]))[:12]:
            write(f"{own[module] + children[module]:7,.0f} CPU-s  {module}  (own {own[module]:,.0f}, "
                  f"children {children[module]:,.0f})")


def module_cpu(rows) -> tuple[dict[str, float], dict[str, float]]:
    """Per test module, the workers' own CPU-seconds and their reaped children's, from the rows
    ``(worker, start, end, own, children, nodeid)`` (pure)."""
    own, children = defaultdict(float), defaultdict(float)
    for _worker, _start, _end, cpu_own, cpu_children, nodeid in rows:
        module = nodeid.split("::", 1)[0]
        own[module] += cpu_own
        children[module] += cpu_children
    return dict(own), dict(children)


#: the steps of :func:`core_speed_s`'s loop (a few tenths of a second)
CORE_SPEED_STEPS = 10_000_000


def core_speed_s() -> float:
    """Seconds one core takes for a fixed pure-Python loop: suite times measured on machines whose
    cores differ are not comparable (the same code took 23 minutes on one 2-core machine and 34 on
    another)."""
    started = time.perf_counter()
    total = 0
    for i in range(CORE_SPEED_STEPS):
        total += i
    return time.perf_counter() - started
