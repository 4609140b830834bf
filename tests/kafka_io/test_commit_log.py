"""The group-commit log followed on a real broker (kafka_io/commit_log.py): a live group's commits,
a transactional producer's offset commits (the aborted one never seen), a group's deletion as
tombstones, the group's other records counted and skipped, the first commit ever on a fresh cluster;
the records the broker wrote decode exactly (translation/group_commit_records.py)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from offset_pipeline.continuous.commit_feed import CommitLogFeed, FollowerMode
from offset_pipeline.kafka_io.commit_log import CommitLogFollower, FollowedCommit
from offset_pipeline.translation.group_commit_records import commit_log_partition
from devstack.cluster import ClusterSpec, KafkaCluster
from tests.conftest import THROWAWAY_BROKER_GRACE_S, close_kafka_clients_of_this_process, free_port, wait_for
from tests.helpers.groups import Member, odd_group

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]  # one broker of its own: a cluster without the log


class Followed:
    """Everything a follower has returned so far."""

    def __init__(self, follower: CommitLogFollower):
        self.follower, self.commits, self.counts, self.errors = follower, [], {}, []
        self.positions, self.partitions, self.groups = {}, 0, []

    def poll(self) -> None:
        batch = self.follower.poll(timeout_s=0.5)
        self.commits += batch.commits
        self.positions, self.partitions = dict(batch.positions), batch.partitions
        self.groups += batch.group_records
        for kind, n in batch.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        if batch.error:
            self.errors.append(batch.error)

    def of(self, group: str) -> list[FollowedCommit]:
        return [c for c in self.commits if c.group == group]

    def until(self, predicate, what: str) -> None:
        def done():
            self.poll()
            return predicate()
        wait_for(done, timeout=60, what=what)


@pytest.fixture
def followed(kafka_pair):
    follower = CommitLogFollower("idc1", {"bootstrap.servers": kafka_pair.bootstrap("idc1")})
    try:
        reader = Followed(follower)
        reader.poll()  # assigned now: the commits since it began (and a few seconds before)
        # (on a worker's fresh pair no group may have committed yet, so the log may not exist: the
        # follower says so, and still reads every commit made since it began, see the last test)
        reader.errors.clear()
        yield reader
    finally:
        follower.close()


def test_a_live_groups_commits_arrive_in_order_with_their_commit_time(kafka_pair, followed):
    topic = kafka_pair.create_topic(f"cl.{uuid.uuid4().hex[:6]}", partitions=2, on=("idc1",))
    group = odd_group()
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    try:
        before_ms = int(time.time() * 1000)
        member.commit(topic, {0: 5, 1: 7})
        member.commit(topic, {0: 9})
        followed.until(lambda: len(followed.of(group)) >= 3, f"the commits of {group}")
    finally:
        member.close()
    commits = followed.of(group)
    assert [(c.cluster, c.topic, c.partition, c.offset) for c in commits] == [
        ("idc1", topic, 0, 5), ("idc1", topic, 1, 7), ("idc1", topic, 0, 9)]
    assert all(before_ms - 5_000 <= c.commit_time_ms <= time.time() * 1000 for c in commits)
    # one group lives in one partition of the log, so its commits come in the order they were made
    assert len({c.log_partition for c in commits}) == 1 and [c.log_offset for c in commits] == sorted(
        c.log_offset for c in commits)
    # the partition the broker's coordinator chose for the group (quotes, spaces, non-ASCII letters)
    assert commits[0].log_partition == commit_log_partition(group, followed.partitions)
    # the member's join wrote its classic group's metadata: counted by its type, not returned
    assert followed.counts.get("type_2", 0) >= 1 and followed.counts.get("unreadable", 0) == 0
    assert followed.errors == []


def test_an_aborted_transactional_offset_commit_never_counts_and_a_committed_one_does(kafka_pair, followed):
    topic = kafka_pair.create_topic(f"cl.tx.{uuid.uuid4().hex[:6]}", partitions=1, on=("idc1",))
    group = f"tx {uuid.uuid4().hex[:6]}"
    bootstrap = kafka_pair.bootstrap("idc1")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"cl-{uuid.uuid4().hex}", "log_level": 3})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        producer.init_transactions(30)
        for offset, commit in ((11, False), (22, True)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], consumer.consumer_group_metadata(),
                                                 30)
            (producer.commit_transaction if commit else producer.abort_transaction)(30)
        followed.until(lambda: followed.of(group), f"the transactional commit of {group}")
        # the follower's positions reach the ends read now, past the last transaction's marker
        # (a marker is no record: a position taken from the records read would stop short of it)
        ends = followed.follower.ends()
        followed.until(lambda: all(followed.positions.get(p, -1) >= end for p, end in ends.items()),
                       "the follower at the log's ends")
    finally:
        consumer.close()
    # read_committed, in the log's order: the aborted 11 came before 22 and was never delivered
    assert [c.offset for c in followed.of(group)] == [22]
    log_partition = followed.of(group)[0].log_partition
    assert ends[log_partition] > followed.of(group)[0].log_offset + 1  # the marker after the commit


def test_a_new_protocol_groups_commits_and_own_records_are_followed(kafka_pair, followed):
    # KIP-848's consumer group protocol (group.protocol=consumer): its members, assignments and
    # epochs are records of other types; its offset commits are the same records as a classic group's.
    topic = kafka_pair.create_topic(f"cl.kip848.{uuid.uuid4().hex[:6]}", partitions=2, on=("idc1",))
    group = f"new protocol {uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False, "log_level": 3})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 2, timeout=60,
                 what=f"{group} assigned by the new protocol")
        consumer.commit(offsets=[TopicPartition(topic, 0, 6), TopicPartition(topic, 1, 2)], asynchronous=False)
        followed.until(lambda: len(followed.of(group)) >= 2, f"the commits of {group}")
    finally:
        consumer.close()
    assert sorted((c.partition, c.offset) for c in followed.of(group)) == [(0, 6), (1, 2)]
    # the protocol's own records: named by their types (not 2, a classic group's), and by the group
    assert group in followed.groups
    assert any(kind.startswith("type_") and kind != "type_2" for kind in followed.counts), followed.counts
    assert followed.counts.get("unreadable", 0) == 0


def test_a_deleted_group_is_a_tombstone_per_partition(kafka_pair, followed):
    topic = kafka_pair.create_topic(f"cl.del.{uuid.uuid4().hex[:6]}", partitions=2, on=("idc1",))
    group = f"deleted {uuid.uuid4().hex[:6]}"
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    member.commit(topic, {0: 3, 1: 4})
    member.close()
    admin = AdminClient({"bootstrap.servers": kafka_pair.bootstrap("idc1")})
    wait_for(lambda: _deleted(admin, group), timeout=60, what=f"{group} deleted")
    followed.until(lambda: sum(1 for c in followed.of(group) if c.offset is None) >= 2, f"the tombstones of {group}")
    gone = [(c.topic, c.partition) for c in followed.of(group) if c.offset is None]
    assert sorted(gone) == [(topic, 0), (topic, 1)]
    assert all(c.commit_time_ms is None for c in followed.of(group) if c.offset is None)


def _deleted(admin: AdminClient, group: str) -> bool:
    try:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
        return True
    except Exception:  # noqa: BLE001 - the member's leave may not have been processed yet: asked again
        return False


def test_a_cluster_that_does_not_answer_is_an_error_not_an_exception():
    follower = CommitLogFollower("idc9", {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, timeout_s=2)
    try:
        batch = follower.poll(timeout_s=0.2)
    finally:
        follower.close()
    assert batch.commits == [] and "idc9 did not list __consumer_offsets" in batch.error


def test_the_first_commit_ever_on_a_fresh_cluster_is_followed(kafka_jars, tmp_path):
    cluster = KafkaCluster(ClusterSpec("idc1", free_port(), free_port(), tmp_path / "fresh"), kafka_jars)
    cluster.start()
    follower = CommitLogFollower("idc1", {"bootstrap.servers": cluster.spec.bootstrap_servers, "log_level": 3})
    try:
        # No group ever committed on a fresh cluster: the log does not exist yet, or the follower's
        # own metadata request has just had the broker create it. Either way the first commit counts.
        follower.poll(timeout_s=0.2)
        topic, group = "fresh.orders", "the first group"
        admin = AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers})  # held until the answer
        admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
        # creates the log; retried while the new topic is not yet known where the group's commit lands
        # (UNKNOWN_TOPIC_OR_PART on a loaded machine), and the committing consumer closed either way
        commit_retried({"bootstrap.servers": cluster.spec.bootstrap_servers, "log_level": 3}, group, topic, 4)
        reader = Followed(follower)
        # the first commit, written before the follower could be assigned to the new log, is not missed
        reader.until(lambda: reader.of(group), "the first commit ever on the cluster")
        assert [(c.topic, c.partition, c.offset) for c in reader.of(group)] == [(topic, 0, 4)]
    finally:
        follower.close()
        close_kafka_clients_of_this_process()
        cluster.stop(timeout=THROWAWAY_BROKER_GRACE_S)


def test_the_feed_follows_on_through_a_broker_restart(kafka_jars, tmp_path):
    cluster = KafkaCluster(ClusterSpec("idc1", free_port(), free_port(), tmp_path / "restarted"), kafka_jars)
    cluster.start()
    conf = {"bootstrap.servers": cluster.spec.bootstrap_servers, "log_level": 0}
    topic, group = "restart.orders", "followed through a restart"
    admin = AdminClient(conf)  # held until the answer
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
    feed = CommitLogFeed({"idc1": lambda: dict(conf)}, keep=lambda g: True, kafka_timeout_s=5, poll_s=0.2).start()
    seen: set[str] = set()

    def named(offset: int) -> bool:
        feed.wait(0.5)
        seen.update(feed.take_changed()["idc1"])
        return group in seen and feed.mode()["idc1"][0] == FollowerMode.FOLLOWING

    try:
        commit_retried(conf, group, topic, 3)  # creates the log
        wait_for(lambda: named(3), timeout=90, what="the first commit followed")
        cluster.stop(timeout=THROWAWAY_BROKER_GRACE_S)
        cluster.start()
        seen.clear()
        commit_retried(conf, group, topic, 9)
        wait_for(lambda: named(9), timeout=120, what="the commit after the restart followed")
        # the followed offsets hold the commit made after the restart
        listing = {group: {(topic, 0): 9}}
        ends = feed.ends("idc1")
        assert ends is not None
        wait_for(lambda: feed.reached("idc1", ends)(group), timeout=30, what="the follower at the log's end")
        assert feed.reconcile("idc1", listing, feed.sequence()["idc1"], feed.reached("idc1", ends)).differences == ()
    finally:
        feed.close()
        close_kafka_clients_of_this_process()
        cluster.stop(timeout=THROWAWAY_BROKER_GRACE_S)


def commit_retried(conf: dict, group: str, topic: str, offset: int) -> None:
    """One commit, retried while a broker that has just started still loads its groups."""
    def done() -> bool:
        consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            return True
        except Exception:  # noqa: BLE001 - COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: asked again
            return False
        finally:
            consumer.close()
    wait_for(done, timeout=90, what=f"{group}'s commit of {offset}")
