"""MirrorMaker 2's positions read on real brokers: a Kafka Connect offsets topic written here by hand
as Connect writes it (kafka_io/connect_offsets.py), and a position carried over the target's own
copies that follow it on the source (kafka_io/copied_through.py). The real MirrorMaker 2's own
offsets are read in tests/fast_forward/test_stale_fast_forward_mm2.py.

* every partition of the topic is read to its end; last write wins, a tombstone deletes, a reset
  writes a lower offset, an aborted transaction's offsets are never read (read_committed), other
  flows' and other connectors' records and malformed records are counted by problem;
* a missing topic and a cluster that does not answer are named reasons, within the bound;
* the walk over copies stops at a local record, a third cluster's copy, or a malformed header.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from offset_pipeline.kafka_io.connect_offsets import read_connect_offsets
from offset_pipeline.kafka_io.copied_through import copied_through
from offset_pipeline.translation.connect_offsets import ConnectOffsetProblem, MirrorSourceOffset, encode_connect_offset
from offset_pipeline.translation.headers import origin_headers
from tests.conftest import Transactions, free_port

pytestmark = pytest.mark.kafka

PARTITIONS = 5


def offset_record(topic: str, partition: int, offset: int | None, cluster: str = "idc1",
                  connector: str = "MirrorSourceConnector"):
    return encode_connect_offset(MirrorSourceOffset(connector, cluster, topic, partition, offset))


def write(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def test_an_offsets_topic_read_to_its_end_in_every_partition(kafka_pair):
    bootstrap = kafka_pair.bootstrap("idc2")
    topic = f"connect-offsets.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(topic, partitions=PARTITIONS, on=("idc2",), config={"cleanup.policy": "compact"})
    write(bootstrap, topic, [
        (0, *offset_record("orders", 0, 9)),
        (0, *offset_record("orders", 0, 19)),  # last write wins
        (1, *offset_record("orders", 1, 4)),
        (1, *offset_record("orders", 1, None)),  # deleted
        (2, *offset_record("orders", 2, 30)),
        (2, *offset_record("orders", 2, 7)),  # an operator's reset: lower
        (3, *offset_record("audit", 0, 0)),
        (3, *offset_record("orders", 0, 99, cluster="idc9")),  # another flow's
        (4, b'["MirrorCheckpointConnector",{"group":"g","topic":"orders","partition":0}]', b'{"offset":0}'),
        (4, b"not json", b'{"offset":1}'),
        (4, *offset_record("orders", 3, 5)[:1], b'{"offset":-5}'),
    ])
    # An aborted transaction's offsets claim copies that were never committed: never read.
    transactions = Transactions(bootstrap, f"tx-{uuid.uuid4().hex}")
    key, value = offset_record("audit", 0, 500)
    transactions.run(lambda producer: producer.produce(topic, key=key, value=value, partition=3), commit=False)
    conf = {"bootstrap.servers": bootstrap, "log_level": 3}
    read = read_connect_offsets(conf, "idc2", topic, "idc1", timeout_s=30)
    assert read.unreadable is None
    assert read.positions == {("orders", 0): 20, ("orders", 2): 8, ("audit", 0): 1}
    assert read.problems == {ConnectOffsetProblem.NOT_A_MIRROR_PARTITION: 1, ConnectOffsetProblem.KEY_NOT_JSON: 1,
                             ConnectOffsetProblem.VALUE_NOT_AN_OFFSET: 1}
    assert read.records_read == 11
    assert read_connect_offsets(conf, "idc2", topic, "idc9", timeout_s=30).positions == {("orders", 0): 100}
    # More records than allowed: a named reason, no positions (a partial read could miss a reset).
    bounded = read_connect_offsets(conf, "idc2", topic, "idc1", timeout_s=30, max_records=5)
    assert bounded.unreadable is not None and "more than the 5 read at most" in bounded.unreadable
    assert not bounded.positions


def test_a_missing_topic_and_a_silent_cluster_are_named_reasons(kafka_pair):
    conf = {"bootstrap.servers": kafka_pair.bootstrap("idc2"), "log_level": 3}
    missing = read_connect_offsets(conf, "idc2", "mm2-offsets.nowhere.internal", "idc1", timeout_s=10)
    assert (missing.unreadable, missing.positions) == ("idc2: mm2-offsets.nowhere.internal does not exist", {})
    silent = read_connect_offsets({"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0}, "idc9",
                                  "mm2-offsets.idc1.internal", "idc1", timeout_s=2)
    assert silent.unreadable is not None and silent.unreadable.startswith("idc9"), silent.unreadable


def test_a_position_is_carried_over_the_targets_copies_only(kafka_pair):
    """On idc1, the idc1->idc2 flow's position; records after it that are copies of idc2 are on idc2."""
    bootstrap = kafka_pair.bootstrap("idc1")
    topic = f"copied-through.{uuid.uuid4().hex[:6]}"  # outside the session mirrors' t.* pattern
    kafka_pair.create_topic(topic, partitions=6, on=("idc1",))
    copy, local, third = list(origin_headers("idc2", 7)), None, [("IDC", b"idc9"), ("Offset", b"7")]
    bad = [("IDC", b"idc2"), ("Offset", b"-1")]
    layouts = {  # partition -> headers of its records in order
        0: [local, local, copy, copy, local, copy],  # position 2: carried to 4, the next local record
        1: [copy, copy, copy],  # no position: only copies, all on idc2 already
        2: [local, copy],  # no position, a local record first: stays without one
        3: [local, copy, third, copy],  # position 1: stops at the third cluster's copy
        4: [local, copy, bad],  # position 1: stops at the malformed header
        5: [],  # empty, no position: nothing to copy
    }
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for partition, headers in layouts.items():
        for i, h in enumerate(headers):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition, headers=h)
    assert producer.flush(30) == 0
    conf = {"bootstrap.servers": bootstrap, "log_level": 3}
    wanted = [(topic, p) for p in layouts]
    stored = {(topic, 0): 2, (topic, 3): 1, (topic, 4): 1}
    assert copied_through(conf, "idc1", "idc2", wanted, stored, timeout_s=30) == {
        (topic, 0): 4, (topic, 1): 3, (topic, 3): 2, (topic, 4): 2, (topic, 5): 0}
    # Bounded: a walk longer than max_records leaves the position as stored.
    assert copied_through(conf, "idc1", "idc2", wanted, stored, timeout_s=30, max_records=2) == {
        (topic, 0): 2, (topic, 3): 1, (topic, 4): 2, (topic, 5): 0}  # 4: two offsets to walk, walked
    # Another target: idc2's copies are not the target's own records, nothing is carried.
    assert copied_through(conf, "idc1", "idc9", wanted, stored, timeout_s=30) == {**stored, (topic, 5): 0}
