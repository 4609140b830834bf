"""The mirror check on real brokers: topics copied by the session mirror (origin headers), a topic
left unmirrored, a topic the mirror renamed, and the command's exit codes."""

from __future__ import annotations

import struct
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer

from offset_pipeline.mirror_check.probe import ClusterAccess, check_mirrors
from offset_pipeline.mirror_check.rules import MirrorStatus, Proof
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.translation.shape import TopicShape
from tests.conftest import wait_for

pytestmark = pytest.mark.kafka


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0


def access(pair, name: str) -> ClusterAccess:
    conf = {"bootstrap.servers": pair.bootstrap(name)}
    return ClusterAccess(name, conf, conf)


def verdicts_by_direction(pair, topics):
    verdicts = check_mirrors((access(pair, "idc1"), access(pair, "idc2")), topics=topics, timeout_s=15)
    return {(v.topic, v.direction): v for v in verdicts}


def test_the_check_names_the_proof_of_each_topic_and_direction(kafka_pair, session_mirrors, topic_name):
    one_way = kafka_pair.create_topic(topic_name, partitions=2)
    produce(kafka_pair.bootstrap("idc1"), one_way, 12)
    wait_for(lambda: kafka_pair.admin("idc2").list_topics(one_way, timeout=10).topics[one_way].partitions
             and _copied(kafka_pair, one_way) >= 12, timeout=60, what="the copies on idc2")
    unmirrored = kafka_pair.create_topic(f"plain.{uuid.uuid4().hex[:8]}")  # outside the session mirrors' prefix
    produce(kafka_pair.bootstrap("idc1"), unmirrored, 5)
    produce(kafka_pair.bootstrap("idc2"), unmirrored, 5)
    renamed = f"orders.{uuid.uuid4().hex[:8]}"
    kafka_pair.create_topic(renamed, on=("idc1",))
    kafka_pair.create_topic(f"idc1.{renamed}", on=("idc2",))  # as DefaultReplicationPolicy names a remote topic
    produce(kafka_pair.bootstrap("idc1"), renamed, 3)

    got = verdicts_by_direction(kafka_pair, [one_way, unmirrored, renamed])
    summary = {key: (v.proof, v.status) for key, v in got.items()}
    # another test's offset-syncs topic on the shared pair would name this one "no pair yet" instead
    unsynced_status = summary[(unmirrored, "idc1->idc2")][1]
    assert unsynced_status in (MirrorStatus.NOT_MIRRORED, MirrorStatus.NO_OFFSET_SYNC_YET)
    assert summary == {
        (one_way, "idc1->idc2"): (Proof.ORIGIN_HEADERS, MirrorStatus.ORIGIN_HEADERS),  # standby: all copies
        (one_way, "idc2->idc1"): (Proof.ORIGIN_HEADERS, MirrorStatus.ORIGIN_HEADERS),  # active: copies of idc1
        (unmirrored, "idc1->idc2"): (Proof.NONE, unsynced_status),
        (unmirrored, "idc2->idc1"): (Proof.NONE, MirrorStatus.NOT_MIRRORED),
        (renamed, "idc1->idc2"): (Proof.NONE, MirrorStatus.RENAMED_REMOTE_TOPIC),
    }, {k: v.reason for k, v in got.items()}
    assert f"'idc1.{renamed}'" in got[(renamed, "idc1->idc2")].reason


def _copied(pair, topic) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": pair.bootstrap("idc2"), "group.id": "probe", "log_level": 3})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1))
    finally:
        consumer.close()


def test_the_command_exits_1_when_a_direction_has_no_proof_and_2_when_nothing_is_shown(kafka_pair, tmp_path):
    topic = kafka_pair.create_topic(f"plain.{uuid.uuid4().hex[:8]}")
    produce(kafka_pair.bootstrap("idc1"), topic, 3)
    env = {"PATH": "/usr/bin:/bin", "OFFSET_PIPELINE_IDC1_BOOTSTRAP": kafka_pair.bootstrap("idc1"),
           "OFFSET_PIPELINE_IDC2_BOOTSTRAP": kafka_pair.bootstrap("idc2"), "OFFSET_PIPELINE_DEVSTACK_DIR": str(tmp_path)}

    def check(*args):
        return subprocess.run([sys.executable, "-m", "offset_pipeline.cli", "mirror", "check", *args],
                              capture_output=True, text=True, env=env, timeout=120)

    shown = check("--topic", topic)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "not_mirrored" in shown.stdout and f"'{topic}' idc1->idc2:" in shown.stdout
    nothing = check("--topic", f"absent.{uuid.uuid4().hex[:8]}")
    assert nothing.returncode == 2, nothing.stdout + nothing.stderr


def offset_sync_record(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    """An offset-sync record laid out as MirrorMaker 2 writes it (int16-length string, int32; two int64s)."""
    name = topic.encode()
    return (struct.pack(">h", len(name)) + name + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream))


def test_offset_syncs_prove_a_one_way_topic_mirrored_without_headers(kafka_pair):
    """Topics copied without origin headers (as plain MirrorMaker 2 copies them), with pairs in the
    offset-syncs topic MirrorMaker 2 keeps on the source: offset syncs serve the group on the
    producing side of a topic configured one-way; a topic without a pair yet, a topic without a
    configured shape and the copies' side are named."""
    suffix = uuid.uuid4().hex[:8]
    synced, unsynced, unknown = f"plain-mm2.{suffix}", f"plain-mm2-late.{suffix}", f"plain-mm2-shape.{suffix}"
    for topic in (synced, unsynced, unknown):
        kafka_pair.create_topic(topic)
        produce(kafka_pair.bootstrap("idc1"), topic, 4)
        produce(kafka_pair.bootstrap("idc2"), topic, 4)  # header-less copies, as far as headers tell
    syncs_topic = kafka_pair.create_topic("mm2-offset-syncs.idc2.internal", on=("idc1",))
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for topic in (synced, unknown):
        key, value = offset_sync_record(topic, 0, 0, 0)
        producer.produce(syncs_topic, key=key, value=value)
    assert producer.flush(30) == 0
    shapes = {synced: TopicShape.one_way("idc1"), unsynced: TopicShape.one_way("idc1")}

    verdicts = check_mirrors((access(kafka_pair, "idc1"), access(kafka_pair, "idc2")),
                             topics=[synced, unsynced, unknown], shapes=shapes, timeout_s=15)
    got = {(v.topic, v.direction): (v.proof, v.status) for v in verdicts}
    assert got == {
        (synced, "idc1->idc2"): (Proof.OFFSET_SYNCS, MirrorStatus.OFFSET_SYNCS),
        (synced, "idc2->idc1"): (Proof.NONE, MirrorStatus.COPIES_SIDE_WITHOUT_HEADERS),
        (unsynced, "idc1->idc2"): (Proof.NONE, MirrorStatus.NO_OFFSET_SYNC_YET),
        (unsynced, "idc2->idc1"): (Proof.NONE, MirrorStatus.NOT_MIRRORED),
        (unknown, "idc1->idc2"): (Proof.NONE, MirrorStatus.SHAPE_NOT_CONFIGURED),
        (unknown, "idc2->idc1"): (Proof.NONE, MirrorStatus.COPIES_SIDE_WITHOUT_HEADERS),
    }, [v.reason for v in verdicts]
    admin = kafka_pair.admin("idc1")  # kept referenced until the deletion is done
    admin.delete_topics([syncs_topic])[syncs_topic].result(timeout=30)


def test_an_offset_syncs_topic_configured_under_another_name_is_read(kafka_pair):
    """OFFSET_PIPELINE_OFFSET_SYNCS can name any topic (MirrorMaker 2's aliases differ from the
    cluster names, a Connect cluster's connector): the check reads it as the sync would."""
    topic = kafka_pair.create_topic(f"plain-mm2-named.{uuid.uuid4().hex[:8]}")
    produce(kafka_pair.bootstrap("idc1"), topic, 2)
    produce(kafka_pair.bootstrap("idc2"), topic, 2)
    syncs_topic = kafka_pair.create_topic(f"custom-syncs.{uuid.uuid4().hex[:8]}", on=("idc2",))
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc2"), "log_level": 3})
    key, value = offset_sync_record(topic, 0, 0, 0)
    producer.produce(syncs_topic, key=key, value=value)
    assert producer.flush(30) == 0

    verdicts = check_mirrors((access(kafka_pair, "idc1"), access(kafka_pair, "idc2")), topics=[topic],
                             shapes={topic: TopicShape.one_way("idc1")}, timeout_s=15,
                             syncs_topics=[OffsetSyncsTopic("idc1", "idc2", "idc2", syncs_topic)])
    got = {v.direction: v for v in verdicts}
    assert got["idc1->idc2"].status is MirrorStatus.OFFSET_SYNCS and syncs_topic in got["idc1->idc2"].reason
