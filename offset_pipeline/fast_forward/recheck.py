"""The fast-forward job's re-check (docs/operating/fast-forward.md). Pure: what the sensor requested and
what was read live from Kafka in, a named verdict and the caught-up facts out.

The sensor's view may be old. Before anything is committed, every condition is checked again
against the live reads (``fast_forward/live_reads.py``):

* **quiet**: both log ends are still the ones the sensor saw, which its snapshots showed unmoved
  since ``stable_since_ms``; logs only grow, so nothing was written since, and the quiet time is
  ``now - stable_since_ms`` (at least the window). The log ends are read before and after every
  other live read, and must not differ: that, not the window, is what makes the reads one
  consistent state (the window keeps fast-forwards off partitions that still see traffic);
* **no lag**: ``c`` is the active log end, or only markers lie between them (read);
* **both mirrors caught up**: each position is at its source's log end, or only markers lie
  between them (read). The standby -> active mirror makes the fast-forward loss-free, the other
  one makes it duplicate-free; both are required, as the sensor requires them. A position behind
  is ``mirror_stopped``: it is checked after the quiet, so the records beyond it have waited at
  least the window on a log whose end did not move, uncopied -- a running mirror never lets that
  happen (``stale_candidates``' docstring works the stopped-mirror cases through against
  NO-LOSS). A stopped mirror whose position is at its source's end blocks nothing: every record
  of the standby below ``t`` is on the active cluster then, and later ones are at or after ``t``.

A standby offset already at the standby log end is not rejected here: the commit rules answer
``unchanged``, and that still proves the point the sync cycle keeps. A passing re-check gives the
facts for :func:`~offset_pipeline.translation.translate_caught_up` and the safe bound, which decide
the offset; the commit rules (docs/concepts/no-loss.md, the commit guard) decide whether it is written.

Invariants (tests/fast_forward/test_recheck.py): a passing re-check's facts always satisfy the
caught-up rule; a moved log end, lag beyond markers or a mirror behind (``mirror_stopped``) is
rejected by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from offset_pipeline.fast_forward.stale_candidates import Rejection, mirror_stopped_detail
from offset_pipeline.translation import CaughtUpFacts, PartitionFacts, TopicShape


@dataclass(frozen=True)
class RequestedPartition:
    """One partition of a fast-forward request: what the sensor saw."""

    topic: str
    partition: int
    active_end: int
    standby_end: int
    stable_since_ms: int


@dataclass(frozen=True)
class LivePartition:
    """What the job read from Kafka for one partition (``fast_forward/live_reads.py``)."""

    topic: str
    partition: int
    committed: int | None  # the group's c on the active cluster
    active_log_start: int
    active_log_end: int
    standby_log_start: int
    standby_log_end: int
    standby_mirror_position: int | None  # standby -> active mirror, on the standby
    active_mirror_position: int | None  # active -> standby mirror, on the active
    no_record_from_committed: bool = False  # [c, active end) read: markers only
    no_record_from_standby_mirror_position: bool = False
    no_record_from_active_mirror_position: bool = False
    # The log ends read again after every other read (None: not read again). Equal ends bracket
    # the reads: nothing was written meanwhile, so they describe one state of both logs.
    active_log_end_after: int | None = None
    standby_log_end_after: int | None = None


@dataclass(frozen=True)
class Recheck:
    rejection: Rejection | None
    detail: str
    facts: PartitionFacts | None  # the caught-up facts when the re-check passed
    stable_for_s: float | None

    @property
    def passed(self) -> bool:
        return self.rejection is None


def recheck(group_id: str, active: str, standby: str, requested: RequestedPartition, live: LivePartition,
            now_ms: int, *, window_s: float) -> Recheck:
    """The live verdict for one requested partition (module docstring)."""
    stable_s = (now_ms - requested.stable_since_ms) / 1000.0

    def reject(reason: Rejection, detail: str) -> Recheck:
        return Recheck(reason, detail, None, stable_s)

    moved = [
        f"{cluster} {seen} -> {now}"
        for cluster, seen, now in ((active, requested.active_end, live.active_log_end),
                                   (standby, requested.standby_end, live.standby_log_end))
        if seen != now
    ]
    if moved:
        return reject(Rejection.RECEIVING_DATA, "log end moved since the sensor looked: " + ", ".join(moved))
    during = [
        f"{cluster} {before} -> {after}"
        for cluster, before, after in ((active, live.active_log_end, live.active_log_end_after),
                                       (standby, live.standby_log_end, live.standby_log_end_after))
        if after is None or after != before
    ]
    if during:
        return reject(Rejection.RECEIVING_DATA, "log end moved (or was not read again) while the job read: "
                      + ", ".join(during))
    if stable_s < window_s:
        return reject(Rejection.RECEIVING_DATA, f"quiet for {stable_s:.0f}s only, less than the {window_s:.0f}s window")
    c = live.committed
    if c is None:
        return reject(Rejection.NO_COMMIT, f"the group has no committed offset on {active}")
    if c > live.active_log_end or (c < live.active_log_end and not live.no_record_from_committed):
        return reject(Rejection.GROUP_LAG, f"lag {live.active_log_end - c} on {active} (c={c}, log end "
                                           f"{live.active_log_end}), not only transaction markers")
    for source, position, end, clear in (
        (standby, live.standby_mirror_position, live.standby_log_end, live.no_record_from_standby_mirror_position),
        (active, live.active_mirror_position, live.active_log_end, live.no_record_from_active_mirror_position),
    ):
        target = active if source == standby else standby
        if position is None:
            return reject(Rejection.MIRROR_UNKNOWN, f"the {source}->{target} mirror has no known position")
        if position < end and not clear:
            # quiet for stable_s >= the window (checked above): not copying, not merely behind
            return reject(Rejection.MIRROR_STOPPED, mirror_stopped_detail(source, target, position, end, stable_s))
    facts = PartitionFacts(
        group_id=group_id, topic=live.topic, partition=live.partition, active=active, standby=standby, committed=c,
        active_log_start=live.active_log_start, active_log_end=live.active_log_end,
        standby_log_start=live.standby_log_start, standby_log_end=live.standby_log_end, shape=TopicShape.unknown(),
        caught_up=CaughtUpFacts(
            logs_stable_for_s=stable_s, standby_to_active_mirror_position=live.standby_mirror_position,
            active_to_standby_mirror_position=live.active_mirror_position, window_s=window_s,
            no_record_from_committed=live.no_record_from_committed,
            no_record_from_standby_mirror_position=live.no_record_from_standby_mirror_position,
            no_record_from_active_mirror_position=live.no_record_from_active_mirror_position,
        ),
    )
    return Recheck(None, f"quiet {stable_s:.0f}s, lag {live.active_log_end - c}, both mirrors caught up", facts,
                   stable_s)
