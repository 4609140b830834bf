"""Origin headers of the newest records of one partition: the evidence for shape detection.

The sync detects a topic's shape (one-way or two-way, docs/concepts/strategies.md) from what its records say
about where they were produced (``offset_pipeline/translation/shape.py``). This module reads the
last ``count`` committed records of a partition on one cluster and counts their origins. Plain
data out; one consumer per call site (the caller reuses it across partitions).

Completion is a record at or after the end read from the snapshot, or the end-of-partition event;
never ``position()`` (librdkafka#3400, see ``partition_records.py``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from offset_pipeline.translation.facts import RecordFact
from offset_pipeline.translation.headers import Origin
from offset_pipeline.translation.shape import HeaderObservation


def sample_consumer(conf: Mapping[str, Any]) -> Consumer:
    return Consumer({
        **conf,
        "group.id": f"offset-pipeline-shape-sample-{uuid.uuid4().hex}",  # never joins, never commits
        "enable.auto.commit": False,
        "isolation.level": "read_committed",  # aborted records were never delivered to anyone
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 0,
    })


def sample_origins(
    consumer: Consumer, cluster: str, peer: str, topic: str, partition: int, log_start: int, log_end: int,
    count: int, timeout_s: float = 10.0,
) -> HeaderObservation:
    """Origins of the committed records in ``[max(log_start, log_end - count), log_end)`` of
    ``topic[partition]`` on ``cluster`` (copies from ``peer`` are the mirror's)."""
    origins = read_origins(consumer, cluster, peer, topic, partition, log_start, log_end, count, timeout_s)
    return HeaderObservation.from_origins(cluster, origins)


def read_origins(
    consumer: Consumer, cluster: str, peer: str, topic: str, partition: int, log_start: int, log_end: int,
    count: int, timeout_s: float = 10.0,
) -> list[Origin]:
    """The parsed origin of each committed record in ``[max(log_start, log_end - count), log_end)``."""
    start = max(log_start, log_end - count)
    if start >= log_end:
        return []
    tp = TopicPartition(topic, partition, start)
    consumer.assign([tp])
    origins: list[Origin] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"sampling {topic}[{partition}] on {cluster} from {start} did not reach {log_end}")
            for msg in consumer.consume(500, timeout=0.2):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return origins
                    raise KafkaException(msg.error())
                if msg.offset() >= log_end:
                    return origins
                fact = RecordFact.from_headers(msg.offset(), msg.timestamp()[1], msg.headers() or [],
                                               read_from=cluster, peer=peer)
                origins.append(fact.origin)
    finally:
        consumer.unassign()
