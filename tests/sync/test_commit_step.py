"""commit_group: one group's translation rows -> decisions and stored rows, against real brokers and a
cluster that does not answer (one group failing never fails the others)."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

import pytest

from offset_pipeline.sync.commit_step import CycleContext, TranslatedRow, active_reset, commit_group
from offset_pipeline.kafka_io.cluster_client import ClusterClient
from offset_pipeline.kafka_io.group_io import IsolatedGroupIO
from offset_pipeline.resources import KafkaClusterResource
from tests.conftest import free_port
from tests.helpers.groups import committed

CYCLE = CycleContext(snapshot_id="s", cycle_time_ms=1_000, dry_run=False, timeout_s=3.0)


def translated(group, topic, partition, t, *, active="idc1", standby="idc2", bound=None, c=10,
               status="header_anchor", strategy="header_anchor") -> TranslatedRow:
    return TranslatedRow(group, topic, partition, active, standby, c, t, status, strategy if t is not None else "none",
                         "test", t if bound is None else bound)


def test_undecided_groups_are_recorded_without_touching_kafka():
    group = 'split "brain" ü'
    rows = [
        TranslatedRow(group, "t", 0, "", "", None, None, "split_brain", "none", "members on both clusters", None),
        TranslatedRow(group, "t", 1, "", "", None, None, "split_brain", "none", "members on both clusters", None),
    ]
    plan, stored = commit_group(rows, {}, CYCLE)  # no Kafka resources at all: nothing can be called
    assert [s.decision for s in stored] == ["split_brain", "split_brain"]
    assert all("members on both clusters" in s.reason and not s.applied for s in stored)
    undetermined = [
        TranslatedRow("g", "t", 0, "", "", None, None, "direction_undetermined", "none", "no members", None),
    ]
    _, stored = commit_group(undetermined, {}, CYCLE)
    assert [s.decision for s in stored] == ["skipped_untranslated"]


@pytest.mark.kafka
def test_a_cluster_down_fails_its_groups_only(kafka_pair):
    topic = kafka_pair.create_topic(f"step.{uuid.uuid4().hex[:8]}", partitions=1)
    live = lambda name, cluster: KafkaClusterResource(  # noqa: E731
        cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(cluster))
    clusters = {
        "idc1": live("idc1", "idc1"),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=f"127.0.0.1:{free_port()}"),
        "idc3": live("idc3", "idc2"),  # the second real broker, under a third name
    }
    unreachable: dict = {}
    g1, g2, g3 = (f"step {n} 'q' {uuid.uuid4().hex[:6]}" for n in ("down", "also down", "fine"))

    plan, stored = commit_group([translated(g1, topic, 0, 3)], clusters, CYCLE, unreachable=unreachable)
    assert [(s.decision, s.applied) for s in stored] == [("failed", False)]
    assert "idc2" in stored[0].error and "idc2" in unreachable

    started = time.monotonic()
    _, stored = commit_group([translated(g2, topic, 0, 3, active="idc2", standby="idc1")], clusters, CYCLE,
                             unreachable=unreachable)
    assert [s.decision for s in stored] == ["failed"]
    assert "earlier in this cycle" in stored[0].error
    assert time.monotonic() - started < 1.0  # no second wait for the same dead cluster

    _, stored = commit_group([translated(g3, topic, 0, 3, active="idc3", standby="idc1")], clusters, CYCLE,
                             unreachable=unreachable)
    assert [(s.decision, s.applied, s.committed_after, s.error) for s in stored] == [("commit", True, 3, None)]
    assert committed(kafka_pair.bootstrap("idc1"), g3, topic) == {0: 3}


@pytest.mark.kafka
def test_the_safe_bound_guards_the_write(kafka_pair):
    topic = kafka_pair.create_topic(f"step.{uuid.uuid4().hex[:8]}", partitions=2)
    clusters = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(name))
                for name in ("idc1", "idc2")}
    group = f"bound 'guard' {uuid.uuid4().hex[:6]}"
    rows = [translated(group, topic, 0, 4, bound=4), translated(group, topic, 1, 6, bound=5)]
    _, stored = commit_group(rows, clusters, CYCLE)
    assert [(s.partition, s.decision, s.applied, s.safe_bound) for s in stored] == [
        (0, "commit", True, 4), (1, "refused_no_loss_check", False, 5)]
    assert committed(kafka_pair.bootstrap("idc2"), group, topic) == {0: 4}


@pytest.mark.parametrize("before, expected", [
    (None, set()),
    ({}, set()),
    ({("t", 0): 10, ("t", 1): 10}, set()),
    ({("t", 0): 12, ("t", 1): 9}, {("t", 0)}),
    ({("t", 0): 12}, {("t", 0)}),
])
def test_active_reset_is_a_committed_offset_that_went_down(before, expected):
    rows = [translated("g", "t", 0, 3, c=10), translated("g", "t", 1, 3, c=10),
            translated("g", "t", 2, None, c=None, status="no_committed_offset")]
    assert active_reset(rows, before) == expected


def test_inconsistent_rows_fail_their_group_without_kafka():
    rows = [translated("g", "t", 0, 3), translated("g", "t", 0, 4)]  # one partition twice
    _, stored = commit_group(rows, {"idc1": None, "idc2": None}, CYCLE)  # None: any Kafka call would raise
    assert {s.decision for s in stored} == {"failed"}
    assert all("twice" in s.error for s in stored)
    bad = [TranslatedRow("g", "t", 0, "idc1", "idc2", 5, None, "header_exact", "header_anchor", "x", 4)]
    _, stored = commit_group(bad, {"idc1": None, "idc2": None}, CYCLE)
    assert [s.decision for s in stored] == ["failed"] and "inconsistent" in stored[0].error


# -- the sync cycle's way: each cluster's calls in a child process (kafka_io/group_io.py) ----------

_ADMIN_CLIENTS_ASKED = 0  # in the child process that runs the calls


@dataclass(frozen=True)
class AbortingClient(ClusterClient):
    """A real cluster's client config whose child process aborts (SIGABRT, as librdkafka's failed
    assertions do) when its admin client is asked for the ``abort_at``-th time: each of the child's
    group calls asks once (kafka_io/group_io.py), so 1 = the re-read of the group's live state, 2 =
    the commit."""

    abort_at: int = 1

    def admin(self):
        global _ADMIN_CLIENTS_ASKED
        _ADMIN_CLIENTS_ASKED += 1
        if _ADMIN_CLIENTS_ASKED >= self.abort_at:
            os.abort()
        return super().admin()


@pytest.mark.kafka
@pytest.mark.parametrize(("abort_at", "step"), [(1, "re-reading the group on idc1"), (2, "committing on idc1")])
def test_a_kafka_client_that_aborts_in_its_child_fails_the_group_with_the_reason_not_the_caller(
    kafka_pair, abort_at, step,
):
    topic = kafka_pair.create_topic(f"step.{uuid.uuid4().hex[:8]}", partitions=1)
    real = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(name))
            for name in ("idc1", "idc2")}
    standby = real["idc1"].plain()
    io = IsolatedGroupIO({
        "idc2": real["idc2"].plain(),
        "idc1": AbortingClient(standby.cluster_name, standby.client_config, standby.admin_config, abort_at=abort_at),
    })
    unreachable: dict = {}
    group = f"step 'abort' {uuid.uuid4().hex[:6]}"
    try:
        _, stored = commit_group([translated(group, topic, 0, 3, active="idc2", standby="idc1")], real, CYCLE,
                                 unreachable=unreachable, io=io)
    finally:
        io.close()
    assert [(s.decision, s.applied, s.committed_after) for s in stored] == [
        ("failed" if abort_at == 1 else "commit", False, None)]
    assert stored[0].error.startswith(step) and "killed by SIGABRT" in stored[0].error
    if abort_at == 2:
        assert "at its old or its new offsets" in stored[0].error
    assert set(unreachable) == {"idc1"}  # the groups after it fail at once
    assert committed(kafka_pair.bootstrap("idc1"), group, topic) == {}  # aborted before the request


@pytest.mark.kafka
def test_isolated_group_calls_commit_as_the_direct_ones_do(kafka_pair):
    topic = kafka_pair.create_topic(f"step.{uuid.uuid4().hex[:8]}", partitions=2)
    clusters = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(name))
                for name in ("idc1", "idc2")}
    io = IsolatedGroupIO({name: r.plain() for name, r in clusters.items()})
    group = f"isolated 'q' ü {uuid.uuid4().hex[:6]}"
    try:
        rows = [translated(group, topic, 0, 4, bound=4), translated(group, topic, 1, 6, bound=5)]
        _, stored = commit_group(rows, clusters, CYCLE, io=io)
    finally:
        io.close()
    assert [(s.partition, s.decision, s.applied, s.committed_after) for s in stored] == [
        (0, "commit", True, 4), (1, "refused_no_loss_check", False, None)]
    assert committed(kafka_pair.bootstrap("idc2"), group, topic) == {0: 4}


class RefusingIO:
    """Group calls as a broker with one ACL missing answers them (the real refusals are in
    tests/secure/test_secure_unauthorized.py): the standby group's commit, or its re-read."""

    def __init__(self, refuse: str):
        self.refuse = refuse

    def member_count(self, cluster, group_id, timeout_s):
        return 1

    def live_state(self, cluster, group_id, partitions, timeout_s):
        from offset_pipeline.kafka_io.group_io import GroupIOError
        from offset_pipeline.kafka_io.standby_groups import LiveGroupState

        if self.refuse == "reread":
            raise GroupIOError("KafkaCallFailed: KafkaException: GROUP_AUTHORIZATION_FAILED: Broker: Group "
                               "authorization failed", unreachable=False)
        return LiveGroupState(cluster, group_id, "EMPTY", 0, {})

    def commit(self, cluster, group_id, offsets, partitions, timeout_s):
        from offset_pipeline.kafka_io.group_commits import (
            GroupCommitWrite,
            PartitionWrite,
        )

        error = "GROUP_AUTHORIZATION_FAILED: Broker: Group authorization failed"
        return GroupCommitWrite(cluster, group_id, tuple(PartitionWrite(t, p, o, False, error, None)
                                                         for (t, p), o in offsets.items()), {}, call_error=None)


@pytest.mark.parametrize("refuse, doing", [("commit", "committing"), ("reread", "re-reading the group")])
def test_a_refusal_by_acl_on_the_standby_group_is_not_authorized_naming_the_right(refuse, doing):
    rows = [translated("g", "t", p, 10, status="header_exact") for p in (0, 1)]
    clusters = {"idc1": object(), "idc2": object()}
    unreachable: dict[str, str] = {}
    plan, stored = commit_group(rows, clusters, CYCLE, io=RefusingIO(refuse), unreachable=unreachable)
    assert [(s.decision, s.applied) for s in stored] == [("not_authorized", False)] * 2
    assert [c.decision.value for c in plan] == ["not_authorized"] * 2
    for row in stored:
        assert f"not authorized on idc2 while {doing}" in row.reason and "--operation Read --group 'g'" in row.reason
        assert "GROUP_AUTHORIZATION_FAILED" in row.error
    assert unreachable == {}  # a refusal is no outage: the cycle's other groups still call idc2
