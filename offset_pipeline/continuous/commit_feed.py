"""The commit-log followers of a continuous run: one per cluster, each in a child process of its own
(``kafka_io/isolated.py``) and polled by a thread of the run, their commits applied to that
cluster's :class:`~offset_pipeline.continuous.followed_state.FollowedOffsets`.

The run asks :meth:`CommitLogFeed.mode` before each cycle: a cluster whose follower is
``following`` (and has been since the run's last full read began) needs reading only where its
groups changed; any other mode names why the run lists every group of the clusters this cycle, as
the polling mode does (``commit_log_starting``, ``commit_log_not_authorized``,
``commit_log_unreadable``, ``commit_log_lagging``, ``commit_log_restarted``).

Bounded: each poll waits at most ``poll_s``; a child that does not answer in its bound is killed
and started again (the follower in it then starts again too, and the run reads everything once);
:meth:`close` stops the threads and the children.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from offset_pipeline.continuous.followed_state import FollowedOffsets, Listing, News, Reconciliation
from offset_pipeline.kafka_io.commit_log import FollowedBatch, follow, followed_ends, stop_following
from offset_pipeline.kafka_io.isolated import IsolatedCalls
from offset_pipeline.translation.group_commit_records import commit_log_partition

CHILD_START_S = 30.0  # beyond the Kafka bound: starting the follower's child process
RETRY_S = 5.0  # a follower that failed is tried again this long after


class FollowerMode(str, Enum):
    """How a cluster's follower stands: ``following``, or why the run polls that cluster."""

    FOLLOWING = "following"
    STARTING = "commit_log_starting"
    NOT_AUTHORIZED = "commit_log_not_authorized"
    UNREADABLE = "commit_log_unreadable"
    LAGGING = "commit_log_lagging"
    RESTARTED = "commit_log_restarted"
    OFF = "commit_log_off"

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


def mode_of_error(error: str) -> FollowerMode:
    """The mode a follower's error puts its cluster in (pure)."""
    if "AUTHORIZATION" in error.upper() or "not authorized" in error.lower():
        return FollowerMode.NOT_AUTHORIZED
    return FollowerMode.UNREADABLE


@dataclass
class _Cluster:
    name: str
    calls: IsolatedCalls
    state: FollowedOffsets
    mode: FollowerMode = FollowerMode.STARTING
    reason: str = "the follower has not read its first batch yet"
    follower_id: str | None = None
    generation: int = 0  # new each time the follower (re)started: commits in between may be missed
    positions: Mapping[int, int] | None = None
    partitions: int = 0
    lag_s: float = 0.0


class CommitLogFeed:
    """The followers of ``confs``' clusters (see the module's docstring). ``keep(group)``: the run's
    group filter; ``lagging_after_s``: a follower whose full batches carry commits older than this
    is ``commit_log_lagging``."""

    def __init__(self, confs: Mapping[str, Callable[[], dict[str, Any]]], keep: Callable[[str], bool], *,
                 kafka_timeout_s: float = 10.0, poll_s: float = 0.5, max_records: int = 20_000,
                 lagging_after_s: float = 10.0):
        self._confs = dict(confs)
        self._keep = keep
        self._kafka_timeout_s = kafka_timeout_s
        self._poll_s = poll_s
        self._max_records = max_records
        self._lagging_after_s = lagging_after_s
        self._lock = threading.Lock()
        self._arrived = threading.Event()
        self._stop = threading.Event()
        self._clusters = {name: _Cluster(name, IsolatedCalls(f"{name} commit log"), FollowedOffsets())
                          for name in self._confs}
        self.counts: dict[str, Counter] = {name: Counter() for name in self._confs}  # records by kind
        self._threads = [threading.Thread(target=self._follow, args=(c,), name=f"commit-log-{c.name}", daemon=True)
                         for c in self._clusters.values()]

    def start(self) -> CommitLogFeed:
        for thread in self._threads:
            thread.start()
        return self

    # -- the threads ----------------------------------------------------------------------------

    def _follow(self, cluster: _Cluster) -> None:
        while not self._stop.is_set():
            try:
                batch: FollowedBatch = cluster.calls.call(
                    follow, cluster.name, self._confs[cluster.name](), self._max_records, self._poll_s,
                    self._kafka_timeout_s, timeout_s=self._poll_s + 2 * self._kafka_timeout_s + CHILD_START_S)
            except Exception as exc:  # noqa: BLE001 - the child is gone: a new one, a new follower
                self._fail(cluster, FollowerMode.UNREADABLE, f"{cluster.name} commit-log follower failed: "
                                                             f"{type(exc).__name__}: {exc}")
                cluster.calls.discard("the follower failed")
                self._stop.wait(RETRY_S)
                continue
            self._take(cluster, batch)
            if batch.error and not batch.positions:  # not started (no right, no log yet): try again later
                self._stop.wait(RETRY_S)

    def _fail(self, cluster: _Cluster, mode: FollowerMode, reason: str) -> None:
        with self._lock:
            cluster.mode, cluster.reason = mode, reason
            cluster.follower_id = None

    def _take(self, cluster: _Cluster, batch: FollowedBatch) -> None:
        now_ms = time.time() * 1000
        with self._lock:
            self.counts[cluster.name].update(batch.counts)
            if batch.follower_id != cluster.follower_id:
                # a follower (re)started: what was committed before it began is known only to a listing
                cluster.follower_id = batch.follower_id
                cluster.generation += 1
            cluster.state.apply(batch.commits, keep=self._keep)
            cluster.state.touch(batch.group_records, keep=self._keep)
            if batch.positions:
                cluster.positions, cluster.partitions = dict(batch.positions), batch.partitions
            times = [c.commit_time_ms for c in batch.commits if c.commit_time_ms is not None]
            full = len(batch.commits) >= self._max_records
            cluster.lag_s = max(0.0, (now_ms - max(times)) / 1000) if times and full else 0.0
            if batch.error:
                cluster.mode, cluster.reason = mode_of_error(batch.error), batch.error
            elif cluster.lag_s > self._lagging_after_s:
                cluster.mode = FollowerMode.LAGGING
                cluster.reason = f"{cluster.name}'s follower reads commits {cluster.lag_s:.1f}s old"
            else:
                cluster.mode, cluster.reason = FollowerMode.FOLLOWING, ""
            if cluster.state.has_changes():  # the run's own commits coming back are no news
                self._arrived.set()

    # -- what the run asks ----------------------------------------------------------------------

    def wait(self, timeout_s: float) -> bool:
        """Until a commit arrived (True) or ``timeout_s`` passed; the arrival is then taken."""
        arrived = self._arrived.wait(timeout_s)
        self._arrived.clear()
        return arrived

    def mode(self) -> dict[str, tuple[FollowerMode, str, int]]:
        """Each cluster's mode, its reason ('' when following) and its follower's generation."""
        with self._lock:
            return {c.name: (c.mode, c.reason, c.generation) for c in self._clusters.values()}

    def take_changed(self) -> dict[str, set[str]]:
        with self._lock:
            return {c.name: c.state.take_changed() for c in self._clusters.values()}

    def take_news(self) -> dict[str, News]:
        """Each cluster's :meth:`FollowedOffsets.take_news`, all at one moment."""
        with self._lock:
            return {c.name: c.state.take_news() for c in self._clusters.values()}

    def expect(self, cluster: str, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """The run is about to commit ``offsets`` for ``group`` on ``cluster``: their echoes wake no
        cycle and are handed to :meth:`take_echoed` (``FollowedOffsets.expect``)."""
        with self._lock:
            c = self._clusters.get(cluster)
            if c is not None:
                c.state.expect(group, offsets)

    def take_echoed(self) -> dict[str, dict[str, dict[tuple[str, int], int]]]:
        """cluster -> group -> (topic, partition) -> offset: the run's own commits seen since the last call."""
        with self._lock:
            return {c.name: c.state.take_echoed() for c in self._clusters.values()}

    def sequence(self) -> dict[str, int]:
        with self._lock:
            return {c.name: c.state.sequence for c in self._clusters.values()}

    def ends(self, cluster: str) -> dict[int, int] | None:
        """``cluster``'s commit-log ends now (None when its follower cannot say)."""
        try:
            return self._clusters[cluster].calls.call(followed_ends, cluster,
                                                      timeout_s=self._kafka_timeout_s + CHILD_START_S)
        except Exception:  # noqa: BLE001 - no comparison this time; the next listing tries again
            return None

    def reached(self, cluster: str, ends: Mapping[int, int]) -> Callable[[str], bool]:
        """Whether ``cluster``'s follower has read a group's log partition up to ``ends``."""
        with self._lock:
            c = self._clusters[cluster]
            positions, partitions = dict(c.positions or {}), c.partitions
        done = {p for p, end in ends.items() if positions.get(p, -1) >= end}
        if not partitions:
            return lambda group: False
        return lambda group: commit_log_partition(group, partitions) in done

    def seed(self, cluster: str, listing: Listing, since: int) -> None:
        with self._lock:
            self._clusters[cluster].state.seed(listing, since)

    def reconcile(self, cluster: str, listing: Listing, since: int, reached: Callable[[str], bool]) -> Reconciliation:
        with self._lock:
            return self._clusters[cluster].state.reconcile(listing, since, reached)

    def close(self) -> None:
        self._stop.set()
        self._arrived.set()
        for thread in self._threads:
            thread.join(self._poll_s + 2 * self._kafka_timeout_s + CHILD_START_S)
        for c in self._clusters.values():
            try:
                c.calls.call(stop_following, c.name, timeout_s=5)
            except Exception:  # noqa: BLE001 - the child goes anyway
                pass
            c.calls.close()
