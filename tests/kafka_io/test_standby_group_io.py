"""Standby group re-reads and the one-call group commit, against a real broker (nothing mocked)."""

from __future__ import annotations

import time
import uuid

import pytest

from offset_pipeline.kafka_io.standby_groups import (
    cluster_unreachable,
    read_group_members,
)
from offset_pipeline.kafka_io.standby_groups import read_live_group_state as read_state_with
from offset_pipeline.kafka_io.group_commits import commit_group_offsets as commit_with
from offset_pipeline.resources import KafkaClusterResource
from tests.conftest import free_port
from tests.helpers.groups import Member, committed

pytestmark = pytest.mark.kafka

ODD = 'standby "io" grüße {g} 한 \' x'


@pytest.fixture(params=["consumer", "admin"])
def via(request) -> str:
    """Both ways to read and write a group's offsets: a consumer per group (in-process callers) and
    the admin client (the commit step's child processes)."""
    return request.param


@pytest.fixture
def read_live_group_state(via):
    def read(cluster, group_id, partitions, **kwargs):
        return read_state_with(cluster, group_id, partitions, offsets_via_admin=via == "admin", **kwargs)
    return read


@pytest.fixture
def commit_group_offsets(via):
    def commit(cluster, group_id, offsets, **kwargs):
        return commit_with(cluster, group_id, offsets, admin=cluster.admin() if via == "admin" and offsets else None,
                           **kwargs)
    return commit


@pytest.fixture
def idc1(kafka_pair) -> KafkaClusterResource:
    return KafkaClusterResource(cluster_name="idc1", bootstrap_servers=kafka_pair.bootstrap("idc1"))


@pytest.fixture
def topic(kafka_pair) -> str:
    return kafka_pair.create_topic(f"io.{uuid.uuid4().hex[:8]}", partitions=2, on=("idc1",))


def test_an_absent_group_reads_as_no_members_and_no_offsets(idc1, topic, read_live_group_state, commit_group_offsets):
    group = ODD.format(g=uuid.uuid4().hex[:6])
    state = read_live_group_state(idc1, group, [(topic, 0), (topic, 1)], timeout_s=10)
    assert (state.cluster, state.group_id, state.member_count, state.committed) == ("idc1", group, 0, {})


def test_one_commit_call_applies_every_partition_and_reads_them_back(kafka_pair, idc1, topic, read_live_group_state, commit_group_offsets):
    group = ODD.format(g=uuid.uuid4().hex[:6])
    write = commit_group_offsets(idc1, group, {(topic, 0): 5, (topic, 1): 0}, timeout_s=10)
    assert (write.call_error, write.reread_error) == (None, None)
    assert write.applied == {(topic, 0): 5, (topic, 1): 0}
    assert write.errors == {}
    assert write.committed_after == {(topic, 0): 5, (topic, 1): 0}
    assert committed(kafka_pair.bootstrap("idc1"), group, topic) == {0: 5, 1: 0}
    # and the re-read of the project sees the same, with no members (the writer never joined)
    state = read_live_group_state(idc1, group, [(topic, 0), (topic, 1)])
    assert (state.member_count, state.committed) == (0, {(topic, 0): 5, (topic, 1): 0})
    assert state.state == "EMPTY"


def test_a_group_with_a_live_member_refuses_the_write_and_keeps_its_offsets(kafka_pair, idc1, topic, read_live_group_state, commit_group_offsets):
    group = ODD.format(g=uuid.uuid4().hex[:6])
    bootstrap = kafka_pair.bootstrap("idc1")
    commit_group_offsets(idc1, group, {(topic, 0): 2, (topic, 1): 1})
    member = Member(bootstrap, group, topic)
    try:
        assert read_group_members(idc1, group).member_count == 1
        write = commit_group_offsets(idc1, group, {(topic, 0): 9, (topic, 1): 9}, timeout_s=10)
        assert write.applied == {}
        assert set(write.errors) == {(topic, 0), (topic, 1)}
        assert all("UNKNOWN_MEMBER_ID" in e for e in write.errors.values()), write.errors
        assert write.committed_after == {(topic, 0): 2, (topic, 1): 1}
        assert committed(bootstrap, group, topic) == {0: 2, 1: 1}
    finally:
        member.close()


def test_a_partly_refused_commit_reports_what_landed(kafka_pair, idc1, topic, read_live_group_state, commit_group_offsets):
    """confluent-kafka raises for the whole call when one partition fails, yet the broker applied
    the others: the re-read says which."""
    group = ODD.format(g=uuid.uuid4().hex[:6])
    write = commit_group_offsets(idc1, group, {(topic, 0): 4, (topic, 7): 4, (topic, 1): 3})
    assert "UNKNOWN_TOPIC_OR_PART" in (write.call_error or write.errors[(topic, 7)])
    assert write.applied == {(topic, 0): 4, (topic, 1): 3}
    assert set(write.errors) == {(topic, 7)}
    assert committed(kafka_pair.bootstrap("idc1"), group, topic) == {0: 4, 1: 3}


def test_an_unreachable_cluster_fails_fast_and_is_named_unreachable(read_live_group_state, commit_group_offsets):
    down = KafkaClusterResource(cluster_name="idc2", bootstrap_servers=f"127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        read_live_group_state(down, "g", [("t", 0)], timeout_s=2)
    assert cluster_unreachable(raised.value), raised.value
    write = commit_group_offsets(down, "g", {("t", 0): 1}, timeout_s=2)
    assert write.applied == {} and write.call_error and write.reread_error
    assert time.monotonic() - started < 20  # bounded by the timeouts, not librdkafka's 45 s default


def test_nothing_to_commit_is_a_caller_bug(idc1, read_live_group_state, commit_group_offsets):
    with pytest.raises(ValueError):
        commit_group_offsets(idc1, "g", {})
