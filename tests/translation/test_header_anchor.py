"""Strategy 1: standby-origin header anchors (Lemma 1), never past c, kept anchors while c grows.

Logs are written in this notation: ``a1`` is a record produced on that cluster, ``b1'`` a
copy of the other cluster's ``b1``, ``_`` a gap (transaction marker or aborted record). The active
cluster is idc1 (its records named a*), the standby idc2 (b*).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.translation import (
    Anchor,
    CopiedFrom,
    MalformedHeader,
    PartitionFacts,
    RecordFact,
    Strategy,
    TopicShape,
    TranslationStatus,
    translate_by_header_anchor,
    translate_partition,
)
from offset_pipeline.translation.headers import LOCAL, HeaderProblem
from devstack.two_cluster_model import TwoClusterModel, count_duplicates, count_loss

A, B = "idc1", "idc2"
TWO_WAY = TopicShape.two_way()


def run(active_log, standby_log, c, *, window=8, kept=None, shape=TWO_WAY, **model_kwargs):
    model = TwoClusterModel.from_notation(active_log, standby_log, **model_kwargs)
    facts = model.partition_facts(c, window=window, kept_anchor=kept, shape=shape, with_caught_up=False)
    result = translate_partition(facts)
    if result.translated:
        assert count_loss(model, c, result.standby_offset) == 0, result
    return model, result


# -- the examples of docs/concepts/no-loss.md ----------------------------------------------------------


def test_lemma_2_x_crossing_does_not_give_2():
    # A = [a1, b1'], B = [b1, a1'], c = 1: the active-origin anchor a1 <-> a1' would say t = 2 (loss).
    model, result = run(["a1", "b1'"], ["b1", "a1'"], 1)
    assert result.standby_offset != 2
    assert count_loss(model, 1, 2) == 1  # the model agrees that 2 would lose b1
    assert result.status is TranslationStatus.HEADER_EXACT
    assert result.standby_offset == 0  # b1' is the record at c: t = s
    assert count_duplicates(model, 1, 0) == 1  # a1' is re-read: a duplicate, never a loss


def test_never_scan_forward_past_c():
    # A = [a0, a1, b1'], B = [a0', a1', b1], c = 1: b1' is after the record at c; t = 2 would lose a1'.
    model, result = run(["a0", "a1", "b1'"], ["a0'", "a1'", "b1"], 1)
    assert result.standby_offset != 2
    assert count_loss(model, 1, 2) == 1
    assert result.status is TranslationStatus.NO_ANCHOR
    assert result.standby_offset is None


def test_records_past_c_in_the_backward_window_are_ignored():
    # Even if the I/O layer hands records at or past c as "below c", they are never used.
    model = TwoClusterModel.from_notation(["a0", "a1", "b1'"], ["a0'", "a1'", "b1"])
    facts = model.partition_facts(1, shape=TWO_WAY)
    leaky = PartitionFacts(**{**facts.__dict__, "records_below": facts.records_below + (model.record_fact(model.logs[A].entries[2], A),)})
    result = translate_partition(leaky)
    assert result.standby_offset is None


def test_lemma_1_record_at_c_gives_s():
    model, result = run(["a0", "b0'"], ["b0", "a0'"], 1)
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_EXACT, 0)
    assert result.anchor_used == Anchor(A, B, 1, 0)


def test_lemma_1_record_below_c_gives_s_plus_1():
    model, result = run(["b0'", "a0", "a1"], ["b0", "a0'", "a1'"], 2)
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_ANCHOR, 1)
    assert result.strategy is Strategy.HEADER_ANCHOR


def test_caught_up_translates_the_last_processed_record_with_s_plus_1():
    # c equals A's log end: no record at c; the last processed record b0' gives s + 1.
    model, result = run(["a0", "b0'"], ["b0", "a0'"], 2)
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_ANCHOR, 1)
    assert count_duplicates(model, 2, 1) == 1  # a0' crossed: a duplicate


def test_best_anchor_is_the_highest():
    model, result = run(["b0'", "b1'", "a0", "b2'", "a1"], ["b0", "b1", "a0'", "b2", "a1'"], 5)
    assert result.standby_offset == 4  # b2' (s = 3) + 1
    assert result.anchor_to_keep == Anchor(A, B, 3, 3)


@pytest.mark.parametrize("c", [1, 2, 3])
def test_markers_between_c_and_the_record_at_c(c):
    # Offsets 1..3 are gaps: the first real record at or after c is b0' at 4, so t = s.
    model, result = run(["a0", "_", "_", "_", "b0'"], ["b0", "a0'"], c)
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_EXACT, 0)


def test_marker_at_the_end_counts_as_caught_up():
    model, result = run(["a0", "b0'", "_"], ["b0", "a0'"], 2)
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_ANCHOR, 1)


def test_marker_at_c_with_only_local_records_after_gives_nothing():
    model, result = run(["a0", "_", "a1", "b0'"], ["b0", "a0'", "a1'"], 1)
    assert result.status is TranslationStatus.NO_ANCHOR


# -- kept anchors ------------------------------------------------------------------------------------


def test_kept_anchor_is_used_when_the_window_has_none():
    log_a, log_b = ["b0'", "a0", "a1", "a2"], ["b0", "a0'", "a1'", "a2'"]
    _, without = run(log_a, log_b, 4, window=2)
    assert without.status is TranslationStatus.NO_ANCHOR
    _, with_kept = run(log_a, log_b, 4, window=2, kept=Anchor(A, B, 0, 0))
    assert (with_kept.status, with_kept.standby_offset) == (TranslationStatus.KEPT_ANCHOR, 1)
    assert with_kept.anchor_to_keep == Anchor(A, B, 0, 0)


def test_kept_anchor_across_cycles_makes_every_cycle_translate():
    model = TwoClusterModel.from_notation(["b0'", "a0", "a1", "a2", "a3"], ["b0", "a0'", "a1'", "a2'", "a3'"])
    kept = None
    for c in range(0, 6):
        result = translate_partition(model.partition_facts(c, window=1, kept_anchor=kept, shape=TWO_WAY))
        kept = result.anchor_to_keep
        assert result.translated, (c, result)
        assert count_loss(model, c, result.standby_offset) == 0


def test_kept_anchor_discarded_when_the_group_is_reset_below_it():
    _, result = run(["a0", "a1", "a2", "b0'", "a3"], ["b0", "a0'", "a1'", "a2'", "a3'"], 2, kept=Anchor(A, B, 3, 0))
    assert result.status is TranslationStatus.NO_ANCHOR
    assert result.anchor_to_keep is None
    assert "group reset" in result.reason


def test_kept_anchor_equal_to_the_record_at_c_is_the_exact_anchor():
    _, result = run(["a0", "b0'"], ["b0", "a0'"], 1, kept=Anchor(A, B, 1, 0))
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_EXACT, 0)


def test_kept_anchor_of_the_other_direction_is_discarded():
    _, result = run(["a0", "a1"], ["a0'", "a1'"], 2, kept=Anchor(B, A, 0, 0))
    assert result.status is TranslationStatus.NO_ANCHOR
    assert "other direction" in result.reason


def test_kept_anchor_below_standby_log_start_is_discarded():
    log_a, log_b = ["b0'", "b1'", "a0"], ["b0", "b1", "a0'"]
    _, ok = run(log_a, log_b, 3, window=1, kept=Anchor(A, B, 1, 1), standby_log_start=2)
    assert (ok.status, ok.standby_offset) == (TranslationStatus.KEPT_ANCHOR, 2)  # t = s + 1 = log start
    _, gone = run(log_a, log_b, 3, window=1, kept=Anchor(A, B, 0, 0), standby_log_start=2)
    assert gone.status is TranslationStatus.STANDBY_RECORDS_DELETED
    assert gone.anchor_to_keep is None


def test_kept_anchor_past_standby_log_end_is_discarded():
    _, result = run(["a0", "a1"], ["a0'", "a1'"], 2, kept=Anchor(A, B, 0, 5))
    assert result.status is TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END
    assert result.anchor_to_keep is None


# -- bad headers -------------------------------------------------------------------------------------


def facts_with(record_at=None, below=(), *, c=10, standby_log_start=0, standby_log_end=100, kept=None, shape=TWO_WAY):
    return PartitionFacts(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=c, active_log_start=0,
        active_log_end=20, standby_log_start=standby_log_start, standby_log_end=standby_log_end,
        record_at_or_after=record_at, records_below=tuple(below), kept_anchor=kept, shape=shape,
    )


def copy(offset, s):
    return RecordFact(offset, 0, CopiedFrom(B, s))


def bad(offset, problem):
    return RecordFact(offset, 0, MalformedHeader(problem, "test"))


@pytest.mark.parametrize(
    ("record_at", "status"),
    [
        (bad(10, HeaderProblem.OFFSET_NOT_A_NUMBER), TranslationStatus.MALFORMED_HEADER),
        (bad(10, HeaderProblem.OFFSET_NEGATIVE), TranslationStatus.MALFORMED_HEADER),
        (bad(10, HeaderProblem.MISSING_OFFSET), TranslationStatus.MALFORMED_HEADER),
        (bad(10, HeaderProblem.THIRD_CLUSTER), TranslationStatus.THIRD_CLUSTER_HEADER),
        (copy(10, 100), TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END),
        (copy(10, 250), TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END),
        (copy(10, 3), TranslationStatus.STANDBY_RECORDS_DELETED),
    ],
)
def test_bad_header_at_c_gets_its_status(record_at, status):
    result = translate_by_header_anchor(facts_with(record_at, standby_log_start=5))
    assert result.status is status
    assert result.standby_offset is None
    assert result.reason


@pytest.mark.parametrize(
    ("s", "warnings", "t"),
    [
        (99, (), 100),  # the last standby record: t = its log end
        (100, (TranslationStatus.ORIGIN_OFFSET_BEYOND_STANDBY_END,), 51),  # at the log end: cannot be true
        (4, (), 51),  # valid (t = 5, the standby log start) but lower than the other copy
        (3, (TranslationStatus.STANDBY_RECORDS_DELETED,), 51),
    ],
)
def test_window_copies_at_the_edges_of_the_standby_log(s, warnings, t):
    # A copy that cannot be true never hides a true one lower in the window.
    window = [copy(9, s), RecordFact(8, 0, LOCAL), copy(7, 50)]
    result = translate_by_header_anchor(facts_with(None, window, standby_log_start=5))
    assert (result.status, result.standby_offset, result.warnings) == (TranslationStatus.HEADER_ANCHOR, t, warnings)


def test_bad_header_at_c_with_a_good_anchor_below_translates_with_a_warning():
    result = translate_by_header_anchor(facts_with(bad(10, HeaderProblem.OFFSET_NOT_A_NUMBER), [copy(8, 40)]))
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_ANCHOR, 41)
    assert result.warnings == (TranslationStatus.MALFORMED_HEADER,)


def test_third_cluster_outranks_malformed():
    result = translate_by_header_anchor(
        facts_with(bad(10, HeaderProblem.OFFSET_NOT_A_NUMBER), [bad(9, HeaderProblem.THIRD_CLUSTER)])
    )
    assert result.status is TranslationStatus.THIRD_CLUSTER_HEADER


def test_exact_wins_a_tie_with_a_window_anchor():
    result = translate_by_header_anchor(facts_with(copy(10, 41), [copy(9, 40)]))
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_EXACT, 41)


def test_record_at_c_read_after_the_snapshot_is_ignored():
    # offset 20 is A's log end in the snapshot: the record arrived later.
    result = translate_by_header_anchor(facts_with(copy(20, 50), c=20))
    assert result.status is TranslationStatus.NO_ANCHOR


def test_active_origin_records_are_not_anchors():
    # A record on A is never "IDC=<A>" (the mirror never writes that); local records give nothing.
    result = translate_by_header_anchor(facts_with(RecordFact(10, 0), [RecordFact(9, 0)]))
    assert result.status is TranslationStatus.NO_ANCHOR


# -- expected duplicates ------------------------------------------------------------------------------


def test_one_way_from_the_standby_is_exact_every_cycle():
    shape = TopicShape.one_way(B)
    log_a, log_b = ["b0'", "_", "b1'", "b2'", "_"], ["b0", "b1", "b2", "b3"]
    model = TwoClusterModel.from_notation(log_a, log_b)
    for c in range(0, 6):
        result = translate_partition(model.partition_facts(c, window=2, shape=shape))
        assert result.translated
        assert result.expected_duplicates == 0
        assert count_duplicates(model, c, result.standby_offset) == 0
        assert count_loss(model, c, result.standby_offset) == 0


def test_two_way_duplicates_are_not_promised():
    _, result = run(["a0", "b0'"], ["b0", "a0'"], 1)
    assert result.expected_duplicates is None


# -- the best candidate is the highest t among the candidates taken one at a time ------------------

_ORIGINS = st.one_of(
    st.builds(CopiedFrom, st.just(B), st.integers(0, 40)),
    st.builds(CopiedFrom, st.just(A), st.integers(0, 40)),
    st.just(LOCAL),
    st.builds(MalformedHeader, st.sampled_from(list(HeaderProblem))),
)


@settings(max_examples=300, deadline=None)
@given(
    c=st.integers(5, 30),
    below=st.lists(st.tuples(st.integers(0, 29), _ORIGINS), max_size=12),
    at=st.one_of(st.none(), _ORIGINS),
    kept=st.one_of(st.none(), st.tuples(st.integers(0, 35), st.integers(0, 40))),
    standby_range=st.tuples(st.integers(0, 10), st.integers(10, 35)),
)
def test_the_result_is_the_best_of_its_candidates_taken_alone(c, below, at, kept, standby_range):
    """The window loop keeps only the highest-s copy; judged one record at a time the rule must
    agree: the same t, the same status, the anchor of the first best record (newest first), and
    every record's warnings in window order."""
    start, end = standby_range
    facts = PartitionFacts(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=c,
        active_log_start=0, active_log_end=40, standby_log_start=start, standby_log_end=end,
        record_at_or_after=RecordFact(c, 0, at) if at is not None else None,
        records_below=tuple(RecordFact(o, 0, origin) for o, origin in below),
        kept_anchor=Anchor(A, B, *kept) if kept is not None else None,
    )
    result = translate_by_header_anchor(facts)

    def alone(**changes):
        empty = {"record_at_or_after": None, "records_below": (), "kept_anchor": None}
        return translate_by_header_anchor(replace(facts, **{**empty, **changes}))

    singles = []
    if facts.record_at_or_after is not None:
        singles.append(alone(record_at_or_after=facts.record_at_or_after))
    singles += [alone(records_below=(r,)) for r in facts.usable_records_below()]
    if facts.kept_anchor is not None:
        singles.append(alone(kept_anchor=facts.kept_anchor, record_at_or_after=facts.record_at_or_after))
    rank = {TranslationStatus.HEADER_EXACT: 2, TranslationStatus.HEADER_ANCHOR: 1, TranslationStatus.KEPT_ANCHOR: 0}
    translated = [r for r in singles if r.translated]
    if not translated:
        assert not result.translated
        return
    best = max(translated, key=lambda r: (r.standby_offset, rank[r.status]))
    assert (result.standby_offset, result.status, result.anchor_used) == (
        best.standby_offset, best.status, best.anchor_used)
    window_warnings = [w for r in singles[: len(singles) - (facts.kept_anchor is not None)] for w in r.warnings]
    assert list(result.warnings[: len(dict.fromkeys(window_warnings))]) == list(dict.fromkeys(window_warnings))
