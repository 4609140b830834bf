"""partitions_to_revisit: which group-partitions a continuous cycle translates again, and why.

Table-driven for each reason of the module's invariants, and property-based: a group-partition is
revisited exactly when one of the invariants names it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.continuous.revisit_rules import (
    PartitionMemory,
    RevisitReason,
    partitions_to_revisit,
    unsettled_wait_s,
)

G = 'g "q" ü'
KEY = (G, "t", 0)


def row(cluster="idc1", *, group=G, members=1, topic="t", partition=0, committed=10, present=True, log_start=0,
        log_end=20, ts="CreateTime", state="Stable", error=""):
    return (cluster, group, members, topic, partition, committed, present, log_start, log_end, ts, state, error)


def pair(active=None, standby=None):
    """Both clusters' rows of one group-partition: idc1 active (members 1), idc2 standby (no members)."""
    return [row("idc1", **(active or {})),
            row("idc2", **{"members": 0, "committed": 8, "state": "Empty", **(standby or {})})]


ENDS = (("idc1", 20), ("idc2", 20))  # the log ends pair() reads
SETTLED = PartitionMemory(translated_at_s=100.0, status="header_exact", commit_synced=True, log_ends=ENDS)
UNSETTLED = PartitionMemory(translated_at_s=100.0, status="timestamp_search", commit_synced=True, log_ends=ENDS)
RETRY_S = 300.0


def revisit(previous, current, memory=None, written=None, now=101.0, revisit_s=2.0):
    return partitions_to_revisit(previous, current, {KEY: SETTLED} if memory is None else memory,
                                 written or {}, now, revisit_s, RETRY_S)


@pytest.mark.parametrize("name, previous, current, memory, written, now, expected", [
    ("first read: everything new", None, pair(), None, None, 101.0, RevisitReason.NEW),
    ("never translated in this run", pair(), pair(), {}, None, 101.0, RevisitReason.NEW),
    ("nothing changed, settled", pair(), pair(), None, None, 500.0, None),
    ("log end grew, settled", pair(), pair({"log_end": 25}, {"log_end": 24}), None, None, 101.0, None),
    ("active offset moved", pair(), pair({"committed": 11}), None, None, 101.0, RevisitReason.OFFSET_MOVED),
    ("standby offset moved by someone", pair(), pair(standby={"committed": 9}), None, None, 101.0,
     RevisitReason.OFFSET_MOVED),
    ("standby offset moved by this run's commit", pair(), pair(standby={"committed": 9}), None,
     {("idc2", G): {("t", 0): 9}}, 101.0, None),
    ("members joined the standby", pair(), pair(standby={"members": 1}), None, None, 101.0,
     RevisitReason.GROUP_CHANGED),
    ("group state changed", pair(), pair({"state": "PreparingRebalance"}), None, None, 101.0,
     RevisitReason.GROUP_CHANGED),
    ("log start moved (retention)", pair(), pair(standby={"log_start": 5}), None, None, 101.0,
     RevisitReason.FACTS_CHANGED),
    ("log end went back (recreated topic)", pair(), pair({"log_end": 3}), None, None, 101.0,
     RevisitReason.FACTS_CHANGED),
    ("read error appeared", pair(), pair(standby={"error": "timed out"}), None, None, 101.0,
     RevisitReason.FACTS_CHANGED),
    ("topic gone on the standby", pair(), pair(standby={"present": False}), None, None, 101.0,
     RevisitReason.FACTS_CHANGED),
    ("unsettled, a log end moved, too soon", pair(), pair(standby={"log_end": 21}), {KEY: UNSETTLED}, None, 101.0,
     None),
    ("unsettled, a log end moved, revisit_s passed", pair(), pair(standby={"log_end": 21}), {KEY: UNSETTLED}, None,
     102.0, RevisitReason.UNSETTLED),
    ("unsettled, nothing moved, revisit_s passed", pair(), pair(), {KEY: UNSETTLED}, None, 150.0, None),
    ("unsettled, nothing moved, twice retry_s passed", pair(), pair(), {KEY: UNSETTLED}, None, 100.0 + 2 * RETRY_S,
     RevisitReason.UNSETTLED),
    ("exact but commit not synced", pair(), pair(standby={"log_end": 25}),
     {KEY: PartitionMemory(100.0, "header_exact", commit_synced=False, log_ends=ENDS)}, None, 103.0,
     RevisitReason.UNSETTLED),
    ("no translation (problem status)", pair(), pair({"log_end": 22}),
     {KEY: PartitionMemory(100.0, "cluster_unavailable", commit_synced=False, log_ends=ENDS)}, None, 103.0,
     RevisitReason.UNSETTLED),
    ("unknown status never counts as settled", pair(), pair({"log_end": 22}),
     {KEY: PartitionMemory(100.0, "from_a_newer_version", commit_synced=True, log_ends=ENDS)}, None, 103.0,
     RevisitReason.UNSETTLED),
])
def test_revisit_reasons(name, previous, current, memory, written, now, expected):
    got = revisit(previous, current, memory, written, now)
    assert got.get(KEY) == expected, name


def test_a_group_change_revisits_every_partition_of_the_group_and_no_other_group():
    previous = pair() + pair({"partition": 1}, {"partition": 1}) + pair({"group": "other"}, {"group": "other"})
    current = (pair(standby={"members": 2}) + pair({"partition": 1}, {"partition": 1, "members": 2})
               + pair({"group": "other"}, {"group": "other"}))
    memory = {KEY: SETTLED, (G, "t", 1): SETTLED, ("other", "t", 0): SETTLED}
    got = revisit(previous, current, memory)
    assert got == {KEY: RevisitReason.GROUP_CHANGED, (G, "t", 1): RevisitReason.GROUP_CHANGED}


def test_a_group_gone_from_one_cluster_is_a_group_change():
    previous = pair()
    current = [row("idc1")]  # the standby's rows are gone (group deleted there)
    assert revisit(previous, current) == {KEY: RevisitReason.GROUP_CHANGED}


def test_only_group_partitions_of_the_current_read_are_named():
    previous = pair() + pair({"topic": "gone"}, {"topic": "gone"})
    assert revisit(previous, pair(), {KEY: SETTLED, (G, "gone", 0): UNSETTLED}, now=500.0) == {}


offsets = st.integers(min_value=0, max_value=5)


@given(
    before=st.tuples(offsets, offsets, st.integers(0, 2), st.integers(0, 2)),
    now=st.tuples(offsets, offsets, st.integers(0, 2), st.integers(0, 2)),
    written=st.one_of(st.none(), offsets),
    status=st.sampled_from(["header_exact", "timestamp_search", "no_anchor", "caught_up"]),
    synced=st.booleans(),
    elapsed=st.floats(0, 10),
    grown=st.integers(0, 3),
)
def test_property_revisited_exactly_when_an_invariant_names_it(before, now, written, status, synced, elapsed, grown):
    (a0, s0, am0, sm0), (a1, s1, am1, sm1) = before, now
    previous = pair({"committed": a0, "members": am0}, {"committed": s0, "members": sm0})
    current = pair({"committed": a1, "members": am1, "log_end": 20 + grown},
                   {"committed": s1, "members": sm1, "log_end": 20 + grown})
    memory = {KEY: PartitionMemory(100.0, status, synced, log_ends=ENDS)}
    written_by_sync = {} if written is None else {("idc2", G): {("t", 0): written}}
    got = revisit(previous, current, memory, written_by_sync, now=100.0 + elapsed, revisit_s=2.0).get(KEY)

    group_changed = (am0, sm0) != (am1, sm1)
    moved = a0 != a1 or (s0 != s1 and s1 != written)
    settled = status in ("header_exact", "caught_up") and synced
    if group_changed:
        assert got == RevisitReason.GROUP_CHANGED
    elif moved:
        assert got == RevisitReason.OFFSET_MOVED
    elif not settled and elapsed >= 2.0 and grown:
        assert got == RevisitReason.UNSETTLED  # a log end moved: a copy, an anchor may have come
    else:
        assert got is None  # a growing log end alone never revisits a settled partition


def test_retry_after_is_spread_per_partition_between_one_and_two_retry_s():
    from offset_pipeline.continuous.revisit_rules import retry_after_s

    waits = {retry_after_s((G, "t", p), 300.0) for p in range(200)}
    assert all(300.0 <= w < 600.0 for w in waits) and len(waits) > 150
    assert retry_after_s(KEY, 300.0) == retry_after_s(KEY, 300.0)  # fixed per key


def test_changed_offset_sync_pairs_revisit_an_unsettled_partition_once_revisit_s_passed():
    from dataclasses import replace

    from offset_pipeline.continuous.revisit_rules import offset_syncs_mark
    from offset_pipeline.translation import OffsetSyncFacts, SyncPair

    unconfirmed = OffsetSyncFacts((SyncPair(9, 8, None),))
    then = offset_syncs_mark([("idc1", "idc2", unconfirmed)])
    waiting = {KEY: replace(UNSETTLED, status="offset_sync_unconfirmed", offset_syncs_mark=then)}
    stamped = {("t", 0): offset_syncs_mark([("idc1", "idc2", OffsetSyncFacts((SyncPair(9, 8, 20),)))])}
    newer = {("t", 0): offset_syncs_mark([("idc1", "idc2", OffsetSyncFacts((SyncPair(9, 8, None), SyncPair(15, 14, None))))])}
    unreadable = {("t", 0): offset_syncs_mark([("idc1", "idc2", OffsetSyncFacts(unconfirmed.pairs, unreadable="gone"))])}

    def reason(memory, marks, now):
        return partitions_to_revisit(pair(), pair(), memory, {}, now, 2.0, RETRY_S, marks).get(KEY)

    assert reason(waiting, {("t", 0): then}, 150.0) is None  # the same pairs: nothing new to prove with
    for marks in (stamped, newer, unreadable, {}):  # a first stamp, a new pair, the topic unreadable, gone
        assert reason(waiting, marks, 102.0) is RevisitReason.OFFSET_SYNCS_CHANGED, marks
        assert reason(waiting, marks, 101.0) is None  # not before revisit_s
    settled = {KEY: replace(SETTLED, offset_syncs_mark=then)}
    assert reason(settled, stamped, 150.0) is None  # an exact, synced answer does not move


def unsettled_for(seconds: float, at: float = 100.0) -> PartitionMemory:
    """UNSETTLED, translated at ``at``, unsettled for ``seconds`` by then."""
    return PartitionMemory(at, "timestamp_search", commit_synced=True, log_ends=ENDS, unsettled_since_s=at - seconds)


@pytest.mark.parametrize("memory, first, wait", [
    (UNSETTLED, 0.25, 2.0),  # since when not known: revisit_s, as without a first wait
    (unsettled_for(0.0), None, 2.0),  # no first wait: revisit_s
    (unsettled_for(0.0), 0.25, 0.25),  # unsettled by its first translation: the first wait
    (unsettled_for(0.25), 0.25, 0.25),
    (unsettled_for(0.5), 0.25, 0.5),  # then as long as it had been unsettled: doubling
    (unsettled_for(1.0), 0.25, 1.0),
    (unsettled_for(60.0), 0.25, 2.0),  # never past revisit_s
])
def test_an_unsettled_partition_backs_off_from_the_first_wait_to_revisit_s(memory, first, wait):
    assert unsettled_wait_s(memory, 2.0, first) == wait


@pytest.mark.parametrize("memory, now, expected", [
    (unsettled_for(0.0), 100.3, RevisitReason.UNSETTLED),  # just unsettled: tried again within 0.25 s
    (unsettled_for(0.0), 100.2, None),  # not before its wait
    (unsettled_for(1.0), 100.5, None),  # unsettled a second by then: waits a second
    (unsettled_for(1.0), 101.0, RevisitReason.UNSETTLED),
])
def test_the_backed_off_wait_decides_an_unsettled_revisit(memory, now, expected):
    got = partitions_to_revisit(pair(), pair(standby={"log_end": 21}), {KEY: memory}, {}, now, 2.0, RETRY_S,
                                revisit_first_s=0.25).get(KEY)
    assert got == expected
    # a log end that did not move still waits for retry_s, whatever the wait
    assert partitions_to_revisit(pair(), pair(), {KEY: memory}, {}, now, 2.0, RETRY_S, revisit_first_s=0.25) == {}
