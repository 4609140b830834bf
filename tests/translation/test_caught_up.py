"""Strategy 3: the caught-up rule (stale fast-forward to the standby log end, docs/concepts/strategies.md)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from offset_pipeline.translation import (
    Anchor,
    CaughtUpFacts,
    CaughtUpPoint,
    NoLossViolation,
    PartitionFacts,
    Strategy,
    TopicShape,
    TranslationStatus,
    caught_up_problem,
    check_no_loss,
    kept_point_problem,
    safe_standby_bound,
    translate_caught_up,
    translate_partition,
)
import devstack.two_cluster_model as model_module
from devstack.two_cluster_model import QUIET_MS, TwoClusterModel, count_duplicates, count_loss

A, B = "idc1", "idc2"


def facts(c=10, *, stable=900.0, to_active=7, to_standby=10, standby_end=7, window=600.0, caught=True):
    return PartitionFacts(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=c, active_log_start=0,
        active_log_end=10, standby_log_start=0, standby_log_end=standby_end, shape=TopicShape.two_way(),
        caught_up=CaughtUpFacts(stable, to_active, to_standby, window) if caught else None,
    )


def test_applies_and_gives_the_standby_log_end():
    result = translate_caught_up(facts())
    assert (result.status, result.standby_offset, result.strategy) == (TranslationStatus.CAUGHT_UP, 7, Strategy.CAUGHT_UP)
    assert result.expected_duplicates == 0


def test_zero_duplicates_only_when_the_other_mirror_caught_up_too():
    assert translate_caught_up(facts(to_standby=9)).expected_duplicates is None
    assert translate_caught_up(facts(to_standby=None)).expected_duplicates is None


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"c": 9}, "lag is not 0"),
        ({"stable": 599.0}, "moved"),
        ({"stable": 30.0, "window": 10.0}, None),
        ({"to_active": 6}, "behind"),
        ({"to_active": None}, "unknown"),
        ({"caught": False}, "no caught-up facts"),
    ],
)
def test_each_condition(kwargs, why):
    problem = caught_up_problem(facts(**kwargs))
    if why is None:
        assert problem is None
    else:
        assert why in problem
        result = translate_caught_up(facts(**kwargs))
        assert result.status is TranslationStatus.NOT_APPLICABLE
        assert result.standby_offset is None


def quiet_two_way_model():
    # A low-traffic two-way partition: the group read everything, both mirrors are done, the last
    # record on A was produced on A, so the only anchor is an old one.
    model = TwoClusterModel.from_notation(["b0'", "a0", "a1", "a2"], ["b0", "a0'", "a1'", "a2'"])
    model.tick(QUIET_MS)
    return model


def test_fast_forward_replaces_a_stale_anchor():
    model = quiet_two_way_model()
    stale = translate_partition(model.partition_facts(4, window=1, kept_anchor=Anchor(A, B, 0, 0),
                                                      shape=TopicShape.two_way(), with_caught_up=False))
    assert (stale.status, stale.standby_offset) == (TranslationStatus.KEPT_ANCHOR, 1)
    assert count_duplicates(model, 4, 1) == 3

    result = translate_partition(model.partition_facts(4, window=1, kept_anchor=Anchor(A, B, 0, 0),
                                                       shape=TopicShape.two_way()))
    assert (result.status, result.standby_offset) == (TranslationStatus.CAUGHT_UP, 4)
    assert "replaces kept_anchor" in result.reason
    assert result.anchor_to_keep == Anchor(A, B, 0, 0)  # still kept for when traffic resumes
    assert count_loss(model, 4, 4) == 0 and count_duplicates(model, 4, 4) == 0


def test_header_result_stays_when_it_is_as_high():
    model = TwoClusterModel.from_notation(["a0", "b0'"], ["a0'", "b0"])
    model.tick(QUIET_MS)
    result = translate_partition(model.partition_facts(2, shape=TopicShape.two_way()))
    assert (result.status, result.standby_offset) == (TranslationStatus.HEADER_ANCHOR, 2)


def test_not_while_the_standby_to_active_mirror_is_behind():
    # b1 is on B but not yet on A: fast-forwarding to B's end would skip it (loss).
    model = TwoClusterModel.from_notation(["b0'", "a0"], ["b0", "a0'", "b1"])
    model.tick(QUIET_MS)
    result = translate_partition(model.partition_facts(2, shape=TopicShape.two_way()))
    assert count_loss(model, 2, 3) == 1
    assert result.status is TranslationStatus.HEADER_ANCHOR
    assert result.standby_offset == 1
    assert "behind" in caught_up_problem(model.partition_facts(2))


def test_not_without_a_quiet_window():
    model = TwoClusterModel.from_notation(["b0'", "a0", "a1"], ["b0", "a0'", "a1'"])
    result = translate_partition(model.partition_facts(3, window=1, shape=TopicShape.two_way()))
    assert result.status is TranslationStatus.NO_ANCHOR
    assert "caught-up:" in result.reason


def test_one_way_topic_without_headers_gets_in_sync_when_quiet():
    """Without record identities (not read), the quiet window is what makes it exact; with them, the
    timestamp search lands on the copy first."""
    model = TwoClusterModel.from_notation(["a0", "a1"], ["a0'", "a1'"], mirror_headers=False)
    model.tick(QUIET_MS)
    facts = model.partition_facts(2, shape=TopicShape.one_way(A))
    unidentified = dataclasses.replace(facts, records_below=tuple(
        dataclasses.replace(r, identity=None) for r in facts.records_below))
    result = translate_partition(unidentified)
    assert (result.status, result.standby_offset) == (TranslationStatus.CAUGHT_UP, 2)
    assert result.in_sync
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, 2)
    assert result.in_sync


# -- offsets are not dense: a trailing commit marker ------------------------------------------------


def gap_facts(c=9, *, to_active=6, no_c_gap=True, no_mirror_gap=True, to_standby=9, no_active_gap=True):
    return PartitionFacts(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=c, active_log_start=0,
        active_log_end=10, standby_log_start=0, standby_log_end=7, shape=TopicShape.two_way(),
        caught_up=CaughtUpFacts(900.0, to_active, to_standby, 600.0, no_record_from_committed=no_c_gap,
                                no_record_from_standby_mirror_position=no_mirror_gap,
                                no_record_from_active_mirror_position=no_active_gap),
    )


@pytest.mark.parametrize(
    ("kwargs", "why", "duplicates"),
    [
        ({}, None, 0),  # c and both mirrors one short of the end, only markers there: caught up
        ({"no_c_gap": False}, "lag is not 0", None),
        ({"no_mirror_gap": False}, "behind", None),
        ({"no_active_gap": False}, None, None),  # only the zero-duplicate promise depends on it
        ({"to_standby": None}, None, None),
    ],
)
def test_a_gap_of_markers_only_counts_as_read(kwargs, why, duplicates):
    facts = gap_facts(**kwargs)
    problem = caught_up_problem(facts)
    result = translate_caught_up(facts)
    if why is None:
        assert problem is None
        assert (result.status, result.standby_offset) == (TranslationStatus.CAUGHT_UP, 7)
        assert result.expected_duplicates == duplicates
    else:
        assert why in problem and result.standby_offset is None


def test_trailing_commit_marker_on_the_model():
    # A transactional batch on A ends with a marker: the group's c stops one short of the log end.
    model = TwoClusterModel.from_notation(["b0'", "a0", "a1", "_"], ["b0", "a0'", "a1'"])
    model.tick(QUIET_MS)
    facts = model.partition_facts(3, window=1, shape=TopicShape.two_way())
    assert facts.caught_up.no_record_from_committed
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.CAUGHT_UP, 3)
    assert count_loss(model, 3, 3) == 0 and count_duplicates(model, 3, 3) == 0
    # a real record in the gap: not caught up
    model = TwoClusterModel.from_notation(["b0'", "a0", "a1"], ["b0", "a0'", "a1'"])
    model.tick(QUIET_MS)
    assert "lag is not 0" in caught_up_problem(model.partition_facts(2, window=1))


# -- the kept fast-forward point (the sync cycle after a fast-forward) -----------------------------


def kept_facts(c=10, *, point=CaughtUpPoint(A, B, 10, 7), standby_start=0, standby_end=9):
    return PartitionFacts(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=c, active_log_start=0,
        active_log_end=12, standby_log_start=standby_start, standby_log_end=standby_end,
        shape=TopicShape.two_way(), kept_caught_up=point,
    )


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({}, None),
        ({"c": 11}, "moved from"),
        ({"c": 9}, "moved from"),  # reset backwards: the point says nothing
        ({"point": CaughtUpPoint(B, A, 10, 7)}, "other direction"),
        ({"standby_end": 6}, "outside"),  # a recreated standby topic
        ({"standby_start": 8}, "outside"),  # retention passed it
        ({"point": None}, "no fast-forward kept"),
    ],
)
def test_kept_point_applies_to_its_own_c_only(kwargs, why):
    facts = kept_facts(**kwargs)
    problem = kept_point_problem(facts)
    result = translate_partition(facts)
    if why is None:
        assert problem is None
        assert (result.status, result.strategy, result.standby_offset) == (
            TranslationStatus.CAUGHT_UP, Strategy.CAUGHT_UP, 7)
        assert safe_standby_bound(facts) == 7
        check_no_loss(facts, result)
    else:
        assert why in problem
        assert result.standby_offset is None
        if kwargs.get("point", 1) is not None:
            assert why in result.reason


def test_a_forged_kept_caught_up_result_is_refused():
    facts = kept_facts()
    result = translate_partition(facts)
    with pytest.raises(NoLossViolation, match="kept fast-forward"):
        check_no_loss(facts, dataclasses.replace(result, standby_offset=8))
    with pytest.raises(NoLossViolation, match="moved from"):
        check_no_loss(kept_facts(c=11), result)


def test_kept_point_is_exact_after_new_standby_records():
    # Fast-forwarded at c=2 -> t=3 when quiet; then b1 is produced on B (not yet mirrored: no header
    # at c to anchor on): the group has not read it, so t stays 3 and nothing is lost or repeated.
    model = TwoClusterModel.from_notation(["b0'", "a0"], ["b0", "a0'", "_"])
    model.tick(QUIET_MS)
    live = translate_partition(model.partition_facts(2, shape=TopicShape.two_way()))
    assert (live.status, live.standby_offset) == (TranslationStatus.CAUGHT_UP, 3)
    model.produce(B, [model.clock])
    facts = model.partition_facts(2, shape=TopicShape.two_way(), with_caught_up=False,
                                  kept_caught_up=CaughtUpPoint(A, B, 2, 3))
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.CAUGHT_UP, 3)
    assert count_loss(model, 2, 3) == 0 and count_duplicates(model, 2, 3) == 0


def test_failover_trials_use_live_kept_and_marker_caught_up_results_and_lose_nothing(monkeypatch):
    seen = Counter()

    def counting(facts):
        result = translate_partition(facts)
        if result.strategy is Strategy.CAUGHT_UP:
            seen["kept" if facts.caught_up is None else "marker" if facts.committed < facts.active_log_end else "live"] += 1
        return result

    monkeypatch.setattr(model_module, "translate_partition", counting)
    summary = model_module.run_trials(1000, seed=20240601)
    assert summary["lost"] == 0 and summary["cycle_lost"] == 0
    assert seen["kept"] > 0 and seen["marker"] > 0 and seen["live"] > 0, seen
