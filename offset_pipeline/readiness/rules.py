"""Is it safe to switch a consumer group to its standby now, and what would it cost? (pure)

The answer per group and direction comes from each of its partitions' newest facts: the
translation (status, standby offset ``t`` for the active offset it translated), the commit that
followed (is the standby group at ``t``?), and the group's active offset now. No Kafka, Spark,
Dagster or ClickHouse here: the continuous run and the interval cycle feed it their rows, the CLI
its own live reads.

A partition is **ready** when switching now loses nothing there (NO-LOSS, docs/concepts/no-loss.md): the standby group
holds a committed offset that the sync wrote from a translation proven loss-free, the group is not
running on the standby already, both clusters were read, and the last sync is no older than
``max_age_s``. Its cost is the **expected duplicates**: the records the group would read again,
known exactly for an exact translation (0) and for a group that moved since the translation
(those records), bounded for a header anchor (the records between the anchor and the committed
offset), unknown for an unrefined timestamp search.

Invariants (tests/readiness/test_rules.py):

* a group is safe to switch only when every one of its partitions is ready;
* every partition that is not ready has exactly one reason, decided in this order: a cluster's facts
  not read, no translation (the reason its status names), the group already on the standby, no
  standby offset, a commit that did not end synced, a stale sync; the group counts every reason;
* a partition without a committed standby offset is never ready: the group would start there from
  ``auto.offset.reset``, which may skip records;
* an untranslated status, a commit that did not end synced, a split brain or an unread cluster is
  never ready, whatever the standby offset is;
* the expected duplicates of a group are known only when every partition's are (else ``None``, and
  ``duplicates_at_most`` bounds them when every partition has a bound);
* a known figure is its own bound (``duplicates_at_most == expected_duplicates``), and a bound of 0
  is exact: nothing is read twice (a header anchor right below the committed offset).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from offset_pipeline.kafka_io.authorization import refusal
from offset_pipeline.translation import TranslationStatus


class NotReady(str, Enum):
    """Why a partition cannot be switched now. Values are stored in ClickHouse: stable names."""

    CLUSTER_UNAVAILABLE = "cluster_unavailable"  # a cluster's facts were not read
    NOT_AUTHORIZED = "not_authorized"  # the broker refused a read or the commit: an ACL is missing
    SPLIT_BRAIN = "split_brain"  # members on both clusters
    ALREADY_ON_STANDBY = "already_on_standby"  # the group has members on the standby (refused_members)
    DIRECTION_UNDETERMINED = "direction_undetermined"  # no members, no movement, no previous direction
    NO_STANDBY_OFFSET = "no_standby_offset"  # nothing committed on the standby for this partition
    MIRROR_LAG = "mirror_lag"  # the record at the group's offset is not on the standby yet
    NO_ANCHOR = "no_anchor"  # nothing safe found to translate from yet
    NOT_TRANSLATED = "not_translated"  # another untranslated status (named in the detail)
    COMMIT_NOT_SYNCED = "commit_not_synced"  # the translation was not written (failed, dry run, refused)
    STALE_SYNC = "stale_sync"  # the last sync is older than max_age_s

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


#: The order a group's reasons are listed in.
REASON_ORDER = tuple(NotReady)

_UNTRANSLATED_REASONS = {
    "cluster_unavailable": NotReady.CLUSTER_UNAVAILABLE, "spark_unavailable": NotReady.NOT_TRANSLATED,
    "not_authorized": NotReady.NOT_AUTHORIZED,
    "split_brain": NotReady.SPLIT_BRAIN, "direction_undetermined": NotReady.DIRECTION_UNDETERMINED,
    "not_yet_mirrored": NotReady.MIRROR_LAG, "copy_missing_on_standby": NotReady.MIRROR_LAG,
    "no_anchor": NotReady.NO_ANCHOR,
    # MirrorMaker 2's pairs: none at or below c yet, or none confirmed yet (both clear as the group moves on)
    "no_offset_sync": NotReady.NO_ANCHOR, "offset_sync_unconfirmed": NotReady.NO_ANCHOR,
}
# The translation's own sets (translation/result.py): a status added there counts here without an edit.
_EXACT = frozenset(s.value for s in TranslationStatus if s.exact)
_TRANSLATED = frozenset(s.value for s in TranslationStatus if s.translated)


@dataclass(frozen=True)
class PartitionFacts:
    """One group-partition's newest facts, as the sync left them."""

    group_id: str
    topic: str
    partition: int
    active: str  # "" when the direction was not decided
    standby: str
    status: str  # the newest translation's status
    translated_committed: int | None  # the active offset that translation was for
    standby_offset: int | None  # its standby offset t
    anchor_active_offset: int | None  # the header anchor it used, if any
    commit_decision: str | None  # the newest commit decision (None: no commit row yet)
    commit_synced: bool  # the standby was at t after it
    standby_committed: int | None  # the standby group's committed offset now
    active_committed: int | None  # the group's committed offset on the active cluster now
    synced_at_s: float | None  # epoch seconds of the newest cycle that left it synced
    read_error: str = ""  # a cluster's facts not read


@dataclass(frozen=True)
class PartitionReadiness:
    facts: PartitionFacts
    ready: bool
    reason: NotReady | None
    detail: str
    expected_duplicates: int | None  # None: unknown
    duplicates_at_most: int | None  # an upper bound when the exact number is unknown


@dataclass(frozen=True)
class GroupReadiness:
    """Safe to switch now (``ready``), what it would cost, and why not."""

    group_id: str
    active: str
    standby: str
    partitions: int
    ready: bool
    expected_duplicates: int | None
    duplicates_at_most: int | None
    seconds_since_sync: float | None  # since the oldest of its partitions' newest sync (None: never)
    reasons: dict[str, int] = field(default_factory=dict)  # NotReady value -> partitions
    first_problem: str = ""  # the first not-ready partition and its detail

    @property
    def verdict(self) -> str:
        return "ready" if self.ready else "not ready: " + ", ".join(f"{r} ({n})" for r, n in self.reasons.items())


def partition_readiness(f: PartitionFacts, now_s: float, max_age_s: float) -> PartitionReadiness:
    """One partition's verdict (see the module's invariants)."""
    where = f"{f.topic}[{f.partition}]"
    reason, detail = _problem(f, now_s, max_age_s)
    moved = 0
    if f.active_committed is not None and f.translated_committed is not None:
        moved = max(f.active_committed - f.translated_committed, 0)
    exact = f.status in _EXACT
    expected = moved if exact else None
    at_most = None
    if exact:
        at_most = moved
    elif f.status in ("header_anchor", "kept_anchor") and f.anchor_active_offset is not None \
            and f.translated_committed is not None:
        at_most = moved + max(f.translated_committed - f.anchor_active_offset - 1, 0)
        if at_most == 0:
            expected = 0  # no duplicate at most is no duplicate
    return PartitionReadiness(f, reason is None, reason, f"{where}: {detail}" if reason else f"{where}: ready",
                              expected, at_most)


def _problem(f: PartitionFacts, now_s: float, max_age_s: float) -> tuple[NotReady | None, str]:
    if f.read_error:
        return (NotReady.NOT_AUTHORIZED if refusal(f.read_error) else NotReady.CLUSTER_UNAVAILABLE), f.read_error
    if f.status not in _TRANSLATED:
        reason = _UNTRANSLATED_REASONS.get(f.status, NotReady.NOT_TRANSLATED)
        return reason, f"translation status {f.status}"
    if f.commit_decision == "refused_members":
        return NotReady.ALREADY_ON_STANDBY, f"the group has members on {f.standby}"
    if f.commit_decision == "not_authorized":
        return NotReady.NOT_AUTHORIZED, f"the commit on {f.standby} was refused: the sync may not write the group there"
    if f.standby_committed is None:
        return NotReady.NO_STANDBY_OFFSET, f"no committed offset on {f.standby}: the group would start from auto.offset.reset"
    if not f.commit_synced:
        return NotReady.COMMIT_NOT_SYNCED, f"the newest commit decision is {f.commit_decision or 'none'}"
    if f.synced_at_s is None:
        return NotReady.STALE_SYNC, "never synced"
    age = now_s - f.synced_at_s
    if age > max_age_s:
        return NotReady.STALE_SYNC, f"last synced {age:.0f}s ago (more than {max_age_s:g}s)"
    return None, ""


def group_readiness(facts: Iterable[PartitionFacts], now_s: float, max_age_s: float) -> list[GroupReadiness]:
    """One verdict per group (and direction), groups sorted by id."""
    by_group: dict[tuple[str, str, str], list[PartitionReadiness]] = {}
    for f in facts:
        by_group.setdefault((f.group_id, f.active, f.standby), []).append(partition_readiness(f, now_s, max_age_s))
    out = []
    for (group_id, active, standby), parts in sorted(by_group.items()):
        parts.sort(key=lambda p: (p.facts.topic, p.facts.partition))
        reasons = Counter(p.reason for p in parts if p.reason is not None)
        synced = [p.facts.synced_at_s for p in parts]
        out.append(GroupReadiness(
            group_id, active, standby, len(parts), ready=not reasons,
            expected_duplicates=_sum(p.expected_duplicates for p in parts),
            duplicates_at_most=_sum(p.duplicates_at_most for p in parts),
            seconds_since_sync=None if any(s is None for s in synced) or not synced else max(now_s - min(synced), 0.0),
            reasons={r.value: reasons[r] for r in REASON_ORDER if reasons[r]},
            first_problem=next((p.detail for p in parts if not p.ready), ""),
        ))
    return out


def _sum(values: Iterable[int | None]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total
