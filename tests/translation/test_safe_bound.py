"""safe_standby_bound: the largest standby offset the facts prove loss-free, whatever the strategy.

Table cases in the notation of the two-cluster model (``a1`` produced on the active idc1, ``b1`` on the standby
idc2, ``x'`` a copy of ``x``, ``_`` a gap), each checked against the model's definition of loss;
then hypothesis over the two-cluster model: the bound never loses a record, and no translated result
is above it.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.translation import (
    Anchor,
    CaughtUpFacts,
    CopiedFrom,
    PartitionFacts,
    RecordFact,
    Strategy,
    TimestampFacts,
    TopicShape,
    TranslationStatus,
    decision_log_line,
    safe_standby_bound,
    translate_partition,
)
from devstack.two_cluster_model import TwoClusterModel, count_loss, run_trial, without_identities
from tests.helpers.model_trials import PROFILE, configs, events, header_less_safe

A, B = "idc1", "idc2"
ONE_WAY = TopicShape.one_way(A)
TWO_WAY = TopicShape.two_way()


def bound_of(active_log, standby_log, c, *, shape=TWO_WAY, kept=None, caught_up=False, window=8, refine=32,
             **model_kwargs):
    model = TwoClusterModel.from_notation(active_log, standby_log, **model_kwargs)
    facts = model.partition_facts(c, shape=shape, kept_anchor=kept, with_caught_up=caught_up, window=window,
                                  refine_window=refine)
    bound = safe_standby_bound(facts)
    if bound is not None:
        assert count_loss(model, c, bound) == 0, (active_log, standby_log, c, bound)
        assert bound <= facts.standby_log_end
    return bound


# (name, active log, standby log, c, keyword arguments, expected bound)
MODEL_CASES = [
    # -- Lemma 1: standby-origin anchors ---------------------------------------------------------
    ("record at c is a standby-origin copy: s", ["a0", "b0'", "b1'", "a1"], ["b0", "a0'", "b1", "a1'"], 2, {}, 2),
    ("standby-origin record below c: s + 1", ["a0", "b0'", "b1'", "a1"], ["b0", "a0'", "b1", "a1'"], 3, {}, 3),
    ("Lemma 2: the active-origin a1 <-> a1' is not used, b1' at c gives 0", ["a1", "b1'"], ["b1", "a1'"], 1, {}, 0),
    ("never scan past c", ["a0", "a1", "b1'"], ["a0'", "a1'", "b1"], 1, {}, None),
    ("gaps: offsets differ", ["_", "b0'", "_", "a0"], ["b0", "_", "a0'"], 3, {}, 1),
    ("the newest of several anchors", ["b0'", "b1'", "b2'", "a0"], ["b0", "b1", "b2", "a0'"], 3, {}, 3),
    ("kept anchor below c: s + 1", ["b0'", "a0", "a1", "a2"], ["b0", "a0'", "a1'", "a2'"], 3,
     {"kept": Anchor(A, B, 0, 0), "window": 1}, 1),
    ("kept anchor at or past c: nothing", ["a0", "a1", "b0'"], ["a0'", "a1'", "b0"], 1,
     {"kept": Anchor(A, B, 2, 2), "window": 1}, None),
    ("kept anchor of the other direction: nothing", ["b0'", "a0", "a1"], ["b0", "a0'", "a1'"], 3,
     {"kept": Anchor(B, A, 0, 0), "window": 1}, None),
    # -- Lemma 3: one-way topics from the producing side -------------------------------------------
    ("one-way: the copy of the record at c", ["a0", "a1", "a2"], ["_", "a0'", "a1'", "a2'"], 1,
     {"shape": ONE_WAY}, 2),
    ("one-way: everything read, copy of the last record + 1", ["a0", "a1", "a2"], ["a0'", "a1'", "a2'"], 3,
     {"shape": ONE_WAY}, 3),
    ("one-way, not mirrored yet: the last copy + 1", ["a0", "a1", "a2"], ["a0'", "a1'"], 2,
     {"shape": ONE_WAY}, 2),
    ("one-way shape told, but the standby produces: no Lemma 3", ["a0", "a1"], ["a0'", "b0", "a1'"], 1,
     {"shape": ONE_WAY}, None),
    ("Lemma 3 is not for two-way topics", ["a0", "a1", "a2"], ["a0'", "a1'", "a2'"], 1, {}, None),
    ("Lemma 3 is not for the consuming side", ["a0", "a1"], ["a0'", "a1'"], 1,
     {"shape": TopicShape.one_way(B)}, None),
    ("header-less mirror: no copy can be identified", ["a0", "a1", "a2"], ["a0'", "a1'", "a2'"], 1,
     {"shape": ONE_WAY, "mirror_headers": False}, None),
    ("redelivered copies after an unprocessed copy: capped at the known loss", ["a0", "a1", "a2", "a3"],
     ["a0'", "a1'", "a2'", "a0'", "a1'"], 2, {"shape": ONE_WAY}, 2),
    # -- caught up ---------------------------------------------------------------------------------
    ("caught up: the standby log end", ["b0'", "a0"], ["b0", "a0'", "_"], 2, {"caught_up": True}, 3),
    ("caught up replaces a lower anchor", ["b0'", "a0"], ["b0", "a0'"], 2, {"caught_up": True}, 2),
    ("lag: no caught-up proof", ["a0", "a1"], ["a0'", "a1'"], 1, {"caught_up": True}, None),
    ("the standby -> active mirror is behind: no caught-up proof", ["a0"], ["a0'", "b0"], 1,
     {"caught_up": True}, None),
]


@pytest.mark.parametrize("name, active_log, standby_log, c, kwargs, expected", MODEL_CASES,
                         ids=[case[0] for case in MODEL_CASES])
def test_bound_table(name, active_log, standby_log, c, kwargs, expected):
    kwargs = dict(kwargs)
    if kwargs.pop("caught_up", False):
        model = TwoClusterModel.from_notation(active_log, standby_log)
        model.tick(700_000)  # quiet for longer than the caught-up window
        facts = model.partition_facts(c, shape=kwargs.get("shape", TWO_WAY))
        bound = safe_standby_bound(facts)
        assert bound == expected
        if bound is not None:
            assert count_loss(model, c, bound) == 0
        return
    assert bound_of(active_log, standby_log, c, **kwargs) == expected


def test_the_redelivery_case_would_lose_a_record_without_the_cap():
    """The known-loss cap is what keeps the bound safe in the redelivery case above: the highest
    Lemma 3 proof (a redelivered a1' at 4, so 5) marks the unprocessed a2' at 2 as processed."""
    model = TwoClusterModel.from_notation(["a0", "a1", "a2", "a3"], ["a0'", "a1'", "a2'", "a0'", "a1'"])
    assert count_loss(model, 2, 5) == 1
    assert safe_standby_bound(model.partition_facts(2, shape=ONE_WAY, with_caught_up=False)) == 2


def test_lemma_3_needs_create_time_on_the_standby_when_the_mirror_redelivers():
    """With LogAppendTime on the standby the search result says nothing about where the copy of the
    searched record is, so the window can start past it: here it holds only a redelivered a0' at 2,
    and "a0' at 2 copies a processed record" (t = 3) would lose the unprocessed a1' at 1."""
    model = TwoClusterModel.from_notation(["a0", "a1"], ["a0'", "a1'", "a0'"], log_append_time=(B,),
                                          timestamps={"a1": 1_000_002})
    facts = model.partition_facts(1, shape=ONE_WAY, with_caught_up=False)
    assert [r.offset for r in facts.timestamp.standby_records] == [2]
    assert count_loss(model, 1, 3) == 1
    assert safe_standby_bound(facts) is None


# The finding: a timestamp search result that no known copy backs is loss-free (by the timestamp
# argument) but above the bound, so the commit guard refuses it. (A search answered with a late
# marker that no real record follows used to be one; the standby's last record now backs it:
# tests/translation/test_timestamp_search.py.)
# A mirror without headers: the refinement by record identity lands on the copy, but it rests on
# the search result being at or before the copy (the timestamp argument), which no record read proves.
UNBACKED_SEARCHES = [
    ("a mirror without headers: no refinement", ["a0", "a1", "a2"], ["a0'", "a1'", "a2'"], 1,
     {"mirror_headers": False}, False, TranslationStatus.TIMESTAMP_SEARCH, 1, None),
    ("a mirror without headers: refined by identity", ["a0", "a1", "a2"], ["a0'", "a1'", "a2'"], 1,
     {"mirror_headers": False, "timestamps": {"a0": 5000, "a1": 5000, "a2": 5000}}, True,
     TranslationStatus.TIMESTAMP_EXACT, 1, None),
]


@pytest.mark.parametrize("name, active_log, standby_log, c, model_kwargs, identities, status, t, bound",
                         UNBACKED_SEARCHES, ids=[case[0] for case in UNBACKED_SEARCHES])
def test_an_unrefined_timestamp_search_is_above_the_bound(name, active_log, standby_log, c, model_kwargs, identities,
                                                          status, t, bound):
    model = TwoClusterModel.from_notation(active_log, standby_log, **model_kwargs)
    facts = model.partition_facts(c, shape=ONE_WAY, with_caught_up=False)
    if not identities:
        facts = without_identities(facts)
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (status, t)
    assert (result.standby_offset == facts.timestamp.search_offset) is not identities
    assert count_loss(model, c, t) == 0
    assert safe_standby_bound(facts) == bound


def base_facts(**overrides) -> PartitionFacts:
    values = dict(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=5, active_log_start=0,
        active_log_end=10, standby_log_start=0, standby_log_end=10, shape=TWO_WAY,
        record_at_or_after=RecordFact(5, 0, CopiedFrom(B, 4)),
    )
    values.update(overrides)
    return PartitionFacts(**values)


# Bad inputs: the translation's pre-checks refuse them, and nothing is proven.
FACT_CASES = [
    ("a standby-origin record at c", {}, 4),
    ("no committed offset", {"committed": None}, None),
    ("c below the active log start", {"active_log_start": 6}, None),
    ("c past the active log end", {"committed": 11}, None),
    ("topic missing on the standby", {"standby_topic_exists": False}, None),
    ("different partition counts", {"active_partition_count": 6, "standby_partition_count": 3}, None),
    ("standby log start past its end", {"standby_log_start": 11}, None),
    ("origin offset at the standby log end: impossible header", {"standby_log_end": 4}, None),
    ("third cluster header", {"record_at_or_after": RecordFact(5, 0, CopiedFrom("idc9", 4))}, None),
    ("record at c from the active side", {"record_at_or_after": RecordFact(5, 0)}, None),
    ("record at c past the snapshot's log end is not used", {"active_log_end": 5}, None),
    ("an anchor from the window and one at c: the higher",
     {"records_below": (RecordFact(4, 0, CopiedFrom(B, 6)),)}, 7),
    ("anchors in the window past c are ignored",
     {"record_at_or_after": None, "records_below": (RecordFact(7, 0, CopiedFrom(B, 8)),)}, None),
    ("caught up proves the log end, also without anchors",
     {"committed": 10, "record_at_or_after": None, "caught_up": CaughtUpFacts(700.0, 10)}, 10),
    ("caught up needs a quiet window",
     {"committed": 10, "record_at_or_after": None, "caught_up": CaughtUpFacts(30.0, 10)}, None),
    ("a known copy of an unprocessed record caps every proof",
     {"committed": 10, "record_at_or_after": None, "caught_up": CaughtUpFacts(700.0, 10), "shape": ONE_WAY,
      "timestamp": TimestampFacts(9, 7, (RecordFact(7, 0, CopiedFrom(A, 12)),))}, 7),
]


@pytest.mark.parametrize("name, overrides, expected", FACT_CASES, ids=[case[0] for case in FACT_CASES])
def test_bound_of_facts(name, overrides, expected):
    assert safe_standby_bound(base_facts(**overrides)) == expected


def test_the_bound_does_not_look_at_results():
    """The same facts give the same bound whatever a translation claimed for them."""
    facts = base_facts()
    assert translate_partition(facts).standby_offset == 4
    assert safe_standby_bound(facts) == safe_standby_bound(dataclasses.replace(facts)) == 4


# -- properties over the model -------------------------------------------------------------------


def bounds_after(config, evs, data):
    """After a random history: (model, c, facts, bound, result) for every committed offset c, with
    a kept anchor drawn from the true standby-origin records of A."""
    trial, _ = run_trial(config, evs)
    m = trial.model
    true_anchors = [
        Anchor(config.active, config.standby, e.offset, e.origin_offset)
        for e in m.logs[config.active].entries if e.real and e.origin == config.standby
    ]
    for c in range(m.logs[config.active].log_start, m.logs[config.active].end + 1):
        kept = data.draw(st.sampled_from([None] + true_anchors)) if true_anchors else None
        facts = m.partition_facts(
            c, window=config.window, refine_window=config.refine_window, kept_anchor=kept, shape=trial.shape(),
            with_caught_up=config.caught_up_facts,
        )
        yield m, c, facts, safe_standby_bound(facts), translate_partition(facts)


@PROFILE
@given(configs(), events(), st.data())
def test_the_bound_never_loses_a_record(config, evs, data):
    """NO-LOSS for the bound itself, on every shape, also with a mirror that redelivers."""
    for m, c, facts, bound, _ in bounds_after(config, header_less_safe(config, evs), data):
        if bound is not None:
            assert count_loss(m, c, bound) == 0, (c, bound, facts)
            assert bound <= facts.standby_log_end


def _unrefined_timestamp_search(result, facts) -> bool:
    """A timestamp search result that no known copy of the standby backs: no headers (unrefined, or
    refined by record identity), or no real record read after the search result (t = the search
    result itself)."""
    tf = facts.timestamp
    if tf is None or result.strategy is not Strategy.TIMESTAMP_SEARCH:
        return False
    if not tf.mirror_writes_headers:
        return True
    return result.status is TranslationStatus.TIMESTAMP_SEARCH and result.standby_offset == tf.search_offset


@PROFILE
@given(configs(), events(), st.data())
def test_no_translated_result_is_above_the_bound(config, evs, data):
    """Every result of translate_partition is at or below the bound, also with redelivery. The one
    exception is named and shown above (test_an_unrefined_timestamp_search_is_above_the_bound): a
    timestamp search result that no known copy backs, which the commit guard refuses."""
    for _, c, facts, bound, result in bounds_after(config, header_less_safe(config, evs), data):
        if not result.translated or _unrefined_timestamp_search(result, facts):
            continue
        assert bound is not None and result.standby_offset <= bound, (bound, decision_log_line(result))
