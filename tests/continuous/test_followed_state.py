"""The followed offsets of a cluster (continuous/followed_state.py): tables, then properties over
random commit histories, a follower that lags behind the listing, and commits it misses."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.continuous.followed_state import DifferenceKind, FollowedOffsets


@dataclass(frozen=True)
class Commit:
    group: str
    topic: str
    partition: int
    offset: int | None


def truth(commits) -> dict:
    """What the cluster lists after ``commits``: a listing leaves out a negative offset (a commit of
    "no position", -1), as kafka_io/group_offsets.py does."""
    listing: dict = {}
    for c in commits:
        if c.offset is None or c.offset < 0:
            listing.get(c.group, {}).pop((c.topic, c.partition), None)
        else:
            listing.setdefault(c.group, {})[(c.topic, c.partition)] = c.offset
    return {g: parts for g, parts in listing.items() if parts}


def test_seed_then_commits_and_deletions_apply_in_order():
    state = FollowedOffsets()
    state.seed({"a": {("t", 0): 5}, "empty": {}})
    assert state.offsets == {"a": {("t", 0): 5}}
    assert state.apply([Commit("a", "t", 0, 7), Commit("b", "t", 1, 3), Commit("a", "t", 0, 9)]) == 3
    assert state.offsets == {"a": {("t", 0): 9}, "b": {("t", 1): 3}}
    state.apply([Commit("b", "t", 1, None), Commit("a", "u", 0, None)])  # a deletion of nothing is harmless
    assert state.offsets == {"a": {("t", 0): 9}}
    assert state.take_changed() == {"a", "b"}
    assert state.take_changed() == set()


def test_a_negative_offset_is_no_committed_offset_as_in_a_listing():
    state = FollowedOffsets()
    state.seed({"g": {("t", 0): 5, ("t", 1): 2}})
    state.apply([Commit("g", "t", 0, -1)])  # a client that committed "no position"
    assert state.offsets == {"g": {("t", 1): 2}} and state.take_changed() == {"g"}
    # the listing after it lists only ("t", 1): not a difference
    assert state.reconcile({"g": {("t", 1): 2}}, since=state.sequence).differences == ()
    state.apply([Commit("g", "t", 1, -1)])
    assert state.offsets == {}


def test_a_seed_keeps_what_commits_applied_while_the_listing_ran_say():
    state = FollowedOffsets()
    state.apply([Commit("g", "t", 0, 3)])
    since = state.sequence
    state.apply([Commit("g", "t", 0, 8), Commit("h", "t", 0, None)])  # while the listing ran
    state.seed({"g": {("t", 0): 3}, "h": {("t", 0): 1}, "i": {("t", 0): 2}}, since=since)
    assert state.offsets == {"g": {("t", 0): 8}, "i": {("t", 0): 2}}
    assert state.reconcile({"g": {("t", 0): 8}, "i": {("t", 0): 2}}, since=state.sequence).differences == ()


def test_a_group_touched_by_another_record_is_changed_with_its_offsets_untouched():
    state = FollowedOffsets()
    state.seed({"g": {("t", 0): 5}})
    state.touch(["g", "h", "other"], keep=lambda g: g != "other")
    assert state.take_changed() == {"g", "h"} and state.offsets == {"g": {("t", 0): 5}} and state.sequence == 0


def test_groups_the_filter_leaves_out_are_not_applied_nor_changed():
    state = FollowedOffsets()
    assert state.apply([Commit("keep", "t", 0, 1), Commit("drop", "t", 0, 1)], keep=lambda g: g == "keep") == 1
    assert state.offsets == {"keep": {("t", 0): 1}} and state.take_changed() == {"keep"}
    assert state.sequence == 1


@pytest.mark.parametrize("followed, listed, kind", [
    ({"g": {("t", 0): 5}}, {"g": {("t", 0): 6}}, DifferenceKind.OFFSET),
    ({}, {"g": {("t", 0): 6}}, DifferenceKind.MISSED),
    ({"g": {("t", 0): 5}}, {}, DifferenceKind.EXTRA),
])
def test_a_difference_is_named_and_healed(followed, listed, kind):
    state = FollowedOffsets()
    state.seed(followed)
    result = state.reconcile(listed, since=state.sequence)
    [difference] = result.differences
    assert (difference.group, difference.topic, difference.partition, difference.kind) == ("g", "t", 0, kind)
    assert result.compared == 1
    assert state.offsets == listed  # healed
    assert state.reconcile(listed, since=state.sequence).differences == ()


def test_commits_after_the_listing_began_and_unreached_log_partitions_are_not_compared():
    state = FollowedOffsets()
    state.seed({"g": {("t", 0): 5}, "h": {("t", 0): 1}})
    since = state.sequence
    state.apply([Commit("g", "t", 0, 8)])  # after the listing began: the listing may or may not have it
    result = state.reconcile({"g": {("t", 0): 5}, "h": {("t", 0): 2}}, since=since, reached=lambda g: g != "h")
    assert (result.compared, result.skipped_changed, result.skipped_unreached, result.differences) == (0, 1, 1, ())
    assert state.offsets == {"g": {("t", 0): 8}, "h": {("t", 0): 1}}  # nothing compared, nothing healed


GROUPS, TOPICS = ("g1", "g2", "ü \"q\""), ("t", "u")
commits = st.lists(st.builds(Commit, st.sampled_from(GROUPS), st.sampled_from(TOPICS), st.integers(0, 2),
                             st.one_of(st.none(), st.just(-1), st.integers(0, 1000))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(seeded=commits, history=commits, data=st.data())
def test_a_lagging_follower_finds_no_false_difference_and_holds_the_listing_after_quiescence(seeded, history, data):
    # The run seeds from a listing, follows ``history``; the follower has applied the first j
    # commits when the listing starts (since), the listing reflects the first k >= j, and the
    # follower has applied the first m >= k when it compares.
    j = data.draw(st.integers(0, len(history)))
    k = data.draw(st.integers(j, len(history)))
    m = data.draw(st.integers(k, len(history)))
    state = FollowedOffsets()
    state.seed(truth(seeded))
    state.apply(history[:j])
    since = state.sequence
    state.apply(history[j:m])
    if data.draw(st.booleans()):  # a seed from that listing instead of a comparison: the same state after
        state.seed(truth(seeded + history[:k]), since=since)
    result = state.reconcile(truth(seeded + history[:k]), since=since)
    assert result.differences == ()
    touched_after = {(c.group, c.topic, c.partition) for c in history[j:m]}
    assert result.skipped_changed <= len(touched_after)
    # quiescence: the follower has every commit, and the listing too
    state.apply(history[m:])
    assert state.reconcile(truth(seeded + history), since=state.sequence).differences == ()
    assert state.offsets == truth(seeded + history)


@settings(max_examples=300, deadline=None)
@given(history=commits.filter(bool), data=st.data())
def test_a_missed_commit_is_a_difference_unless_a_later_one_overwrote_it(history, data):
    missed = data.draw(st.integers(0, len(history) - 1))
    state = FollowedOffsets()
    state.apply(history[:missed] + history[missed + 1:])  # the follower never saw one commit
    listing = truth(history)
    result = state.reconcile(listing, since=state.sequence)  # every commit made before the listing
    c = history[missed]
    later = [x for x in history[missed + 1:] if (x.group, x.topic, x.partition) == (c.group, c.topic, c.partition)]
    earlier = truth(history[:missed]).get(c.group, {}).get((c.topic, c.partition))
    found = [(d.group, d.topic, d.partition) for d in result.differences]
    if later or earlier == (c.offset if c.offset is not None and c.offset >= 0 else None):
        assert (c.group, c.topic, c.partition) not in found
    else:
        assert (c.group, c.topic, c.partition) in found
    assert state.offsets == listing  # healed either way


def test_the_runs_own_commit_coming_back_is_an_echo_not_news():
    state = FollowedOffsets()
    state.seed({"g": {("t", 0): 5, ("t", 1): 2}})
    state.expect("g", {("t", 0): 7, ("t", 1): 4})
    state.apply([Commit("g", "t", 0, 7)])
    assert not state.has_changes() and state.take_changed() == set()
    assert state.take_echoed() == {"g": {("t", 0): 7}} and state.take_echoed() == {}
    assert state.offsets == {"g": {("t", 0): 7, ("t", 1): 2}}  # applied like any commit
    # someone else's offset on a partition the run expected: news, and the expectation is over
    state.apply([Commit("g", "t", 1, 9)])
    assert state.take_changed() == {"g"} and state.take_echoed() == {}
    state.apply([Commit("g", "t", 1, 4)])  # the run's offset, late: no longer expected
    assert state.take_changed() == {"g"}
    # an echo once: the same offset committed again later is news
    state.expect("g", {("t", 0): 8})
    state.apply([Commit("g", "t", 0, 8), Commit("g", "t", 0, 8)])
    assert state.take_echoed() == {"g": {("t", 0): 8}} and state.take_changed() == {"g"}


def test_an_echo_beside_news_of_the_same_group_is_both_and_a_listing_ends_every_expectation():
    state = FollowedOffsets()
    state.expect("g", {("t", 0): 7})
    state.apply([Commit("g", "t", 0, 7), Commit("g", "u", 0, 1)])
    assert state.take_changed() == {"g"} and state.take_echoed() == {"g": {("t", 0): 7}}
    state.expect("g", {("t", 0): 9})
    state.seed({"g": {("t", 0): 7}})  # a listing after a follower restart: newer than any echo awaited
    state.apply([Commit("g", "t", 0, 9)])
    assert state.take_changed() == {"g"} and state.take_echoed() == {}


@settings(max_examples=300, deadline=None)
@given(history=commits, expected=commits)
def test_echoes_change_no_offset_and_every_commit_is_news_or_an_echo(history, expected):
    # ``expected``: what the run said it would write (an expectation per group-partition, the last
    # one said); every commit of ``history`` is either an echo of one or news of its group.
    state = FollowedOffsets()
    waiting: dict = {}
    for c in expected:
        if c.offset is not None:
            state.expect(c.group, {(c.topic, c.partition): c.offset})
            waiting[(c.group, c.topic, c.partition)] = c.offset
    state.apply(history)
    assert state.offsets == truth(history)
    news, echoes = set(), {}
    for c in history:
        key = (c.group, c.topic, c.partition)
        if key in waiting and waiting.pop(key) == c.offset and c.offset >= 0:  # a deletion is always news
            echoes.setdefault(c.group, {})[(c.topic, c.partition)] = c.offset
        else:
            waiting.pop(key, None)
            news.add(c.group)
    assert state.take_changed() == news
    assert state.take_echoed() == echoes


def test_news_names_the_groups_another_record_touched_and_hands_the_others_offsets():
    state = FollowedOffsets()
    state.seed({"a": {("t", 0): 5, ("t", 1): 2}, "b": {("t", 0): 1}, "c": {("t", 0): 4}})
    state.apply([Commit("a", "t", 0, 7), Commit("b", "t", 0, 3), Commit("c", "t", 0, None)])
    state.touch(["b", "d"])  # b's members changed too; d has no commit at all
    news = state.take_news()
    assert news.changed == {"a", "b", "c", "d"} and news.touched == {"b", "d"}
    # a commit-only group gets its whole offsets; c's were all deleted: none to hand
    assert news.offsets == {"a": {("t", 0): 7, ("t", 1): 2}}
    news.offsets["a"][("t", 0)] = 99  # a copy: the state is not changed through it
    assert state.offsets["a"][("t", 0)] == 7
    again = state.take_news()
    assert (again.changed, again.touched, dict(again.offsets)) == (frozenset(), frozenset(), {})
    state.apply([Commit("b", "t", 0, 4)])  # touched before the last take: a commit alone now
    assert state.take_news().touched == frozenset()
