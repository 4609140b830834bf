"""The translation step of one sync cycle around the Spark job (``assets/translation.py`` wires it).

:func:`snapshot_tuples` gives the cycle's snapshot rows (carried from the snapshot step in this
process, or read back); :func:`read_earlier_cycles` what earlier cycles left (kept anchors and
fast-forward points, directions, the partitions the last cycle did not reach); a
:class:`TranslationJob` is the Spark job, with its read window (:func:`read_window_s`);
:func:`write_results` appends the results, the changed anchors and the partitions deferred to the
next cycle.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from offset_pipeline.storage import cycle_rows, deferrals, fast_forwards, translations
from offset_pipeline.storage.history import direction_history, previous_snapshot
from offset_pipeline.sync.spark_translation import (
    PARTITION_KEY,
    collected_rows,
    translate_groups,
    work_tasks,
)
from offset_pipeline.sync.work import SNAPSHOT_COLUMNS
from offset_pipeline.translation import TranslationStatus
from offset_pipeline.translation.direction import DirectionHistory

SNAPSHOT_GROUP = SNAPSHOT_COLUMNS.index("group_id")
_SNAPSHOT_VALUES = attrgetter(*SNAPSHOT_COLUMNS)


def snapshot_tuples(carried: Iterable | None, client, snapshot_id: str, unavailable: str | None) -> list[tuple]:
    """This run's snapshot rows in ``SNAPSHOT_COLUMNS`` order: the rows the snapshot step carried in this
    process, else read back from ClickHouse (``client``); with neither, RuntimeError (``unavailable``:
    why ClickHouse is not there)."""
    if carried is not None:
        return list(map(_SNAPSHOT_VALUES, carried))  # one C call per row (several columns: a tuple)
    if client is not None:
        return cycle_rows.snapshot_rows(client, snapshot_id, SNAPSHOT_COLUMNS)
    raise RuntimeError(f"this run's snapshot is neither in this process nor readable: {unavailable}")


@dataclass
class EarlierCycles:
    """What earlier cycles left: kept anchors, kept fast-forward points (stale partitions), the
    direction history, and the partitions the last cycle did not reach (``first_keys``).

    ``read``: they were read from ClickHouse; else ``error`` says why they are empty."""

    anchors: dict = field(default_factory=dict)
    points: dict = field(default_factory=dict)
    history: DirectionHistory = field(default_factory=DirectionHistory)
    first_keys: set = field(default_factory=set)
    read: bool = False
    error: str | None = None


def read_earlier_cycles(client, unavailable: str | None, snapshot_id: str, snapshot_rows: list[tuple],
                        cycle_time_ms: int) -> EarlierCycles:
    """What earlier cycles left, read with ``client`` (None: ClickHouse is not there, ``unavailable``
    says why). A failed read gives none of it and the error, never an exception."""
    if client is None:
        return EarlierCycles(error=unavailable)
    try:
        # The snapshot's groups: the recent history is read first and only the groups it lacks
        # are looked up further back (storage/recent.py).
        group_ids = {row[SNAPSHOT_GROUP] for row in snapshot_rows}
        anchors = translations.latest_anchors(client)
        points = fast_forwards.latest_points(client)  # kept fast-forwards (stale partitions)
        previous = previous_snapshot(client, snapshot_id)
        history = direction_history(client, snapshot_id, previous, group_ids, cycle_time_ms)
        # what the last cycle did not reach
        first_keys = deferrals.deferred_by(client, previous.snapshot_id if previous else None)
    except Exception as exc:  # noqa: BLE001 - the history is an aid, not a requirement
        return EarlierCycles(error=f"reading earlier cycles failed: {type(exc).__name__}: {str(exc)[:300]}")
    return EarlierCycles(anchors, points, history, first_keys, read=True)


def partition_keys(rows: Iterable[Mapping[str, Any]]) -> set[tuple]:
    """The Kafka partitions (``PARTITION_KEY``) of work or result rows."""
    return {tuple(r[k] for k in PARTITION_KEY) for r in rows}


def read_window_s(budget_s: float, spark_bound_s: float, kafka_timeout_s: float) -> float:
    """How long the cycle's translation reads Kafka: the budget, cut to leave room under the Spark
    bound for a read begun just before the end (a few Kafka timeouts) and for collecting results,
    so a slow cycle defers its last partitions instead of losing everything to the bound. Never
    below half the bound, so a small bound still reads."""
    return min(budget_s, max(spark_bound_s - 3 * kafka_timeout_s, spark_bound_s / 2))


@dataclass(frozen=True)
class ReadSettings:
    """How the Spark job reads Kafka (the asset's config)."""

    window: int
    refine_window: int
    kafka_timeout_s: float
    read_budget_s: float
    mirror_writes_headers: bool
    read_threads: int = 1  # Kafka partitions a Spark task reads at once (spark_translation.translate_keyed_rows)
    batch_keys: int = 1  # Kafka partitions read together (kafka_io/batched_reads.py)


@dataclass(eq=False)
class TranslationJob:
    """The cycle's Spark job: ``SparkResource.run_job(job)`` calls it with the session, and it returns
    one result row (``RESULT_COLUMNS``) per work row. ``first_in_line``: the partitions of the work the
    last cycle left, read first.

    ``window_s``: how long it reads Kafka; until the job runs, from the whole Spark bound. :meth:`start`
    starts the bound's clock (before the session is asked for); :meth:`finish` records the seconds
    since then and Spark's error, if any."""

    work: list[dict]
    confs: dict[str, dict]
    snapshot_id: str
    cycle_time_ms: int
    reads: ReadSettings
    spark_bound_s: float
    first_in_line: set[tuple]
    window_s: float = field(init=False)
    started: float = field(init=False, default=0.0)
    seconds: float = field(init=False, default=0.0)
    error: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.window_s = read_window_s(self.reads.read_budget_s, self.spark_bound_s, self.reads.kafka_timeout_s)

    def start(self) -> None:
        self.started = time.monotonic()

    def finish(self, error: str | None) -> None:
        self.seconds, self.error = time.monotonic() - self.started, error

    def __call__(self, session) -> list[dict]:
        # The window opens once the session is there (a cold JVM or Python worker start-up is
        # not reading) and is cut to what is left of the Spark bound.
        left_s = self.spark_bound_s - (time.monotonic() - self.started)
        self.window_s = read_window_s(self.reads.read_budget_s, left_s, self.reads.kafka_timeout_s)
        read_until = time.time() + self.window_s
        reads = self.reads
        # spark.sql.shuffle.partitions: how many tasks the work is spread over (resources/spark.py)
        tasks = work_tasks(session, self.work, int(session.conf.get("spark.sql.shuffle.partitions")),
                           salt=self.snapshot_id, first_keys=self.first_in_line)
        out = translate_groups(
            tasks, self.confs, snapshot_id=self.snapshot_id,
            cycle_time_ms=self.cycle_time_ms, window=reads.window, refine_window=reads.refine_window,
            timeout_s=reads.kafka_timeout_s, mirror_writes_headers=reads.mirror_writes_headers, read_until=read_until,
            first_keys=self.first_in_line, read_threads=reads.read_threads, batch_keys=reads.batch_keys,
        )
        return collected_rows(out)


def deferred_rows(rows: list[dict]) -> list[dict]:
    """The result rows of partitions not read within the read window (``translation_deferred``)."""
    return [r for r in rows if r["status"] == TranslationStatus.TRANSLATION_DEFERRED.value]


def write_results(writer, snapshot_id: str, cycle_time_ms: int, rows: list[dict], anchors: Mapping,
                  deferred_keys: set[tuple]) -> tuple[int, int]:
    """Append the result rows, the anchors that changed (against ``anchors``, those kept so far) and the
    partitions to read first next cycle. Returns (result rows written, anchor rows written)."""
    written = translations.insert_translations(writer, rows)
    anchors_written = translations.insert_anchors(writer, anchor_changes(rows, anchors, snapshot_id, cycle_time_ms))
    deferrals.insert_deferred(writer, snapshot_id, cycle_time_ms, deferred_keys)
    return written, anchors_written


def anchor_changes(rows: list[dict], anchors: Mapping, snapshot_id: str, cycle_time_ms: int) -> list[dict]:
    """``offset_anchors`` rows for the result rows whose anchor to keep differs from the one kept."""
    return [
        {
            "group_id": r["group_id"], "topic": r["topic"], "partition": r["partition"], "active": r["active"],
            "standby": r["standby"], "active_offset": r["keep_active_offset"],
            "standby_offset": r["keep_standby_offset"], "snapshot_id": snapshot_id, "kept_at": cycle_time_ms,
        }
        for r in rows
        if r["active"] and r["standby"]
        # store a change only: a new anchor, or the drop of one that was kept
        and (r["keep_active_offset"], r["keep_standby_offset"]) != _kept(anchors, r)
    ]


def _kept(anchors: Mapping, row: dict):
    anchor = anchors.get((row["group_id"], row["topic"], row["partition"], row["active"], row["standby"]))
    return (anchor.active_offset, anchor.standby_offset) if anchor else (None, None)
