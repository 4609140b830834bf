"""MirrorMaker 2's offset-syncs topic of one cluster, read into plain pairs (one read per cycle and
cluster; the pairs of every partition it names come back at once).

The topic has one partition; each record is decoded by ``translation/offset_sync.py``. A record
that names no pair (malformed, or a tombstone) is counted by its problem and skipped: the other
pairs stay facts. Whatever keeps the topic from being read (it does not exist, the cluster does not
answer within the bound, the read is refused) becomes :attr:`OffsetSyncsRead.unreadable`, a reason,
never an exception: the translation names it ``offset_syncs_unreadable`` on the rows it concerns.

Bounded: every broker call has ``timeout_s``, the whole read has a deadline of ``timeout_s``, and at
most ``max_records`` records are read (from ``start_offset`` on: a caller that keeps the pairs of
earlier reads reads only what was written since). Completion is a record at or past the end read
first, or the end-of-partition event; never ``position()`` (see ``partition_records.py``).

What a pair proves depends on what was read after it (the active log end: ``SyncPair``'s
``active_end_after``), so :attr:`OffsetSyncsRead.end_offset` is returned for the caller to order
its reads: every pair returned was written before the read ended.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from offset_pipeline.kafka_io.consumer_pool import ConsumerPool
from offset_pipeline.translation.offset_sync import OffsetSync, OffsetSyncProblem, decode_offset_sync

PartitionKey = tuple[str, int]  # upstream topic, partition


@dataclass(frozen=True)
class OffsetSyncsRead:
    """One read of an offset-syncs topic. ``pairs``: (upstream topic, partition) -> its pairs
    ``(u, d)`` in the topic's order; ``problems``: records that named no pair, by problem;
    ``end_offset``: the offset-syncs partition's end when the read began; ``next_offset``: where
    the next incremental read starts (``end_offset``, or short of it when ``max_records`` cut the
    read); ``unreadable``: why the topic could not be read (then no pairs)."""

    cluster: str
    topic: str
    pairs: Mapping[PartitionKey, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    problems: Mapping[OffsetSyncProblem, int] = field(default_factory=dict)
    records_read: int = 0
    end_offset: int | None = None
    unreadable: str | None = None
    next_offset: int | None = None


def _consumer(conf: Mapping[str, Any]) -> Consumer:
    return Consumer({
        **conf,
        "group.id": f"offset-pipeline-offset-syncs-{uuid.uuid4().hex}",  # never joins, never commits
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",  # an exactly-once MirrorMaker 2 writes its pairs in transactions
        "fetch.wait.max.ms": 50,
    })


CONSUMERS = ConsumerPool(_consumer)


def read_offset_syncs(
    conf: Mapping[str, Any], cluster: str, topic: str, *, timeout_s: float = 10.0, max_records: int = 1_000_000,
    start_offset: int = 0,
) -> OffsetSyncsRead:
    """The pairs of ``topic`` (MirrorMaker 2's offset-syncs topic) on ``cluster``. Never raises.

    The consumer comes from this process's pool (``kafka_io/consumer_pool.py``): a continuous run's
    child reads the topic every cycle, and a new client each time cost its set-up and connections
    in every cycle's read."""
    try:
        with CONSUMERS.lease(conf) as lease:
            return _read(lease.consumer, cluster, topic, timeout_s, max_records, start_offset)
    except KafkaException as exc:
        return OffsetSyncsRead(cluster, topic, unreadable=f"{cluster}: {topic}: {exc.args[0] if exc.args else exc}")


def _read(consumer: Consumer, cluster: str, topic: str, timeout_s: float, max_records: int,
          start_offset: int) -> OffsetSyncsRead:
    deadline = time.monotonic() + timeout_s
    metadata = consumer.list_topics(topic, timeout=timeout_s)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        why = "does not exist" if described is None or described.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART \
            else str(described.error)
        return OffsetSyncsRead(cluster, topic, unreadable=f"{cluster}: {topic} {why}")
    if 0 not in described.partitions:
        return OffsetSyncsRead(cluster, topic, unreadable=f"{cluster}: {topic} has no partition 0")
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout_s, cached=False)
    start = max(low, start_offset)
    pairs: dict[PartitionKey, list[tuple[int, int]]] = {}
    problems: Counter[OffsetSyncProblem] = Counter()
    read = 0
    stop = high
    if start < high:
        consumer.assign([TopicPartition(topic, 0, start)])
        stop = min(high, start + max_records)
        done = False
        while not done:
            left = deadline - time.monotonic()
            if left <= 0:
                return OffsetSyncsRead(
                    cluster, topic, unreadable=f"{cluster}: {topic} not read within {timeout_s:g} s "
                                               f"({read} of {high - start} records)")
            # Take what has arrived; when nothing has, wait for the next fetch (not for a full
            # batch): a batch consume waits out its whole timeout unless it fills, the end-of-partition
            # event included, so a read of a few new pairs cost a full second of every cycle.
            batch = consumer.consume(num_messages=500, timeout=0)
            if not batch:
                first = consumer.poll(min(left, 1.0))
                batch = [first] if first is not None else []
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done = True
                        continue
                    raise KafkaException(error)
                if message.offset() >= stop:
                    done = True
                    continue
                read += 1
                decoded = decode_offset_sync(message.key(), message.value())
                if isinstance(decoded, OffsetSync):
                    pairs.setdefault((decoded.topic, decoded.partition), []).append(
                        (decoded.upstream, decoded.downstream))
                else:
                    problems[decoded] += 1
                if message.offset() >= stop - 1:
                    done = True
    return OffsetSyncsRead(
        cluster, topic, pairs={key: tuple(value) for key, value in pairs.items()}, problems=dict(problems),
        records_read=read, end_offset=high, next_offset=max(stop, start) if start < high else max(high, 0),
    )


def read_offset_syncs_from(conf: Mapping[str, Any], cluster: str, topic: str, start_offset: int, timeout_s: float,
                           max_records: int) -> OffsetSyncsRead:
    """:func:`read_offset_syncs` with positional arguments (a child process's call, whose own bound is
    its ``timeout_s`` keyword: ``kafka_io/isolated.py``)."""
    return read_offset_syncs(conf, cluster, topic, timeout_s=timeout_s, max_records=max_records,
                             start_offset=start_offset)
