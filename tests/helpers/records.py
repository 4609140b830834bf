"""A partition's log end and its records' values, read back with plain consumers (no project code)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition

from tests.conftest import wait_for


def read_values(bootstrap: str, topic: str, partition: int, end: int | None = None) -> dict[int, bytes]:
    """offset -> value of every committed record up to the partition's log end as the read starts, and
    at least below ``end`` (waiting for records still on their way).

    Offsets are not record counts: a copy written by MirrorMaker 2 with exactly-once support sits
    between transaction markers, so n copied records can end past offset n. Reading to the log end,
    not to ``end``, finds every copy however many markers lie between them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
    tp = TopicPartition(topic, partition)
    target = max(end or 0, consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1])
    if target == 0:
        consumer.close()
        return {}
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: dict[int, bytes] = {}
    try:
        def done():
            for msg in consumer.consume(500, timeout=0.5):
                if not msg.error():
                    out[msg.offset()] = msg.value()
            # the position passes transaction markers too, so it reaches the target when the last
            # record before it is a marker
            return consumer.position([tp])[0].offset >= target
        wait_for(done, timeout=30, what=f"reading {topic}[{partition}] to {target}")
    finally:
        consumer.close()
    return out


def records_in(bootstrap: str, topic: str, partition: int) -> int:
    """How many committed records the partition holds (not its log end: see ``read_values``)."""
    return len(read_values(bootstrap, topic, partition))


def log_end(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's log end (its high watermark, read from the broker, not from a cache)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "log_level": 3})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        consumer.close()
