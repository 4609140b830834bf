"""A MirrorMaker 2 position carried over the target's own copies that follow it on the source.

Behind a two-way mirror, each cluster's partition holds its own records and the copies of the other
cluster's. MirrorMaker 2 must not copy the copies back (they would loop): a transform drops them
(the dev harness: ``Filter`` when an ``IDC`` header is present). Connect records no offset for a
dropped record (``translation/connect_offsets.py``), so the source position of the ``B->A`` flow
stops at B's last *local* record copied, and a partition of B holding only copies of A has no
position at all. The stale rule (``fast_forward/stale_candidates.py``) asks of that position one
fact: every record of B below it exists on A. A copy of one of A's records exists on A by
definition. So records beyond the position that are all copies of the target -- the ``IDC`` origin
header naming the target, as ``translation/headers.parse_origin`` reads it -- leave that fact true
up to where they end:

    copied through = the first record at or after the position that is not a copy of the target,
                     or the log end when there is none (transaction markers are no records).

A partition without a position is read from its log start (records below it are gone from B and no
failover can read them); it gets a position only where copies were found (an empty partition: its
end), else it stays without one (``mirror_position_unknown``). A record naming a third cluster, a
malformed header or a local record stops the walk: nothing proves it is on the target. The
position never moves back, and never past the log end read here.

Bounded: at most ``max_records`` offsets are walked per partition (beyond: the position stays as it
was), every call has ``timeout_s``, the whole walk a deadline of ``timeout_s``; a partition not
walked in time keeps its stored position. Never raises for a partition; a source cluster that does
not answer leaves every position as stored.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from offset_pipeline.kafka_io.partition_records import LeasedConsumers, PartitionReader, ReadStats
from offset_pipeline.translation.headers import CopiedFrom

TP = tuple[str, int]


def copied_through(
    source_conf: Mapping[str, Any], source: str, target: str, partitions: Iterable[TP], positions: Mapping[TP, int],
    *, timeout_s: float = 10.0, max_records: int = 10_000,
) -> dict[TP, int]:
    """``positions`` (the ``source``->``target`` flow's, on ``source``) carried over the target's copies
    that follow them, for ``partitions``; a partition without a position gets one where its records
    from its log start are such copies (or it is empty). Never raises."""
    out = {tp: p for tp, p in positions.items()}
    wanted = sorted(set(partitions))
    if not wanted:
        return out
    deadline = time.monotonic() + timeout_s
    by_topic: dict[str, list[int]] = {}
    for topic, partition in wanted:
        by_topic.setdefault(topic, []).append(partition)
    for topic, topic_partitions in by_topic.items():
        try:
            with LeasedConsumers(ReadStats(), topic, deadline) as clients:
                consumer = clients.get("copies", dict(source_conf))
                for partition in topic_partitions:
                    if deadline <= time.monotonic():
                        return out
                    try:
                        through = _walk(consumer, source, target, topic, partition, out.get((topic, partition)),
                                        deadline, max_records)
                    except KafkaException:
                        continue  # this partition's position stays as stored
                    if through is not None:
                        out[(topic, partition)] = through
        except KafkaException:
            continue  # the source does not answer for this topic: its positions stay as stored
    return out


def _walk(consumer, source: str, target: str, topic: str, partition: int, position: int | None, deadline: float,
          max_records: int) -> int | None:
    """The partition's new position, or None to keep it as it is."""
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                               timeout=max(0.1, deadline - time.monotonic()), cached=False)
    start = low if position is None else max(position, low)
    if start >= high:
        return high if position is None else None  # no position and nothing on the source (any more) to copy
    if high - start > max_records:
        return None
    reader = PartitionReader(consumer, topic, partition, read_from=source, peer=target, end=high, deadline=deadline)
    try:
        records, upto = reader.read(start)
    except TimeoutError:
        return None
    through = next((r.offset for r in records if not _copy_of(r.origin, target)), upto)
    return through if through > start else None


def _copy_of(origin: object, target: str) -> bool:
    return isinstance(origin, CopiedFrom) and origin.cluster == target
