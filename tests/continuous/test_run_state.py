"""ContinuousState: what a continuous run remembers, and the checkpoint rows it writes from it."""

from __future__ import annotations

from dataclasses import replace

from offset_pipeline.continuous.run_state import ContinuousState, carried_commit
from offset_pipeline.storage.commits import CommitRow
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.translation import DirectionBasis, DirectionDecision

G = 'g "q" ü'


def snap(cluster, partition=0, committed=10, members=0, cycle="r:1", group=G):
    return SnapshotRow(cycle, 1_000, cluster, group, "Stable" if members else "Empty", members, "t", partition,
                       committed, True, 0, 20, 20, "CreateTime", "")


def result(partition=0, standby_offset=10, status="header_exact", keep=(9, 9), cycle="r:1", group=G):
    return {"snapshot_id": cycle, "cycle_time": 1_000, "group_id": group, "topic": "t", "partition": partition,
            "active": "idc1", "standby": "idc2", "committed": 10, "standby_committed": 8, "strategy": "header_anchor",
            "standby_offset": standby_offset, "status": status, "reason": "r", "expected_duplicates": 0,
            "timestamp_inversion": False, "anchor_active_offset": None, "anchor_standby_offset": None,
            "safe_bound": 10, "keep_active_offset": keep[0] if keep else None,
            "keep_standby_offset": keep[1] if keep else None, "decision": "line"}


def commit(partition=0, decision="commit", applied=True, new=10, cycle="r:1", group=G):
    return CommitRow(cycle, 1_000, group, "t", partition, "idc1", "idc2", 8, new, 10, decision, "why", "header_exact",
                     "header_anchor", False, applied, None, new if applied else 8)


ACTIVE = {G: DirectionDecision(G, "idc1", "idc2", DirectionBasis.MEMBERS, "members on idc1")}


def state_after_one_cycle() -> ContinuousState:
    state = ContinuousState(("idc1", "idc2"))
    read = [snap("idc1", members=1), snap("idc2", committed=8), snap("idc1", 1, members=1), snap("idc2", 1, 8)]
    state.record(read, [result(), result(1, status="timestamp_search", keep=None)],
                 [commit(), commit(1, decision="skipped_untranslated", applied=False, new=None)], ACTIVE, 5.0)
    return state


def test_a_checkpoint_holds_every_row_of_the_newest_read_and_one_row_per_group_partition():
    state = state_after_one_cycle()
    cp = state.checkpoint("r:7", 7_000)
    assert len(cp.snapshot_rows) == 4
    assert {(r.snapshot_id, r.snapshot_time_ms) for r in cp.snapshot_rows} == {("r:7", 7_000)}
    assert [(r["partition"], r["snapshot_id"], r["cycle_time"]) for r in cp.translation_rows] == [
        (0, "r:7", 7_000), (1, "r:7", 7_000)]
    assert [(r.partition, r.snapshot_id, r.cycle_time_ms) for r in cp.commit_rows] == [(0, "r:7", 7_000),
                                                                                         (1, "r:7", 7_000)]
    # the first checkpoint after a commit writes it as it was made
    assert [(r.decision, r.applied) for r in cp.commit_rows] == [("commit", True), ("skipped_untranslated", False)]


def test_a_write_from_before_the_previous_checkpoint_is_carried_as_unchanged():
    state = state_after_one_cycle()
    state.checkpoint("r:7", 7_000)
    cp = state.checkpoint("r:8", 8_000)
    written, skipped = cp.commit_rows
    assert (written.decision, written.applied, written.previous_offset, written.new_offset,
            written.committed_after) == ("unchanged", False, 10, 10, 10)
    assert written.synced  # the partition stays synced in the metrics
    assert (skipped.decision, skipped.applied) == ("skipped_untranslated", False)
    assert {r.snapshot_id for r in cp.commit_rows} == {"r:8"}


def test_carried_commit_keeps_a_write_that_did_not_land_unapplied():
    row = commit(decision="commit", applied=False, new=10)
    carried = carried_commit(row, "r:9", 9_000)
    assert (carried.decision, carried.applied, carried.snapshot_id) == ("commit", False, "r:9")


def test_anchors_are_written_once_per_change():
    state = state_after_one_cycle()
    first = state.checkpoint("r:7", 7_000)
    assert [(a["partition"], a["active_offset"], a["standby_offset"]) for a in first.anchor_rows] == [(0, 9, 9)]
    assert state.checkpoint("r:8", 8_000).anchor_rows == []
    state.record(state.snapshot, [result(keep=(11, 12))], [], ACTIVE, 9.0)
    assert [(a["active_offset"], a["standby_offset"]) for a in state.checkpoint("r:9", 9_000).anchor_rows] == [(11, 12)]


def test_a_group_partition_gone_from_the_read_is_forgotten():
    state = state_after_one_cycle()
    state.record([snap("idc1", members=1), snap("idc2", committed=8)], [], [], ACTIVE, 6.0)
    assert set(state.results) == set(state.commits) == set(state.memory) == {(G, "t", 0)}


def test_history_is_the_newest_read_with_what_the_run_wrote_and_the_last_direction():
    state = state_after_one_cycle()
    history = state.history()
    assert history.committed_before[("idc1", G)] == {("t", 0): 10, ("t", 1): 10}
    assert history.written_by_sync == {("idc2", G): {("t", 0): 10}}
    assert history.previous_active == {G: "idc1"}
    assert state.memory[(G, "t", 0)].settled and not state.memory[(G, "t", 1)].settled


def test_forget_topics_makes_their_partitions_new():
    state = state_after_one_cycle()
    state.forget_topics({"t"})
    assert state.memory == {}


def test_readiness_counts_an_untouched_synced_partition_as_synced_at_the_newest_read():
    state = state_after_one_cycle()
    later = [replace(r, snapshot_time_ms=9_000) for r in state.snapshot]
    later = [replace(r, committed_offset=10) if r.cluster == "idc2" and r.partition == 0 else r for r in later]
    state.record(later, [], [], ACTIVE, 9.0)  # a cycle that translated nothing: the standby is still at t
    facts = {f.partition: f for f in state.readiness_facts()}
    assert facts[0].synced_at_s == 9.0 and facts[0].commit_synced and facts[0].standby_committed == 10
    assert facts[1].synced_at_s is None  # never synced (its commit was skipped)
    [group] = state.readiness(now_s=10.0, max_age_s=300)
    assert not group.ready and group.reasons == {"commit_not_synced": 1}
    # the group moved on idc1 and nothing was synced since: partition 0 is no longer synced at the newest read
    moved = [replace(r, committed_offset=15, snapshot_time_ms=12_000) if r.cluster == "idc1" and r.partition == 0
             else replace(r, snapshot_time_ms=12_000) for r in later]
    state.record(moved, [], [], ACTIVE, 12.0)
    facts = {f.partition: f for f in state.readiness_facts()}
    assert facts[0].synced_at_s == 9.0 and facts[0].active_committed == 15  # the last read that found it synced


def test_an_unsettled_partition_remembers_since_when_and_the_run_waits_for_its_next_try():
    state = state_after_one_cycle()  # partition 1 unsettled at 5.0, partition 0 settled
    assert state.memory[(G, "t", 1)].unsettled_since_s == 5.0
    assert state.memory[(G, "t", 0)].unsettled_since_s is None
    assert abs(state.next_unsettled_due_s(5.1, 2.0, 0.25) - 0.15) < 1e-9  # its first wait: 0.25 s
    # no shorter first wait (the default): a flat revisit_s, the partitions due then in one cycle
    assert state.next_unsettled_due_s(5.1, 2.0, None) == state.next_unsettled_due_s(5.1, 2.0, 2.0) == 2.0
    assert state.unsettled_partitions(5.1, 2.0, 0.25) == frozenset()
    assert state.unsettled_partitions(5.3, 2.0, 0.25) == {("t", 1)}
    # translated again, still unsettled: since when stays, and the wait is as long (0.3 s)
    state.record(state.snapshot, [result(1, status="timestamp_search", keep=None)], [], ACTIVE, 5.3)
    assert state.memory[(G, "t", 1)].unsettled_since_s == 5.0
    assert abs(state.next_unsettled_due_s(5.3, 2.0, 0.25) - 0.3) < 1e-9
    # a wait that ended without a revisit (nothing moved) is not waited for again: revisit_s
    assert state.next_unsettled_due_s(9.0, 2.0, 0.25) == 2.0
    # settled, then unsettled again: a new streak
    state.record(state.snapshot, [result(1)], [commit(1)], ACTIVE, 6.0)
    assert state.memory[(G, "t", 1)].settled and state.memory[(G, "t", 1)].unsettled_since_s is None
    state.record(state.snapshot, [result(1, status="timestamp_search", keep=None)], [], ACTIVE, 7.0)
    assert state.memory[(G, "t", 1)].unsettled_since_s == 7.0
