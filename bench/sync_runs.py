"""The product's sync run from a benchmark, outside a Dagster deployment, against the benchmark's own
clusters (``bench.clusters``), an embedded ClickHouse and local Spark (or a Spark Connect server).

* The interval cycle: :func:`offset_sync_assets` and :func:`resources` for ``dg.materialize`` (every
  asset of the ``offset_sync`` group, as job ``offset_sync_cycle`` runs them), :func:`step_seconds` and
  :func:`run_window` read a run's timings back from its events (used by ``cycle_benchmark``,
  ``scale_cycles``, ``storage_growth``).
* The continuous run (``freshness``, ``compare_mm2``): the product's ``ContinuousSync`` in a thread
  (:class:`BenchContinuousRun`) or in a process of its own (:class:`ProcessContinuousRun`).
  ``watch(outcome, state)`` is called after every cycle in the sync's thread. ``offset_syncs_topics``:
  MirrorMaker 2's offset-syncs topics the run reads (``settings.offset_syncs_topics``), for a run behind
  a plain MirrorMaker 2 (``mirror_writes_headers=False``).
* :func:`table`: the plain-text tables the benchmarks print.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import dagster as dg

from offset_pipeline.continuous.checkpoint import CheckpointSettings
from offset_pipeline.continuous.cycle_reads import FollowSettings
from offset_pipeline.continuous.loop import (
    ContinuousIO,
    ContinuousSettings,
    ContinuousSync,
    RunSummary,
)
from offset_pipeline.kafka_io.group_offsets import DEFAULT_GROUP_EXCLUDE, GroupFilter
from offset_pipeline.resources import (
    ClickHouseResource,
    KafkaClusterResource,
    SparkResource,
)
from offset_pipeline.resources.clickhouse import close_embedded_clients
from offset_pipeline.resources.spark import SparkUnavailable
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.sync.spark_translation import untranslated_rows
from offset_pipeline.sync.translation_step import ReadSettings, TranslationJob
from offset_pipeline.translation import TranslationStatus


# -- the interval cycle ------------------------------------------------------------------------------


def offset_sync_assets() -> list:
    from offset_pipeline.assets import all_assets

    return [a for a in all_assets if set(a.group_names_by_key.values()) == {"offset_sync"}]


def resources(bootstraps: dict[str, str], dsn: str, spark_connect_url: str | None) -> dict:
    """The resources of one interval cycle: a Kafka resource per cluster, ClickHouse at ``dsn``, and
    Spark (local, or the Spark Connect server at ``spark_connect_url``)."""
    return {
        **{name: KafkaClusterResource(cluster_name=name, bootstrap_servers=bs) for name, bs in bootstraps.items()},
        "clickhouse": ClickHouseResource(dsn=dsn),
        "spark": SparkResource(connect_url=spark_connect_url) if spark_connect_url else SparkResource(),
    }


def step_seconds(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    """Step key -> seconds from its start event to its success (or failure) event."""
    starts, ends = {}, {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or entry.step_key is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            starts[entry.step_key] = entry.timestamp
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            ends[entry.step_key] = entry.timestamp
    return {k: ends[k] - starts[k] for k in starts if k in ends}


def run_window(instance: dg.DagsterInstance, run_id: str) -> float:
    """Seconds from the run's start event to its success/failure event."""
    times = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is not None and event.event_type in (
            dg.DagsterEventType.RUN_START, dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE
        ):
            times[event.event_type] = entry.timestamp
    start = times.get(dg.DagsterEventType.RUN_START)
    end = times.get(dg.DagsterEventType.RUN_SUCCESS) or times.get(dg.DagsterEventType.RUN_FAILURE)
    return end - start if start and end else float("nan")


def table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A plain-text table: a header row, a rule, then the rows; ``align`` one letter a column
    (``l`` left, ``r`` right; default: the first left, the rest right)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- the continuous run ------------------------------------------------------------------------------


def spark_runner(spark: SparkResource, log: logging.Logger) -> Callable[[TranslationJob], list[dict]]:
    def run(job: TranslationJob) -> list[dict]:
        job.start()
        try:
            rows = spark.run_job(job, what=f"translating {len(job.work)} group-partitions on Spark")
            job.finish(None)
        except SparkUnavailable as exc:
            log.warning("spark unavailable: %s", exc)
            job.finish(str(exc))
            rows = untranslated_rows(job.work, TranslationStatus.SPARK_UNAVAILABLE, str(exc), job.snapshot_id,
                                     job.cycle_time_ms)
        return rows

    return run


class BenchContinuousRun:
    """``ContinuousSync`` over ``bootstraps`` in a thread of this process."""

    def __init__(self, bootstraps: dict[str, str], dsn: str, shapes: dict[str, str], *, group_include: str = ".*",
                 dry_run: bool = False, mirror_writes_headers: bool = True, spark_connect_url: str | None = None,
                 checkpoint_s: float = 30.0, watch=None, run_id: str = "bench-continuous",
                 offset_syncs_topics: tuple[OffsetSyncsTopic, ...] = (), follow_commit_log: bool = True,
                 revisit_s: float | None = None):
        self.log = logging.getLogger("bench.sync_runs")
        clusters = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=bs) for name, bs in bootstraps.items()}
        clickhouse = ClickHouseResource(dsn=dsn)
        spark = SparkResource(connect_url=spark_connect_url) if spark_connect_url else SparkResource()
        io = ContinuousIO(clusters=clusters, clickhouse=clickhouse, run_spark=spark_runner(spark, self.log),
                          spark_bound_s=spark.job_timeout_s, release_clickhouse=lambda: close_embedded_clients(dsn))
        reads = ReadSettings(window=50, refine_window=200, kafka_timeout_s=10.0, read_budget_s=60.0,
                             mirror_writes_headers=mirror_writes_headers)
        settings = ContinuousSettings(
            group_filter=GroupFilter(group_include, DEFAULT_GROUP_EXCLUDE), shapes=dict(shapes), reads=reads, dry_run=dry_run,
            checkpoint_s=checkpoint_s, offset_syncs_topics=tuple(offset_syncs_topics),
            **({"revisit_s": revisit_s} if revisit_s is not None else {}),  # else the product's default
            follow=FollowSettings(follow_commit_log=follow_commit_log),
            checkpoint=CheckpointSettings(clusters=tuple(bootstraps),
                                          confs={n: r.client_config() for n, r in clusters.items()}),
        )
        self.sync = ContinuousSync(run_id, io, settings, self.log, on_cycle=watch)
        self.stop = threading.Event()
        self.summary: RunSummary | None = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, run_for_s: float) -> BenchContinuousRun:
        def target() -> None:
            try:
                self.summary = self.sync.run(run_for_s, self.stop)
            except BaseException as exc:  # noqa: BLE001 - reported by join()
                self.error = exc

        self._thread = threading.Thread(target=target, name="continuous-sync", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout_s: float | None = None) -> RunSummary:
        assert self._thread is not None
        self._thread.join(timeout_s)
        if self.error is not None:
            raise RuntimeError(f"the continuous run failed: {self.error!r}") from self.error
        if self._thread.is_alive():
            raise RuntimeError("the continuous run did not end in time")
        return self.summary


def _run_in_child(kwargs: dict, run_for_s: float, out, reasons: bool = False) -> None:
    """The child of :class:`ProcessContinuousRun`: the run, reporting every cycle on ``out`` (with
    ``reasons``, also the first reason given for each status, as ``("reason", status, example)``)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    reported: set[str] = set()

    def watch(outcome, state) -> None:
        # the group-partitions this cycle translated and left synced: (their committed offset)
        since = time.monotonic() - outcome.seconds
        settled = {}
        for key, memory in state.memory.items():
            if memory.translated_at_s >= since:
                commit, result = state.commits.get(key), state.results.get(key)
                if commit is not None and commit.synced and result is not None and result.get("committed") is not None:
                    settled[key] = int(result["committed"])
                status = getattr(result.get("status"), "value", result.get("status")) if result is not None else None
                if reasons and status is not None and status not in reported:
                    reported.add(status)
                    out.put(("reason", str(status), f"{key[0]} {key[1]}[{key[2]}]: {result.get('reason')}"))
        out.put(("cycle", time.monotonic(), outcome, settled))

    try:
        summary = BenchContinuousRun(**kwargs, watch=watch).start(run_for_s).join(run_for_s + 300)
        out.put(("summary", summary))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put(("error", repr(exc)))


class ProcessContinuousRun:
    """``BenchContinuousRun`` in a process of its own, as Dagster runs the asset (a run worker per
    run): the benchmark's load (producers, 500 group members, mirrors) does not share the sync's
    interpreter. ``on_cycle(monotonic_s, outcome, settled)`` is called in a thread of this process per
    cycle, ``settled``: {(group, topic, partition): committed offset} of the group-partitions the
    cycle translated and left synced. ``on_reason(status, example)``, when given: the first reason the
    run gave for each translation status (one group-partition's)."""

    def __init__(self, on_cycle, on_reason=None, **kwargs):
        import multiprocessing

        self.on_cycle, self.on_reason, self.kwargs = on_cycle, on_reason, kwargs
        self._ctx = multiprocessing.get_context("spawn")  # no fork of a process full of Kafka clients
        self._out = self._ctx.Queue()
        self._proc = None
        self._reader: threading.Thread | None = None
        self.summary: RunSummary | None = None
        self.error: str | None = None

    def start(self, run_for_s: float) -> ProcessContinuousRun:
        self._proc = self._ctx.Process(target=_run_in_child,
                                       args=(self.kwargs, run_for_s, self._out, self.on_reason is not None),
                                       name="continuous-sync", daemon=True)
        self._proc.start()
        self._reader = threading.Thread(target=self._read, name="continuous-sync-reports", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        while True:
            message = self._out.get()
            if message[0] == "cycle":
                self.on_cycle(*message[1:])
            elif message[0] == "reason":
                self.on_reason(*message[1:])
            elif message[0] == "summary":
                self.summary = message[1]
                return
            else:
                self.error = message[1]
                return

    def terminate(self, timeout_s: float = 30.0) -> None:
        """Stop the child now (SIGTERM, then SIGKILL), for a caller that needs no summary."""
        if self._proc is None or not self._proc.is_alive():
            return
        self._proc.terminate()
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout_s)

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def join(self, timeout_s: float | None = None) -> RunSummary:
        assert self._reader is not None and self._proc is not None
        self._reader.join(timeout_s)
        self._proc.join(30)
        if self.error is not None:
            raise RuntimeError(f"the continuous run failed: {self.error}")
        if self.summary is None:
            raise RuntimeError("the continuous run did not end in time")
        return self.summary
