"""MirrorMaker 2's offset-sync pairs as anchors (translation/offset_sync_anchor.py).

Table cases in the notation of the two-cluster model (``a1`` produced on the active idc1, ``a1'`` its copy on the
standby idc2, copied by a mirror that writes no origin headers), each checked against the model's
definition of loss; then hypothesis over the two-cluster model with a MirrorMaker-like mirror
(sparse pairs, lost sends, restarts that copy records twice, compaction): no translated result
loses a record, the safe bound proves what the rule translates, and the commit plan commits it.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.sync.commit_rules import CommitDecision, StandbyGroupState, plan_standby_commits
from offset_pipeline.translation import (
    OffsetSyncFacts,
    Strategy,
    SyncPair,
    TopicShape,
    TranslationStatus,
    check_no_loss,
    decision_log_line,
    safe_standby_bound,
    translate_by_offset_sync,
    translate_partition,
)
from devstack.two_cluster_model import SHAPES, Trial, TrialConfig, TwoClusterModel, count_loss
from tests.helpers.model_trials import PROFILE

A, B = "idc1", "idc2"
ONE_WAY = TopicShape.one_way(A)


def names(n: int, prime: str = "") -> list[str]:
    return [f"a{i}{prime}" for i in range(n)]


def restarted_model() -> TwoClusterModel:
    """A task copied a0..a20, committed its position after a8 and crashed; the next one copied a9..
    again: B = a0'..a20', a9'..a20' (the second copies at 21..32)."""
    return TwoClusterModel.from_notation(names(21), names(21, "'") + [f"a{i}'" for i in range(9, 21)],
                                         mirror_headers=False)


def facts_for(model: TwoClusterModel, c: int, syncs: OffsetSyncFacts | None, *, shape=ONE_WAY, refine=64):
    facts = model.partition_facts(c, shape=shape, refine_window=refine, with_caught_up=False)
    return dataclasses.replace(facts, offset_syncs=syncs)


def forward(model: TwoClusterModel, start: int, n: int = 64) -> OffsetSyncFacts:
    after = [model.record_fact(e, B) for e in model.logs[B].retained_real(start)]
    return OffsetSyncFacts(forward_from=start, forward_records=tuple(after[:n]), forward_complete=len(after) <= n)


# -- why a pair needs confirmation ------------------------------------------------------------------


def test_an_unconfirmed_pair_after_a_restart_would_lose_records():
    """Every pair was delivered: (0, 0) for the first task's first record, (8, 8) at its commit,
    (9, 21) for the second task's first record. For c = 15 the newest pair at or below c suggests
    t = 22, below which B holds the first copies of a15..a20: lost, by NO-LOSS. The rule does
    not take it while nothing bounds what lies below d = 21."""
    m = restarted_model()
    pairs = (SyncPair(0, 0), SyncPair(8, 8), SyncPair(9, 21))
    assert count_loss(m, 15, 22) == 6
    result = translate_by_offset_sync(facts_for(m, 15, OffsetSyncFacts(pairs)))
    assert result.status is TranslationStatus.OFFSET_SYNC_UNCONFIRMED and result.standby_offset is None


def test_a_confirmed_pair_is_refined_onto_the_first_copy():
    """(8, 8) was read while idc1's log ended at 12 <= c: B at or below 8 copies records below 12.
    From t0 = 9 the first record with a15's identity is its first copy, at 15."""
    m = restarted_model()
    pairs = (SyncPair(0, 0, 5), SyncPair(8, 8, 12), SyncPair(9, 21, 21))
    syncs = dataclasses.replace(forward(m, 9), pairs=pairs)
    facts = facts_for(m, 15, syncs)
    result = translate_by_offset_sync(facts)
    assert (result.strategy, result.standby_offset) == (Strategy.OFFSET_SYNC, 15), result.reason
    assert result.status is TranslationStatus.OFFSET_SYNC_ANCHOR  # a15 has two copies: not exact
    assert count_loss(m, 15, 15) == 0
    check_no_loss(facts, result)
    assert safe_standby_bound(facts) == 15


# -- table ----------------------------------------------------------------------------------------

ONE_COPY = names(10)
ONE_COPY_B = names(10, "'")


@pytest.mark.parametrize(
    "label, active_log, standby_log, c, pairs, window_from, status, t",
    [
        ("no pair yet", ONE_COPY, ONE_COPY_B, 4, (), None, TranslationStatus.NO_OFFSET_SYNC, None),
        ("only pairs above c", ONE_COPY, ONE_COPY_B, 4, [(6, 6, 10)], None, TranslationStatus.NO_OFFSET_SYNC, None),
        ("a pair at c is never confirmed (u is below its log end)", ONE_COPY, ONE_COPY_B, 4, [(4, 4, 4)], None,
         TranslationStatus.OFFSET_SYNC_UNCONFIRMED, None),
        ("confirmed, no window: t = d + 1", ONE_COPY, ONE_COPY_B, 6, [(2, 2, 5)], None,
         TranslationStatus.OFFSET_SYNC_ANCHOR, 3),
        ("confirmed and refined onto the only copy", ONE_COPY, ONE_COPY_B, 6, [(2, 2, 5)], 3,
         TranslationStatus.OFFSET_SYNC_EXACT, 6),
        ("two pairs share a u (a record copied twice): the larger d", names(8),
         names(6, "'") + ["a3'", "a4'", "a5'", "a6'", "a7'"], 7, [(3, 3, 4), (3, 6, 6)], None,
         TranslationStatus.OFFSET_SYNC_ANCHOR, 7),
        ("the same, caught up: the timestamp search's window refines past the second copy of a5", names(6),
         names(6, "'") + ["a3'", "a4'", "a5'"], 6, [(3, 3, 4), (3, 6, 6)], None, TranslationStatus.OFFSET_SYNC_EXACT, 9),
        ("caught up: the pair of the last processed record, t = d + 1", ONE_COPY, ONE_COPY_B, 10, [(9, 9, 10)], None,
         TranslationStatus.OFFSET_SYNC_EXACT, 10),
        ("caught up: refined past the copy of the last processed record", ONE_COPY, ONE_COPY_B, 10, [(5, 5, 8)], 6,
         TranslationStatus.OFFSET_SYNC_EXACT, 10),
        ("the next record not copied yet: refined to B's end, every record before it copies a processed one",
         ONE_COPY, names(7, "'"), 7, [(2, 2, 5)], 3, TranslationStatus.OFFSET_SYNC_EXACT, 7),
        ("the same after a restart copied two processed records twice: past the second copies", ONE_COPY,
         names(7, "'") + ["a5'", "a6'"], 7, [(2, 2, 5)], 3, TranslationStatus.OFFSET_SYNC_EXACT, 9),
        ("the mirror several records behind the group: B's end, not the pair", ONE_COPY,
         names(5, "'"), 8, [(1, 1, 3)], 2, TranslationStatus.OFFSET_SYNC_EXACT, 5),
        ("caught up, the last processed record not copied yet: B's end, its copy to be read again", ONE_COPY,
         names(8, "'"), 10, [(5, 5, 8)], 6, TranslationStatus.OFFSET_SYNC_ANCHOR, 8),
        ("no copy yet, and the timestamp window alone, cut: only t0", ONE_COPY, names(7, "'"), 8, [(2, 2, 5)],
         None, TranslationStatus.OFFSET_SYNC_ANCHOR, 3),
        ("a window starting after t0 is not used", ONE_COPY, ONE_COPY_B, 8, [(2, 2, 5)], 5,
         TranslationStatus.OFFSET_SYNC_ANCHOR, 3),
        ("a pair that contradicts its stamp (u not below it) is not confirmed", ONE_COPY, ONE_COPY_B, 8, [(5, 5, 5)],
         None, TranslationStatus.OFFSET_SYNC_UNCONFIRMED, None),
        ("gaps: offsets are not dense, the identity finds the copy", ["a0", "_", "a2", "_", "a4", "a5"],
         ["a0'", "a2'", "_", "a4'", "a5'"], 3, [(0, 0, 2)], 1, TranslationStatus.OFFSET_SYNC_EXACT, 3),
    ],
)
def test_table(label, active_log, standby_log, c, pairs, window_from, status, t):
    m = TwoClusterModel.from_notation(active_log, standby_log, mirror_headers=False)
    syncs = forward(m, window_from) if window_from is not None else OffsetSyncFacts()
    syncs = dataclasses.replace(syncs, pairs=tuple(SyncPair(*p) for p in pairs))
    facts = facts_for(m, c, syncs)
    result = translate_by_offset_sync(facts)
    assert (result.status, result.standby_offset) == (status, t), f"{label}: {result.reason}"
    if t is not None:
        assert count_loss(m, c, t) == 0, label
        check_no_loss(facts, result)
        assert safe_standby_bound(facts) >= t


def test_a_cut_window_without_the_copy_refines_to_where_it_was_read():
    """The forward read stopped after a3', a4' (its bound): both copy records below a8, so t = 5;
    a5', a6' are still to be read again, so not exact. A record past the window could be anything."""
    m = TwoClusterModel.from_notation(ONE_COPY, names(7, "'"), mirror_headers=False)
    syncs = dataclasses.replace(forward(m, 3, n=2), pairs=(SyncPair(2, 2, 5),))
    assert not syncs.forward_complete
    facts = facts_for(m, 8, syncs)
    result = translate_by_offset_sync(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.OFFSET_SYNC_ANCHOR, 5), result.reason
    assert count_loss(m, 8, 5) == 0
    check_no_loss(facts, result)
    assert safe_standby_bound(facts) >= 5


def test_pairs_before_the_standby_topic_was_recreated_are_dropped():
    """B's downstream offsets went backwards (recreated topic): the old pair (7, 7) would give 8,
    past the new log's copies of a4..a7."""
    m = TwoClusterModel.from_notation(names(10), names(8, "'"), mirror_headers=False)
    pairs = (SyncPair(7, 7, 8), SyncPair(0, 0, 1))
    assert count_loss(m, 4, 8) > 0
    result = translate_by_offset_sync(facts_for(m, 4, OffsetSyncFacts(pairs)))
    assert (result.status, result.standby_offset) == (TranslationStatus.OFFSET_SYNC_ANCHOR, 1)


def test_a_confirmed_pair_past_the_standby_end_is_inconsistent():
    m = TwoClusterModel.from_notation(names(10), names(5, "'"), mirror_headers=False)
    result = translate_by_offset_sync(facts_for(m, 9, OffsetSyncFacts((SyncPair(7, 7, 8),))))
    assert result.status is TranslationStatus.INCONSISTENT_FACTS


def test_pairs_below_the_standby_log_start_are_refused():
    m = TwoClusterModel.from_notation(names(10), names(10, "'"), mirror_headers=False, standby_log_start=6)
    result = translate_by_offset_sync(facts_for(m, 9, OffsetSyncFacts((SyncPair(2, 2, 5),))))
    assert result.status is TranslationStatus.STANDBY_RECORDS_DELETED


@pytest.mark.parametrize(
    "syncs, status",
    [
        (OffsetSyncFacts(unreadable="idc1: no answer within 10 s"), TranslationStatus.OFFSET_SYNCS_UNREADABLE),
        (OffsetSyncFacts(remote_topic="idc1.topic"), TranslationStatus.REMOTE_TOPIC_RENAMED),
        (OffsetSyncFacts((SyncPair(1, 1, 2),)), TranslationStatus.OFFSET_SYNC_ANCHOR),
    ],
)
def test_named_statuses_through_translate_partition(syncs, status):
    m = TwoClusterModel.from_notation(names(6), names(6, "'"), mirror_headers=False)
    facts = dataclasses.replace(facts_for(m, 4, syncs), timestamp=None)  # the pairs alone
    if syncs.remote_topic is not None:  # the standby has idc1.topic, not topic
        facts = dataclasses.replace(facts, standby_topic_exists=False)
    result = translate_partition(facts)
    assert result.status is status, result.reason
    if status is TranslationStatus.OFFSET_SYNC_ANCHOR:
        assert result.strategy is Strategy.OFFSET_SYNC
    else:
        assert result.standby_offset is None


def test_an_unreadable_topic_is_named_even_when_the_timestamp_search_translates():
    m = TwoClusterModel.from_notation(names(6), names(6, "'"), mirror_headers=False)
    result = translate_partition(facts_for(m, 4, OffsetSyncFacts(unreadable="timeout")))
    assert result.strategy is Strategy.TIMESTAMP_SEARCH
    assert TranslationStatus.OFFSET_SYNCS_UNREADABLE in result.warnings


@pytest.mark.parametrize("shape", [TopicShape.two_way(), TopicShape.one_way(B), TopicShape.unknown()])
def test_other_shapes_are_not_translated_by_pairs(shape):
    m = TwoClusterModel.from_notation(names(6), names(6, "'"), mirror_headers=False)
    facts = facts_for(m, 4, OffsetSyncFacts((SyncPair(1, 1, 2),)), shape=shape)
    assert translate_by_offset_sync(facts).status is TranslationStatus.NOT_APPLICABLE
    assert translate_partition(facts).strategy is not Strategy.OFFSET_SYNC
    assert safe_standby_bound(facts) is None


def test_the_commit_plan_commits_an_offset_sync_result():
    """The commit guard: a result the pairs prove is at or below the bound, so it is committed."""
    m = TwoClusterModel.from_notation(names(10), names(10, "'"), mirror_headers=False)
    syncs = dataclasses.replace(forward(m, 3), pairs=(SyncPair(2, 2, 5),))
    facts = facts_for(m, 6, syncs)
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.OFFSET_SYNC_EXACT, 6)
    tp = (facts.topic, facts.partition)
    [commit] = plan_standby_commits(
        [result], StandbyGroupState(group_id=facts.group_id, cluster=facts.standby, member_count=0), active_member_count=0,
        facts_by_partition={tp: facts}, safe_bounds={tp: safe_standby_bound(facts)},
    )
    assert commit.decision is CommitDecision.COMMIT and commit.new_offset == 6


# -- properties over the MirrorMaker-like mirror ------------------------------------------------------

_produce = st.tuples(st.just("produce"), st.just(0), st.integers(1, 4), st.sampled_from([0, 0, 1, 2]), st.just(0),
                     st.integers(-5000, 2000))
_mirror = st.tuples(st.just("mirror"), st.just(0), st.integers(1, 5), st.sampled_from([0, 0, 0, 1]))
_mm2 = st.one_of(st.just(("mm2_commit",)), st.just(("mm2_restart",)), st.just(("compact_syncs",)),
                 st.tuples(st.just("lose_syncs"), st.integers(1, 3)))
_consume = st.tuples(st.just("consume"), st.integers(0, 100))
_other = st.one_of(st.just(("sync",)), st.tuples(st.just("reset"), st.integers(0, 100)),
                   st.tuples(st.just("retain"), st.just(0), st.integers(1, 4)),
                   st.tuples(st.just("redeliver"), st.just(0), st.integers(1, 6)))
mm2_events = st.lists(st.one_of([_produce] * 4 + [_mirror] * 4 + [_mm2] * 2 + [_consume] * 2 + [st.just(("sync",))] * 2
                                + [_other]), min_size=20, max_size=100)


@st.composite
def mm2_configs(draw):
    return TrialConfig(
        shape="one_way_from_active", active=draw(st.sampled_from((A, B))), mirror_headers=False, mm2_syncs=True,
        timestamp_pattern=draw(st.sampled_from(("increasing", "batches", "reversed"))), shape_mode="configured",
        window=draw(st.integers(1, 10)), refine_window=draw(st.integers(1, 40)), caught_up_facts=draw(st.booleans()),
        identical_pairs=draw(st.booleans()), sync_lag_max=draw(st.integers(1, 6)),
        sync_forward_window=draw(st.booleans()),
    )


def _after_each_sync(config, evs):
    """(trial, c, facts, result) right after each sync, while the model is as the sync read it."""
    trial = Trial(config)
    for event in evs:
        outcome = trial.apply(event)
        if outcome is not None:
            yield trial, trial.c, outcome.facts, outcome.result


@PROFILE
@given(mm2_configs(), mm2_events)
def test_no_loss_behind_a_mirror_maker_like_mirror(config, evs):
    for trial, c, facts, result in _after_each_sync(config, evs):
        if result.translated:
            assert count_loss(trial.model, c, result.standby_offset) == 0, decision_log_line(result)
            assert facts.standby_log_start <= result.standby_offset <= facts.standby_log_end


@PROFILE
@given(mm2_configs(), mm2_events)
def test_the_bound_proves_every_offset_sync_result(config, evs):
    for trial, c, facts, result in _after_each_sync(config, evs):
        bound = safe_standby_bound(facts)
        if bound is not None:
            assert count_loss(trial.model, c, bound) == 0, (c, bound, facts)
            assert bound <= facts.standby_log_end
        if result.strategy is Strategy.OFFSET_SYNC:
            assert bound is not None and result.standby_offset <= bound, decision_log_line(result)


@PROFILE
@given(mm2_configs(), mm2_events, st.data())
def test_no_loss_for_every_committed_offset(config, evs, data):
    """At the end, every c of the active log with the pairs stamped as the trial read them."""
    trial = Trial(config)
    for event in evs:
        trial.apply(event)
    m = trial.model
    active = m.logs[config.active]
    for c in range(active.log_start, active.end + 1):
        facts = m.partition_facts(c, refine_window=config.refine_window, shape=trial.shape(), with_caught_up=False)
        facts = dataclasses.replace(facts, offset_syncs=trial.offset_sync_facts(c))
        result = translate_partition(facts)
        check_no_loss(facts, result)
        if result.translated:
            assert count_loss(m, c, result.standby_offset) == 0, decision_log_line(result)
        bound = safe_standby_bound(facts)
        if bound is not None:
            assert count_loss(m, c, bound) == 0


def test_the_pairs_translate_often_in_random_trials():
    """Not vacuous: over seeded random trials the pairs translate a good share of the cycles, the
    restarts among them, and the safe bound accepts every such result."""
    rng = random.Random(7)
    by_pairs = restarted_trials = 0
    for _ in range(200):
        config = TrialConfig(shape="one_way_from_active", mirror_headers=False, mm2_syncs=True,
                             active=rng.choice((A, B)), sync_lag_max=rng.randint(1, 5), caught_up_facts=False)
        evs = []
        for _ in range(60):
            kind = rng.choices(["produce", "mirror", "consume", "sync", "mm2"], [4, 4, 2, 2, 1])[0]
            if kind == "produce":
                evs.append(("produce", 0, rng.randint(1, 3), 0, 0, 0))
            elif kind == "mirror":
                evs.append(("mirror", 0, rng.randint(1, 5), 0))
            elif kind == "consume":
                evs.append(("consume", rng.randint(50, 100)))
            elif kind == "sync":
                evs.append(("sync",))
            else:
                evs.append(rng.choice([("mm2_commit",), ("mm2_restart",), ("lose_syncs", 1)]))
        restarted = any(e[0] == "mm2_restart" for e in evs)
        for trial, c, facts, result in _after_each_sync(config, evs):
            if result.strategy is Strategy.OFFSET_SYNC:
                by_pairs += 1
                restarted_trials += restarted
                assert result.standby_offset <= safe_standby_bound(facts)
                assert count_loss(trial.model, c, result.standby_offset) == 0
    assert by_pairs >= 200 and restarted_trials >= 50, (by_pairs, restarted_trials)


def test_the_model_refuses_offset_syncs_outside_their_setting():
    for shape in SHAPES:
        if shape != "one_way_from_active":
            with pytest.raises(ValueError):
                TrialConfig(shape=shape, mirror_headers=False, mm2_syncs=True)
    with pytest.raises(ValueError):
        TrialConfig(shape="one_way_from_active", mirror_headers=True, mm2_syncs=True)
