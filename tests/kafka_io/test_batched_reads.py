"""run_batched against real brokers: many partitions' reads together give each partition exactly the
facts it gets read alone, in fewer calls, and one partition's failure stays its own."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from devstack.records import read_partition
from offset_pipeline.kafka_io.batched_reads import BatchStats, run_batched
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.kafka_io.partition_records import (
    GroupPartitionInput,
    PartitionLogs,
    ReadStats,
    read_translation_facts,
    translation_fact_steps,
)
from offset_pipeline.translation.shape import TopicShape
from offset_pipeline.translation.translate import check_no_loss, translate_partition
from tests.conftest import wait_for
from tests.helpers.fact_reads import conf, produce_one_way

pytestmark = pytest.mark.kafka

PARTITIONS = 4


def logs_of(pair, topic, partition, active="idc1", standby="idc2") -> PartitionLogs:
    (a,) = read_partition_ranges(pair.admin(active), active, [(topic, partition)])
    (s,) = read_partition_ranges(pair.admin(standby), standby, [(topic, partition)])
    return PartitionLogs(a.log_start, a.last_stable, s.log_start, s.last_stable)


def two_way(pair, topic) -> None:
    """Records produced on both clusters into every partition, mirrored both ways."""
    for cluster in ("idc1", "idc2"):
        producer = Producer({"bootstrap.servers": pair.bootstrap(cluster), "enable.idempotence": True, "log_level": 3})
        for p in range(PARTITIONS):
            for i in range(12):
                producer.produce(topic, value=json.dumps({"id": f"{cluster}-{p}-{i}"}).encode(), partition=p)
        assert producer.flush(30) == 0
    for p in range(PARTITIONS):
        wait_for(lambda p=p: all(len(read_partition(pair.bootstrap(c), topic, p)) == 24 for c in ("idc1", "idc2")),
                 timeout=90, what=f"{topic}[{p}] mirrored both ways")


@pytest.fixture(scope="module")
def topics(kafka_pair, session_mirrors):
    """A two-way topic of 4 partitions, a one-way one (transactions, an aborted batch, a timestamp
    going back) and one with an open transaction on idc1 (not mirrored: it stays open)."""
    suffix = uuid.uuid4().hex[:6]
    both, open_tx = f"t.batched-two.{suffix}", f"x.batched-open.{suffix}"
    one_way = [f"t.batched-one.{suffix}", f"t.batched-one-more.{suffix}"]
    kafka_pair.create_topic(both, partitions=PARTITIONS)
    for topic in [*one_way, open_tx]:
        kafka_pair.create_topic(topic)
    two_way(kafka_pair, both)
    for topic in one_way:
        n = produce_one_way(kafka_pair, topic)
        wait_for(lambda topic=topic, n=n: len(read_partition(kafka_pair.bootstrap("idc2"), topic, 0)) == n, timeout=90,
                 what=f"{topic} mirrored")
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "transactional.id": f"open-{open_tx}",
                         "log_level": 3})
    producer.init_transactions(30)
    producer.begin_transaction()
    plain = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for i in range(10):
        plain.produce(open_tx, value=json.dumps({"id": f"r{i}"}).encode(), partition=0)
    assert plain.flush(30) == 0
    for i in range(5):
        producer.produce(open_tx, value=json.dumps({"id": f"open-{i}"}).encode(), partition=0)
    assert producer.flush(30) == 0
    try:
        yield {"two_way": both, "one_way": one_way, "open": open_tx}
    finally:
        producer.abort_transaction(30)


def partition_jobs(pair, topics) -> list[tuple[tuple, dict]]:
    """(args, kwargs) of read_translation_facts for every partition and direction of the topics."""
    jobs = []
    for p in range(PARTITIONS):
        for active, standby in (("idc1", "idc2"), ("idc2", "idc1")):
            logs = logs_of(pair, topics["two_way"], p, active, standby)
            groups = [GroupPartitionInput(f"g{c}", c) for c in range(logs.active_log_start, logs.active_log_end + 1, 5)]
            jobs.append(((active, standby, conf(pair, active), conf(pair, standby), topics["two_way"], p, logs, groups),
                         {"shape": TopicShape.two_way(), "window": 4}))
    for topic in topics["one_way"]:
        logs = logs_of(pair, topic, 0)
        groups = [GroupPartitionInput(f"g{c}", c) for c in range(logs.active_log_start, logs.active_log_end + 1, 3)]
        for refine_window in (3, 200):  # the same partition twice in one batch: its reads go in turn
            jobs.append((("idc1", "idc2", conf(pair, "idc1"), conf(pair, "idc2"), topic, 0, logs, groups),
                         {"shape": TopicShape.one_way("idc1"), "window": 5, "refine_window": refine_window}))
    (a,) = read_partition_ranges(pair.admin("idc1"), "idc1", [(topics["open"], 0)])
    assert (a.last_stable, a.log_end) == (10, 15)
    # The snapshot's log end past the last stable offset: the reads stop at the open transaction.
    open_logs = PartitionLogs(a.log_start, a.log_end, 0, 0)
    jobs.append((("idc1", "idc2", conf(pair, "idc1"), conf(pair, "idc2"), topics["open"], 0, open_logs,
                  [GroupPartitionInput("mid", 6), GroupPartitionInput("caught-up", 10)]),
                 {"shape": TopicShape.two_way(), "window": 3}))
    return jobs


def test_batched_reads_give_every_partition_its_facts_read_alone_in_fewer_calls(kafka_pair, topics):
    jobs = partition_jobs(kafka_pair, topics)
    alone = [read_translation_facts(*args, **kwargs) for args, kwargs in jobs]
    batch_stats, read_stats = BatchStats(), [ReadStats() for _ in jobs]
    started = time.monotonic()
    together = run_batched([translation_fact_steps(*args, **kwargs, stats=stats)
                            for (args, kwargs), stats in zip(jobs, read_stats)], timeout_s=20, stats=batch_stats)
    assert time.monotonic() - started < 10  # the open transaction's partition stopped at its last stable offset
    errors = [r for r in together if isinstance(r, BaseException)]
    assert not errors, errors
    assert together == alone
    # Every partition's reads happened (passes and lookups), in far fewer calls than passes.
    # (The two reads of one partition go in turn, so a one-way partition's lookups share calls
    # with the other one-way partition's only.)
    assert batch_stats.passes >= len(jobs) and batch_stats.fetch_calls < batch_stats.passes / 2, batch_stats
    searches = sum(s.offsets_for_times_calls for s in read_stats)
    assert searches == batch_stats.lookups >= 2 * batch_stats.lookup_calls, (searches, batch_stats)
    assert [[f.record_at_or_after.offset if f.record_at_or_after else None for f in together[-1]]] == [[6, None]]
    for facts in together:  # and the facts translate without loss
        for f in facts:
            check_no_loss(f, translate_partition(f))


def test_a_partition_of_an_unreachable_cluster_fails_alone(kafka_pair, topics):
    jobs = partition_jobs(kafka_pair, topics)[:3]
    (active, standby, _, standby_conf, topic, p, logs, groups), kwargs = jobs[0]
    dead = {"bootstrap.servers": "127.0.0.1:9", "socket.connection.setup.timeout.ms": 1000}
    steps = [translation_fact_steps(active, standby, dead, standby_conf, topic, p, logs, groups, timeout_s=3, **kwargs)]
    steps += [translation_fact_steps(*args, **kw) for args, kw in jobs[1:]]
    started = time.monotonic()
    results = run_batched(steps, timeout_s=3)
    assert time.monotonic() - started < 15
    assert isinstance(results[0], Exception), results[0]
    assert results[1:] == [read_translation_facts(*args, **kw) for args, kw in jobs[1:]]
