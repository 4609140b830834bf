"""A continuous cycle's few partitions, translated without Spark, in a child process.

Most continuous cycles have a handful of group-partitions to translate (``continuous/revisit_rules.py``):
starting a Spark job for them would cost more than the reads. They run the same per-partition
function as a Spark task (``spark_translation.translate_keyed_rows``: each Kafka partition read once
for all its groups, the same rules, the same result rows), in a child process of the run
(``kafka_io/isolated.py``): a crash of the Kafka client there costs this cycle's reads, never the
run, and the child keeps its consumers from cycle to cycle (``kafka_io/consumer_pool.py``).
A cycle with more work than ``local_max_partitions`` goes to Spark as in the interval mode.
"""

from __future__ import annotations

import time
from typing import Any

from offset_pipeline.kafka_io.isolated import IsolatedCalls
from offset_pipeline.kafka_io.thread_pools import shared_pool
from offset_pipeline.sync.spark_translation import (
    PARTITION_KEY,
    translate_keyed_rows,
    untranslated_rows,
)
from offset_pipeline.sync.translation_step import ReadSettings
from offset_pipeline.translation import TranslationStatus

CHILD_START_S = 30.0  # beyond the reads' own bound: starting the child the first time


#: Kafka partitions read at once in the child: each read waits on the brokers, not on the CPU
#: (librdkafka releases the GIL), and each thread leases consumers of its own from the pool.
READ_THREADS = 8


def translate_work(work: list[dict[str, Any]], confs: dict[str, dict], snapshot_id: str, cycle_time_ms: int,
                   reads: ReadSettings, read_until: float | None) -> list[dict[str, Any]]:
    """Called in the child: one result row per work row (``spark_translation.RESULT_COLUMNS``), the
    Kafka partitions read ``READ_THREADS`` at a time."""
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for row in work:
        by_key.setdefault(tuple(row[k] for k in PARTITION_KEY), []).append(row)

    def one(key: tuple) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for rows in translate_keyed_rows(
            {key: by_key[key]}, confs, snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms, read_until=read_until,
            window=reads.window, refine_window=reads.refine_window, timeout_s=reads.kafka_timeout_s,
            mirror_writes_headers=reads.mirror_writes_headers,
        ):
            out += rows
        return out

    if len(by_key) == 1:
        return one(next(iter(by_key)))
    # the child's pool for its life (kafka_io/thread_pools.py): threads started per call cost as
    # much as the reads of a small cycle
    pool = shared_pool("translate", READ_THREADS)
    return [row for rows in pool.map(one, list(by_key)) for row in rows]


def partition_count(work: list[dict[str, Any]]) -> int:
    return len({tuple(row[k] for k in PARTITION_KEY) for row in work})


class LocalTranslation:
    """The child that translates a continuous run's small cycles (one for the run's life; a child
    that died is replaced at the next call)."""

    def __init__(self) -> None:
        self._calls = IsolatedCalls("continuous translation")

    def translate(self, work: list[dict[str, Any]], confs: dict[str, dict], snapshot_id: str, cycle_time_ms: int,
                  reads: ReadSettings, read_until: float) -> list[dict[str, Any]]:
        """The work's result rows; a child that failed, died or ran past its bound gives every work
        row ``cluster_unavailable`` with the reason (nothing committed for them, anchors kept)."""
        if not work:
            return []
        bound_s = max(read_until - time.time(), 0.0) + 3 * reads.kafka_timeout_s + CHILD_START_S
        try:
            return self._calls.call(translate_work, work, confs, snapshot_id, cycle_time_ms, reads, read_until,
                                    timeout_s=bound_s)
        except Exception as exc:  # noqa: BLE001 - these partitions' status, never the run's
            return untranslated_rows(work, TranslationStatus.CLUSTER_UNAVAILABLE,
                                     f"translating {partition_count(work)} partitions outside Spark failed: "
                                     f"{type(exc).__name__}: {str(exc)[:300]}", snapshot_id, cycle_time_ms)

    def close(self) -> None:
        self._calls.close()

    def discard(self, why: str) -> None:
        """A new child (and new pooled consumers) at the next call (``IsolatedCalls.discard``)."""
        self._calls.discard(why)
