"""A continuous run's checkpoint written to ClickHouse, beside the run's cycles, in a thread.

:meth:`CheckpointWriter.submit` hands a :class:`~offset_pipeline.continuous.run_state.Checkpoint` to
a writer thread and returns at once: the cycles go on while ClickHouse writes (at 10,000
group-partitions a checkpoint is some 50,000 rows and a few seconds of the embedded engine). One
checkpoint is in flight at a time; one due while the last is still being written is skipped and
counted by the caller (the next carries the newest state anyway).

The writer writes what a cycle of the interval mode writes (snapshot, translations, anchors,
commits, each group's readiness to switch, the monitoring rows of ``monitoring/metrics_step.py``), replays the spool first, and
through the spool (``storage/deferred_writes.py``): a ClickHouse that is down costs late rows,
never a cycle. With the embedded engine it lets go of the data folder after each checkpoint
(``release``), so the sensors and other runs that read it take their turn between checkpoints.
It also samples topic shapes (``sync/shape_step.py``, which keeps its evidence in ClickHouse).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from offset_pipeline.continuous.run_state import Checkpoint, snapshot_tuple
from offset_pipeline.monitoring.metrics_step import carried_cycle_rows, cycle_metrics
from offset_pipeline.storage import (
    commit_log_follow,
    commits,
    metrics,
    mirror_checks,
    offset_sync_pairs,
    readiness,
    snapshots,
    translations,
)
from offset_pipeline.storage.deferred_writes import open_writer
from offset_pipeline.sync.offset_sync_step import store_pairs
from offset_pipeline.sync.shape_step import ShapeSettings, sample_and_detect


@dataclass(frozen=True)
class CheckpointSettings:
    clusters: tuple[str, str]  # the two configured names (the resources' cluster_name), no default
    mirror_window_s: float = 180.0
    lagging_after_s: float = 120.0
    shapes: ShapeSettings | None = None  # None: no shape sampling
    configured_shapes: dict[str, str] = field(default_factory=dict)
    confs: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckpointOutcome:
    checkpoint_id: str
    rows_written: int  # inserted or spooled
    rows_spooled: int
    metric_rows: int
    metric_statuses: dict[str, int]
    detected_shapes: dict[str, str] | None  # None: not sampled
    error: str | None  # ClickHouse unavailable (rows spooled, monitoring rows dropped)
    seconds: float


class CheckpointWriter:
    """Writes checkpoints in a thread of its own, one at a time."""

    def __init__(self, clickhouse, settings: CheckpointSettings, release: Callable[[], None] = lambda: None):
        self._clickhouse = clickhouse
        self._settings = settings
        self._release = release
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.outcomes: list[CheckpointOutcome] = []

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, checkpoint: Checkpoint) -> bool:
        """Start writing ``checkpoint``; False when the last is still being written (nothing started)."""
        if self.busy():
            return False
        self._thread = threading.Thread(target=self._write, args=(checkpoint,), name="offset-sync-checkpoint",
                                        daemon=True)
        self._thread.start()
        return True

    def wait(self, timeout_s: float) -> bool:
        """Wait for the checkpoint in flight; False when it is still being written after ``timeout_s``."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.busy()

    def take_outcomes(self) -> list[CheckpointOutcome]:
        with self._lock:
            out, self.outcomes = self.outcomes, []
        return out

    def _write(self, checkpoint: Checkpoint) -> None:
        outcome = write_checkpoint(self._clickhouse, checkpoint, self._settings)
        try:
            self._release()
        finally:
            with self._lock:
                self.outcomes.append(outcome)


def write_checkpoint(clickhouse, checkpoint: Checkpoint, settings: CheckpointSettings) -> CheckpointOutcome:
    """Every row of ``checkpoint`` written (or spooled), then its monitoring rows and a shape sample
    when ClickHouse answers. Never raises: a failure is the outcome's ``error``."""
    started = time.monotonic()
    cp = checkpoint
    writer = open_writer(clickhouse, snapshots.ensure_table, translations.ensure_tables, commits.ensure_table,
                         metrics.ensure_tables, readiness.ensure_table,
                         mirror_checks.ensure_table,  # every table Grafana reads exists from the first cycle
                         commit_log_follow.ensure_table, offset_sync_pairs.ensure_table)
    error = writer.outcome.error
    metric_rows, statuses, detected, written = 0, {}, None, 0
    try:
        if writer.client is not None:
            replay = clickhouse.deferred_writes().replay(writer.client)
            error = error or replay.error
        written += snapshots.insert_rows(writer, cp.snapshot_rows)
        written += translations.insert_translations(writer, cp.translation_rows)
        written += translations.insert_anchors(writer, cp.anchor_rows)
        written += commits.insert_rows(writer, cp.commit_rows)
        written += readiness.insert_rows(writer, cp.readiness_rows)
        written += store_pairs(writer, cp.offset_sync_rows, cp.time_ms)
        written += commit_log_follow.insert_rows(writer, cp.follow_rows)
        if writer.client is not None and error is None and not writer.outcome.deferred:
            log_end, fact_rows = carried_cycle_rows(cp.snapshot_rows, cp.translation_rows, cp.commit_rows)
            done = cycle_metrics(writer, cp.checkpoint_id, cp.time_ms, log_end, fact_rows,
                                 mirror_window_s=settings.mirror_window_s, lagging_after_s=settings.lagging_after_s,
                                 graph_hours=None)
            metric_rows, statuses = done.written, dict(done.partition_statuses)
            detected = _sample_shapes(writer.client, cp, settings)
    except Exception as exc:  # noqa: BLE001 - ClickHouse failed mid-checkpoint: the cycles go on
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    return CheckpointOutcome(cp.checkpoint_id, written, writer.outcome.deferred, metric_rows, statuses, detected,
                             error or writer.outcome.error, time.monotonic() - started)


def _sample_shapes(client, cp: Checkpoint, settings: CheckpointSettings) -> dict[str, str] | None:
    if settings.shapes is None:
        return None
    step = sample_and_detect(client, cp.checkpoint_id, cp.time_ms, [snapshot_tuple(r) for r in cp.snapshot_rows],
                             settings.configured_shapes, settings.clusters, settings.confs, settings.shapes)
    return step.detected()
