"""What a translation returns: the standby offset (or none), the strategy, a named status, a reason.

Every value of :class:`Strategy` and :class:`TranslationStatus` is a short lowercase string: it is
stored in ClickHouse and shown in Grafana as is, so values are stable names, never renamed.

A result with ``standby_offset=None`` must never be committed; the commit step keeps the standby
group where it is (docs/concepts/no-loss.md, the commit guard) and counts the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Strategy(str, Enum):
    """Which strategy (docs/concepts/strategies.md) produced the standby offset."""

    HEADER_ANCHOR = "header_anchor"  # standby-origin anchors (Lemma 1), incl. kept anchors
    TIMESTAMP_SEARCH = "timestamp_search"  # one-way topics, from the producing side
    CAUGHT_UP = "caught_up"  # stale fast-forward to the standby log end
    OFFSET_SYNC = "offset_sync"  # MirrorMaker 2's offset-sync pairs, one-way topics, no origin headers

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


class TranslationStatus(str, Enum):
    """One named status per group-partition and cycle (docs/concepts/statuses.md)."""

    # -- translated: ``standby_offset`` is set and satisfies NO-LOSS --------------------------
    HEADER_EXACT = "header_exact"  # the record at c is a standby-origin copy: t = s
    HEADER_ANCHOR = "header_anchor"  # a standby-origin record below c: t = s + 1
    KEPT_ANCHOR = "kept_anchor"  # an anchor kept from an earlier cycle: t = s + 1
    TIMESTAMP_EXACT = "timestamp_exact"  # search + header refinement landed on the copy
    TIMESTAMP_SEARCH = "timestamp_search"  # search result (maybe partly refined), duplicates possible
    CAUGHT_UP = "caught_up"  # stale fast-forward: t = standby log end
    OFFSET_SYNC_EXACT = "offset_sync_exact"  # a confirmed pair, refined by identity onto the copy
    OFFSET_SYNC_ANCHOR = "offset_sync_anchor"  # a confirmed pair (u, d) below c: t = d + 1 (maybe partly refined)

    # -- not translated: ``standby_offset`` is None ------------------------------------------
    NO_COMMITTED_OFFSET = "no_committed_offset"
    COMMITTED_BELOW_LOG_START = "committed_below_log_start"  # retention on the active cluster
    COMMITTED_BEYOND_LOG_END = "committed_beyond_log_end"  # truncated or recreated topic
    TOPIC_MISSING_ON_STANDBY = "topic_missing_on_standby"
    PARTITION_COUNT_MISMATCH = "partition_count_mismatch"
    MALFORMED_HEADER = "malformed_header"
    THIRD_CLUSTER_HEADER = "third_cluster_header"
    ORIGIN_OFFSET_BEYOND_STANDBY_END = "origin_offset_beyond_standby_end"
    STANDBY_RECORDS_DELETED = "standby_records_deleted"  # retention on the standby cluster
    LOG_APPEND_TIME_ON_STANDBY = "log_append_time_on_standby"
    SHAPE_CONFLICT = "shape_conflict"  # a "one-way" topic has records produced on the standby
    NOT_YET_MIRRORED = "not_yet_mirrored"  # the record at c has no copy on the standby yet
    COPY_MISSING_ON_STANDBY = "copy_missing_on_standby"  # a later record's copy is there, not c's
    INCONSISTENT_FACTS = "inconsistent_facts"  # the reads contradict each other
    SPLIT_BRAIN = "split_brain"
    NO_ANCHOR = "no_anchor"  # nothing safe found yet
    DIRECTION_UNDETERMINED = "direction_undetermined"
    CLUSTER_UNAVAILABLE = "cluster_unavailable"
    # the broker refused a read of this group or topic for want of an ACL (the reason names the right);
    # the group's other partitions and the other groups are synced as usual
    NOT_AUTHORIZED = "not_authorized"
    SPARK_UNAVAILABLE = "spark_unavailable"  # the translation engine did not answer: nothing read or translated
    # the cycle's read budget ran out before the partition was read; it goes first next cycle
    TRANSLATION_DEFERRED = "translation_deferred"
    NOT_APPLICABLE = "not_applicable"  # a strategy asked about a partition it does not cover
    # MirrorMaker 2's offset syncs (a one-way topic mirrored without origin headers):
    NO_OFFSET_SYNC = "no_offset_sync"  # no pair at or below c for the partition (yet)
    # pairs at or below c, but none was read before an active log end at or below c: what lies below
    # their downstream offsets is not proven yet (a pair read once is confirmed as the group moves on)
    OFFSET_SYNC_UNCONFIRMED = "offset_sync_unconfirmed"
    OFFSET_SYNCS_UNREADABLE = "offset_syncs_unreadable"  # the offset-syncs topic could not be read
    REMOTE_TOPIC_RENAMED = "remote_topic_renamed"  # mirrored under another name (say <alias>.<topic>)

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value

    @property
    def translated(self) -> bool:
        return self in _TRANSLATED

    @property
    def exact(self) -> bool:
        """The standby offset points at the copy of the record the group reads next (or past the
        copy of the last processed record): the InSync candidates (docs/concepts/statuses.md)."""
        return self in _EXACT


_TRANSLATED = frozenset(
    {
        TranslationStatus.HEADER_EXACT,
        TranslationStatus.HEADER_ANCHOR,
        TranslationStatus.KEPT_ANCHOR,
        TranslationStatus.TIMESTAMP_EXACT,
        TranslationStatus.TIMESTAMP_SEARCH,
        TranslationStatus.CAUGHT_UP,
        TranslationStatus.OFFSET_SYNC_EXACT,
        TranslationStatus.OFFSET_SYNC_ANCHOR,
    }
)
_EXACT = frozenset({
    TranslationStatus.HEADER_EXACT, TranslationStatus.TIMESTAMP_EXACT, TranslationStatus.CAUGHT_UP,
    TranslationStatus.OFFSET_SYNC_EXACT,
})

#: statuses in the order they are preferred when several problems were seen and nothing translated
PROBLEM_PRIORITY: tuple[TranslationStatus, ...] = (
    TranslationStatus.THIRD_CLUSTER_HEADER,
    TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END,
    TranslationStatus.MALFORMED_HEADER,
    TranslationStatus.STANDBY_RECORDS_DELETED,
)


@dataclass(frozen=True)
class Anchor:
    """``(a, s)``: the record at ``active_offset`` on ``active`` and the record at ``standby_offset``
    on ``standby`` are copies of one record (docs/concepts/no-loss.md, safe and unsafe anchors).

    Only standby-origin anchors are built and kept (the record on the active cluster carries
    ``IDC=<standby>``, ``Offset=<standby_offset>``), so Lemma 1 applies on every topic shape. An
    anchor is tied to its direction: it is meaningless once the group moves to the other cluster.
    """

    active: str
    standby: str
    active_offset: int
    standby_offset: int

    def __str__(self) -> str:
        return f"{self.active}:{self.active_offset}->{self.standby}:{self.standby_offset}"


@dataclass(frozen=True)
class TranslationResult:
    """The outcome for one group-partition in one cycle. Always present, also when nothing can be
    committed (``standby_offset is None``, with a status and a reason).

    ``expected_duplicates`` is set only when the rule knows it (0 for exact results on one-way
    topics and for a caught-up fast-forward with both mirrors caught up; it assumes an
    exactly-once mirror). ``anchor_to_keep`` is the best standby-origin anchor to store for the
    next cycle (None: forget any kept anchor). ``warnings`` lists problems seen on the way even
    when a translation was found (say a malformed header in the backward window).
    """

    group_id: str
    topic: str
    partition: int
    strategy: Strategy | None
    standby_offset: int | None
    status: TranslationStatus
    reason: str
    expected_duplicates: int | None = None
    anchor_to_keep: Anchor | None = None
    timestamp_inversion: bool = False
    active: str | None = None
    standby: str | None = None
    committed: int | None = None
    standby_committed: int | None = None
    anchor_used: Anchor | None = None
    warnings: tuple[TranslationStatus, ...] = ()

    def __post_init__(self) -> None:
        if self.status.translated != (self.standby_offset is not None):
            raise ValueError(
                f"status {self.status.value} with standby_offset={self.standby_offset}: a translated "
                "status needs an offset and any other status must have none"
            )
        if self.status.translated and self.strategy is None:
            raise ValueError(f"translated status {self.status.value} needs a strategy")

    @property
    def translated(self) -> bool:
        return self.standby_offset is not None

    @property
    def in_sync(self) -> bool:
        """InSync (docs/concepts/statuses.md): the synced offsets point at the very same record (zero duplicates)."""
        return self.translated and self.expected_duplicates == 0


def untranslatable(
    group_id: str,
    topic: str,
    partition: int,
    status: TranslationStatus,
    reason: str,
    *,
    active: str | None = None,
    standby: str | None = None,
    committed: int | None = None,
    standby_committed: int | None = None,
    anchor_to_keep: Anchor | None = None,
    warnings: tuple[TranslationStatus, ...] = (),
    timestamp_inversion: bool = False,
) -> TranslationResult:
    """A result that must not be committed (for statuses decided outside the rules: a cluster that
    is down, a split brain found by the direction rule, ...)."""
    if status.translated:
        raise ValueError(f"{status.value} is a translated status")
    return TranslationResult(
        group_id=group_id,
        topic=topic,
        partition=partition,
        strategy=None,
        standby_offset=None,
        status=status,
        reason=reason,
        anchor_to_keep=anchor_to_keep,
        active=active,
        standby=standby,
        committed=committed,
        standby_committed=standby_committed,
        warnings=warnings,
        timestamp_inversion=timestamp_inversion,
    )
