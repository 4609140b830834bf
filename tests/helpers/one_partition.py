"""Reads and writes of one partition (partition 0 unless told), values as text, with plain clients:
what the stale-partition, audit and Dagster-on-Postgres tests produce, read back and compare (its log
end: records.py)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import wait_for
from tests.helpers.records import log_end


def produce(bootstrap: str, topic: str, values: list[str], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for value in values:
        producer.produce(topic, value=value.encode(), partition=partition)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int | None:
    """The group's committed offset on the partition; None without one."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        [tp] = consumer.committed([TopicPartition(topic, partition)], timeout=10)
    finally:
        consumer.close()
    return tp.offset if tp.offset >= 0 else None


def read_values(bootstrap: str, topic: str, start: int, end: int, partition: int = 0) -> list[tuple[int, str]]:
    """(offset, value) of the committed records in [start, end)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}", "log_level": 3,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    out = []
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                    break
                continue
            if msg.error() or msg.offset() >= end:
                break
            out.append((msg.offset(), msg.value().decode()))
    finally:
        consumer.close()
    return out


def mirrored(kafka_pair, topic: str, partition: int = 0) -> None:
    """Wait until everything of the partition on either cluster has its copy on the other."""
    def done():
        a = read_values(kafka_pair.bootstrap("idc1"), topic, 0, log_end(kafka_pair.bootstrap("idc1"), topic, partition),
                        partition)
        b = read_values(kafka_pair.bootstrap("idc2"), topic, 0, log_end(kafka_pair.bootstrap("idc2"), topic, partition),
                        partition)
        return {v for _, v in a} == {v for _, v in b}
    wait_for(done, timeout=60, what=f"{topic}[{partition}] mirrored both ways")
