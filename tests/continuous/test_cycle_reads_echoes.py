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
