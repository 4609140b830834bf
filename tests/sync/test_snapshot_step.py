"""The snapshot step's followed read (sync/snapshot_step.py, ``ChangedGroups``) on the session's real
clusters: the log facts of the partitions the changed groups involve, and of those named ``also``,
are read anew; every other partition's are carried from the last read, and a partition the last
read did not ask about is read."""

from __future__ import annotations

import re
import uuid

import pytest

from offset_pipeline.kafka_io.group_offsets import GroupFilter, GroupState
from offset_pipeline.sync.snapshot_step import ChangedGroups, ClusterReads, read_clusters
from tests.helpers.groups import commit_as_group
from tests.helpers.one_partition import produce

pytestmark = pytest.mark.kafka


def log_ends(reads: ClusterReads, cluster: str) -> dict[str, int]:
    return {r.topic: r.log_end for r in reads.ranges[cluster] if r.partition == 0}


def test_a_followed_read_reads_the_log_facts_of_the_changed_groups_and_carries_the_others(kafka_pair):
    uid = uuid.uuid4().hex[:8]
    b1 = kafka_pair.bootstrap("idc1")
    topics = {name: kafka_pair.create_topic(f"t.carried-{name}.{uid}") for name in ("a", "b", "c")}
    groups = {name: f"carried {name} {uid}" for name in topics}
    for name, topic in topics.items():
        produce(b1, topic, ["x", "y"])
        commit_as_group(b1, groups[name], topic, 1)
    configs = {c: (lambda c=c: {"bootstrap.servers": kafka_pair.bootstrap(c), "log_level": 3}) for c in ("idc1", "idc2")}
    group_filter = GroupFilter(f"^carried .* {re.escape(uid)}$")

    first = read_clusters(configs, group_filter, 10.0)
    assert not first.unavailable and first.carried == 0
    assert log_ends(first, "idc1") == {topics["a"]: 2, topics["b"]: 2, topics["c"]: 2}

    # more records on every topic; only group a commits; c's partition is named (an unsettled one)
    for topic in topics.values():
        produce(b1, topic, ["z"])
    commit_as_group(b1, groups["a"], topics["a"], 3)
    followed = read_clusters(configs, group_filter, 10.0, changed=ChangedGroups(
        first.groups, [groups["a"]], carried=first, also=frozenset({(topics["c"], 0)})))
    assert not followed.unavailable
    # a's and c's log ends are new, b's is the last read's
    assert log_ends(followed, "idc1") == {topics["a"]: 3, topics["b"]: 2, topics["c"]: 3}
    assert followed.carried == 2  # b's partition on each cluster
    a_now = {g.group_id: g.committed for g in followed.groups["idc1"]}
    assert a_now[groups["a"]] == {(topics["a"], 0): 3} and a_now[groups["b"]] == {(topics["b"], 0): 1}
    # the rows have every group-partition on both clusters, b's with the carried facts
    rows = {(r.cluster, r.group_id): r for r in followed.rows("s", 0)}
    assert len(rows) == 6 and rows[("idc1", groups["b"])].log_end == 2 and rows[("idc1", groups["a"])].log_end == 3

    # a partition the last read did not ask about is read; one whose committed offset did not change
    # is carried, even in a group read again
    d = kafka_pair.create_topic(f"t.carried-d.{uid}")
    produce(b1, d, ["w"])
    commit_as_group(b1, groups["b"], d, 1)  # group b now involves a partition the last read did not ask about
    again = read_clusters(configs, group_filter, 10.0, changed=ChangedGroups(
        followed.groups, [], carried=followed))
    assert log_ends(again, "idc1") == {topics["a"]: 3, topics["b"]: 2, topics["c"]: 3}  # nobody committed: carried
    again = read_clusters(configs, group_filter, 10.0, changed=ChangedGroups(
        followed.groups, [groups["b"]], carried=followed))
    assert log_ends(again, "idc1") == {topics["a"]: 3, topics["b"]: 2, topics["c"]: 3, d: 1}
    everything = read_clusters(configs, group_filter, 10.0, changed=ChangedGroups(followed.groups, [groups["b"]]))
    assert everything.carried == 0 and log_ends(everything, "idc1") == {
        topics["a"]: 3, topics["b"]: 3, topics["c"]: 3, d: 1}


def state(group: str, committed: dict, members: int = 0, group_state: str = "EMPTY", read_error: str = "") -> GroupState:
    return GroupState("idc1", group, group_state, members, committed, read_error)


T0, T1, T2 = ("t", 0), ("t", 1), ("u", 0)
BEFORE = {"g": state("g", {T0: 5, T1: 7}), "h": state("h", {T2: 1})}


@pytest.mark.parametrize("now, also, fresh", [
    ({"g": state("g", {T0: 5, T1: 7})}, set(), set()),  # read again, nothing changed: carried
    ({"g": state("g", {T0: 6, T1: 7})}, set(), {T0}),  # one offset moved: that partition
    ({"g": state("g", {T0: 5})}, set(), set()),  # an offset gone: no longer involved
    ({"g": state("g", {T0: 5, T1: 7}, members=1, group_state="STABLE")}, set(), {T0, T1}),  # the group changed
    ({"g": state("g", {T0: 5, T1: 7}, read_error="boom")}, set(), {T0, T1}),  # unreadable
    ({"new": state("new", {T0: 1})}, set(), {T0}),  # a new group
    ({"g": state("g", {T0: 5, T1: 7})}, {T1, ("gone", 0)}, {T1}),  # also, where involved
])
def test_the_fresh_partitions_are_those_a_revisit_may_translate(now, also, fresh):
    groups = {"idc1": [now.get(g, BEFORE.get(g)) for g in sorted(set(BEFORE) | set(now)) if g in now or g == "h"]}
    carried = ClusterReads(asked={"idc1": {T0, T1, T2}})
    changed = ChangedGroups({"idc1": list(BEFORE.values())}, sorted(now), carried, frozenset(also))
    involved = {tp for g in groups["idc1"] for tp in g.committed}
    assert changed.fresh_partitions(groups, involved) == fresh
    # a partition the carried read did not ask about is read whatever else holds
    unasked = ChangedGroups({"idc1": list(BEFORE.values())}, sorted(now), ClusterReads(asked={"idc1": {T0}}),
                            frozenset(also))
    assert unasked.fresh_partitions(groups, involved) == fresh | (involved - {T0})


def test_offsets_put_in_from_a_commit_log_have_their_moved_partitions_read():
    # the run put g's followed offsets into the groups it hands as previous: compared with those,
    # nothing changed; compared with the groups as the carried read gave them, T0 moved
    patched = state("g", {T0: 6, T1: 7})
    previous = {"idc1": [patched, BEFORE["h"]]}
    before = {"idc1": [BEFORE["g"], BEFORE["h"]]}
    carried = ClusterReads(asked={"idc1": {T0, T1, T2}})
    involved = {T0, T1, T2}
    assert ChangedGroups(previous, [], carried, before=before).fresh_partitions(previous, involved) == {T0}
    assert ChangedGroups(previous, [], carried).fresh_partitions(previous, involved) == set()
