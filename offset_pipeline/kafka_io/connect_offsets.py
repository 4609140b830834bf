"""Kafka Connect's offsets topic read into MirrorMaker 2's source positions (one flow's, plain data).

Where MirrorMaker 2 keeps how far it has copied each source partition (``translation/connect_offsets.py``
decodes the records and says what a position means): the offsets topic of the Connect worker that
runs the flow, on the flow's target cluster. The read takes every partition of the topic (Connect
creates it with 25 by default), each from its start to its end as the read began, ``read_committed``:
with exactly-once source support the offsets are written in the transactions of their copies, and an
aborted transaction's offsets claim copies that were never committed. Records are folded in each
partition's order (a key always lands on the same partition): last write wins, tombstones delete.
Only the records of ``source_alias``'s flow count; other connectors' records and malformed ones are
counted by problem and skipped.

Whatever keeps the topic from being read to its end (it does not exist, the cluster does not answer,
the read is refused, the deadline passes, more than ``max_records`` records) is
:attr:`ConnectOffsetsRead.unreadable`, a reason, never an exception; and then no positions at all:
a partial read could hold an old offset a later record overwrote with a lower one (a reset).

Bounded: every broker call has ``timeout_s``, and the whole read a deadline of ``timeout_s``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from offset_pipeline.translation.connect_offsets import (
    ConnectOffsetProblem,
    MirrorSourceOffset,
    decode_connect_offset,
    positions_from_offsets,
)

TP = tuple[str, int]


@dataclass(frozen=True)
class ConnectOffsetsRead:
    """One read of a Connect offsets topic on ``cluster``: ``positions`` of ``source_alias``'s flow,
    (upstream topic, partition) -> position (every record below it copied); ``problems``: records
    that name no MirrorMaker 2 position, by problem; ``unreadable``: why the topic could not be read
    to its end (then no positions)."""

    cluster: str
    topic: str
    source_alias: str
    positions: Mapping[TP, int] = field(default_factory=dict)
    problems: Mapping[ConnectOffsetProblem, int] = field(default_factory=dict)
    records_read: int = 0
    unreadable: str | None = None


def _consumer(conf: Mapping[str, Any]) -> Consumer:
    return Consumer({
        **conf,
        "group.id": f"offset-pipeline-connect-offsets-{uuid.uuid4().hex}",  # never joins, never commits
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",  # exactly-once offsets are written in transactions
        "fetch.wait.max.ms": 50,
    })


def read_connect_offsets(
    conf: Mapping[str, Any], cluster: str, topic: str, source_alias: str, *, timeout_s: float = 10.0,
    max_records: int = 1_000_000,
) -> ConnectOffsetsRead:
    """The positions of ``source_alias``'s flow kept in ``topic`` on ``cluster``. Never raises."""

    def unreadable(why: str) -> ConnectOffsetsRead:
        return ConnectOffsetsRead(cluster, topic, source_alias, unreadable=why)

    try:
        consumer = _consumer(conf)
    except KafkaException as exc:
        return unreadable(f"{cluster}: no consumer: {exc}")
    try:
        return _read(consumer, cluster, topic, source_alias, timeout_s, max_records)
    except KafkaException as exc:
        return unreadable(f"{cluster}: {topic}: {exc.args[0] if exc.args else exc}")
    finally:
        consumer.close()


def _read(consumer: Consumer, cluster: str, topic: str, source_alias: str, timeout_s: float,
          max_records: int) -> ConnectOffsetsRead:
    deadline = time.monotonic() + timeout_s

    def unreadable(why: str) -> ConnectOffsetsRead:
        return ConnectOffsetsRead(cluster, topic, source_alias, unreadable=f"{cluster}: {topic} {why}")

    described = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if described is None or described.error is not None:
        why = "does not exist" if described is None or described.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART \
            else str(described.error)
        return unreadable(why)
    ends: dict[int, int] = {}
    starts: list[TopicPartition] = []
    for partition in sorted(described.partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s, cached=False)
        if low < high:
            ends[partition] = high
            starts.append(TopicPartition(topic, partition, low))
    total = sum(ends[tp.partition] - tp.offset for tp in starts)
    if total > max_records:
        return unreadable(f"holds {total} records, more than the {max_records} read at most")
    records: dict[int, list[MirrorSourceOffset]] = {p: [] for p in ends}
    problems: Counter[ConnectOffsetProblem] = Counter()
    read = 0
    pending = set(ends)
    if starts:
        consumer.assign(starts)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return unreadable(f"not read to its end within {timeout_s:g} s ({read} of {total} records; "
                              f"{len(pending)} of {len(ends)} partitions unfinished)")
        # Take what has arrived; when nothing has, wait for the next fetch, not for a full batch (a
        # batch consume waits out its whole timeout unless it fills: a second of every read).
        batch = consumer.consume(num_messages=500, timeout=0)
        if not batch:
            first = consumer.poll(min(left, 1.0))
            batch = [first] if first is not None else []
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                    continue
                raise KafkaException(error)
            partition = message.partition()
            if partition not in pending or message.offset() >= ends[partition]:
                pending.discard(partition)
                continue
            read += 1
            decoded = decode_connect_offset(message.key(), message.value())
            if isinstance(decoded, MirrorSourceOffset):
                records[partition].append(decoded)
            else:
                problems[decoded] += 1
            if message.offset() >= ends[partition] - 1:
                pending.discard(partition)
    in_order = [record for partition in sorted(records) for record in records[partition]]
    return ConnectOffsetsRead(cluster, topic, source_alias, positions=positions_from_offsets(in_order, source_alias),
                              problems=dict(problems), records_read=read)
