"""Strategy: MirrorMaker 2's offset-sync pairs as anchors, for a one-way topic mirrored by a plain
MirrorMaker 2 (no origin headers), the group active on the producing cluster A, standby B.

A pair ``(u, d)`` of the offset-syncs topic (translation/offset_sync.py) says: A's record ``u``
was written on B at ``d``. MirrorMaker 2 sends it only once that write is acknowledged.

**The setting, and what is excluded.** Every record of B is a copy of a record of A (a one-way
topic produced on A). A two-way topic is excluded: a record produced on B below ``t`` has its copy
on A wherever the reverse mirror put it, which no pair of this direction says anything about. A
mirror that transforms or filters records is excluded: a filtered record gets no pair and no copy,
and a transformed copy does not carry its original's identity, which the refinement matches on.
Copying is per partition, in A's order, by one producer at a time (a task); without exactly-once a
task that restarts resumes at its committed source position, which is at or before what it had
copied, so a restart copies some records again, after everything written before it.

**Why the pair alone does not prove ``t = d + 1``, nor ``t = d`` for ``u == c``.** NO-LOSS (every
record of B below ``t`` copies a record of A below ``c``) is about every record below ``t``, and a
pair says nothing of the records below ``d``: a task that copied A's records 0..20, committed its
position at 8 and crashed is followed by one that copies 9.. again and sends the pair
``(9, 21)``. For ``c = 15`` that pair suggests ``t = 22``, below which B holds the first copies of
15..20: lost by the definition (the group would read their second copies, but a record of B below
``t`` is unprocessed). Every pair was delivered; sparse pairs (``offset.lag.max``), lost sends and
compaction only make such pairs harder to spot. So a pair is used only once something bounds what
lies below its ``d``.

**The bound below d (confirmation).** Each pair carries ``active_end_after``: A's log end read
after the pair was first read. Every record of B at or below ``d`` was written before the pair was
sent, so before it was read, so before that log end was read; and a record is copied only once it
is on A. So every record of B at or below ``d`` copies a record of A below ``active_end_after``.
When ``active_end_after <= c`` they are all processed: ``t0 = d + 1`` satisfies NO-LOSS, whatever
restarts, lost sends or re-copies came before (a *confirmed* pair). No pair with ``u == c`` can be
confirmed (``u`` itself is below its ``active_end_after``), so the exact case comes from the
refinement below. Among the confirmed pairs the one with the largest ``d`` gives the largest
``t0``, and each is safe on its own (NO-LOSS is closed downwards), so pairs sharing a ``u`` (a
record copied twice) need no choice: their largest ``d`` wins. A pair whose ``u`` is not below its
``active_end_after`` contradicts the reads and is not used.

**Refinement by record identity.** Let ``a`` be the first real record of A at or after ``c`` (the
group's next record), with its content identity. Starting after a confirmed pair ``(u, d)``, B
holds, in order: the rest of that task's copies ``u + 1, u + 2, ...``, then, after any restart, the
copies of a task that resumed at or before where the previous one stopped. So up to the first copy
of ``a`` after ``d``, every record of B after ``d`` copies a record of A below ``a``: processed.
The first record at or after ``t0`` whose identity is ``a``'s, at ``m``, is at or before that copy
(an earlier byte-identical record can only put ``m`` earlier), so ``t = m`` is NO-LOSS. It needs
every real record of B from ``t0`` to ``m`` to have been read: a window read forward from an
offset at or before ``t0`` (the offset syncs' own forward read, or the timestamp search's window
when it starts early enough). When the group has read everything real (no record at or after
``c``), ``a`` is the last processed record and ``t = m + 1``; a confirmed pair whose ``u`` is that
record gives ``t0 = d + 1`` right past its copy.

**No copy in the window yet.** When the window holds no record with the searched identity (the
mirror is behind the group), the same argument covers the whole window: every real record of B
from ``t0`` up to where the window was read without a gap comes before the first copy after ``d``
of the searched record, so it copies a record of A below it, which is processed (below ``a``, or
at or below ``p`` when caught up). So ``t`` is where that read stopped: B's readable end when the
window reached it, else just past the last real record read. For the group's next record and a
window that reached B's end this is exact (the group's next record on B is ``a``'s copy when it
comes); caught up, ``p``'s copy still to come is read again, and a cut window leaves the unread
records to be read again. The timestamp search's window counts only when it reached B's end
(its records come from windows merged around several search results, with gaps between them
otherwise). Sparse or missing pairs only move ``t0`` back: more records to scan, or duplicates
when the window does not reach far enough, never a loss.

**Inside B's log.** ``t0`` lies in ``[standby_log_start, standby_log_end]``; a confirmed pair whose
``d`` is at or past B's log end contradicts the snapshot order (B's log was truncated or
recreated) and is not used, and pairs written before B's downstream offsets went backwards (the
topic was recreated on B) are dropped: the pairs after the last such step are the current log's.

Statuses: ``offset_sync_exact`` (refined onto a record with ``a``'s identity, the only one in a
window that reached B's readable end; past the copy of the last processed record; or, ``a`` not
copied yet, to B's readable end),
``offset_sync_anchor`` (``t0``, or refined with duplicates possible); not translated:
``no_offset_sync`` (no pair at or below ``c``), ``offset_sync_unconfirmed`` (pairs at or below
``c``, none confirmed yet), ``offset_syncs_unreadable``, ``remote_topic_renamed`` (the pre-check in
translate.py), ``not_applicable`` (another shape, or no offset syncs read).

Invariants (tests/translation/test_offset_sync_anchor.py, table-driven, and the properties over
devstack/two_cluster_model.py's MirrorMaker-like mirror: sparse pairs, lost sends, restarts that
copy records twice): ``count_loss == 0`` for every translated result; ``t`` inside B's log; the
result never above :func:`offset_sync_proof`, which ``safe_standby_bound`` counts as a proof.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .facts import OffsetSyncFacts, PartitionFacts, RecordFact, SyncPair
from .result import Strategy, TranslationResult, TranslationStatus


@dataclass(frozen=True)
class OffsetSyncProof:
    """What the pairs prove for one group-partition: ``t`` (NO-LOSS), from ``pair``."""

    t: int
    pair: SyncPair
    status: TranslationStatus  # OFFSET_SYNC_EXACT or OFFSET_SYNC_ANCHOR
    note: str


def current_pairs(pairs: tuple[SyncPair, ...]) -> tuple[SyncPair, ...]:
    """The pairs written for B's current log: those after the last pair whose downstream offset is
    below its predecessor's (B's offsets went backwards: the topic was recreated or truncated)."""
    start = 0
    for i in range(1, len(pairs)):
        if pairs[i].downstream < pairs[i - 1].downstream:
            start = i
    return pairs[start:]


def _window(facts: PartitionFacts, syncs: OffsetSyncFacts, t0: int) -> tuple[list[RecordFact], bool, int | None] | None:
    """Every real record of B from ``t0`` on that was read (by offset), whether they reach B's
    readable end, and the offset below which every real record from ``t0`` on is among them (None
    when no such offset is known); None when no window read starts at or before ``t0``."""
    windows: list[tuple[int | None, tuple[RecordFact, ...], bool, bool]] = [
        # the offset syncs' forward read is one contiguous read from forward_from
        (syncs.forward_from, syncs.forward_records, syncs.forward_complete, True)
    ]
    tf = facts.timestamp
    if tf is not None:
        windows.append((tf.search_offset, tf.standby_records, tf.standby_records_complete, False))
    for start, records, complete, contiguous in windows:
        if start is not None and start <= t0 and (records or complete):
            inside = {r.offset: r for r in records if t0 <= r.offset < facts.standby_log_end}
            ordered = [inside[o] for o in sorted(inside)]
            if complete:
                read_to = facts.standby_log_end
            elif contiguous and ordered:
                read_to = ordered[-1].offset + 1
            else:
                read_to = None
            return ordered, complete, read_to
    return None


def _refine(facts: PartitionFacts, syncs: OffsetSyncFacts, pair: SyncPair) -> OffsetSyncProof:
    """``t0 = d + 1`` moved forward to the first record with the identity of the group's next record
    (module docstring); ``t0`` when nothing proves more."""
    standby = facts.standby
    t0 = pair.downstream + 1
    at = facts.usable_record_at_or_after()
    caught_up = at is None
    a = at if at is not None else facts.last_processed_record()
    anchor_note = f"confirmed pair {facts.active}:{pair.upstream}->{standby}:{pair.downstream}"
    if caught_up and a is not None and a.offset == pair.upstream:
        return OffsetSyncProof(t0, pair, TranslationStatus.OFFSET_SYNC_EXACT,
                               f"{anchor_note} is the copy of the last processed record: t = d + 1")
    unrefined = OffsetSyncProof(t0, pair, TranslationStatus.OFFSET_SYNC_ANCHOR, f"{anchor_note}: t = d + 1")
    if a is None or a.identity is None or a.offset < pair.upstream:
        return unrefined
    window = _window(facts, facts.offset_syncs, t0)
    if window is None:
        return OffsetSyncProof(t0, pair, TranslationStatus.OFFSET_SYNC_ANCHOR,
                               f"{anchor_note}: t = d + 1 (no window read from {t0} on to refine)")
    records, complete, read_to = window
    matches = [r.offset for r in records if r.identity == a.identity]
    what = "last processed record" if caught_up else "next record"
    if not matches:
        if read_to is not None and read_to > t0:
            exact = complete and not caught_up
            return OffsetSyncProof(
                read_to, pair, TranslationStatus.OFFSET_SYNC_EXACT if exact else TranslationStatus.OFFSET_SYNC_ANCHOR,
                f"{anchor_note}, refined from {t0} to {read_to}: none of the {len(records)} records read from {t0} "
                f"has the identity of the {what} {facts.active}:{a.offset} (not copied yet), so each copies a "
                f"processed record (window {'complete' if complete else 'cut'}): t = {read_to}",
            )
        return OffsetSyncProof(t0, pair, TranslationStatus.OFFSET_SYNC_ANCHOR,
                               f"{anchor_note}: t = d + 1 (no record with the identity of {facts.active}:{a.offset} "
                               f"in the {len(records)} records read from {t0})")
    m = matches[0]
    t = m + 1 if caught_up else m
    exact = complete and len(matches) == 1
    return OffsetSyncProof(
        t, pair, TranslationStatus.OFFSET_SYNC_EXACT if exact else TranslationStatus.OFFSET_SYNC_ANCHOR,
        f"{anchor_note}, refined from {t0} to {standby}:{m}, the first record with the identity of the {what} "
        f"{facts.active}:{a.offset}" + ("" if exact else f" ({len(matches)} such records read, window "
                                                        f"{'complete' if complete else 'cut'})") + f": t = {t}",
    )


def offset_sync_proof(facts: PartitionFacts) -> OffsetSyncProof | tuple[TranslationStatus, str]:
    """The largest ``t`` MirrorMaker 2's pairs prove for ``facts`` (module docstring), or the status
    and reason why they prove nothing. Pure; the rule and ``safe_standby_bound`` both ask it."""
    c, active, standby = facts.committed, facts.active, facts.standby
    syncs = facts.offset_syncs
    if c is None:
        return TranslationStatus.NO_COMMITTED_OFFSET, f"group has no committed offset on {active}"
    if syncs is None:
        return TranslationStatus.NOT_APPLICABLE, "no offset syncs were read for this partition"
    if not facts.shape.produced_only_on(active):
        return (TranslationStatus.NOT_APPLICABLE,
                f"offset syncs need a one-way topic produced on {active}; shape is {facts.shape.value}")
    if syncs.unreadable is not None:
        return TranslationStatus.OFFSET_SYNCS_UNREADABLE, f"offset-syncs topic not read: {syncs.unreadable}"
    if syncs.remote_topic is not None and syncs.remote_topic != facts.topic:
        return (TranslationStatus.REMOTE_TOPIC_RENAMED,
                f"{facts.topic!r} is mirrored to {standby} as {syncs.remote_topic!r}")
    pairs = current_pairs(syncs.pairs)
    at_or_below = [p for p in pairs if p.upstream <= c]
    if not at_or_below:
        return (TranslationStatus.NO_OFFSET_SYNC,
                f"no offset-sync pair at or below c={c} among {len(pairs)} pairs of {facts.topic}[{facts.partition}]")
    confirmed = [p for p in at_or_below
                 if p.active_end_after is not None and p.upstream < p.active_end_after <= c]
    if not confirmed:
        newest = max(at_or_below, key=lambda p: p.downstream)
        return (TranslationStatus.OFFSET_SYNC_UNCONFIRMED,
                f"{len(at_or_below)} pairs at or below c={c} (newest {active}:{newest.upstream}->"
                f"{standby}:{newest.downstream}), none read before an {active} log end at or below c yet")
    usable = [p for p in confirmed if facts.standby_log_start <= p.downstream + 1 and p.downstream < facts.standby_log_end]
    if not usable:
        if any(p.downstream >= facts.standby_log_end for p in confirmed):
            return (TranslationStatus.INCONSISTENT_FACTS,
                    f"confirmed pairs name offsets at or past {standby}'s log end {facts.standby_log_end}")
        return (TranslationStatus.STANDBY_RECORDS_DELETED,
                f"confirmed pairs give t below {standby}'s log start {facts.standby_log_start}")
    best = max(usable, key=lambda p: p.downstream)
    return _refine(facts, syncs, best)


def refinement_start(facts: PartitionFacts) -> int | None:
    """Where the refinement of :func:`offset_sync_proof` starts for ``facts`` (``d + 1`` of the pair
    it uses), None when the pairs prove nothing: where a reader reads the standby forward from."""
    proof = offset_sync_proof(dataclasses.replace(facts, timestamp=None))
    return None if isinstance(proof, tuple) else proof.pair.downstream + 1


def _fields(facts: PartitionFacts) -> dict[str, Any]:
    return dict(
        group_id=facts.group_id, topic=facts.topic, partition=facts.partition, active=facts.active,
        standby=facts.standby, committed=facts.committed, standby_committed=facts.standby_committed,
    )


def translate_by_offset_sync(facts: PartitionFacts) -> TranslationResult:
    """Translate ``facts.committed`` by MirrorMaker 2's confirmed offset-sync pairs, refined by
    record identity (module docstring)."""
    proof = offset_sync_proof(facts)
    if isinstance(proof, tuple):
        status, reason = proof
        return TranslationResult(strategy=None, standby_offset=None, status=status, reason=reason, **_fields(facts))
    return TranslationResult(
        strategy=Strategy.OFFSET_SYNC, standby_offset=proof.t, status=proof.status, reason=proof.note,
        **_fields(facts),
    )
