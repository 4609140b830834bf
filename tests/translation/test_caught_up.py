"""Strategy 3: the caught-up rule (stale fast-forward to the standby log end, DESIGN.md §4.3)."""

from __future__ import annotations

import pytest

from offset_pipeline.translation import (
    Anchor,
    CaughtUpFacts,
    PartitionFacts,
    Strategy,
    TopicShape,
    TranslationStatus,
    caught_up_problem,
    translate_caught_up,
    translate_partition,
)
from offset_pipeline.translation.model import QUIET_MS, TwoClusterModel, count_duplicates, count_loss

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
    model = TwoClusterModel.from_notation(["a0", "a1"], ["a0'", "a1'"], mirror_headers=False)
    model.tick(QUIET_MS)
    result = translate_partition(model.partition_facts(2, shape=TopicShape.one_way(A)))
    assert (result.status, result.standby_offset) == (TranslationStatus.CAUGHT_UP, 2)
    assert result.in_sync
