"""MirrorMaker 2's offset-syncs topic read on real brokers (kafka_io/offset_syncs.py).

* records written by the broker, valid and malformed, come back as pairs and counted problems;
* a missing topic and a cluster that does not answer are named reasons, within the bound;
* a real, plain MirrorMaker 2 (bench/mm2/mirrormaker.py: dedicated, one-way, identity replication
  policy, no transform, sparse syncs) writes pairs that our parser decodes, and every pair names an
  upstream record and a downstream record with the same key, value and timestamp.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from confluent_kafka import KafkaException, Producer

from bench.mm2.mirrormaker import MirrorMaker2
from devstack.records import read_partition
from offset_pipeline.kafka_io.offset_syncs import read_offset_syncs
from offset_pipeline.translation.offset_sync import OffsetSyncProblem, offset_syncs_topic
from tests.conftest import free_port, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]


def key_bytes(topic: str, partition: int) -> bytes:
    raw = topic.encode()
    return struct.pack(">h", len(raw)) + raw + struct.pack(">i", partition)


def value_bytes(upstream: int, downstream: int) -> bytes:
    return struct.pack(">qq", upstream, downstream)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    try:
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(30) == 0
    finally:
        producer.flush(5)


def test_records_written_by_the_broker_decode_into_pairs_and_problems(kafka_pair, topic_name):
    topic = kafka_pair.create_topic(topic_name, on=("idc1",))
    produce(kafka_pair.bootstrap("idc1"), topic, [
        (key_bytes("orders", 0), value_bytes(0, 0)),
        (key_bytes("orders", 1), value_bytes(5, 7)),
        (key_bytes("orders", 0), value_bytes(100, 98)),
        (key_bytes("orders", 0) + b"!", value_bytes(1, 1)),  # a key longer than its layout
        (key_bytes("orders", 0), value_bytes(1, 1)[:9]),  # a value cut short
        (key_bytes("orders", 0), None),  # a tombstone
        (b"\x00\x02\xff\xfe\x00\x00\x00\x00", value_bytes(1, 1)),  # not UTF-8
    ])
    read = read_offset_syncs({"bootstrap.servers": kafka_pair.bootstrap("idc1")}, "idc1", topic, timeout_s=30)
    assert read.unreadable is None
    assert dict(read.pairs) == {("orders", 0): ((0, 0), (100, 98)), ("orders", 1): ((5, 7),)}
    assert dict(read.problems) == {
        OffsetSyncProblem.KEY_TOO_LONG: 1, OffsetSyncProblem.VALUE_TOO_SHORT: 1, OffsetSyncProblem.TOMBSTONE: 1,
        OffsetSyncProblem.TOPIC_NOT_UTF8: 1,
    }
    assert (read.records_read, read.end_offset) == (7, 7)

    # incremental: from the end of the first read, only what was written since
    produce(kafka_pair.bootstrap("idc1"), topic, [(key_bytes("orders", 1), value_bytes(9, 11))])
    again = read_offset_syncs({"bootstrap.servers": kafka_pair.bootstrap("idc1")}, "idc1", topic, timeout_s=30,
                              start_offset=read.end_offset)
    assert dict(again.pairs) == {("orders", 1): ((9, 11),)} and again.records_read == 1


def test_a_missing_topic_is_a_named_reason(kafka_pair):
    read = read_offset_syncs({"bootstrap.servers": kafka_pair.bootstrap("idc1")}, "idc1",
                             "mm2-offset-syncs.nowhere.internal", timeout_s=10)
    assert read.unreadable is not None and "does not exist" in read.unreadable, read.unreadable
    assert not read.pairs


def test_a_cluster_that_does_not_answer_is_a_named_reason():
    read = read_offset_syncs({"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0}, "idc9",
                             "mm2-offset-syncs.x.internal", timeout_s=2)
    assert read.unreadable is not None and read.unreadable.startswith("idc9"), read.unreadable
    assert not read.pairs


def test_a_plain_mirror_maker_2s_own_pairs(kafka_pair, tmp_path):
    """Each pair the real MirrorMaker 2 wrote names A's record u and B's record d, and they are one
    record (key, value, timestamp): the parser reads the broker's bytes as MirrorMaker 2 meant them."""
    # Not a t.* name: the session's Python mirrors copy those, and only MirrorMaker 2 may copy this one.
    topic = kafka_pair.create_topic(f"plain-mm2-pairs.{uuid.uuid4().hex[:8]}", partitions=2, on=("idc1",))
    source, target = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    producer = Producer({"bootstrap.servers": source, "enable.idempotence": True, "log_level": 3})
    try:
        for i in range(40):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
    finally:
        producer.flush(5)
    mirror = MirrorMaker2(f"syncs{free_port()}", source, target, topics=topic, groups="none-at-all",
                          work_dir=tmp_path / "mm2", settings={"offset.lag.max": "3"})
    src_alias, dst_alias = mirror.aliases
    syncs_topic = offset_syncs_topic(src_alias, dst_alias)  # on the source cluster: MM2's default
    conf = {"bootstrap.servers": source}
    with mirror:
        def copied_and_synced():
            read = read_offset_syncs(conf, "idc1", syncs_topic, timeout_s=10)
            try:
                copied = read.unreadable is None and all(
                    len(read_partition(target, topic, p, timeout_s=10)) >= 20 for p in (0, 1))
            except KafkaException:  # MirrorMaker 2 has not created the topic on the target yet
                copied = False
            return read if copied and all((topic, p) in read.pairs for p in (0, 1)) else None

        read = wait_for(copied_and_synced, timeout=180, what=f"MirrorMaker 2 copying {topic} and writing pairs")
    assert not read.problems, read.problems
    for partition in (0, 1):
        upstream = {r.offset: r for r in read_partition(source, topic, partition)}
        downstream = {r.offset: r for r in read_partition(target, topic, partition)}
        pairs = read.pairs[(topic, partition)]
        assert len(pairs) >= 2, pairs  # the first record's, then sparse ones (offset.lag.max = 3)
        for u, d in pairs:
            original, copy = upstream[u], downstream[d]
            assert (copy.key, copy.value, copy.timestamp) == (original.key, original.value, original.timestamp)
            assert not copy.headers  # a plain MirrorMaker 2: no origin headers
