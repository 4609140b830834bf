"""A partition's log end and its records' values, read back with plain consumers (no project code)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition

from tests.conftest import wait_for


def read_values(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    """offset -> value of every record below ``end``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: dict[int, bytes] = {}
    try:
        def done():
            for msg in consumer.consume(500, timeout=0.5):
                if not msg.error():
                    out[msg.offset()] = msg.value()
            return not out or max(out) >= end - 1
        wait_for(done, timeout=30, what=f"reading {topic}[{partition}] to {end}")
    finally:
        consumer.close()
    return out


def log_end(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's log end (its high watermark, read from the broker, not from a cache)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "log_level": 3})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        consumer.close()
