"""CPU-seconds and peak resident memory of a process tree (a benchmark's driver, its Spark JVMs,
executors and Python workers), read with psutil.

CPU: :meth:`ProcessTree.cpu_seconds` sums, over every live process of the tree, its own user+sys
time plus the user+sys time of its children it has reaped (Linux adds a reaped child's times to its
parent's). The difference of two readings is what the tree spent between them, including processes
born and gone in between (their parent in the tree reaped them), without counting a process twice.
A process that outlives its parent leaves the tree (re-parented): not counted (Spark's do not).

Memory: :class:`PeakRss` samples the sum of the tree's resident set sizes in a thread (every
``interval_s``) and keeps the highest.
"""

from __future__ import annotations

import threading

import psutil


class ProcessTree:
    """The processes under ``roots`` (pids), roots included."""

    def __init__(self, roots: list[int]):
        self.roots = [psutil.Process(pid) for pid in roots]

    def processes(self) -> list[psutil.Process]:
        seen: dict[int, psutil.Process] = {}
        for root in self.roots:
            try:
                for proc in [root, *root.children(recursive=True)]:
                    seen.setdefault(proc.pid, proc)
            except psutil.NoSuchProcess:
                continue
        return list(seen.values())

    def cpu_seconds(self) -> float:
        total = 0.0
        for proc in self.processes():
            try:
                t = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total

    def cpu_seconds_by_kind(self) -> dict[str, float]:
        """:meth:`cpu_seconds` split by what the process is: ``driver`` (the first root), ``jvm``
        (Spark's Java processes) or ``python`` (pyspark's daemon and workers, any other)."""
        out = {"driver": 0.0, "jvm": 0.0, "python": 0.0}
        driver = self.roots[0].pid if self.roots else None
        for proc in self.processes():
            try:
                t = proc.cpu_times()
                name = proc.name()
            except psutil.NoSuchProcess:
                continue
            kind = "driver" if proc.pid == driver else "jvm" if name == "java" else "python"
            out[kind] += t.user + t.system + t.children_user + t.children_system
        return out

    def rss_bytes(self) -> int:
        total = 0
        for proc in self.processes():
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total


class PeakRss:
    """``with PeakRss(tree) as peak: ...`` then ``peak.bytes``: the highest summed RSS seen."""

    def __init__(self, tree: ProcessTree, interval_s: float = 1.0):
        self.tree, self.interval_s = tree, interval_s
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)

    def _run(self) -> None:
        while True:
            self.bytes = max(self.bytes, self.tree.rss_bytes())
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self):  # -> PeakRss
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.bytes = max(self.bytes, self.tree.rss_bytes())
