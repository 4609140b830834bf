"""Commit planning: every decision, the NO-LOSS guard, the log line, properties.

The rules: docs/concepts/no-loss.md (the commit guard)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.sync.commit_rules import (
    CommitDecision,
    StandbyCommit,
    StandbyGroupState,
    commit_log_line,
    offsets_to_commit,
    parse_commit_log_line,
    plan_standby_commits,
)
from offset_pipeline.translation import (
    Anchor,
    CopiedFrom,
    PartitionFacts,
    RecordFact,
    Strategy,
    TopicShape,
    TranslationResult,
    TranslationStatus,
    safe_standby_bound,
    translate_partition,
    untranslatable,
)

A, B = "idc1", "idc2"
G = "orders-consumer"


def translated(t, *, topic="t", partition=0, group=G, status=TranslationStatus.HEADER_ANCHOR,
               strategy=Strategy.HEADER_ANCHOR):
    return TranslationResult(group_id=group, topic=topic, partition=partition, strategy=strategy,
                             standby_offset=t, status=status, reason="test", active=A, standby=B)


def untranslated(*, topic="t", partition=0, group=G, status=TranslationStatus.NO_ANCHOR):
    return untranslatable(group, topic, partition, status, "nothing safe yet", active=A, standby=B)


def state(committed=None, members=0, group=G):
    return StandbyGroupState(group_id=group, cluster=B, member_count=members, committed=committed or {})


TP = ("t", 0)

# (result, current standby offset, standby members, active members, reset, dry_run) -> decision
CASES = {
    "forward": (translated(7), 5, 0, 3, False, False, CommitDecision.COMMIT, 7),
    "first offset": (translated(7), None, 0, 3, False, False, CommitDecision.COMMIT, 7),
    "unchanged": (translated(5), 5, 0, 3, False, False, CommitDecision.UNCHANGED, None),
    "untranslated": (untranslated(), 5, 0, 3, False, False, CommitDecision.SKIPPED_UNTRANSLATED, None),
    "rewind refused": (translated(3), 5, 0, 3, False, False, CommitDecision.REFUSED_REWIND, None),
    "rewind after reset": (translated(3), 5, 0, 3, True, False, CommitDecision.REWIND_AFTER_RESET, 3),
    "reset but forward": (translated(7), 5, 0, 3, True, False, CommitDecision.COMMIT, 7),
    "standby members": (translated(7), 5, 2, 0, False, False, CommitDecision.REFUSED_MEMBERS, None),
    "split brain": (translated(7), 5, 2, 1, False, False, CommitDecision.SPLIT_BRAIN, None),
    "split brain untranslated": (untranslated(), 5, 2, 1, False, False, CommitDecision.SPLIT_BRAIN, None),
    "members before untranslated": (untranslated(), 5, 1, 0, False, False, CommitDecision.REFUSED_MEMBERS, None),
    "dry run forward": (translated(7), 5, 0, 3, False, True, CommitDecision.DRY_RUN, None),
    "dry run reset": (translated(3), 5, 0, 3, True, True, CommitDecision.DRY_RUN, None),
    "dry run refused rewind": (translated(3), 5, 0, 3, False, True, CommitDecision.REFUSED_REWIND, None),
    "dry run unchanged": (translated(5), 5, 0, 3, False, True, CommitDecision.UNCHANGED, None),
    "no active members": (translated(7), 5, 0, 0, False, False, CommitDecision.COMMIT, 7),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_decision_table(case):
    result, current, standby_members, active_members, reset, dry_run, decision, written = CASES[case]
    committed = {} if current is None else {TP: current}
    [commit] = plan_standby_commits(
        [result], state(committed, standby_members), active_member_count=active_members,
        active_reset={TP} if reset else set(), dry_run=dry_run,
    )
    assert commit.decision is decision
    assert (commit.group_id, commit.topic, commit.partition, commit.standby_cluster) == (G, "t", 0, B)
    assert commit.previous_offset == current
    assert commit.new_offset == result.standby_offset
    assert (commit.translation_status, commit.strategy) == (result.status, result.strategy)
    assert commit.reason
    assert offsets_to_commit([commit]) == ({} if written is None else {TP: written})


def test_reasons_carry_the_numbers():
    plan = plan_standby_commits(
        [translated(7, partition=0), translated(3, partition=1), translated(2, partition=2)],
        state({("t", 0): 5, ("t", 1): 9, ("t", 2): 4}), active_member_count=1, active_reset={("t", 2)},
    )
    assert [c.decision for c in plan] == [
        CommitDecision.COMMIT, CommitDecision.REFUSED_REWIND, CommitDecision.REWIND_AFTER_RESET]
    assert "5" in plan[0].reason and "7" in plan[0].reason
    assert "3" in plan[1].reason and "9" in plan[1].reason
    assert "reset" in plan[2].reason and "4" in plan[2].reason
    dry = plan_standby_commits([translated(3)], state({TP: 5}), active_member_count=1, active_reset={TP},
                               dry_run=True)
    assert "would rewind_after_reset" in dry[0].reason and "3" in dry[0].reason


def test_one_commit_per_result_and_mixed_plan():
    results = [translated(7, partition=0), untranslated(partition=1), translated(4, partition=2, topic="u")]
    plan = plan_standby_commits(results, state({("t", 0): 5, ("u", 2): 4}), active_member_count=2)
    assert [c.decision for c in plan] == [
        CommitDecision.COMMIT, CommitDecision.SKIPPED_UNTRANSLATED, CommitDecision.UNCHANGED]
    assert offsets_to_commit(plan) == {("t", 0): 7}


@pytest.mark.parametrize(
    "bad",
    [
        dict(results=[translated(7, group="other")]),
        dict(results=[translated(7), translated(8)]),
        dict(results=[dataclasses.replace(translated(7), standby="idc9")]),
        dict(results=[translated(7)], active_member_count=-1),
    ],
)
def test_caller_bugs_raise(bad):
    kwargs = {"active_member_count": 0, **bad}
    results = kwargs.pop("results")
    with pytest.raises(ValueError):
        plan_standby_commits(results, state(), **kwargs)


# -- the NO-LOSS guard -------------------------------------------------------------------------


def header_facts(**overrides):
    # A: the record at 9 is a copy of B:6 (standby-origin), c=10. Lemma 1: t = 6 + 1 = 7.
    base = dict(
        group_id=G, topic="t", partition=0, active=A, standby=B, committed=10, active_log_start=0,
        active_log_end=20, standby_log_start=0, standby_log_end=15, shape=TopicShape.two_way(),
        record_at_or_after=RecordFact(10, 1000),
        records_below=(RecordFact(9, 900, CopiedFrom(B, 6)),),
    )
    base.update(overrides)
    return PartitionFacts(**base)


def test_check_no_loss_passes_a_real_translation():
    facts = header_facts()
    good = translate_partition(facts)
    assert (good.status, good.standby_offset, good.anchor_used) == (TranslationStatus.HEADER_ANCHOR, 7, Anchor(A, B, 9, 6))
    [commit] = plan_standby_commits([good], state({TP: 5}), active_member_count=1, facts_by_partition={TP: facts})
    assert commit.decision is CommitDecision.COMMIT
    assert offsets_to_commit([commit]) == {TP: 7}


@pytest.mark.parametrize(
    ("t", "why"),
    [
        (8, "t = s + 1"),  # claims a record beyond the anchor was processed
        (16, "outside"),  # above the standby log end
    ],
)
def test_check_no_loss_catches_a_bad_result(t, why):
    facts = header_facts()
    bad = dataclasses.replace(translate_partition(facts), standby_offset=t)
    for dry_run in (False, True):
        [commit] = plan_standby_commits([bad], state({TP: 5}), active_member_count=1, dry_run=dry_run,
                                        facts_by_partition={TP: facts})
        assert commit.decision is CommitDecision.REFUSED_NO_LOSS_CHECK
        assert why in commit.reason and str(t) in commit.reason
        assert offsets_to_commit([commit]) == {}


def test_missing_facts_when_facts_were_given_is_refused():
    [commit] = plan_standby_commits([translated(7)], state({TP: 5}), active_member_count=1, facts_by_partition={})
    assert commit.decision is CommitDecision.REFUSED_NO_LOSS_CHECK
    assert offsets_to_commit([commit]) == {}


def test_membership_is_decided_before_the_no_loss_check():
    facts = header_facts()
    bad = dataclasses.replace(translate_partition(facts), standby_offset=8)
    [commit] = plan_standby_commits([bad], state({TP: 5}, members=1), active_member_count=1,
                                    facts_by_partition={TP: facts})
    assert commit.decision is CommitDecision.SPLIT_BRAIN


# -- the safe-bound guard ----------------------------------------------------------------------

# (name, result, current standby offset, standby members, active members, dry_run, bounds) -> decision
BOUND_CASES = {
    "at the bound": (translated(7), 5, 0, 1, False, {TP: 7}, CommitDecision.COMMIT),
    "below the bound": (translated(6), 5, 0, 1, False, {TP: 7}, CommitDecision.COMMIT),
    "above the bound": (translated(8), 5, 0, 1, False, {TP: 7}, CommitDecision.REFUSED_NO_LOSS_CHECK),
    "no bound proven": (translated(7), 5, 0, 1, False, {TP: None}, CommitDecision.REFUSED_NO_LOSS_CHECK),
    "partition missing from the bounds": (translated(7), 5, 0, 1, False, {}, CommitDecision.REFUSED_NO_LOSS_CHECK),
    "dry run above the bound": (translated(8), 5, 0, 1, True, {TP: 7}, CommitDecision.REFUSED_NO_LOSS_CHECK),
    "dry run at the bound": (translated(7), 5, 0, 1, True, {TP: 7}, CommitDecision.DRY_RUN),
    "unchanged but above the bound": (translated(8), 8, 0, 1, False, {TP: 7}, CommitDecision.REFUSED_NO_LOSS_CHECK),
    "rewind above the bound": (translated(8), 9, 0, 1, False, {TP: 7}, CommitDecision.REFUSED_NO_LOSS_CHECK),
    "untranslated without a bound": (untranslated(), 5, 0, 1, False, {TP: None}, CommitDecision.SKIPPED_UNTRANSLATED),
    "members come first": (translated(8), 5, 1, 0, False, {TP: 7}, CommitDecision.REFUSED_MEMBERS),
    "split brain comes first": (translated(8), 5, 1, 1, False, {TP: 7}, CommitDecision.SPLIT_BRAIN),
    "no guard without bounds": (translated(8), 5, 0, 1, False, None, CommitDecision.COMMIT),
}


@pytest.mark.parametrize("case", list(BOUND_CASES), ids=list(BOUND_CASES))
def test_safe_bound_guard(case):
    result, current, standby_members, active_members, dry_run, bounds, decision = BOUND_CASES[case]
    [commit] = plan_standby_commits([result], state({TP: current}, standby_members),
                                    active_member_count=active_members, dry_run=dry_run, safe_bounds=bounds)
    assert commit.decision is decision
    assert commit.safe_bound == (None if bounds is None else bounds.get(TP))
    if decision is CommitDecision.REFUSED_NO_LOSS_CHECK:
        assert offsets_to_commit([commit]) == {}
        assert str(result.standby_offset) in commit.reason
        assert "bound" in commit.reason


def test_safe_bound_guard_with_the_bound_of_real_facts():
    """header_facts prove 7 (Lemma 1: the standby-origin record below c copies B:6)."""
    facts = header_facts()
    bound = safe_standby_bound(facts)
    assert bound == 7
    good = translate_partition(facts)
    plan = plan_standby_commits(
        [good, dataclasses.replace(good, partition=1, standby_offset=8)],
        state({TP: 5, ("t", 1): 5}), active_member_count=1, safe_bounds={TP: bound, ("t", 1): bound},
    )
    assert [c.decision for c in plan] == [CommitDecision.COMMIT, CommitDecision.REFUSED_NO_LOSS_CHECK]
    assert offsets_to_commit(plan) == {TP: 7}


# -- the commit log line -----------------------------------------------------------------------

ODD_GROUP_IDS = ['say "hi"', "with space = and=eq", "한글 그룹 ✓", 'back\\slash" x=1 reason="fake"', "line\nbreak\u2028", ""]


@pytest.mark.parametrize("group_id", ODD_GROUP_IDS)
def test_commit_log_line_round_trips_odd_group_ids(group_id):
    [commit] = plan_standby_commits([translated(7, group=group_id, topic="t p")], state({("t p", 0): 5}, group=group_id),
                                    active_member_count=1)
    line = commit_log_line(commit)
    assert "\n" not in line and "\u2028" not in line
    parsed = parse_commit_log_line(line)
    assert parsed == {
        "group": group_id, "topic": "t p", "partition": 0, "standby": B, "previous_offset": 5, "new_offset": 7,
        "safe_bound": None, "decision": "commit", "translation_status": "header_anchor", "strategy": "header_anchor",
        "reason": commit.reason,
    }


def test_commit_log_line_exact_format():
    commit = StandbyCommit(G, "t", 3, B, None, None, CommitDecision.SKIPPED_UNTRANSLATED, 'no "anchor"',
                           TranslationStatus.NO_ANCHOR, None)
    assert commit_log_line(commit) == (
        'offset-sync commit group="orders-consumer" topic="t" partition=3 standby="idc2" previous_offset=- '
        'new_offset=- safe_bound=- decision=skipped_untranslated translation_status=no_anchor strategy=- '
        'reason="no \\"anchor\\""'
    )
    guarded = dataclasses.replace(commit, new_offset=8, safe_bound=7, decision=CommitDecision.REFUSED_NO_LOSS_CHECK)
    assert "new_offset=8 safe_bound=7 decision=refused_no_loss_check " in commit_log_line(guarded)
    assert parse_commit_log_line(commit_log_line(guarded))["safe_bound"] == 7


# -- properties --------------------------------------------------------------------------------

offsets = st.integers(min_value=0, max_value=50)
partition_case = st.tuples(st.none() | offsets, st.none() | offsets, st.booleans())  # current, t, reset


@settings(max_examples=300, deadline=None)
@given(
    cases=st.lists(partition_case, min_size=1, max_size=8),
    standby_members=st.integers(0, 3),
    active_members=st.integers(0, 3),
    dry_run=st.booleans(),
    bounds=st.none() | st.lists(st.none() | offsets, min_size=8, max_size=8),
)
def test_never_rewinds_and_writes_nothing_when_it_must_not(cases, standby_members, active_members, dry_run, bounds):
    results, committed, reset = [], {}, set()
    safe_bounds = None if bounds is None else {("t", p): b for p, b in enumerate(bounds)}
    for partition, (current, t, is_reset) in enumerate(cases):
        results.append(untranslated(partition=partition) if t is None else translated(t, partition=partition))
        if current is not None:
            committed[("t", partition)] = current
        if is_reset:
            reset.add(("t", partition))
    plan = plan_standby_commits(results, state(committed, standby_members), active_member_count=active_members,
                                active_reset=reset, dry_run=dry_run, safe_bounds=safe_bounds)
    written = offsets_to_commit(plan)
    if safe_bounds is not None:  # never above the proven bound, never without one
        for tp, offset in written.items():
            assert safe_bounds[tp] is not None and offset <= safe_bounds[tp]

    assert len(plan) == len(results)
    for commit, result in zip(plan, results):
        tp = (commit.topic, commit.partition)
        assert commit.new_offset == result.standby_offset
        if commit.decision is CommitDecision.COMMIT:
            assert commit.previous_offset is None or commit.new_offset > commit.previous_offset
        if commit.decision.writes or commit.decision is CommitDecision.DRY_RUN:
            assert result.translated
            if commit.previous_offset is not None and commit.new_offset < commit.previous_offset:
                assert tp in reset
        if tp in written:
            assert written[tp] == result.standby_offset
            assert written[tp] >= (commit.previous_offset or 0) or tp in reset
    if dry_run or standby_members > 0:
        assert written == {}
    if standby_members > 0 and active_members > 0:
        assert {c.decision for c in plan} == {CommitDecision.SPLIT_BRAIN}
    elif standby_members > 0:
        assert {c.decision for c in plan} == {CommitDecision.REFUSED_MEMBERS}
