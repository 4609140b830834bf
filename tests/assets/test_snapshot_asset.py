"""The offset_snapshot asset against the real clusters and the embedded ClickHouse engine."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource

pytestmark = pytest.mark.kafka


COORDINATOR_NOT_READY = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                         KafkaError.COORDINATOR_NOT_AVAILABLE}


def commit(bootstrap, group_id, topic, offsets):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "log_level": 3})
    try:
        # A broker just started may not have loaded the group's coordinator yet (NOT_COORDINATOR):
        # retriable, asked again for a while.
        deadline = time.monotonic() + 30
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def test_snapshot_rows_for_both_clusters_with_unicode_and_quoted_group_ids(kafka_pair, chdb_dsn):
    uid = uuid.uuid4().hex[:8]
    topic = kafka_pair.create_topic(f"snap.{uid}", partitions=2)
    only_on_idc1 = kafka_pair.create_topic(f"snap.{uid}.one", partitions=1, on=("idc1",))
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for i in range(7):
        producer.produce(topic, value=b"x", partition=i % 2)
    producer.produce(only_on_idc1, value=b"y", partition=0)
    producer.flush(30)

    group = f"snap-{uid} it's \"quoted\", 한국어 ü"
    commit(kafka_pair.bootstrap("idc1"), group, topic, {0: 3, 1: 2})
    commit(kafka_pair.bootstrap("idc1"), group, only_on_idc1, {0: 1})
    commit(kafka_pair.bootstrap("idc2"), group, topic, {0: 1})

    result = dg.materialize(
        [offset_snapshot],
        resources={
            "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=kafka_pair.bootstrap("idc1")),
            "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=kafka_pair.bootstrap("idc2")),
            "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        },
        run_config={"ops": {"offset_snapshot": {"config": {"group_include": f"^snap-{uid} "}}}},
    )
    assert result.success
    metadata = result.asset_materializations_for_node("offset_snapshot")[0].metadata
    assert metadata["group_partitions"].value == 3
    assert metadata["rows"].value == 6

    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    rows = client.query(
        "SELECT cluster, topic, partition, committed_offset, topic_present, log_start, log_end, group_state "
        "FROM offset_snapshots WHERE group_id = {g:String} AND snapshot_id = {s:String} "
        "ORDER BY cluster, topic, partition",
        parameters={"g": group, "s": result.run_id},
    ).result_rows
    assert [r[:5] for r in rows] == [
        ("idc1", topic, 0, 3, True),
        ("idc1", topic, 1, 2, True),
        ("idc1", only_on_idc1, 0, 1, True),
        ("idc2", topic, 0, 1, True),
        ("idc2", topic, 1, None, True),  # involved through idc1's commit: idc2's facts are read too
        ("idc2", only_on_idc1, 0, None, False),  # missing on idc2: a named fact, not an error
    ]
    # Log ranges are idc1's real ones (4 + 3 records) and idc2's empty partitions.
    assert {(r[0], r[1], r[2]): r[6] for r in rows} == {
        ("idc1", topic, 0): 4, ("idc1", topic, 1): 3, ("idc1", only_on_idc1, 0): 1,
        ("idc2", topic, 0): 0, ("idc2", topic, 1): 0, ("idc2", only_on_idc1, 0): None,
    }
    assert {r[7] for r in rows} == {"EMPTY"}
