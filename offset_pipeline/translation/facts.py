"""Facts in: what the I/O layer read from both clusters for one group-partition and one cycle.

The rules never read Kafka; they only judge these facts. The reading contract:

* **read_committed.** Records are read with ``isolation.level=read_committed``, so only real records
  appear; offset gaps are transaction markers, aborted records or compacted records.
* **Snapshot order.** Committed offsets are read first, then the active log start/end, then the
  standby log start/end, then records. So every honest origin header on an active record below
  ``active_log_end`` names a standby offset below ``standby_log_end``. Records at or beyond the
  snapshot's log ends arrived after the snapshot and are ignored by the rules.
* **Record at c.** ``record_at_or_after`` is the first real record at or after ``committed`` (and
  below ``active_log_end``), or None when there is none: the group has read everything real.
* **Backward window.** ``records_below`` are the real records immediately below ``committed``
  (contiguous: no real record of the active log between the lowest of them and ``committed`` is
  left out), newest first or in any order. Only records below ``committed`` are used: never scan
  past c (docs/concepts/no-loss.md, safe and unsafe anchors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from operator import attrgetter

from .headers import LOCAL, CopiedFrom, Headers, Origin, parse_origin
from .result import Anchor
from .shape import TopicShape

_OFFSET = attrgetter("offset")
_new = object.__new__

DEFAULT_STALE_WINDOW_S = 600.0  # the caught-up rule: log ends unchanged for 10 minutes


class TimestampType(str, Enum):
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class RecordFact:
    """One real record as read from a cluster: its offset, timestamp and parsed origin headers."""

    offset: int
    timestamp: int
    origin: Origin = LOCAL
    #: A digest of the record's content (key, value, timestamp, headers other than the origin headers),
    #: read only where the timestamp search refines by it (a mirror that writes no origin headers). A
    #: copy has its original's identity; two records of one log share one only when byte-identical.
    identity: bytes | None = None

    @classmethod
    def from_headers(cls, offset: int, timestamp: int, headers: Headers, *, read_from: str, peer: str,
                     identity: bytes | None = None) -> RecordFact:
        return cls.of(offset, timestamp, parse_origin(headers, read_from=read_from, peer=peer), identity)

    @classmethod
    def of(cls, offset: int, timestamp: int, origin: Origin = LOCAL, identity: bytes | None = None) -> RecordFact:
        """``RecordFact(offset, timestamp, origin, identity)`` made without the frozen dataclass's
        ``__init__``, whose ``object.__setattr__`` per field costs three times the rest: the readers
        make one per record read, hundreds of thousands per cycle. Equal, hashed, frozen and printed
        as the instance ``__init__`` makes (tests/translation/test_fact_constructors.py)."""
        fact = _new(cls)
        fact.__dict__.update(offset=offset, timestamp=timestamp, origin=origin, identity=identity)
        return fact

    def copy_of(self, cluster: str) -> int | None:
        """The origin offset when this record is a valid copy from ``cluster``, else None."""
        if isinstance(self.origin, CopiedFrom) and self.origin.cluster == cluster:
            return self.origin.offset
        return None


@dataclass(frozen=True)
class TimestampFacts:
    """Reads for the timestamp search (docs/concepts/strategies.md), from the standby cluster.

    ``searched_offset`` is the active record whose timestamp was searched: the first real record at
    or after c, or, when there is none, the last real record below c (the caught-up variant).
    ``search_offset`` is the answer of ``offsets_for_times(timestamp)`` on the standby, None when
    the standby has no record with a timestamp that large (end of log). ``standby_records`` are the
    standby's real records read forward from ``search_offset`` (bounded), for the header refinement.
    ``standby_last`` is the standby's last real record, read only when no real record follows the
    search result (``search_offset`` None, or only transaction markers from it to the end).
    ``standby_first`` is the standby's first real record at or after its log start (None: the
    standby holds no real record): it shows whether retention on the standby deleted the copy of
    the searched record (then the first retained record copies a later one). Always read it.
    ``mirror_writes_headers``: the mirror into the standby writes ``IDC``/``Offset`` on every copy
    (the devstack mirror does). Then a standby record without a valid active-origin header was
    produced on the standby; without such a mirror, headers on the standby are not trusted at all,
    and the refinement compares record identities (``RecordFact.identity``) instead.
    ``standby_records_complete``: ``standby_records`` hold every real record of the standby from the
    search result to its readable end (the window was not cut by its bound).
    """

    searched_offset: int
    search_offset: int | None
    standby_records: tuple[RecordFact, ...] = ()
    standby_last: RecordFact | None = None
    mirror_writes_headers: bool = True
    standby_first: RecordFact | None = None
    standby_records_complete: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "standby_records", tuple(self.standby_records))


@dataclass(frozen=True)
class CaughtUpFacts:
    """Reads for the stale fast-forward (docs/concepts/strategies.md, the caught-up rule).

    ``logs_stable_for_s``: how long neither cluster's log end moved (the smaller of the two).
    ``standby_to_active_mirror_position``: the standby offset below which the standby -> active
    mirror has copied (or skipped as a loop) every record, read from its committed positions (the
    devstack mirror commits them in the transaction that writes the copies). None: unknown.
    ``active_to_standby_mirror_position``: the same for the other direction (an active offset); it
    only decides whether zero duplicates can be promised. The stability window absorbs the order
    in which these were read: nothing was written to either log during it.
    """

    logs_stable_for_s: float
    standby_to_active_mirror_position: int | None
    active_to_standby_mirror_position: int | None = None
    window_s: float = DEFAULT_STALE_WINDOW_S
    # Offsets are not dense (markers, aborted records): a transactional topic ends with a commit marker, which
    # no consumer is handed, so a group (or a mirror) that read everything can stop one offset short
    # of the log end. Each flag says the gap up to the log end was read (read_committed) and holds
    # no real record: [c, active log end), [B->A position, standby log end), [A->B position, active
    # log end). Then the group (or mirror) has read every real record, as if at the log end.
    no_record_from_committed: bool = False
    no_record_from_standby_mirror_position: bool = False
    no_record_from_active_mirror_position: bool = False


@dataclass(frozen=True)
class CaughtUpPoint:
    """A fast-forward applied earlier (the caught-up rule), kept like an anchor: when it was verified,
    the group's committed offset on ``active`` was ``active_offset`` and every record of
    ``standby`` below ``standby_offset`` had its copy on ``active`` below it. Logs only grow, so
    that stays true; the point translates ``c == active_offset`` to ``t = standby_offset`` exactly
    (every record of the standby from ``standby_offset`` on arrived after the fast-forward)."""

    active: str
    standby: str
    active_offset: int
    standby_offset: int

    def __str__(self) -> str:
        return f"{self.active}:{self.active_offset}=>{self.standby}:{self.standby_offset}"


@dataclass(frozen=True)
class SyncPair:
    """One pair of MirrorMaker 2's offset-syncs topic for this partition: the active cluster's record
    at ``upstream`` was written on the standby at ``downstream``.

    ``active_end_after``: the active log end read after this pair was first read (the smallest such
    end the reader knows of), None when no active log end was read after it yet. Every record of
    the standby at or below ``downstream`` was written before the pair (MirrorMaker 2 sends a pair
    only once the copy at ``downstream`` is acknowledged), so before that log end was read, so it
    copies an active record below ``active_end_after``: the bound the rule needs below ``d``
    (translation/offset_sync_anchor.py)."""

    upstream: int
    downstream: int
    active_end_after: int | None = None


@dataclass(frozen=True)
class OffsetSyncFacts:
    """What was read of MirrorMaker 2's offset-syncs topic for one partition (one read per cycle
    and cluster), for a mirror that writes no origin headers.

    ``pairs``: the partition's pairs in the order of the offset-syncs topic (the order MirrorMaker
    2 wrote them). ``unreadable``: why the offset-syncs topic could not be read this cycle (None:
    it was read). ``remote_topic``: the name the mirror writes this topic's copies under on the
    standby, when the reader knows it (a replication policy that prefixes the source alias gives
    ``<alias>.<topic>``); the rule only translates a topic mirrored under its own name.
    ``forward_from`` / ``forward_records``: the standby's real records read forward from
    ``forward_from`` (contiguous, bounded, each with its content identity), for the refinement;
    the timestamp search's window is used too when it starts early enough. ``forward_complete``:
    they hold every real record up to the standby's readable end (the read was not cut by its bound).
    """

    pairs: tuple[SyncPair, ...] = ()
    unreadable: str | None = None
    remote_topic: str | None = None
    forward_from: int | None = None
    forward_records: tuple[RecordFact, ...] = ()
    forward_complete: bool = False  # forward_records reach the standby's readable end

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(self.pairs))
        object.__setattr__(self, "forward_records", tuple(self.forward_records))


@dataclass(frozen=True)
class PartitionFacts:
    """Everything known about one group-partition this cycle (the module docstring is the contract)."""

    group_id: str
    topic: str
    partition: int
    active: str
    standby: str
    committed: int | None
    active_log_start: int
    active_log_end: int
    standby_log_start: int
    standby_log_end: int
    standby_committed: int | None = None
    standby_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    shape: TopicShape = field(default_factory=TopicShape.unknown)
    record_at_or_after: RecordFact | None = None
    records_below: tuple[RecordFact, ...] = ()
    kept_anchor: Anchor | None = None
    timestamp: TimestampFacts | None = None
    caught_up: CaughtUpFacts | None = None
    kept_caught_up: CaughtUpPoint | None = None  # the newest fast-forward applied for this group-partition
    standby_topic_exists: bool = True
    active_partition_count: int | None = None
    standby_partition_count: int | None = None
    #: MirrorMaker 2's pairs for this partition (a mirror without origin headers); None: not read
    offset_syncs: OffsetSyncFacts | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "records_below", tuple(self.records_below))
        object.__setattr__(self, "standby_timestamp_type", TimestampType(self.standby_timestamp_type))
        if self.active == self.standby:
            raise ValueError("active and standby must be different clusters")

    # -- the records the rules may use --------------------------------------------------------
    def usable_record_at_or_after(self) -> RecordFact | None:
        """The first real record at or after c, if it was there at snapshot time."""
        record = self.record_at_or_after
        if record is None or self.committed is None:
            return None
        if record.offset < self.committed or record.offset >= self.active_log_end:
            return None
        return record

    def usable_records_below(self) -> tuple[RecordFact, ...]:
        """The backward window, newest first, only records strictly below c and inside the active
        log (duplicates by offset dropped). Anything at or past c is never used."""
        return self._usable_records_below

    @cached_property
    def _usable_records_below(self) -> tuple[RecordFact, ...]:
        # Computed once per facts (the facts are frozen): the header rule, the safe bound and the
        # timestamp search each ask, and at 50 groups per partition that was 2 million records sorted.
        c, log_start = self.committed, self.active_log_start
        if c is None:
            return ()
        seen: dict[int, RecordFact] = {}
        for record in self.records_below:
            offset = record.offset
            if log_start <= offset < c and offset not in seen:
                seen[offset] = record
        return tuple(sorted(seen.values(), key=_OFFSET, reverse=True))

    def last_processed_record(self) -> RecordFact | None:
        """The last real record below c, when nothing real is at or after c (the caught-up case)."""
        if self.usable_record_at_or_after() is not None:
            return None
        below = self.usable_records_below()
        return below[0] if below else None
