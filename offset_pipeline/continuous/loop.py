"""A continuous sync run: back-to-back incremental cycles until the run rolls over.

``assets/continuous.py`` (``offset_continuous_sync``) builds a :class:`ContinuousSync` and calls
:meth:`ContinuousSync.run`. Each cycle:

1. reads both clusters (``sync/snapshot_step.py``, each cluster in a child process kept for the
   run's life: no process start per cycle);
2. picks the group-partitions that may have a new answer (``continuous/revisit_rules.py``);
3. decides their groups' directions and work (``sync/work.py``, with the run's memory as the
   history) and translates them: a few partitions in the run's translation child
   (``continuous/local_translation.py``), more than ``local_max_partitions`` on Spark, as the
   interval mode does;
4. commits the groups with new results (``sync/commit_cycle.py``, the same plan, NO-LOSS guard and
   one commit call per group, in child processes kept for the run's life);
5. remembers the results (``continuous/run_state.py``).

Every ``checkpoint_s`` the state goes to ClickHouse in a thread (``continuous/checkpoint.py``).
The first cycle is the interval mode's cycle: its snapshot is written first, earlier cycles are
read back (kept anchors, fast-forward points, directions, the standby offsets recorded last: an
offset found elsewhere was moved by a run killed mid-commit, and is reported), every
group-partition is translated and committed.

Faults are the interval mode's: a cluster that does not answer gives its groups
``cluster_unavailable`` for that cycle (no commit), Spark or the translation child failing gives
their partitions a named status, ClickHouse down costs late checkpoint rows; the loop goes on and
the next cycle retries what was not settled (``revisit_s``). Nothing here raises for a cluster,
group or partition.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from offset_pipeline.continuous.checkpoint import (
    CheckpointOutcome,
    CheckpointSettings,
    CheckpointWriter,
)
from offset_pipeline.continuous.cycle_reads import CycleReads, FollowSettings
from offset_pipeline.continuous.local_translation import (
    LocalTranslation,
    partition_count,
)
from offset_pipeline.continuous.revisit_rules import offset_syncs_mark, partitions_to_revisit
from offset_pipeline.continuous.run_state import ContinuousState, snapshot_tuple
from offset_pipeline.kafka_io.group_io import IsolatedGroupIO
from offset_pipeline.kafka_io.group_offsets import GroupFilter
from offset_pipeline.kafka_io.isolated import IsolatedCalls
from offset_pipeline.monitoring.decision_log import write_decision_lines
from offset_pipeline.storage import (
    commits,
    deferrals,
    fast_forwards,
    offset_sync_pairs,
    snapshots,
    translations,
)
from offset_pipeline.storage.deferred_writes import open_writer
from offset_pipeline.sync.commit_checks import (
    CheckOutcome,
    bound_offenders,
    evaluate_no_loss,
    evaluate_sync_freshness,
)
from offset_pipeline.sync.commit_cycle import (
    CycleCommits,
    commit_groups,
    read_commit_history,
    translated_by_group,
    unrecorded_changes,
)
from offset_pipeline.sync.commit_step import CycleContext
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.sync.gc_pause import cyclic_gc_paused
from offset_pipeline.sync.offset_sync_step import OffsetSyncsReader, restored_reader
from offset_pipeline.sync.shape_step import sample_and_detect
from offset_pipeline.sync.spark_translation import result_row
from offset_pipeline.sync.translation_step import (
    ReadSettings,
    TranslationJob,
    read_earlier_cycles,
)
from offset_pipeline.sync.work import build_work
from offset_pipeline.translation import TranslationStatus


@dataclass(frozen=True)
class ContinuousSettings:
    """How a continuous run syncs (the asset's config)."""

    group_filter: GroupFilter
    shapes: dict[str, str]
    reads: ReadSettings
    dry_run: bool
    checkpoint: CheckpointSettings  # the cluster names among them: no default
    parallel_groups: int = 16
    checkpoint_s: float = 30.0
    revisit_s: float = 2.0
    # an unsettled group-partition's first wait, doubling up to revisit_s (revisit_rules.unsettled_wait_s);
    # None (or revisit_s): every wait is revisit_s. Off by default: measured, it bought no duplicates
    # behind MirrorMaker 2 and cost CPU behind a two-way mirror (docs/results/compare-mm2.md)
    revisit_first_s: float | None = None
    retry_s: float = 300.0
    local_max_partitions: int = 1000
    min_cycle_s: float = 0.05  # cycles start at most this often: what arrives meanwhile is one batch
    max_sync_age_s: float = 300.0
    # MirrorMaker 2's offset-syncs topics (settings.offset_syncs_topics): read once per cycle, from
    # where the last read stopped; their stamped pairs live in the run's memory
    offset_syncs_topics: tuple[OffsetSyncsTopic, ...] = ()
    # the clusters' commit logs followed: a cycle reads only the groups that committed (cycle_reads.py)
    follow: FollowSettings = FollowSettings()


@dataclass(frozen=True)
class ContinuousIO:
    """What the run reaches, handed in by the Dagster layer (this room imports no resource).

    ``clusters``: cluster name -> its ``KafkaClusterResource``; ``clickhouse``: the
    ``ClickHouseResource``; ``run_spark(job)``: a ``TranslationJob``'s rows, or ``spark_unavailable``
    rows when Spark failed (never raises); ``release_clickhouse()``: let go of the embedded engine's
    data folder between checkpoints; ``yield_to()``, asked at every checkpoint: why the run should end
    now (a stop asked of it, or a fast-forward queued behind it), or None."""

    clusters: Mapping[str, Any]
    clickhouse: Any
    run_spark: Callable[[TranslationJob], list[dict]]
    spark_bound_s: float
    release_clickhouse: Callable[[], None] = lambda: None
    yield_to: Callable[[], str | None] = lambda: None


@dataclass(frozen=True)
class CycleOutcome:
    number: int
    seconds: float
    revisited: Counter  # reason -> group-partitions
    statuses: Counter  # translation status -> group-partitions translated this cycle
    engine: str  # "none", "local" or "spark"
    partitions_written: int
    commit_errors: int
    unavailable: dict[str, str]  # cluster -> why it did not answer this cycle
    stage_seconds: dict[str, float] = field(default_factory=dict)  # read, revisit, decide, translate, commit, record


@dataclass
class RunSummary:
    """What the run did, for the asset's metadata and checks."""

    cycles: int = 0
    cycle_seconds: list[float] = field(default_factory=list)
    revisited: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    engines: Counter = field(default_factory=Counter)
    partitions_written: int = 0
    commit_errors: int = 0
    unavailable_cycles: Counter = field(default_factory=Counter)  # cluster -> cycles it did not answer
    last_unavailable: dict[str, str] = field(default_factory=dict)
    checkpoints: list[CheckpointOutcome] = field(default_factory=list)
    checkpoints_skipped: int = 0
    unrecorded: list[dict] = field(default_factory=list)
    history_error: str | None = None
    no_loss_checked: int = 0
    no_loss_offenders: list[dict] = field(default_factory=list)
    writes_not_landed: int = 0
    bound_offenders: list[dict] = field(default_factory=list)  # translations above their own safe bound
    stopped_by: str = "rollover"
    follow: Any = None  # at the end: what the run saw of the commit logs (cycle_reads.FollowStatus)

    def add(self, outcome: CycleOutcome) -> None:
        self.cycles += 1
        self.cycle_seconds.append(outcome.seconds)
        self.revisited.update(outcome.revisited)
        self.statuses.update(outcome.statuses)
        self.engines[outcome.engine] += 1
        self.partitions_written += outcome.partitions_written
        self.commit_errors += outcome.commit_errors
        for cluster, why in outcome.unavailable.items():
            self.unavailable_cycles[cluster] += 1
            self.last_unavailable[cluster] = why

    def add_no_loss(self, outcome: CheckOutcome) -> None:
        self.no_loss_checked += outcome.metadata["written_partitions"]
        self.writes_not_landed += outcome.metadata["writes_not_landed"]
        if not outcome.passed and len(self.no_loss_offenders) < 50:
            self.no_loss_offenders += list(outcome.metadata["offending_partitions"].data)[: 50 - len(self.no_loss_offenders)]

    def cycle_quantile(self, q: float) -> float | None:
        if not self.cycle_seconds:
            return None
        if len(self.cycle_seconds) == 1:
            return self.cycle_seconds[0]
        return statistics.quantiles(self.cycle_seconds, n=100, method="inclusive")[min(int(q * 100), 99) - 1]


class ContinuousSync:
    """One continuous run (see the module's docstring). ``on_cycle(outcome, state)``, when given, is
    called after every cycle (benchmarks and tests watch the standby offsets through it)."""

    def __init__(self, run_id: str, io: ContinuousIO, settings: ContinuousSettings, log,
                 on_cycle: Callable[[CycleOutcome, ContinuousState], None] | None = None):
        self.run_id, self.io, self.settings, self.log, self.on_cycle = run_id, io, settings, log, on_cycle
        self.clusters = tuple(io.clusters)
        self.state = ContinuousState(self.clusters)
        self.summary = RunSummary()
        self._admin_configs = {name: resource.admin_config for name, resource in io.clusters.items()}
        self._confs = {name: resource.client_config() for name, resource in io.clusters.items()}
        self._snapshot_calls = {name: IsolatedCalls(name) for name in self.clusters}
        self._reads = CycleReads(self._admin_configs, {name: r.client_config for name, r in io.clusters.items()},
                                 settings.group_filter, settings.reads.kafka_timeout_s, self._snapshot_calls,
                                 settings.follow, log)
        self._group_io = IsolatedGroupIO({name: resource.plain() for name, resource in io.clusters.items()})
        self._local = LocalTranslation()
        self._offset_syncs = OffsetSyncsReader(
            settings.offset_syncs_topics, {name: resource.client_config for name, resource in io.clusters.items()})
        self._marks: dict[tuple[str, int], tuple] = {}  # (topic, partition) -> (facts ids, mark, facts)
        self._checkpoints = CheckpointWriter(io.clickhouse, settings.checkpoint, io.release_clickhouse)
        self._number = 0
        self._unavailable: dict[str, str] = {}  # this cycle's clusters that did not answer
        self._stages: dict[str, float] = {}  # this cycle's seconds per stage so far
        self._was_unavailable: dict[str, str] = {}  # the previous cycle's
        self._last_checkpoint_id: str | None = None
        self.last_readiness: list = []  # the newest checkpoint's readiness rows (storage.readiness.ReadinessRow)

    # -- the run -------------------------------------------------------------------------------

    def run(self, run_for_s: float, stop: threading.Event | None = None) -> RunSummary:
        """Cycles until ``run_for_s`` passed or ``stop`` is set; then the last checkpoint. Closes the
        run's child processes."""
        stop = stop or threading.Event()
        deadline = time.monotonic() + run_for_s
        next_checkpoint = time.monotonic() + self.settings.checkpoint_s
        try:
            self._first_cycle()
            while time.monotonic() < deadline and not stop.is_set():
                started = time.monotonic()
                checkpoint_due = started >= next_checkpoint
                # a checkpoint's cycle reads every partition's log facts: the rows it stores are new
                self._record(self.cycle(all_ranges=checkpoint_due))
                if checkpoint_due:
                    self._checkpoint()
                    next_checkpoint = time.monotonic() + self.settings.checkpoint_s
                    waiting = self._ask_yield()
                    if waiting:
                        self.summary.stopped_by = waiting
                        break
                rest = self.settings.min_cycle_s - (time.monotonic() - started)
                if rest > 0:  # at most one cycle per min_cycle_s: commits arriving meanwhile are one batch
                    stop.wait(rest)
                if self._reads.last_kind == "followed":
                    # the next cycle when a commit comes, or when an unsettled partition's wait ends
                    due = self.state.next_unsettled_due_s(time.monotonic(), self.settings.revisit_s,
                                                          self.settings.revisit_first_s)
                    self._reads.wait_for_commits(min(due, max(0.0, deadline - time.monotonic())))
            if stop.is_set():
                self.summary.stopped_by = "stop requested"
            # the last checkpoint holds the run's final state: never skipped for one still in flight
            self._checkpoints.wait(max(60.0, 3 * self.settings.reads.kafka_timeout_s))
            self._collect_checkpoints()
            self._checkpoint()
            self._checkpoints.wait(max(60.0, 3 * self.settings.reads.kafka_timeout_s))
            self._collect_checkpoints()
        finally:
            self.close()
            self.summary.follow = self._reads.report()
        return self.summary

    def _ask_yield(self) -> str | None:
        try:
            return self.io.yield_to()
        except Exception as exc:  # noqa: BLE001 - not knowing is no reason to stop syncing
            self.log.warning(f"offset-sync could not ask whether other work waits: {type(exc).__name__}: {exc}")
            return None

    def close(self) -> None:
        self._reads.close()
        for calls in self._snapshot_calls.values():
            calls.close()
        self._group_io.close()
        self._local.close()

    @property
    def follow_status(self):
        """What the run saw of the commit logs (``continuous/cycle_reads.py``'s ``FollowStatus``)."""
        return self._reads.report()

    def freshness(self, now_s: float | None = None) -> CheckOutcome:
        """``sync_freshness``: each group synced as of the oldest of its partitions' newest sync. A partition
        left alone because nothing changed counts as synced at the newest read (``readiness_facts``)."""
        synced: dict[str, list[float | None]] = {}
        for f in self.state.readiness_facts():
            synced.setdefault(f.group_id, []).append(f.synced_at_s)
        newest = {g: min(times) for g, times in synced.items() if all(t is not None for t in times)}
        return evaluate_sync_freshness(synced, newest, now_s or time.time(), self.settings.max_sync_age_s)

    # -- one cycle -----------------------------------------------------------------------------

    @cyclic_gc_paused()  # as the interval steps: the cycle's rows make no reference cycles (sync/gc_pause.py)
    def cycle(self, all_ranges: bool = False) -> CycleOutcome:
        """One cycle. ``all_ranges``: a followed read reads every partition's log facts too, not only
        those where an offset or a group changed and of the unsettled partitions (``cycle_reads.py``)."""
        started = time.monotonic()
        self._number += 1
        cycle_id = f"{self.run_id}:{self._number}"
        time_ms = int(time.time() * 1000)
        snapshot = self._read(cycle_id, time_ms, all_ranges)
        read_done = time.monotonic()
        tuples = [snapshot_tuple(r) for r in snapshot]
        revisit = partitions_to_revisit(self.state.snapshot_tuples(), tuples, self.state.memory,
                                        self.state.written_by_sync, time.monotonic(), self.settings.revisit_s,
                                        self.settings.retry_s, self._offset_syncs_marks(),
                                        revisit_first_s=self.settings.revisit_first_s)
        self._stages = {"read": read_done - started, "revisit": time.monotonic() - read_done}
        return self._sync(cycle_id, time_ms, snapshot, tuples, revisit, self.state.history(),
                          self.state.previous_committed(), started)

    def _read(self, cycle_id: str, time_ms: int, all_ranges: bool = False):
        reads = self._reads.read(offset_syncs=self._offset_syncs if self.settings.offset_syncs_topics else None,
                                 also=self.state.unsettled_partitions(time.monotonic(), self.settings.revisit_s,
                                                                      self.settings.revisit_first_s),
                                 all_ranges=all_ranges)
        self._unavailable = dict(reads.unavailable)
        self._renew_clients(reads.unavailable)
        return reads.rows(cycle_id, time_ms)

    def _renew_clients(self, unavailable: Mapping[str, str]) -> None:
        """The run's children keep their Kafka clients from cycle to cycle. One that lived through an
        outage of its cluster can stay stuck after the cluster is back, so a cluster that did not
        answer gets new ones (a child start, about a second, per failed cycle; the translation child
        holds consumers of both clusters)."""
        for cluster in unavailable:
            why = f"{cluster} did not answer: new clients for the next cycle"
            self._snapshot_calls[cluster].discard(why)
            self._group_io.discard(cluster, why)
        if unavailable:
            self._local.discard(f"{', '.join(sorted(unavailable))} did not answer: new clients for the next cycle")

    def _sync(self, cycle_id, time_ms, snapshot, tuples, revisit, history, previous_committed,
              started: float) -> CycleOutcome:
        stages = getattr(self, "_stages", {})
        mark = time.monotonic()

        def stage(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            stages[name] = stages.get(name, 0.0) + now - mark
            mark = now

        chosen = [t for t in tuples if (t[1], t[3], int(t[4])) in revisit]
        syncs = self._offset_syncs.facts() if self.settings.offset_syncs_topics else {}
        work = build_work(chosen, self.settings.shapes, self.state.anchors, self.clusters, history,
                          self.state.detected_shapes, caught_up_points=self.state.points, offset_syncs=syncs,
                          offset_syncs_default=self._offset_syncs.direction_facts())
        results = [result_row(r, cycle_id, time_ms) for r in work.undecided]
        stage("decide")
        translated, engine = self._translate(work.work, cycle_id, time_ms)
        results += translated
        stage("translate")
        offenders = bound_offenders(results)
        if offenders:  # the interval mode's blocking check within_safe_bound: a bug, nothing committed
            self.summary.bound_offenders += offenders[: 50 - len(self.summary.bound_offenders)]
            self.log.error(f"offset-sync translations above their own safe bound, no commit this cycle: {offenders[:5]}")
            done = CycleCommits([], [], {}, 0.0)
        else:
            if not self.settings.dry_run:  # before the commits: their echoes may come back before they return
                self._reads.expect(results)
            done = self._commit(results, cycle_id, time_ms, previous_committed)
        stage("commit")
        self.state.record(snapshot, results, done.stored, work.directions, time.monotonic(), tuples,
                          self._offset_syncs_marks(syncs))
        self._log(results, done)
        self.summary.add_no_loss(evaluate_no_loss(done.stored))
        stage("record")
        self._stages = {}
        return CycleOutcome(
            self._number, time.monotonic() - started, Counter(r.value for r in revisit.values()),
            Counter(r["status"] for r in results), engine,
            partitions_written=sum(1 for r in done.stored if r.applied),
            commit_errors=sum(1 for r in done.stored if r.error), unavailable=dict(self._unavailable),
            stage_seconds={k: round(v, 4) for k, v in stages.items()},
        )

    def _offset_syncs_marks(self, syncs: Mapping | None = None) -> dict[tuple[str, int], object]:
        """(topic, partition) -> its offset-sync pairs now (``revisit_rules.offset_syncs_mark``)."""
        if not self.settings.offset_syncs_topics:
            return {}
        by_partition: dict[tuple[str, int], list] = {}
        for (topic, partition, active, standby), facts in (syncs if syncs is not None else self._offset_syncs.facts()).items():
            by_partition.setdefault((topic, partition), []).append((active, standby, facts))
        marks = {}
        for key, sides in by_partition.items():
            # the reader hands an unchanged partition's facts as the same object: its mark is kept
            ids = tuple(id(facts) for *_, facts in sides)
            cached = self._marks.get(key)
            if cached is None or cached[0] != ids:
                cached = self._marks[key] = (ids, offset_syncs_mark(sides), sides)  # sides keep the ids alive
            marks[key] = cached[1]
        for key in [k for k in self._marks if k not in by_partition]:
            del self._marks[key]
        return marks

    def _translate(self, work: list[dict], cycle_id: str, time_ms: int) -> tuple[list[dict], str]:
        if not work:
            return [], "none"
        reads = self.settings.reads
        if partition_count(work) <= self.settings.local_max_partitions:
            return self._local.translate(work, self._confs, cycle_id, time_ms, reads,
                                         read_until=time.time() + reads.read_budget_s), "local"
        job = TranslationJob(work, self._confs, cycle_id, time_ms, reads, self.io.spark_bound_s, set())
        return self.io.run_spark(job), "spark"

    def _commit(self, results: list[dict], cycle_id: str, time_ms: int, previous_committed) -> CycleCommits:
        if not results:
            return CycleCommits([], [], {}, 0.0)
        by_group = translated_by_group(results, None, cycle_id, None)
        context = CycleContext(cycle_id, time_ms, self.settings.dry_run, self.settings.reads.kafka_timeout_s)
        done = commit_groups(by_group, self.io.clusters, context, previous_committed, self.settings.parallel_groups,
                             io=self._group_io)
        self._renew_clients(done.unreachable)
        return done

    def _log(self, results: list[dict], done: CycleCommits) -> None:
        # Problems at INFO, routine lines at DEBUG (monitoring/decision_log.py), as in the interval mode.
        problems = [r["decision"] for r in results if not TranslationStatus(r["status"]).translated
                    and r["status"] not in _SAID_ONCE]
        write_decision_lines(itertools.chain(problems, done.lines(routine=False)))
        write_decision_lines(itertools.chain((r["decision"] for r in results if TranslationStatus(r["status"]).translated),
                                             done.lines(routine=True)), routine=True)

    def _record(self, outcome: CycleOutcome) -> None:
        self.summary.add(outcome)
        for cluster in sorted(set(outcome.unavailable) - set(self._was_unavailable)):
            self.log.warning(f"offset-sync cluster unavailable: {outcome.unavailable[cluster]}; its groups are not "
                             "synced until it answers (checked every cycle)")
        for cluster in sorted(set(self._was_unavailable) - set(outcome.unavailable)):
            self.log.info(f"offset-sync cluster {cluster} answers again (cycle {outcome.number})")
        self._was_unavailable = dict(outcome.unavailable)
        self._collect_checkpoints()
        if self.on_cycle is not None:
            self.on_cycle(outcome, self.state)

    # -- the first cycle and the checkpoints -----------------------------------------------------

    def _first_cycle(self) -> None:
        """The interval mode's cycle: snapshot written first, earlier cycles read back, everything
        translated and committed, then the first checkpoint."""
        started = time.monotonic()
        self._number += 1
        cycle_id = self._checkpoint_id()
        time_ms = int(time.time() * 1000)
        writer = open_writer(self.io.clickhouse, snapshots.ensure_table, translations.ensure_tables, commits.ensure_table,
                             fast_forwards.ensure_table, deferrals.ensure_table, offset_sync_pairs.ensure_table)
        self._restore_offset_syncs(writer.client if writer.outcome.error is None else None)
        snapshot = self._read(cycle_id, time_ms)
        tuples = [snapshot_tuple(r) for r in snapshot]
        snapshots.insert_rows(writer, snapshot)
        client = writer.client if writer.outcome.error is None and not writer.outcome.deferred else None
        earlier = read_earlier_cycles(client, writer.outcome.error or "the snapshot was spooled", cycle_id, tuples,
                                      time_ms)
        self.summary.history_error = earlier.error
        self.state.anchors, self.state.anchors_written = dict(earlier.anchors), dict(earlier.anchors)
        self.state.points = dict(earlier.points)
        self.state.previous_active = dict(earlier.history.previous_active)
        # the recorded standby offsets of the snapshot's group-partitions (recent cycles first)
        partitions: dict[str, list] = {}
        for t in tuples:
            partitions.setdefault(t[1], []).append(SimpleNamespace(topic=t[3], partition=int(t[4])))
        history = read_commit_history(client if earlier.read else None, cycle_id, partitions, self.clusters)
        self._first_shapes(client if earlier.read else None, cycle_id, time_ms, tuples)
        self.io.release_clickhouse()
        revisit = partitions_to_revisit(None, tuples, {}, {}, time.monotonic(), self.settings.revisit_s)
        outcome = self._sync(cycle_id, time_ms, snapshot, tuples, revisit, earlier.history,
                             history.previous_committed, started)
        self.summary.unrecorded = unrecorded_changes(list(self.state.commits.values()), history.recorded)
        for change in self.summary.unrecorded[:20]:
            self.log.warning(f"offset-sync unrecorded standby change: {change}")
        self._record(outcome)
        self._checkpoint(cycle_id, time_ms, with_snapshot=False)

    def _restore_offset_syncs(self, client) -> None:
        """MirrorMaker 2's pairs and stamps earlier runs stored: the run goes on from them (a group
        lagging behind keeps the proofs of the stamps it passed). Without them it reads afresh."""
        if not self.settings.offset_syncs_topics:
            return
        self._offset_syncs, why = restored_reader(
            self.settings.offset_syncs_topics, {name: r.client_config for name, r in self.io.clusters.items()}, client)
        if why:
            self.log.warning(f"offset-sync pairs not restored: {why}")

    def _first_shapes(self, client, cycle_id: str, time_ms: int, tuples: list[tuple]) -> None:
        """The shapes of unconfigured topics for the first cycle, as the interval mode detects them
        (the evidence kept in ClickHouse, and a sample); later checkpoints sample again."""
        shapes = self.settings.checkpoint.shapes
        if client is None or shapes is None:
            return
        try:
            step = sample_and_detect(client, cycle_id, time_ms, tuples, self.settings.shapes, self.clusters,
                                     self._confs, shapes)
        except Exception as exc:  # noqa: BLE001 - unknown shapes: header anchors only until a checkpoint samples
            self.log.warning(f"offset-sync shape sample failed: {type(exc).__name__}: {exc}")
            return
        for error in step.errors:
            self.log.warning(f"offset-sync shape sample failed: {error}")
        self.state.detected_shapes = step.detected()

    def _checkpoint_id(self) -> str:
        return f"{self.run_id}:{self._number}"

    def _checkpoint(self, checkpoint_id: str | None = None, time_ms: int | None = None, *,
                    with_snapshot: bool = True) -> None:
        checkpoint_id = checkpoint_id or self._checkpoint_id()
        if checkpoint_id == self._last_checkpoint_id:
            return  # no cycle since the last one: nothing new to write
        if self._checkpoints.busy():  # the next one carries the newest state anyway
            self.summary.checkpoints_skipped += 1
            return
        self._last_checkpoint_id = checkpoint_id
        checkpoint = self.state.checkpoint(checkpoint_id, time_ms or int(time.time() * 1000),
                                           self.settings.max_sync_age_s)
        checkpoint = replace(checkpoint, offset_sync_rows=self._offset_syncs.take_unstored(),
                             follow_rows=self._reads.checkpoint_rows(checkpoint.checkpoint_id, checkpoint.time_ms,
                                                                     self.run_id))
        self.last_readiness = checkpoint.readiness_rows
        if not with_snapshot:  # the first cycle wrote its snapshot before reading the history
            checkpoint = replace(checkpoint, snapshot_rows=[])
        self._checkpoints.submit(checkpoint)

    def _collect_checkpoints(self) -> None:
        for outcome in self._checkpoints.take_outcomes():
            self.summary.checkpoints.append(outcome)
            if outcome.error:
                self.log.warning(f"offset-sync clickhouse unavailable at checkpoint {outcome.checkpoint_id}: "
                                 f"{outcome.error}; {outcome.rows_spooled} rows spooled, the cycles go on")
            if outcome.detected_shapes is not None and outcome.detected_shapes != self.state.detected_shapes:
                changed = {t for t in set(outcome.detected_shapes) | set(self.state.detected_shapes)
                           if outcome.detected_shapes.get(t) != self.state.detected_shapes.get(t)}
                self.state.detected_shapes = dict(outcome.detected_shapes)
                self.state.forget_topics(changed)


_SAID_ONCE = {TranslationStatus.CLUSTER_UNAVAILABLE.value, TranslationStatus.SPARK_UNAVAILABLE.value,
              TranslationStatus.TRANSLATION_DEFERRED.value}
