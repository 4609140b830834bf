"""The commit-log feed of a continuous run (continuous/commit_feed.py) on the session's real pair:
both clusters followed, the groups that committed, joined or were left named, a listing made while groups keep
committing compared without a false difference, the followed offsets equal to a listing once the
commits stop; a cluster that does not answer is never ``following``."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from offset_pipeline.continuous.commit_feed import CommitLogFeed, FollowerMode
from offset_pipeline.kafka_io.group_offsets import GroupFilter, read_groups
from tests.conftest import wait_for
from tests.helpers.groups import Member

pytestmark = pytest.mark.kafka

CLUSTERS = ("idc1", "idc2")


def confs(kafka_pair) -> dict:
    return {c: (lambda c=c: {"bootstrap.servers": kafka_pair.bootstrap(c), "log_level": 3}) for c in CLUSTERS}


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """One commit of ``group`` without joining it (as a tool or a stopped group's admin would)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture
def feed_of(kafka_pair):
    feeds = []

    def start(prefix: str) -> CommitLogFeed:
        feed = CommitLogFeed(confs(kafka_pair), keep=lambda g: g.startswith(prefix), kafka_timeout_s=10).start()
        feeds.append(feed)
        return feed
    yield start
    for feed in feeds:
        feed.close()


def following(feed: CommitLogFeed) -> bool:
    return all(mode == FollowerMode.FOLLOWING for mode, _why, _gen in feed.mode().values())


def test_both_clusters_are_followed_and_the_groups_that_committed_are_named(kafka_pair, feed_of):
    prefix = f"feed-{uuid.uuid4().hex[:6]}-"
    topic = kafka_pair.create_topic(f"feed.{uuid.uuid4().hex[:6]}", partitions=2)
    feed = feed_of(prefix)
    # (a pair whose clusters never had a group has no log yet: the commits below create it)
    commit(kafka_pair.bootstrap("idc1"), f"{prefix}a", {(topic, 0): 5})
    commit(kafka_pair.bootstrap("idc2"), f"{prefix}b 'ü'", {(topic, 1): 7})
    commit(kafka_pair.bootstrap("idc1"), f"other-{prefix}", {(topic, 0): 1})  # not the run's group filter
    wait_for(lambda: following(feed), timeout=60, what="both followers following")
    member = Member(kafka_pair.bootstrap("idc2"), f"{prefix}joined", topic)  # a join, no commit
    changed: dict[str, set] = {c: set() for c in CLUSTERS}

    def arrived() -> bool:
        feed.wait(0.5)
        for cluster, groups in feed.take_changed().items():
            changed[cluster] |= groups
        return changed == {"idc1": {f"{prefix}a"}, "idc2": {f"{prefix}b 'ü'", f"{prefix}joined"}}
    try:
        wait_for(arrived, timeout=30, what=f"the commits and the join named (now {changed})")
    finally:
        member.close()
    wait_for(lambda: feed.wait(0.5) and f"{prefix}joined" in feed.take_changed()["idc2"], timeout=30,
             what="the member's leave named")
    assert feed.take_changed() == {"idc1": set(), "idc2": set()}  # each once
    assert sum(feed.counts["idc1"].values()) >= 2  # records read and counted by kind


def test_a_listing_made_while_groups_commit_finds_no_false_difference_and_equals_after_quiescence(
        kafka_pair, feed_of):
    prefix = f"recon-{uuid.uuid4().hex[:6]}-"
    topic = kafka_pair.create_topic(f"recon.{uuid.uuid4().hex[:6]}", partitions=3)
    groups = [f"{prefix}{i}" for i in range(6)]
    for cluster in CLUSTERS:
        for g in groups:
            commit(kafka_pair.bootstrap(cluster), g, {(topic, 0): 1})
    feed = feed_of(prefix)
    wait_for(lambda: following(feed), timeout=60, what="both followers following")
    admins = {c: AdminClient({"bootstrap.servers": kafka_pair.bootstrap(c), "log_level": 3}) for c in CLUSTERS}
    group_filter = GroupFilter(include=f"^{prefix}")

    def listing(cluster: str) -> dict:
        return {g.group_id: dict(g.committed) for g in read_groups(admins[cluster], cluster, group_filter, 15)
                if not g.read_error}

    for cluster in CLUSTERS:  # the run's first listing seeds the followed offsets
        since = feed.sequence()[cluster]
        feed.seed(cluster, listing(cluster), since)

    stop = threading.Event()
    rng = random.Random(7)
    made = {"commits": 0}

    def keep_committing() -> None:
        while not stop.is_set():
            cluster, group = rng.choice(CLUSTERS), rng.choice(groups)
            commit(kafka_pair.bootstrap(cluster), group, {(topic, rng.randrange(3)): rng.randrange(1, 10_000)})
            made["commits"] += 1
    writer = threading.Thread(target=keep_committing, daemon=True)
    writer.start()
    try:
        time.sleep(1)
        results = {}
        for cluster in CLUSTERS:
            since = feed.sequence()[cluster]
            listed = listing(cluster)
            ends = feed.ends(cluster)
            assert ends is not None
            wait_for(lambda c=cluster, e=ends: all(feed.reached(c, e)(g) for g in groups), timeout=30,
                     what=f"{cluster}'s follower at the log's end after the listing")
            results[cluster] = feed.reconcile(cluster, listed, since, feed.reached(cluster, ends))
    finally:
        stop.set()
        writer.join(30)
    assert made["commits"] > 5, made
    for cluster, result in results.items():
        assert result.differences == () and result.compared > 0, (cluster, result)

    # quiescence: every commit followed, a new listing compared in full, equal
    for cluster in CLUSTERS:
        ends = feed.ends(cluster)
        wait_for(lambda c=cluster, e=ends: all(feed.reached(c, e)(g) for g in groups), timeout=30,
                 what=f"{cluster}'s follower past the last commit")
        since = feed.sequence()[cluster]
        listed = listing(cluster)
        ends = feed.ends(cluster)
        wait_for(lambda c=cluster, e=ends: all(feed.reached(c, e)(g) for g in groups), timeout=30,
                 what=f"{cluster}'s follower at the log's end")
        result = feed.reconcile(cluster, listed, since, feed.reached(cluster, ends))
        assert result.differences == () and result.skipped_changed == 0, (cluster, result)
        assert result.compared == sum(len(v) for v in listed.values()) >= len(groups)


def test_a_cluster_that_does_not_answer_is_never_following_and_says_why():
    feed = CommitLogFeed({"idc9": lambda: {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}},
                         keep=lambda g: True, kafka_timeout_s=2, poll_s=0.2).start()
    try:
        wait_for(lambda: feed.mode()["idc9"][1] != "the follower has not read its first batch yet", timeout=60,
                 what="the follower's first answer")
        mode, why, _generation = feed.mode()["idc9"]
        assert mode == FollowerMode.UNREADABLE and "idc9 did not list __consumer_offsets" in why
        assert feed.ends("idc9") is None
    finally:
        started = time.monotonic()
        feed.close()
    assert time.monotonic() - started < 40  # bounded: the thread and its child stop
