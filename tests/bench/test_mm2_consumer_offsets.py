"""The MirrorMaker 2 comparison's reader of ``__consumer_offsets`` (bench/mm2/consumer_offsets.py):
its record parser and its wait for a topic the cluster has not created yet."""

from __future__ import annotations

import struct
import threading

import pytest

from bench.mm2.consumer_offsets import parse_offset_commit, wait_for_partitions


def _key(version: int, group: str, topic: str, partition: int) -> bytes:
    def string(text: str) -> bytes:
        data = text.encode("utf-8")
        return struct.pack(">h", len(data)) + data
    return struct.pack(">h", version) + string(group) + string(topic) + struct.pack(">i", partition)


@pytest.mark.parametrize("key, value, expected", [
    (_key(1, "g", "t", 3), struct.pack(">hq", 3, 42) + b"\0" * 12, ("g", "t", 3, 42)),
    (_key(0, "g-ü", "t.x", 0), struct.pack(">hq", 0, 7), ("g-ü", "t.x", 0, 7)),
    (_key(2, "g", "t", 3), struct.pack(">hq", 3, 42), None),    # group metadata
    (_key(1, "g", "t", 3), None, None),                         # tombstone: an offset deleted
    (None, struct.pack(">hq", 3, 42), None),
])
def test_offset_commit_records_are_parsed_and_others_skipped(key, value, expected):
    assert parse_offset_commit(key, value) == expected


def test_the_partitions_are_waited_for_until_the_topic_exists():
    answers = iter([[], [], [2, 0, 1]])
    asked = []

    def partitions_now():
        asked.append(1)
        return next(answers)

    assert wait_for_partitions(partitions_now, threading.Event(), pause_s=0.001) == [0, 1, 2]
    assert len(asked) == 3


def test_a_stop_ends_the_wait_with_no_partitions():
    stop = threading.Event()

    def partitions_now():
        stop.set()
        return []

    assert wait_for_partitions(partitions_now, stop, pause_s=0.001) == []
