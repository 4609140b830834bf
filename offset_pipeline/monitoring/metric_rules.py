"""Per-cycle sync metrics and statuses of every group-partition (docs/operating/monitoring.md). Pure: facts in,
rows out; no Kafka, ClickHouse or Dagster.

For a group-partition translated from its active cluster A to its standby B, with ``f`` the
group's committed offset on A and ``g`` its committed offset on B after this cycle's commit step:

* ``d = f - g``: the article's ``D(t) = f(t) - g(t) - C`` without the constant ``C`` (the offset
  difference between the clusters), which cancels in ``dd``;
* ``dd = d - d_previous``: the change since the previous cycle's row of the same group-partition
  and direction (NULL for the first). When sync works, ``d`` saws up between cycles and drops back
  at each sync, so ``dd`` alternates around 0 and its sum over 10 minutes converges to 0; when sync
  stops it grows with the group's progress;
* ``sync_age_s``: seconds since the partition was last synced (its standby offset written or
  already there), NULL if never;
* ``active_lag`` / ``standby_lag``: records left to read after ``f`` on A and after ``g`` on B; the
  offset gap between the clusters is their difference (what a switchover now would read again).

The status of a group-partition, the first that applies (``STATUS_ORDER``):

* ``SplitBrain``: members on both clusters (no commit);
* ``Broken``: an error status (bad headers, inconsistent facts, a cluster unavailable, a topic
  missing or partition counts differing on the standby, a shape conflict) or a failed or refused
  commit;
* ``Stale``: the group sits at its active log end, its standby offset below the standby's log end,
  and no exact translation: a low-traffic fast-forward candidate (for the stale-partition sensor);
* ``Lagging``: not synced for ``lagging_after_s`` (default 4 cycles of 30 s), or never, or the data
  mirror into the standby looks stopped (``mirror_stalled``: Mirroring means mirror and sync run);
* ``InSync``: synced to an exact translation (the record at ``c`` and the standby record at ``g``
  are copies of one another, read from their headers this cycle; or both at their log ends): a
  switchover now duplicates nothing;
* ``Mirroring``: synced, loss-free, duplicates possible.

Invariants (tests/monitoring/test_metric_rules.py): one row per input row; ``dd`` is NULL exactly when there is
no previous ``d`` of the same direction; ``InSync`` only with an exact status and ``g`` equal to the
translated offset; a SplitBrain or Broken input never reads as InSync or Mirroring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from offset_pipeline.translation import TranslationStatus

SPLIT_BRAIN, BROKEN, LAGGING, STALE, IN_SYNC, MIRRORING = (
    "SplitBrain", "Broken", "Lagging", "Stale", "InSync", "Mirroring",
)
#: Worst first: a group or topic shows the first status any of its partitions has.
STATUS_ORDER = (SPLIT_BRAIN, BROKEN, STALE, LAGGING, MIRRORING, IN_SYNC)

_ERROR_STATUSES = frozenset({
    TranslationStatus.MALFORMED_HEADER, TranslationStatus.THIRD_CLUSTER_HEADER,
    TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END, TranslationStatus.INCONSISTENT_FACTS,
    TranslationStatus.CLUSTER_UNAVAILABLE, TranslationStatus.SPARK_UNAVAILABLE, TranslationStatus.TOPIC_MISSING_ON_STANDBY,
    TranslationStatus.PARTITION_COUNT_MISMATCH, TranslationStatus.SHAPE_CONFLICT,
    TranslationStatus.COMMITTED_BEYOND_LOG_END, TranslationStatus.NOT_AUTHORIZED,
    # MirrorMaker 2's offset syncs: a topic that cannot be read, or a topic mirrored under another
    # name, stays so until someone acts (no_offset_sync and offset_sync_unconfirmed clear by themselves)
    TranslationStatus.OFFSET_SYNCS_UNREADABLE, TranslationStatus.REMOTE_TOPIC_RENAMED,
})
_FAILED_DECISIONS = frozenset({"failed", "refused_no_loss_check", "not_authorized"})
_SYNCED_DECISIONS = frozenset({"commit", "rewind_after_reset", "unchanged"})

Key = tuple[str, str, int, str, str]  # group, topic, partition, active, standby


@dataclass(frozen=True)
class CycleFacts:
    """What one cycle knows of one group-partition (from its translation and commit rows)."""

    group_id: str
    topic: str
    partition: int
    active: str  # "" when the direction was not decided
    standby: str
    committed: int | None  # f
    standby_offset: int | None  # the translation's t
    status: str  # translation status
    strategy: str
    decision: str | None  # commit decision ("" / None: no commit row)
    applied: bool
    committed_after: int | None  # g
    active_log_end: int | None = None
    standby_log_end: int | None = None
    timestamp_inversion: bool = False
    # The data mirror into the standby looks stopped: over the last minutes the active log grew and
    # the standby log did not (a heuristic: exact for one-way topics; on a two-way topic the
    # standby's own producers can hide a stopped mirror).
    mirror_stalled: bool = False

    @property
    def key(self) -> Key:
        return (self.group_id, self.topic, self.partition, self.active, self.standby)

    @property
    def synced(self) -> bool:
        """This cycle left the standby at the translated offset."""
        if self.decision not in _SYNCED_DECISIONS or self.standby_offset is None:
            return False
        if self.decision != "unchanged" and not self.applied:
            return False
        return self.committed_after == self.standby_offset


@dataclass(frozen=True)
class MetricRow:
    cycle_time_ms: int
    group_id: str
    topic: str
    partition: int
    active: str
    standby: str
    f: int | None
    g: int | None
    d: int | None
    dd: int | None
    synced: bool
    last_synced_ms: int | None
    sync_age_s: float | None
    translated: bool
    exact: bool
    header_hit: bool  # the header strategy translated this cycle
    status: str  # the translation status
    strategy: str
    sync_status: str  # STATUS_ORDER
    timestamp_inversion: bool = False
    active_lag: int | None = None  # active log end - f: records the group has left on A
    standby_lag: int | None = None  # standby log end - g: records it would read on B after a switch
    mirror_stalled: bool = False


def metric_rows(
    cycle_time_ms: int,
    facts: Iterable[CycleFacts],
    previous_d: Mapping[Key, int],
    last_synced_ms: Mapping[Key, int],
    *,
    lagging_after_s: float = 120.0,
) -> list[MetricRow]:
    """One :class:`MetricRow` per fact. ``previous_d``/``last_synced_ms``: per key, the newest ``d``
    and the newest synced cycle time of earlier cycles."""
    rows = []
    for fact in facts:
        d = fact.committed - fact.committed_after if fact.committed is not None and fact.committed_after is not None else None
        previous = previous_d.get(fact.key)
        dd = d - previous if d is not None and previous is not None else None
        synced_ms = cycle_time_ms if fact.synced else last_synced_ms.get(fact.key)
        age = (cycle_time_ms - synced_ms) / 1000.0 if synced_ms is not None else None
        status = _status_of(fact.status)
        rows.append(MetricRow(
            cycle_time_ms, fact.group_id, fact.topic, fact.partition, fact.active, fact.standby,
            fact.committed, fact.committed_after, d, dd, fact.synced, synced_ms, age,
            translated=status is not None and status.translated,
            exact=status is not None and status.exact,
            header_hit=fact.strategy == "header_anchor" and status is not None and status.translated,
            status=fact.status, strategy=fact.strategy,
            sync_status=sync_status(fact, age, lagging_after_s),
            timestamp_inversion=fact.timestamp_inversion,
            active_lag=_minus(fact.active_log_end, fact.committed),
            standby_lag=_minus(fact.standby_log_end, fact.committed_after),
            mirror_stalled=fact.mirror_stalled,
        ))
    return rows


def _minus(a: int | None, b: int | None) -> int | None:
    return a - b if a is not None and b is not None else None


def _status_of(value: str) -> TranslationStatus | None:
    try:
        return TranslationStatus(value)
    except ValueError:
        return None


def sync_status(fact: CycleFacts, sync_age_s: float | None, lagging_after_s: float) -> str:
    """The status of one group-partition this cycle (module docstring)."""
    status = _status_of(fact.status)
    if status is TranslationStatus.SPLIT_BRAIN or fact.decision == "split_brain":
        return SPLIT_BRAIN
    if status is None or status in _ERROR_STATUSES or fact.decision in _FAILED_DECISIONS:
        return BROKEN
    in_sync = fact.synced and status.exact
    at_active_end = fact.committed is not None and fact.committed == fact.active_log_end
    behind_on_standby = fact.standby_log_end is not None and (
        fact.committed_after is None or fact.committed_after < fact.standby_log_end
    )
    if at_active_end and behind_on_standby and not in_sync:
        return STALE
    if sync_age_s is None or sync_age_s > lagging_after_s or fact.mirror_stalled:
        return LAGGING
    if in_sync:
        return IN_SYNC
    return MIRRORING


def worst(statuses: Iterable[str]) -> str | None:
    """The first of ``statuses`` in :data:`STATUS_ORDER` (None for none)."""
    present = set(statuses)
    return next((s for s in STATUS_ORDER if s in present), None)


def worst_first(table: list[dict], limit: int) -> list[dict]:
    """The ``limit`` worst rows of a per-group-topic status table (``status``, ``max_sync_age_s``,
    ``group``, ``topic``): by :data:`STATUS_ORDER`, then the oldest sync, then by name. The metrics
    asset shows these in its metadata; every row is in ``offset_sync_metrics`` (Grafana)."""
    def key(row: dict):
        rank = STATUS_ORDER.index(row["status"]) if row["status"] in STATUS_ORDER else len(STATUS_ORDER)
        age = row["max_sync_age_s"]
        return rank, -(age if age is not None else float("inf")), row["group"], row["topic"]

    return sorted(table, key=key)[:limit]
