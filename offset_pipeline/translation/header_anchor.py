"""Strategy 1 (docs/concepts/strategies.md, header anchors): standby-origin header anchors.

Invariants this rule keeps:

* **Only standby-origin anchors.** A record of the active cluster A that carries ``IDC=<B>``,
  ``Offset=s`` (B the standby) is a copy of B's record at ``s``. By Lemma 1, ``t = s`` is safe when
  that record is the first real record at or after ``c``, and ``t = s + 1`` when it is below ``c``.
  Active-origin anchors are never used (Lemma 2: unsafe on two-way topics).
* **Never scan past c.** Only the first real record at or after ``c`` and records below ``c`` are
  looked at; a standby-origin record after the first real record at or after ``c`` proves nothing
  (docs/concepts/no-loss.md: A=[a0, a1, b1'], B=[a0', a1', b1], c=1 must not give 2).
* **Kept anchors only while c grows.** An anchor found in an earlier cycle is a fact about two
  append-only logs, so it stays safe while ``c >= a``; when ``c`` went below ``a`` (the group was
  reset on A) it is discarded. It is also discarded once its ``t`` left B's log range (retention
  on B, or a recreated topic).
* **Inside B's log.** A candidate ``t`` must lie in ``[standby_log_start, standby_log_end]``: an
  ``s`` at or past B's log end is a header that cannot be true (given the snapshot order), and a
  ``t`` below B's log start points at deleted records.

The best candidate is the one with the highest ``t`` (ties: exact, then window, then kept); since
every candidate is safe on its own and NO-LOSS is closed downwards, the highest is safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import PartitionFacts, RecordFact
from .headers import CopiedFrom, LocalRecord, MalformedHeader
from .result import (
    PROBLEM_PRIORITY,
    Anchor,
    Strategy,
    TranslationResult,
    TranslationStatus,
)

_SOURCE_RANK = {
    TranslationStatus.HEADER_EXACT: 2,
    TranslationStatus.HEADER_ANCHOR: 1,
    TranslationStatus.KEPT_ANCHOR: 0,
}


@dataclass(frozen=True)
class _Candidate:
    t: int
    status: TranslationStatus
    anchor: Anchor

    @property
    def rank(self) -> tuple[int, int]:
        return (self.t, _SOURCE_RANK[self.status])


def _problem_status(warnings: list[TranslationStatus]) -> TranslationStatus | None:
    for status in PROBLEM_PRIORITY:
        if status in warnings:
            return status
    return None


def translate_by_header_anchor(facts: PartitionFacts) -> TranslationResult:
    """Translate ``facts.committed`` by standby-origin anchors (record at c, backward window, kept).

    Expects the pre-checks of :func:`~offset_pipeline.translation.translate.translate_partition`
    to have passed (a committed offset inside the active log).
    """
    c = facts.committed
    if c is None:
        raise ValueError("translate_by_header_anchor needs a committed offset")
    active, standby = facts.active, facts.standby
    warnings: list[TranslationStatus] = []
    notes: list[str] = []
    candidates: list[_Candidate] = []

    def consider(record: RecordFact, status: TranslationStatus, where: str) -> None:
        origin = record.origin
        if isinstance(origin, MalformedHeader):
            warnings.append(origin.status)
            notes.append(f"{where} {active}:{record.offset} has {origin}")
            return
        if not isinstance(origin, CopiedFrom) or origin.cluster != standby:
            return  # produced on the active cluster: no anchor (Lemma 2)
        s = origin.offset
        t = s if status is TranslationStatus.HEADER_EXACT else s + 1
        anchor = Anchor(active, standby, record.offset, s)
        if s >= facts.standby_log_end:
            warnings.append(TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END)
            notes.append(f"{where} {anchor} names an offset at or past {standby}'s log end {facts.standby_log_end}")
            return
        if t < facts.standby_log_start:
            warnings.append(TranslationStatus.STANDBY_RECORDS_DELETED)
            notes.append(f"{where} {anchor} gives {t}, below {standby}'s log start {facts.standby_log_start}")
            return
        candidates.append(_Candidate(t, status, anchor))

    at = facts.usable_record_at_or_after()
    if at is not None:
        consider(at, TranslationStatus.HEADER_EXACT, "record at c")
    below = facts.usable_records_below()
    # Every usable copy below c gives t = s + 1, so only the highest s can win (the first such
    # record, newest first, as max() keeps the first of equals): it alone becomes a candidate.
    # Records with a problem go through consider() for their warning. This loop runs groups x
    # window times: one candidate object per record was a third of a 100k-row cycle's rules.
    best_below: RecordFact | None = None
    best_s = -1
    lowest_s = facts.standby_log_start - 1  # t = s + 1 must not fall below the standby log start
    end = facts.standby_log_end
    for record in below:
        origin = record.origin
        if isinstance(origin, CopiedFrom):
            if origin.cluster != standby:
                continue  # produced on the active cluster: no anchor (Lemma 2)
            s = origin.offset
            if lowest_s <= s < end:
                if s > best_s:
                    best_s, best_below = s, record
                continue
        elif isinstance(origin, LocalRecord):
            continue
        consider(record, TranslationStatus.HEADER_ANCHOR, "record below c")
    if best_below is not None:
        consider(best_below, TranslationStatus.HEADER_ANCHOR, "record below c")

    kept = facts.kept_anchor
    if kept is not None:
        if (kept.active, kept.standby) != (active, standby):
            notes.append(f"kept anchor {kept} is for the other direction: discarded")
        elif kept.active_offset < c:
            consider(
                RecordFact(kept.active_offset, 0, CopiedFrom(standby, kept.standby_offset)),
                TranslationStatus.KEPT_ANCHOR,
                "kept anchor",
            )
        elif at is not None and at.offset == kept.active_offset:
            pass  # the same record is the record at c this cycle: already considered
        else:
            notes.append(f"kept anchor {kept} discarded: c={c} went below its active offset (group reset)")

    common = dict(
        group_id=facts.group_id, topic=facts.topic, partition=facts.partition, active=active, standby=standby,
        committed=c, standby_committed=facts.standby_committed,
    )
    if not candidates:
        status = _problem_status(warnings) or TranslationStatus.NO_ANCHOR
        looked = f"record at c {'at ' + str(at.offset) if at else 'none'}, {len(below)} records below c"
        reason = f"no standby-origin ({standby}) anchor usable ({looked}" + (f"; kept anchor {kept}" if kept else "") + ")"
        if notes:
            reason += ": " + "; ".join(notes)
        return TranslationResult(
            strategy=None, standby_offset=None, status=status, reason=reason, anchor_to_keep=None,
            warnings=tuple(dict.fromkeys(warnings)), **common,
        )

    best = max(candidates, key=lambda cand: cand.rank)
    a, s = best.anchor.active_offset, best.anchor.standby_offset
    if best.status is TranslationStatus.HEADER_EXACT:
        reason = f"record at c ({active}:{a}) is a copy of {standby}:{s}: t = s"
    elif best.status is TranslationStatus.HEADER_ANCHOR:
        gap = "the last processed record" if below and below[0].offset == a else "a processed record"
        reason = f"{gap} ({active}:{a} < c) is a copy of {standby}:{s}: t = s + 1"
    else:
        reason = f"kept anchor {best.anchor} (a < c): t = s + 1"
    if notes:
        reason += "; " + "; ".join(notes)

    # Zero duplicates are known when every standby record is produced on the standby (one-way
    # from the standby) and no real record lies between the anchor and c.
    expected_duplicates = None
    if facts.shape.produced_only_on(standby):
        if best.status is TranslationStatus.HEADER_EXACT:
            expected_duplicates = 0
        elif best.status is TranslationStatus.HEADER_ANCHOR and below and below[0].offset == a:
            expected_duplicates = 0
    return TranslationResult(
        strategy=Strategy.HEADER_ANCHOR, standby_offset=best.t, status=best.status, reason=reason,
        expected_duplicates=expected_duplicates, anchor_to_keep=best.anchor, anchor_used=best.anchor,
        warnings=tuple(dict.fromkeys(warnings)), **common,
    )
