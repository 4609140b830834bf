"""The largest standby offset the facts PROVE loss-free, whatever strategy the translation picked.

:func:`safe_standby_bound` is a second, simpler line of defence behind :func:`translate_partition`:
the commit step refuses a translated ``t`` above it (``commit_rules``), and the ``no_loss`` asset
check compares the standby offsets it reads back after committing against it. It looks at the same
:class:`PartitionFacts` the translation saw, never at the translation's result.

The bound is the highest of these proofs (docs/concepts/no-loss.md), each one NO-LOSS on its own:

* **Lemma 1, standby-origin anchors (every shape).** A record of the active cluster A that is a
  valid copy of the standby B's record ``s`` (``IDC=<B>``, ``Offset=s``): ``s`` when it is the first
  real record at or after ``c``; ``s + 1`` when it is below ``c`` (backward window); ``s + 1`` for
  the kept anchor ``(a, s)`` of this direction when ``a < c``. A header naming an ``s`` at or past
  B's log end is impossible under the snapshot order and proves nothing.
* **Lemma 3, one-way topics translated from the producing side.** Every record of B is a copy of a
  record of A, in A's order. So a known record of B (read for the timestamp search: the forward
  window, the last and the first record) at offset ``r`` that copies A's record ``h`` proves
  ``r + 1`` when ``h < c``, and ``r`` when ``h`` is the first real record at or after ``c``.
  Used only when the mirror marks every copy (``mirror_writes_headers``) and every known record of
  B is such a copy (a record produced on B refutes the one-way premise, as in the timestamp
  search; without headers no record of B can be identified), with CreateTime on B and the search
  made for the record the translation searches (the first real record at or after ``c``, else the
  last one below it). Those two make the forward window start at or before the first retained
  copy of the searched record, which is what keeps a mirror that redelivers (at-least-once) safe
  too: a second copy of a processed record can sit after the copy of an unprocessed one, and the
  window then reads that unprocessed copy first, so the known-loss cap below applies.
* **MirrorMaker 2's confirmed offset-sync pairs (one-way topics produced on A, no origin
  headers).** A pair ``(u, d)`` read before an active log end at or below ``c`` proves ``d + 1``:
  every record of B at or below ``d`` was written before the pair was read, so it copies a record
  of A below that log end. Refined forward to the first record with the identity of the group's
  next record when a window read from at or before ``d + 1`` reaches it (in-order copying; tasks
  restart at or before what they copied). :func:`offset_sync_proof` in offset_sync_anchor.py,
  where the argument is written out; the translation's offset-sync results are exactly these.
* **Caught up (the caught-up rule).** B's log end, when :func:`caught_up_problem` is None; a kept
  fast-forward point's ``t`` when ``c`` is still its ``active_offset`` (:func:`kept_point_problem`).

Invariants (tested in tests/translation/test_safe_bound.py, table-driven and with hypothesis over
the two-cluster model):

* **Proven.** ``count_loss(model, c, bound) == 0`` for facts read from the model, on every shape,
  also with a mirror that redelivers.
* **Inside B's log.** The bound is never above ``standby_log_end``.
* **Never past a known loss.** The bound is never above the offset of a known record of B that
  copies an active record at or after ``c`` (any ``t`` above it loses that record).
* **None when nothing is proven**, including every input the translation's pre-checks refuse (no
  committed offset, ``c`` outside the active log, a log start past its log end, a topic missing
  on B, different partition counts). The trivial ``t = standby_log_start`` (nothing retained
  below it) is not counted as a proof.
* **Independent of the strategy.** Computed from the facts only; it covers every header and
  caught-up result by construction, and timestamp results that land on, or refine past, a known
  copy. A translated result above it is a finding, not something to round away.

Not covered: a timestamp search result that no known copy backs (a mirror without headers, or a
search that landed after the standby's last real record, say on the mirror's last transaction
marker, with nothing read after it). It is loss-free by the timestamp argument of
``timestamp_search`` but not proven by the records read, so it is above the bound and the commit
guard refuses it.
"""

from __future__ import annotations

from .caught_up import caught_up_problem, kept_point_problem
from .facts import PartitionFacts, RecordFact, TimestampType
from .headers import CopiedFrom
from .offset_sync_anchor import offset_sync_proof
from .translate import facts_problem


def _lemma_1(facts: PartitionFacts, c: int) -> list[int]:
    standby, end = facts.standby, facts.standby_log_end
    proofs: list[int] = []
    at = facts.usable_record_at_or_after()
    s = at.copy_of(standby) if at is not None else None
    if s is not None and s < end:
        proofs.append(s)
    # Only the largest proof counts (safe_standby_bound takes the max): one per window, not one per
    # record. record.copy_of(standby), inlined: this loop runs groups x window times.
    highest = -1
    for record in facts.usable_records_below():
        origin = record.origin
        if isinstance(origin, CopiedFrom) and origin.cluster == standby and highest < origin.offset < end:
            highest = origin.offset
    if highest >= 0:
        proofs.append(highest + 1)
    kept = facts.kept_anchor
    if (
        kept is not None
        and (kept.active, kept.standby) == (facts.active, standby)
        and kept.active_offset < c
        and kept.standby_offset < end
    ):
        proofs.append(kept.standby_offset + 1)
    return proofs


def _known_standby_records(facts: PartitionFacts) -> list[RecordFact]:
    """The records of B read for the timestamp search, inside B's log, by offset."""
    tf = facts.timestamp
    if tf is None:
        return []
    records = list(tf.standby_records) + [r for r in (tf.standby_last, tf.standby_first) if r is not None]
    inside = {r.offset: r for r in records if facts.standby_log_start <= r.offset < facts.standby_log_end}
    return [inside[o] for o in sorted(inside)]


def _lemma_3(facts: PartitionFacts, c: int, known: list[RecordFact]) -> list[int]:
    tf = facts.timestamp
    if tf is None or not tf.mirror_writes_headers or not facts.shape.allows_timestamp_search(facts.active):
        return []
    if facts.standby_timestamp_type is not TimestampType.CREATE_TIME:
        return []
    searched = facts.usable_record_at_or_after() or facts.last_processed_record()
    if searched is None or tf.searched_offset != searched.offset:
        return []
    origins = [r.copy_of(facts.active) for r in known]
    if any(h is None for h in origins):
        return []  # a record produced on B: the topic is not one-way
    at = facts.usable_record_at_or_after()
    proofs: list[int] = []
    for record, h in zip(known, origins):
        if h < c:
            proofs.append(record.offset + 1)
        elif at is not None and h == at.offset:
            proofs.append(record.offset)
    return proofs


def _known_loss(facts: PartitionFacts, c: int, known: list[RecordFact]) -> int | None:
    """The lowest offset of a known record of B that copies an unprocessed active record."""
    return next((r.offset for r in known if (h := r.copy_of(facts.active)) is not None and h >= c), None)


def safe_standby_bound(facts: PartitionFacts) -> int | None:
    """The largest standby offset these facts prove loss-free, or None (module docstring)."""
    if facts_problem(facts) is not None:
        return None
    c = facts.committed
    assert c is not None  # the pre-check refuses a missing committed offset
    known = _known_standby_records(facts)
    proofs = _lemma_1(facts, c) + _lemma_3(facts, c, known)
    if facts.offset_syncs is not None:
        by_sync = offset_sync_proof(facts)
        if not isinstance(by_sync, tuple):
            proofs.append(by_sync.t)
    if facts.caught_up is not None and caught_up_problem(facts) is None:
        proofs.append(facts.standby_log_end)
    if facts.kept_caught_up is not None and kept_point_problem(facts) is None:
        proofs.append(facts.kept_caught_up.standby_offset)
    if not proofs:
        return None
    bound = min(max(proofs), facts.standby_log_end)
    loss = _known_loss(facts, c, known)
    return bound if loss is None else min(bound, loss)
