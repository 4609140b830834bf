"""Read whole partitions back as plain records: what tests and trials use to count and compare."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

# Right after a topic is created its leader may not be known yet: these errors pass quickly.
# A topic just created (by a test or by the mirror) can be known to the client before all of its
# partitions are: Local: Unknown partition clears with the next metadata refresh.
_TRANSIENT = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
}


@dataclass(frozen=True)
class StoredRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


def read_partition(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    isolation: str = "read_committed",
    start: int = OFFSET_BEGINNING,
    timeout_s: float = 30.0,
) -> list[StoredRecord]:
    """Every record of one partition up to its current end (last stable offset for read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"offset-pipeline-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "log_level": 3,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        low, high = _watermarks(consumer, tp)
        if high <= max(low, start, 0):
            return []  # nothing to read: the position would never move
        consumer.assign([TopicPartition(topic, partition, start)])
        records: list[StoredRecord] = []
        deadline = time.monotonic() + timeout_s
        # The position passes aborted records and transaction markers too, so it reaches the end
        # read at the start even when the partition ends in a marker that is never returned.
        while True:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                records.append(
                    StoredRecord(
                        msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1],
                        msg.key(), msg.value(), tuple(msg.headers() or ()),
                    )
                )
            if consumer.position([tp])[0].offset >= high:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"reading {topic}[{partition}] from {bootstrap_servers} did not reach offset {high} "
                    f"within {timeout_s}s (an open transaction holds the last stable offset back?)"
                )
        return records
    finally:
        consumer.close()



def _watermarks(consumer: Consumer, tp: TopicPartition, attempts: int = 40) -> tuple[int, int]:
    for attempt in range(attempts):
        try:
            return consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        except KafkaException as exc:
            if exc.args[0].code() not in _TRANSIENT or attempt == attempts - 1:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")
