"""Every group offset commit on a cluster, with the time the broker wrote it, read from its
``__consumer_offsets`` topic: for the MirrorMaker 2 comparison (``bench/compare_mm2.py``), which
measures MirrorMaker 2's group offset writes and this project's commits alike, by when each stood
on the standby, without polling (a one-second poll made every system look up to a second staler).

A record of ``__consumer_offsets`` whose key has version 0 or 1 is an offset commit: key ``(int16
version, string group, string topic, int32 partition)``, value ``(int16 version, int64 offset, ...)``
in every value version (0-4); the other key versions are group metadata and are skipped, and so are
tombstones (an offset deleted). The record's timestamp is the coordinator's append time.
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"


def _string(data: bytes, at: int) -> tuple[str, int]:
    length = int.from_bytes(data[at:at + 2], "big", signed=True)
    return data[at + 2:at + 2 + length].decode("utf-8"), at + 2 + length


def parse_offset_commit(key: bytes | None, value: bytes | None) -> tuple[str, str, int, int] | None:
    """(group, topic, partition, offset) of an offset commit record, or None for any other record."""
    if not key or len(key) < 2 or not value or len(value) < 10:
        return None
    if int.from_bytes(key[0:2], "big", signed=True) not in (0, 1):
        return None
    try:
        group, at = _string(key, 2)
        topic, at = _string(key, at)
    except UnicodeDecodeError:
        return None
    partition = int.from_bytes(key[at:at + 4], "big", signed=True)
    offset = int.from_bytes(value[2:10], "big", signed=True)
    return group, topic, partition, offset


def wait_for_partitions(partitions_now: Callable[[], list[int]], stop: threading.Event,
                        pause_s: float = 0.5) -> list[int]:
    """The partitions of ``__consumer_offsets`` once it has any, asking ``partitions_now`` every
    ``pause_s`` until then; [] if ``stop`` is set first. A cluster creates the topic at the first
    group coordinator lookup, so behind MirrorMaker 2 alone it appears only when the first
    checkpoint or sync commit arrives, after the recorder has started; its commits are still read,
    since the recorder reads from the beginning."""
    while not stop.is_set():
        partitions = partitions_now()
        if partitions:
            return sorted(partitions)
        stop.wait(pause_s)
    return []


@dataclass
class OffsetCommitLog:
    """Reads ``__consumer_offsets`` of ``bootstrap`` from its beginning until stopped, keeping the
    commits of ``groups``: (group, topic, partition) -> [(broker time in seconds, offset), ...]."""

    bootstrap: str
    groups: set[str]
    commits: dict[tuple[str, str, int], list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    errors: int = 0

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-offsets-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "log_level": 3, "fetch.wait.max.ms": 50})
        try:
            def partitions_now() -> list[int]:
                topic = consumer.list_topics(OFFSETS_TOPIC, timeout=10).topics.get(OFFSETS_TOPIC)
                return [] if topic is None or topic.error is not None else list(topic.partitions)

            partitions = wait_for_partitions(partitions_now, stop)
            consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
            while not stop.is_set():
                for message in consumer.consume(1000, timeout=0.2):
                    if message.error():
                        self.errors += 1
                        continue
                    commit = parse_offset_commit(message.key(), message.value())
                    if commit is None or commit[0] not in self.groups:
                        continue
                    group, topic, partition, offset = commit
                    self.commits[(group, topic, partition)].append((message.timestamp()[1] / 1000.0, offset))
        except KafkaException:
            self.errors += 1
            raise
        finally:
            consumer.close()
