"""A window of one partition's records with their origin headers, and its log range, read within a
bound: what the planned switchover checks record identities on (``readiness/switch_point.py``).

The reads use the translation's pooled read consumers (``partition_records.LeasedConsumers``:
``read_committed``, no group membership, never a commit) and its :class:`PartitionReader`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from offset_pipeline.kafka_io.partition_records import (
    LeasedConsumers,
    PartitionReader,
    ReadStats,
)
from offset_pipeline.translation.facts import RecordFact


@dataclass(frozen=True)
class RecordWindow:
    cluster: str
    topic: str
    partition: int
    log_start: int
    log_end: int  # the last stable offset when a transaction is open
    records: list[RecordFact]  # the real records of [start, read_to), sorted by offset
    start: int
    read_to: int  # every real record of [start, read_to) is in ``records``


def log_range(conf: dict, cluster: str, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
    """(log start, last stable offset) of the partition, asked of the broker."""
    deadline = time.monotonic() + timeout_s
    with LeasedConsumers(ReadStats(), topic, deadline) as consumers:
        return consumers.log_range("target", conf, partition, timeout_s)


def read_window(conf: dict, cluster: str, peer: str, topic: str, partition: int, start: int, end: int | None,
                timeout_s: float, max_records: int = 200_000) -> RecordWindow:
    """The real records of ``[start, end)`` (``end`` None: to the log's end), at most ``max_records``
    offsets, with their origin headers parsed (``peer``: the one legitimate origin cluster)."""
    deadline = time.monotonic() + timeout_s
    with LeasedConsumers(ReadStats(), topic, deadline) as consumers:
        log_start, log_end = consumers.log_range("target", conf, partition, timeout_s)
        begin = max(start, log_start)
        stop_at = min(log_end if end is None else min(end, log_end), begin + max_records)
        reader = PartitionReader(consumers.get("target", conf), topic, partition, read_from=cluster, peer=peer,
                                 end=stop_at, deadline=deadline)
        records, read_to = reader.read(begin) if begin < stop_at else ([], begin)
    return RecordWindow(cluster, topic, partition, log_start, log_end, sorted(records, key=lambda r: r.offset),
                        begin, read_to)
