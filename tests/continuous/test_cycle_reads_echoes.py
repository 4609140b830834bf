"""The run's own standby commits seen in a commit log (continuous/cycle_reads.py): put into the
groups as last read, so no read follows them; a group the last read did not have is read instead."""

from __future__ import annotations

import logging

from offset_pipeline.continuous.cycle_reads import CycleReads, FollowSettings
from offset_pipeline.kafka_io.group_offsets import GroupFilter, GroupState


def reads_with(groups) -> CycleReads:
    reads = CycleReads({}, {}, GroupFilter(".*", ""), 1.0, {}, FollowSettings(follow_commit_log=False),
                       logging.getLogger("test"))
    reads._groups = groups  # the groups as the last read gave them
    return reads


def test_an_echo_patches_the_group_as_read_and_an_unknown_group_is_read_again():
    standby = GroupState("idc2", "g", "EMPTY", 0, {("t", 0): 5, ("t", 1): 2})
    unreadable = GroupState("idc2", "bad", "UNKNOWN", 0, {}, read_error="timed out")
    reads = reads_with({"idc1": [GroupState("idc1", "g", "STABLE", 1, {("t", 0): 9})], "idc2": [standby, unreadable]})
    again = reads._patch_echoes({"idc2": {"g": {("t", 0): 8}, "new": {("t", 0): 1}, "bad": {("t", 0): 3}},
                                 "idc1": {}})
    assert again == {"new", "bad"}  # the standby group the first commit created, and one not read last time
    [patched, still_bad] = reads._groups["idc2"]
    assert patched.committed == {("t", 0): 8, ("t", 1): 2} and (patched.state, patched.member_count) == ("EMPTY", 0)
    assert still_bad is unreadable and reads._groups["idc1"][0].committed == {("t", 0): 9}
    assert reads.status.echoes == 1
    assert standby.committed == {("t", 0): 5, ("t", 1): 2}  # the earlier read's own state is not changed


def test_before_any_read_there_is_nothing_to_patch():
    reads = reads_with(None)
    assert reads._patch_echoes({"idc2": {"g": {("t", 0): 8}}}) == set() and reads.status.echoes == 0


def test_a_commit_only_group_takes_its_followed_offsets_and_the_others_are_read_again():
    from offset_pipeline.continuous.followed_state import News

    active = GroupState("idc1", "g", "STABLE", 1, {("t", 0): 9, ("t", 1): 4})
    moved = GroupState("idc1", "m", "STABLE", 2, {("t", 0): 1})
    unreadable = GroupState("idc1", "bad", "UNKNOWN", 0, {}, read_error="timed out")
    reads = reads_with({"idc1": [active, moved, unreadable], "idc2": []})
    news = {"idc1": News(frozenset({"g", "m", "bad", "new", "gone"}), frozenset({"m"}),
                         {"g": {("t", 0): 12, ("t", 1): 4}, "m": {("t", 0): 2}, "bad": {("t", 0): 3},
                          "new": {("t", 0): 1}}),
            "idc2": News(frozenset(), frozenset(), {})}
    again = reads._patch_commits(news)
    # members changed, not read last time, unreadable then, every offset deleted: read them again
    assert again == {"m", "bad", "new", "gone"}
    [patched, still_moved, still_bad] = reads._groups["idc1"]
    assert patched.committed == {("t", 0): 12, ("t", 1): 4}
    assert (patched.state, patched.member_count) == ("STABLE", 1)  # a commit changes no member
    assert still_moved is moved and still_bad is unreadable
    assert active.committed == {("t", 0): 9, ("t", 1): 4}  # the earlier read's own state is not changed
    assert reads.status.followed_commits == 1


def test_news_of_a_cluster_not_read_last_time_is_read():
    from offset_pipeline.continuous.followed_state import News

    reads = reads_with({"idc1": []})
    assert reads._patch_commits({"idc2": News(frozenset({"g"}), frozenset(), {"g": {("t", 0): 1}})}) == {"g"}
