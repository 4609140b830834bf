"""Strategy 2 (docs/concepts/strategies.md): timestamp search, for one-way topics translated from the producing side.

Setting: every record of the standby B is a copy of a record of the active A, in A's order (Lemma 3),
with A's CreateTime timestamp. Let ``a`` be the searched A record (timestamp ``ts``):

* normally the first real record at or after ``c`` (the group's next record);
* when there is none (the group read everything), the last real record below ``c`` -- the
  caught-up variant, where the copy's offset plus one is the exact answer.

``offsets_for_times(ts)`` on B returns the first offset whose timestamp is ``>= ts``. The copy of
``a`` has timestamp ``ts``, so the answer ``o`` is at or before the copy, and every B record below
``o`` is a copy of an A record before ``a``: processed. Loss-free, but with duplicates when
timestamps repeat or go backwards.

**Refinement.** Scan B forward from ``o`` (a bounded, read_committed window) while the record is a
copy (``IDC=<A>``) of an A record below ``a``: each such record is processed, so ``t`` may move
past it. A copy of ``a`` itself is the exact answer (``t`` = its offset, or its offset + 1 in the
caught-up variant). The scan stops, keeping the last safe offset, at a copy of a record after ``a``
and at the end of the window. It never goes past the copy of ``a``.

**Refinement by record identity**, for a mirror that writes no headers (MirrorMaker 2; headers on B
are then not trusted at all). Scan B forward from ``o`` to the first record whose identity (a digest
of key, value, timestamp and headers, ``RecordFact.identity``) is ``a``'s: at offset ``m``. The copy
of ``a`` has ``a``'s identity and lies at or after ``o``, so ``m`` is at or before it, and every B
record below ``m`` is, in A's order, a copy of a record before ``a``: ``t = m`` (``m + 1`` in the
caught-up variant, where ``a`` itself was processed) is loss-free by the argument for ``o``. It is
**exact** when ``m`` is the window's only record with that identity and the window holds every
record up to B's readable end (then the copy of ``a``, when mirrored, is in the window, so it is
``m``). Byte-identical records on A (a producer's retry, say) can only put ``m`` on an earlier copy:
duplicates, never a loss. No match in the window keeps ``o``.

**Nothing real after the answer.** When B has no record with a timestamp ``>= ts``, or the answer
``o`` is a transaction marker (the mirror's markers are stamped when it commits, later than the
records it copied) with no real record after it, B's last real record decides: a copy of a record
before ``a`` gives ``t`` = its offset + 1 -- the same position as ``o`` for a consumer (only
markers between), and one the copies read prove (``safe_bound``).

**Checks that refuse rather than guess:**

* LogAppendTime on B: copies do not carry A's timestamps, the search is meaningless.
* Retention on B deleted the copy of ``a``: B's first retained record (``standby_first``) copies a
  record after ``a``. Unprocessed copies may then sit before the search result (also with an
  at-least-once mirror whose redelivered copy of ``a`` survived). When B's first retained record
  copies a record at or before ``a``, every B record before the first retained copy of ``a``
  copies a record before ``a`` -- even with redelivery, since the mirror reads A in order and
  only ever rewinds.
* The search landed on a copy of a record *after* ``a`` before any progress: the copy of ``a`` is
  not at or after ``o`` (never mirrored), so ``o`` may have skipped unprocessed records.
* With a header-writing mirror, any B record read (window, tail or first) without a valid
  ``IDC=<A>`` header was produced on B: the topic is not one-way, and neither the search result
  nor the offsets already scanned can be trusted (stopping there and keeping the last safe
  offset would rely on the very assumption that record refutes).

``timestamp_inversion`` is set when the first real record at the search result has a larger
timestamp than ``ts`` (the article's "duplicate risk" metric), whether or not refinement fixed it.

Known limit: without headers on B (a header-less mirror) the search cannot be verified; it relies
on the copy of ``a`` still being on B, i.e. on the group not lagging past B's retention, and on an
exactly-once mirror.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .facts import PartitionFacts, RecordFact, TimestampFacts, TimestampType
from .result import Strategy, TranslationResult, TranslationStatus


def _missing_copy_status(facts: PartitionFacts) -> TranslationStatus:
    """The copy of the searched record is not where it must be: deleted by the standby's retention
    (when it deleted anything), else never mirrored."""
    if facts.standby_log_start > 0:
        return TranslationStatus.STANDBY_RECORDS_DELETED
    return TranslationStatus.COPY_MISSING_ON_STANDBY


def _result_fields(facts: PartitionFacts) -> dict[str, Any]:
    """The fields every result for this group-partition carries, translated or not."""
    return dict(
        group_id=facts.group_id, topic=facts.topic, partition=facts.partition, active=facts.active,
        standby=facts.standby, committed=facts.committed, standby_committed=facts.standby_committed,
    )


def _fail(
    facts: PartitionFacts, status: TranslationStatus, reason: str, inversion: bool = False
) -> TranslationResult:
    """A result with no standby offset: nothing may be committed."""
    return TranslationResult(
        strategy=None, standby_offset=None, status=status, reason=reason, timestamp_inversion=inversion,
        **_result_fields(facts),
    )


@dataclass(frozen=True)
class _Search:
    """The searched active record ``a`` (timestamp ``ts``) and what every later step needs with it."""

    facts: PartitionFacts
    tf: TimestampFacts
    a: int
    ts: int
    caught_up: bool  # a is the last processed record, not the first record at or after c
    head: str  # the reason's opening, naming the searched record
    identity: bytes | None = None  # a's content digest, when it was read (header-less mirror)


class _StandbyReads(NamedTuple):
    """The standby records read for the search, restricted to the standby's current log."""

    window: list[RecordFact]  # real records from the search result on, by offset
    nothing_after: bool  # no real record at or after the search result
    last: RecordFact | None  # the standby's last real record, only when nothing_after
    first: RecordFact | None  # the standby's first retained real record


class _Refinement(NamedTuple):
    """Where the header refinement left ``t``."""

    t: int
    exact: bool  # t is at (or just past, caught up) the copy of a
    progressed: int  # processed copies moved past
    note: str


def _refuse_unsearchable(facts: PartitionFacts) -> TranslationResult | None:
    """A refusal when the timestamp search does not apply to the partition or was not read."""
    active, standby = facts.active, facts.standby
    if not facts.shape.allows_timestamp_search(active):
        return _fail(
            facts,
            TranslationStatus.NOT_APPLICABLE,
            f"timestamp search needs a one-way topic produced on {active}; shape is {facts.shape.value}",
        )
    if facts.standby_timestamp_type is TimestampType.LOG_APPEND_TIME:
        return _fail(
            facts,
            TranslationStatus.LOG_APPEND_TIME_ON_STANDBY,
            f"{standby} stamps {facts.topic} with LogAppendTime: copies do not keep {active}'s timestamps",
        )
    if facts.timestamp is None:
        return _fail(facts, TranslationStatus.NOT_APPLICABLE, "no timestamp search was read for this partition")
    return None


def _find_searched_record(facts: PartitionFacts, tf: TimestampFacts) -> _Search | TranslationResult:
    """The active record whose timestamp is searched (the first real record at or after c, else the
    last processed one), checked against the record the search was actually run for."""
    c, active = facts.committed, facts.active
    at = facts.usable_record_at_or_after()
    caught_up = at is None
    searched = at if at is not None else facts.last_processed_record()
    if searched is None:
        return _fail(
            facts, TranslationStatus.NO_ANCHOR, f"no real record at or below c={c} in the read window to search"
        )
    if tf.searched_offset != searched.offset:
        return _fail(
            facts,
            TranslationStatus.INCONSISTENT_FACTS,
            f"the search used {active}:{tf.searched_offset} but the record to translate is {active}:{searched.offset}",
        )
    a, ts = searched.offset, searched.timestamp
    what = "last processed record" if caught_up else "first real record at or after c"
    return _Search(facts, tf, a, ts, caught_up, head=f"{what} {active}:{a} ts={ts}", identity=searched.identity)


def _in_standby_log(facts: PartitionFacts, record: RecordFact | None) -> RecordFact | None:
    """``record`` if it lies inside the standby's current log, else None."""
    if record is not None and not (facts.standby_log_start <= record.offset < facts.standby_log_end):
        return None
    return record


def _read_standby(s: _Search) -> _StandbyReads:
    """The window after the search result (deduplicated, sorted, inside the standby log), and the
    standby's last and first real records where they are usable."""
    facts, tf = s.facts, s.tf
    search_none = tf.search_offset is None or tf.search_offset >= facts.standby_log_end
    window: list[RecordFact] = [] if search_none else sorted(
        {
            r.offset: r
            for r in tf.standby_records
            if max(tf.search_offset, facts.standby_log_start) <= r.offset < facts.standby_log_end
        }.values(),
        key=lambda r: r.offset,
    )
    # No real record at or after the search result: the standby holds nothing with a timestamp >=
    # ts, or the search was answered with a transaction marker (stamped when the mirror committed,
    # after ts) that no real record follows. Then the standby's last record decides.
    nothing_after = search_none or (not window and tf.standby_last is not None)
    last = _in_standby_log(facts, tf.standby_last if nothing_after else None)
    first = _in_standby_log(facts, tf.standby_first)
    return _StandbyReads(window, nothing_after, last, first)


def _refuse_records_not_copied(s: _Search, reads: _StandbyReads) -> TranslationResult | None:
    """With a header-writing mirror: a shape conflict when any standby record read is not a copy
    from the active cluster."""
    active, standby = s.facts.active, s.facts.standby
    seen = reads.window + [r for r in (reads.last, reads.first) if r is not None]
    odd = next((r for r in seen if r.copy_of(active) is None), None)
    if odd is not None:
        return _fail(
            s.facts,
            TranslationStatus.SHAPE_CONFLICT,
            f"{standby}:{odd.offset} ({odd.origin}) is not a copy from {active}, and the mirror marks every "
            f"copy: records are produced on {standby}, the topic is not one-way",
        )
    return None


def _refuse_copy_lost_to_retention(s: _Search, reads: _StandbyReads) -> TranslationResult | None:
    """With a header-writing mirror: a refusal when the standby's retention may have deleted the
    copy of a."""
    facts, a, head, first = s.facts, s.a, s.head, reads.first
    active, standby = facts.active, facts.standby
    # Retention on the standby: its first retained record must not copy a record after a, or
    # the copy of a is gone and records before the search result may be unprocessed.
    if first is None and facts.standby_log_start > 0 and (reads.window or reads.last):
        return _fail(
            facts,
            TranslationStatus.INCONSISTENT_FACTS,
            f"{standby} deleted records (log start {facts.standby_log_start}) and its first retained record was "
            f"not read: cannot rule out that the copy of {active}:{a} is gone",
        )
    if first is None and facts.standby_log_start > 0:
        return _fail(
            facts,
            TranslationStatus.STANDBY_RECORDS_DELETED,
            f"{head}: {standby} deleted records (log start {facts.standby_log_start}) and holds no record now: "
            f"the copy of {active}:{a} is gone or not there yet",
        )
    h0 = first.copy_of(active) if first is not None else None
    if h0 is not None and h0 > a:
        return _fail(
            facts,
            _missing_copy_status(facts),
            f"{head}: {standby}'s first retained record {standby}:{first.offset} copies the later {active}:{h0}: "
            f"the copy of {active}:{a} is gone (log start {facts.standby_log_start}); the group lags past "
            f"{standby}'s retention",
        )
    return None


def _translate_from_standby_last(s: _Search, last: RecordFact | None, trust_headers: bool) -> TranslationResult:
    """The standby has no real record with a timestamp >= ts: its last record decides, t = its
    offset + 1 when it is a trusted copy of a record before a."""
    facts, a, head = s.facts, s.a, s.head
    active, standby = facts.active, facts.standby
    h = last.copy_of(active) if last is not None and trust_headers else None
    if last is None or h is None:
        return _fail(
            facts,
            TranslationStatus.NOT_YET_MIRRORED,
            f"{head}: no record on {standby} has a timestamp >= ts and its last record "
            f"{'is missing' if last is None else 'proves nothing (no trusted header)'}: the copy is not there yet",
        )
    if h == a:
        return _fail(
            facts,
            TranslationStatus.INCONSISTENT_FACTS,
            f"{head}: no record on {standby} has a timestamp >= ts, yet its last record {standby}:{last.offset} "
            f"is the copy of {active}:{a} (timestamps not preserved?)",
        )
    if h > a:
        return _fail(
            facts,
            _missing_copy_status(facts),
            f"{head}: no record on {standby} has a timestamp >= ts and its last record {standby}:{last.offset} "
            f"copies the later {active}:{h}: the copy of {active}:{a} is not on {standby} "
            f"({standby} log start {facts.standby_log_start})",
        )
    t = last.offset + 1
    return TranslationResult(
        strategy=Strategy.TIMESTAMP_SEARCH, standby_offset=t, status=TranslationStatus.TIMESTAMP_SEARCH,
        reason=f"{head}: not on {standby} yet; its last record {standby}:{last.offset} copies {active}:{h} < {a}: "
               f"t = {t}",
        expected_duplicates=None if s.caught_up else 0, **_result_fields(facts),
    )


def _refine_by_headers(
    s: _Search, o: int, window: list[RecordFact], trust_headers: bool, inversion: bool
) -> _Refinement | TranslationResult:
    """Move t from the search result ``o`` past the window's copies of records before a, up to the
    copy of a; a refusal when the window starts with a copy of a record after a."""
    facts, a, head = s.facts, s.a, s.head
    active, standby = facts.active, facts.standby
    t = o
    exact = False
    progressed = 0
    note = "no records read after the search result" if not window else ""
    for record in window if trust_headers else ():
        h = record.copy_of(active)
        assert h is not None  # the shape check above refused windows with other records
        if h < a:
            t = record.offset + 1
            progressed += 1
            continue
        if h == a:
            t = record.offset + 1 if s.caught_up else record.offset
            exact = True
            note = f"landed on the copy {standby}:{record.offset}"
            break
        if progressed == 0:
            return _fail(
                facts,
                _missing_copy_status(facts),
                f"{head}: offsets_for_times gave {o}, whose record {standby}:{record.offset} copies the later "
                f"{active}:{h}: the copy of {active}:{a} is not at or after {o} "
                f"({standby} log start {facts.standby_log_start})",
                inversion,
            )
        note = f"stopped at {standby}:{record.offset}, a copy of the later {active}:{h}"
        break
    else:
        if not trust_headers:
            return _refine_by_identity(s, o, window)
        if window:
            note = f"window of {len(window)} records ended before the copy"
    return _Refinement(t, exact, progressed, note)


def _refine_by_identity(s: _Search, o: int, window: list[RecordFact]) -> _Refinement:
    """Header-less mirror: t from the search result ``o`` to the window's first record with a's
    identity (module docstring); ``o`` when a's identity was not read or nothing matches."""
    standby = s.facts.standby
    if s.identity is None:
        return _Refinement(o, False, 0, "the mirror writes no origin headers: unrefined")
    matches = [r for r in window if r.identity == s.identity]
    if not matches:
        return _Refinement(o, False, 0, f"no record with the same identity in the {len(window)} records read: "
                                        "unrefined")
    m = matches[0].offset
    t = m + 1 if s.caught_up else m
    exact = len(matches) == 1 and s.tf.standby_records_complete
    if exact:
        note = f"landed on {standby}:{m}, the only record with the same identity up to the end"
    elif len(matches) > 1:
        note = f"moved to {standby}:{m}, the first of {len(matches)} records with the same identity"
    else:
        note = f"moved to {standby}:{m}, the only record with the same identity in a window cut by its bound"
    progressed = sum(1 for r in window if r.offset < m)
    return _Refinement(t, exact, progressed, note)


def _translate_from_search_result(s: _Search, window: list[RecordFact], trust_headers: bool) -> TranslationResult:
    """The standby has real records from the search result on: t = the search result, refined by
    headers, refused when it falls below the standby's log start."""
    facts, standby = s.facts, s.facts.standby
    o = s.tf.search_offset  # not None: nothing_after covers a missing search result
    inversion = bool(window) and window[0].timestamp > s.ts
    refined = _refine_by_headers(s, o, window, trust_headers, inversion)
    if isinstance(refined, TranslationResult):
        return refined
    t, exact, progressed, note = refined
    if t < facts.standby_log_start:
        return _fail(
            facts,
            TranslationStatus.STANDBY_RECORDS_DELETED,
            f"{s.head}: search result {t} is below {standby}'s log start {facts.standby_log_start}",
            inversion,
        )
    status = TranslationStatus.TIMESTAMP_EXACT if exact else TranslationStatus.TIMESTAMP_SEARCH
    reason = f"{s.head}: offsets_for_times gave {o}" + (" (timestamp inversion)" if inversion else "")
    reason += f"; refined past {progressed} processed copies; {note}: t = {t}"
    return TranslationResult(
        strategy=Strategy.TIMESTAMP_SEARCH, standby_offset=t, status=status, reason=reason,
        expected_duplicates=0 if exact else None, timestamp_inversion=inversion, **_result_fields(facts),
    )


def translate_by_timestamp(facts: PartitionFacts) -> TranslationResult:
    """Translate ``facts.committed`` by timestamp search plus header refinement."""
    if facts.committed is None:
        raise ValueError("translate_by_timestamp needs a committed offset")
    refusal = _refuse_unsearchable(facts)
    if refusal is not None:
        return refusal
    search = _find_searched_record(facts, facts.timestamp)  # not None: _refuse_unsearchable refused that
    if isinstance(search, TranslationResult):
        return search

    reads = _read_standby(search)
    trust_headers = search.tf.mirror_writes_headers
    if trust_headers:
        refusal = _refuse_records_not_copied(search, reads)
        if refusal is None:
            refusal = _refuse_copy_lost_to_retention(search, reads)
        if refusal is not None:
            return refusal

    if reads.nothing_after:
        return _translate_from_standby_last(search, reads.last, trust_headers)
    return _translate_from_search_result(search, reads.window, trust_headers)
