"""Which group-partitions are stale low-traffic fast-forward candidates (docs/operating/fast-forward.md).

Pure: the stale-partition sensor reads the snapshot history from ClickHouse and the mirrors'
positions, and this module decides. A group-partition (translated from its active cluster A to its
standby B) is a candidate when

1. the group has a committed offset on A, and its standby offset is behind B's log end (else there
   is nothing to fast-forward);
2. its lag on A is 0 -- or at most ``marker_slack`` offsets, which a transactional topic's trailing
   commit marker leaves (the fast-forward job reads ``[c, end)`` and proceeds only when it holds no
   record);
3. neither log end moved for ``window_s``, judged from snapshots that cover the whole window (from
   the oldest snapshot showing today's log ends to the newest one, which must be recent);
4. both mirrors have caught up: the B->A mirror's position on B is at B's log end (so every record of
   B is on A too, below ``c``), and the A->B mirror's position on A at A's log end (so no processed
   record of A is still to arrive on B: zero duplicates) -- each within ``marker_slack`` too: a
   mirror that writes its copies in transactions leaves a commit marker after its last copy, and
   a mirror never reads a marker (the job reads the gap and proceeds only when it holds no record).

**A stopped mirror** (a fault an unattended stack must survive). Condition 4 reads each mirror's
committed positions, never whether the mirror runs. For the B->A mirror with the group G active on A,
at its log end (``c`` = A's log end), and ``t`` = B's log end, NO-LOSS needs every record of B below
B's log end to have its copy on A (every copy on A is below ``c``). A-origin records of B are copies
of A's records. A B-origin record below the B->A position has its copy on A: the devstack mirror
commits a position in the same transaction as the copies below it, and an at-least-once mirror
(MirrorMaker 2) after they are acknowledged -- a positions group must never run ahead of the copies.
So the proof rests on the position as a fact about the past, and these are the cases of a stopped B->A
mirror:

* **stopped while B keeps receiving records**: these are the unsafe ones. A is quiet, G is at A's
  end, and ``t`` = B's end would put records below ``t`` that G never saw: loss. B's log end moves,
  so ``receiving_data``; once B is quiet for the window, the position stays below B's log end:
  ``mirror_stopped`` (next case). Rejected both ways, never fast-forwarded.
* **stopped before copying records that B got earlier, nothing new since**: the position stays below
  an end that has not moved for the window. Such records have waited the whole window uncopied, which
  a running mirror never lets happen: ``mirror_stopped`` (not copying this partition: stopped, stuck,
  or not mirroring the topic) for as long as that lasts -- formerly ``mirror_behind`` forever:
  safe, but named for the symptom.
* **stopped, with both logs quiet and the position at B's log end**: A is quiet *because* the mirror
  is down, and the position equals B's end only because B is quiet too. The fast-forward is then
  still NO-LOSS: every record of B below ``t`` is on A (the position says so), below ``c``; records B
  gets later are at or after ``t`` and a failover reads them. What a stopped mirror cuts off is the
  future, and ``t`` never covers the future. It is only unprovable that the mirror runs, and nothing
  needs that: a running, idle devstack mirror leaves no trace either (it commits only when it copies,
  and its positions group has no members: it assigns its partitions itself and commits through the
  producer's transactions -- tests/fast_forward/test_stale_fast_forward.py checks that; MirrorMaker 2's source
  tasks assign their partitions too and keep their positions in Connect's offsets topic).
  Requiring proof of life would stop every fast-forward on a quiet mirror, i.e. the feature. So a
  caught-up stopped mirror is allowed, and tests/fast_forward/test_stale_fast_forward.py fails over after such
  a fast-forward.

The same holds for the A->B mirror (its position makes the fast-forward duplicate-free). A
position behind its source's end is therefore never ``mirror_behind`` any more: the mirror check
comes after the window, so the records beyond the position have waited at least the window, and the
verdict is ``mirror_stopped`` (``mirror_behind`` stays in the enum for rows written before).

Every other group-partition gets a named rejection with a detail. The sensor's view may be old: the
job re-checks every condition against live Kafka (``translation/caught_up.py``) before committing.

Invariants (tests/fast_forward/test_stale_candidates.py): a candidate satisfies all four conditions; a log end
that moved inside the window, a lag or a mirror position more than the slack behind a log end is
never a candidate (the last is ``mirror_stopped``); the run key is the same for the same
group-partition and log ends, and differs when a log end moves.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


MAX_SNAPSHOT_AGE_S = 300.0  # an older newest snapshot says nothing about now (the cycle stopped)


class Rejection(str, Enum):
    NO_COMMIT = "no_committed_offset"
    AT_STANDBY_END = "standby_already_at_log_end"
    GROUP_LAG = "group_has_lag"
    RECEIVING_DATA = "receiving_data"
    SHORT_HISTORY = "history_shorter_than_window"
    MIRROR_UNKNOWN = "mirror_position_unknown"
    MIRROR_BEHIND = "mirror_behind"  # no longer given: a position behind a quiet end is MIRROR_STOPPED
    MIRROR_STOPPED = "mirror_stopped"  # records waited the whole window on a source, not copied
    SNAPSHOT_TOO_OLD = "snapshot_too_old"  # the sync cycle stopped: the history says nothing of now


@dataclass(frozen=True)
class LogEnds:
    time_ms: int
    active_end: int
    standby_end: int


@dataclass(frozen=True)
class PartitionHistory:
    group_id: str
    topic: str
    partition: int
    active: str
    standby: str
    committed: int | None  # c on A (newest snapshot)
    standby_committed: int | None  # on B
    points: tuple[LogEnds, ...]  # snapshots of both log ends, any order; the newest is "now"
    active_mirror_position: int | None = None  # the A->B mirror's position on A
    standby_mirror_position: int | None = None  # the B->A mirror's position on B


def partition_histories(directions: Iterable[tuple], log_ends: Iterable[tuple]) -> list[PartitionHistory]:
    """The histories of the stored rows (``storage/stale_history.read_stale_history``): per decided
    group-partition, its newest offsets and the log ends of both its clusters at every snapshot
    that read both (mirror positions left for the caller to fill in). Undecided rows (no active or
    standby: a split brain, ...) are left out: never fast-forwarded."""
    ends: dict[tuple[str, int], dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for cluster, topic, partition, ms, end in log_ends:
        ends[(topic, int(partition))][int(ms)][cluster] = int(end)
    out = []
    for group, topic, partition, active, standby, c, g in directions:
        if not active or not standby:
            continue
        by_time = ends.get((topic, int(partition)), {})
        points = tuple(
            LogEnds(ms, sides[active], sides[standby])
            for ms, sides in sorted(by_time.items())
            if active in sides and standby in sides
        )
        out.append(PartitionHistory(group, topic, int(partition), active, standby, c, g, points))
    return out


@dataclass(frozen=True)
class StaleVerdict:
    history: PartitionHistory
    rejection: Rejection | None
    detail: str
    stable_for_s: float | None
    stable_since_ms: int | None = None  # since when both log ends are unmoved (known once the lag passed)

    @property
    def candidate(self) -> bool:
        return self.rejection is None

    def quiet_by(self, now_ms: int, window_s: float) -> bool:
        """Everything but the mirrors passed, or only the window failed, and the quiet that began at
        ``stable_since_ms`` reaches the window by ``now_ms`` if the log ends are still unmoved: a
        live read of the ends (and of the mirrors) can decide it now, without waiting for a snapshot."""
        if self.rejection not in (Rejection.MIRROR_UNKNOWN, Rejection.RECEIVING_DATA, Rejection.SHORT_HISTORY):
            return False
        return self.stable_since_ms is not None and now_ms - self.stable_since_ms >= window_s * 1000

    def run_key(self) -> str:
        """Deterministic per group-partition and log ends: a new request only when a log end moved."""
        h, newest = self.history, max(self.history.points, key=lambda p: p.time_ms)
        ident = json.dumps([h.group_id, h.topic, h.partition, h.active, h.standby, newest.active_end,
                            newest.standby_end], ensure_ascii=False)
        return f"fast-forward-{hashlib.sha256(ident.encode()).hexdigest()[:24]}"


def classify(history: PartitionHistory, now_ms: int, *, window_s: float = 600.0, marker_slack: int = 1) -> StaleVerdict:
    h = history

    since: list[int] = []  # set once known

    def reject(reason: Rejection, detail: str, stable: float | None = None) -> StaleVerdict:
        return StaleVerdict(h, reason, detail, stable, since[0] if since else None)

    if not h.points:
        return reject(Rejection.SHORT_HISTORY, "no snapshot of this partition")
    points = sorted(h.points, key=lambda p: p.time_ms)
    newest = points[-1]
    if h.committed is None:
        return reject(Rejection.NO_COMMIT, f"the group has no committed offset on {h.active}")
    if h.standby_committed is not None and h.standby_committed >= newest.standby_end:
        return reject(Rejection.AT_STANDBY_END,
                      f"{h.standby} offset {h.standby_committed} is at its log end {newest.standby_end}")
    lag = newest.active_end - h.committed
    if lag > marker_slack or lag < 0:
        return reject(Rejection.GROUP_LAG, f"lag {lag} on {h.active} (c={h.committed}, log end {newest.active_end})")
    # Stable since the oldest snapshot of the unbroken run of snapshots showing today's log ends (a
    # change between two snapshots is taken to have happened as late as possible: conservative), up
    # to the newest snapshot: what the snapshots show, never assumed beyond them (the job re-reads
    # the log ends live; unchanged ends then prove the quiet lasted until it looked).
    now_ends = (newest.active_end, newest.standby_end)
    moved = next((i for i in range(len(points) - 1, -1, -1) if (points[i].active_end, points[i].standby_end) != now_ends), None)
    stable_since = points[0].time_ms if moved is None else points[moved + 1].time_ms
    stable_s = (newest.time_ms - stable_since) / 1000.0
    age_s = (now_ms - newest.time_ms) / 1000.0
    if age_s > max(window_s, MAX_SNAPSHOT_AGE_S):
        return reject(Rejection.SNAPSHOT_TOO_OLD, f"the newest snapshot is {age_s:.0f}s old: is the sync cycle running?")
    since.append(stable_since)
    if moved is not None and stable_s < window_s:
        return reject(Rejection.RECEIVING_DATA, f"log ends moved {stable_s:.0f}s ago (window {window_s:.0f}s)", stable_s)
    if moved is None and stable_s < window_s:
        return reject(Rejection.SHORT_HISTORY,
                      f"snapshots cover {stable_s:.0f}s, less than the {window_s:.0f}s window", stable_s)
    for cluster, target, position, end in ((h.standby, h.active, h.standby_mirror_position, newest.standby_end),
                                           (h.active, h.standby, h.active_mirror_position, newest.active_end)):
        if position is None:
            return reject(Rejection.MIRROR_UNKNOWN, f"the {cluster}->{target} mirror has no known position", stable_s)
        if end - position > marker_slack:
            # The end has not moved for stable_s >= the window: what lies beyond the position waited
            # that long uncopied, which a running mirror never lets happen (module docstring).
            return reject(Rejection.MIRROR_STOPPED, mirror_stopped_detail(cluster, target, position, end, stable_s),
                          stable_s)
    return StaleVerdict(h, None, f"stable {stable_s:.0f}s, lag {lag}, mirrors caught up: fast-forward {h.standby} "
                                 f"to {newest.standby_end}", stable_s, stable_since)


def mirror_stopped_detail(source: str, target: str, position: int, end: int, quiet_s: float) -> str:
    """The ``mirror_stopped`` detail, one wording for the sensor and the job."""
    return (f"the {source}->{target} mirror is at {position}, {end - position} behind {source}'s log end {end}, "
            f"which has not moved for {quiet_s:.0f}s: the mirror is not copying (stopped, stuck, or not mirroring "
            f"this topic)")


def skip_reason(verdicts: Iterable[StaleVerdict]) -> str:
    """What the sensor says when nothing qualifies: how many were rejected, and why."""
    verdicts = list(verdicts)
    if not verdicts:
        return "no group-partition in the snapshot history"
    counts = Counter(v.rejection.value for v in verdicts if v.rejection is not None)
    return f"no stale partition among {len(verdicts)}: " + ", ".join(f"{n} {r}" for r, n in counts.most_common())
