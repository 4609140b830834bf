"""Failover trials on real clusters: does a group restarted on its standby lose or repeat records?

With the mirror and traffic running (the caller starts them), a round of trials goes:

1. every trial's consumer group runs on its active cluster (a :class:`GroupRunner` that commits as
   it goes and writes the id of every record it processed) while sync cycles run back to back;
2. each group stops at its own random moment (it commits what it processed and leaves), counted
   from the end of the first cycle that saw it running (a cycle whose decision for one of its
   partitions is not ``skipped_untranslated``): a group that joined and left between two snapshots
   gives the sync no direction to go by, as it would not in production, and a trial of it tests
   the harness's timing, not the sync (trial 0006 of the test, stopping 3.1 s after its start,
   sometimes had members for under a second, between the first two cycles);
3. sync cycles go on until every trial partition has a committed standby offset from a cycle that
   started after its group stopped (or ``max_cycles_after_stop`` is reached: "unsynced");
4. once the mirror has copied everything the group processed, the group is restarted on the
   standby cluster with a subscribing consumer: it resumes from the synced offsets and reads to
   the standby's log end.

The records are counted by their unique ids (devstack/traffic.py), never by offsets:

* **lost**: a record of the standby below the synced offset ``t`` that the group never processed
  on the active cluster (NO-LOSS, docs/concepts/no-loss.md);
* **duplicates**: records the restarted group read again although it had processed them. The group
  stopped before the sync that counts, so every duplicate here is the translation's own (a real
  disaster adds the records processed since the last cycle).

The sync cycle is a callable (:data:`SyncCycle`) so tests and ``bench/`` run the real assets
(:func:`dagster_sync_cycle`) and nothing here knows how a cycle is made.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from devstack.consumers import ConsumerGroupSpec, GroupRunner, record_id
from devstack.traffic import TopicTraffic

log = logging.getLogger("offset_pipeline.failover_trials")

GroupPartition = tuple[str, str, int]  # (group, topic, partition)


@dataclass(frozen=True)
class CycleDecision:
    """What one cycle did for one group-partition: the commit decision and why."""

    decision: str
    translation_status: str = ""
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.decision} ({self.translation_status}: {self.reason})" if self.translation_status else self.decision


#: One full sync cycle; returns what it decided for every group-partition it handled.
SyncCycle = Callable[[], Mapping[GroupPartition, CycleDecision]]

SYNCED_DECISIONS = frozenset({"commit", "unchanged", "rewind_after_reset"})


@dataclass(frozen=True)
class TrialGroup:
    """One trial: a fresh consumer group reading one topic on ``active``, stopped after ``stop_after_s``."""

    trial_id: str
    group_id: str
    topic: TopicTraffic
    active: str
    standby: str
    stop_after_s: float

    @property
    def shape(self) -> str:
        """``two_way``, ``one_way_from_active`` (translated from the producing side) or
        ``one_way_from_standby`` (the group reads the copies)."""
        if self.topic.two_way:
            return "two_way"
        return "one_way_from_active" if self.topic.producers_on[0] == self.active else "one_way_from_standby"

    @property
    def pattern(self) -> str:
        """The topic's timestamp pattern, ``+txn`` for transactional topics."""
        return self.topic.timestamps + ("+txn" if self.topic.transactional else "")


@dataclass(frozen=True)
class TrialOutcome:
    trial: TrialGroup
    processed: int
    committed_active: dict[int, int]
    synced: dict[int, int | None]  # the standby offset the group restarted from (None: none)
    decisions: dict[int, CycleDecision]  # the last cycle's decision per partition
    cycles_after_stop: int
    lost: int
    duplicates: int
    restart_read: int
    resumed_at_synced: bool  # the restarted group read exactly the standby's records from t on
    lost_ids: tuple[str, ...] = ()

    @property
    def synced_all(self) -> bool:
        return all(t is not None for t in self.synced.values()) and all(
            d.decision in SYNCED_DECISIONS for d in self.decisions.values()
        )


def plan_trials(
    plan: Iterable[TopicTraffic],
    clusters: tuple[str, str],
    count: int,
    *,
    seed: int,
    prefix: str = "trial",
    stop_range_s: tuple[float, float] = (1.0, 6.0),
) -> list[TrialGroup]:
    """``count`` trials cycling over every (topic, active cluster) pair of ``plan``: the producing
    side(s), and the copy side of one-way topics. Stop moments are drawn from ``stop_range_s``."""
    rng = random.Random(seed)
    pairs = [(t, active) for t in plan for active in clusters]
    run = uuid.uuid4().hex[:6]
    trials = []
    for i in range(count):
        topic, active = pairs[i % len(pairs)]
        standby = clusters[1] if active == clusters[0] else clusters[0]
        trials.append(
            TrialGroup(
                trial_id=f"{i:04d}",
                group_id=f"{prefix}-{run}-{i:04d}",
                topic=topic,
                active=active,
                standby=standby,
                stop_after_s=round(rng.uniform(*stop_range_s), 3),
            )
        )
    return trials


@dataclass
class _Running:
    trial: TrialGroup
    runner: GroupRunner
    stop: threading.Event
    thread: threading.Thread
    path: Path
    stopped_at: float | None = None
    armed: bool = False  # its stop timer runs


@dataclass
class FailoverTrials:
    """Runs rounds of trials against real clusters. ``bootstraps``: cluster name -> bootstrap."""

    bootstraps: Mapping[str, str]
    sync_cycle: SyncCycle
    work_dir: Path
    max_cycles_after_stop: int = 4
    # a group no cycle has seen running after this many cycles gets its stop timer anyway (and
    # then counts as unsynced): a round always ends
    max_cycles_unseen: int = 20
    # how long a trial's count waits for the mirror to copy what the group processed: a MirrorMaker 2
    # killed and restarted mid-round took more than 60 s to copy again on a loaded 2-core machine
    mirror_wait_s: float = 180.0
    restart_timeout_s: float = 60.0
    commit_every_records: int = 10
    commit_interval_s: float = 0.5
    cycles: int = field(default=0, init=False)

    def _cycle(self) -> Mapping[GroupPartition, CycleDecision]:
        self.cycles += 1
        return self.sync_cycle()

    def run_round(self, trials: list[TrialGroup]) -> list[TrialOutcome]:
        """Run ``trials`` together (see the module docstring) and count each one."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        running = [self._start(trial) for trial in trials]
        last: dict[GroupPartition, CycleDecision] = {}
        after_stop: dict[str, int] = {t.group_id: 0 for t in trials}
        # Cycles while groups run: directions by members, anchors kept, as in production. Each
        # group stops on its own timer, whatever the cycle is doing.
        round_cycles = 0
        while any(r.stopped_at is None for r in running):
            cycle_started = time.monotonic()
            last.update(self._cycle())
            round_cycles += 1
            self._count_after_stop(running, cycle_started, after_stop)
            for r in running:  # the stop timers: from the first cycle that saw the group running
                if not r.armed and (self._seen(r.trial, last) or round_cycles >= self.max_cycles_unseen):
                    r.armed = True
                    timer = threading.Timer(r.trial.stop_after_s, r.stop.set)
                    timer.daemon = True
                    timer.start()
        for r in running:
            r.thread.join(timeout=60)
            if r.thread.is_alive():
                raise RuntimeError(f"trial group {r.trial.group_id} did not stop")
        committed = {r.trial.group_id: self._committed(r.trial.active, r.trial.group_id, r.trial.topic) for r in running}
        # Cycles after every stop, until each trial is synced from its final offsets.
        while True:
            pending = [
                r for r in running
                if after_stop[r.trial.group_id] < 1
                or (after_stop[r.trial.group_id] < self.max_cycles_after_stop and not self._synced(r.trial, last))
            ]
            if not pending:
                break
            cycle_started = time.monotonic()
            last.update(self._cycle())
            self._count_after_stop(running, cycle_started, after_stop)
        return [self._outcome(r, committed[r.trial.group_id], last, after_stop[r.trial.group_id]) for r in running]

    # -- the groups on the active cluster --------------------------------------------------------
    def _start(self, trial: TrialGroup) -> _Running:
        spec = ConsumerGroupSpec(
            trial.group_id, trial.active, (trial.topic.name,),
            commit_every_records=self.commit_every_records, commit_interval_s=self.commit_interval_s,
        )
        path = self.work_dir / f"{trial.group_id}.processed.jsonl"
        runner = GroupRunner(spec, self.bootstraps[trial.active], path)
        stop = threading.Event()
        running = _Running(trial, runner, stop, threading.Thread(), path)

        def run() -> None:
            try:
                runner.run(stop)  # on stop: commits what it processed and leaves the group
            finally:
                running.stopped_at = time.monotonic()

        running.thread = threading.Thread(target=run, daemon=True, name=f"trial-{trial.trial_id}")
        running.thread.start()  # its stop timer starts once a cycle has seen it (run_round)
        return running

    @staticmethod
    def _count_after_stop(running: list[_Running], cycle_started: float, after_stop: dict[str, int]) -> None:
        for r in running:
            if r.stopped_at is not None and cycle_started >= r.stopped_at:
                after_stop[r.trial.group_id] += 1

    @staticmethod
    def _seen(trial: TrialGroup, last: Mapping[GroupPartition, CycleDecision]) -> bool:
        """A cycle decided a direction for the group (it saw the group running, or its offsets move)."""
        return any(d.decision != "skipped_untranslated" for (g, _, _), d in last.items() if g == trial.group_id)

    @staticmethod
    def _synced(trial: TrialGroup, last: Mapping[GroupPartition, str]) -> bool:
        decisions = [d.decision for (g, _, _), d in last.items() if g == trial.group_id]
        return bool(decisions) and all(d in SYNCED_DECISIONS for d in decisions)

    # -- reads ----------------------------------------------------------------------------------
    def _consumer(self, cluster: str, group_id: str | None = None, **extra) -> Consumer:
        return Consumer({
            "bootstrap.servers": self.bootstraps[cluster],
            "group.id": group_id or f"offset-pipeline-trial-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "log_level": 3,
            **extra,
        })

    def _committed(self, cluster: str, group_id: str, topic: TopicTraffic) -> dict[int, int | None]:
        consumer = self._consumer(cluster, group_id)
        try:
            parts = consumer.committed([TopicPartition(topic.name, p) for p in range(topic.partitions)], timeout=30)
        finally:
            consumer.close()
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in parts}

    def _log_end(self, cluster: str, topic: str, partitions: int) -> dict[int, int]:
        consumer = self._consumer(cluster)
        try:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(partitions)
            }
        finally:
            consumer.close()

    def _read_all(self, cluster: str, topic: str, ends: Mapping[int, int]) -> dict[int, list[tuple[int, str | None]]]:
        """(offset, id) of every real record below ``ends`` per partition (read_committed)."""
        out: dict[int, list[tuple[int, str | None]]] = {p: [] for p in ends}
        consumer = self._consumer(cluster)
        todo = {p for p, end in ends.items() if end > 0}
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in todo])
            deadline = time.monotonic() + 120
            while todo:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic} on {cluster} to {dict(ends)} timed out")
                for msg in consumer.consume(500, timeout=0.5):
                    if msg.error() or msg.offset() >= ends[msg.partition()]:
                        continue
                    out[msg.partition()].append((msg.offset(), record_id(msg.value())))
                for tp in consumer.position([TopicPartition(topic, p) for p in list(todo)]):
                    if tp.offset >= ends[tp.partition]:
                        todo.discard(tp.partition)
        finally:
            consumer.close()
        return out

    def _restart_on_standby(
        self, trial: TrialGroup, last_offsets: Mapping[int, int | None]
    ) -> dict[int, list[tuple[int, str | None]]]:
        """The group itself, subscribing on the standby: what it reads from its committed offsets
        until it has read the record at ``last_offsets[p]`` (the standby's last real record at or
        after its start; None: nothing to read). A partition that never gets there (it resumed
        past it) is given up on after ``restart_timeout_s`` and shows as not resumed."""
        consumer = self._consumer(trial.standby, trial.group_id, **{"session.timeout.ms": 10000})
        out: dict[int, list[tuple[int, str | None]]] = {p: [] for p in last_offsets}
        todo = {p for p, last in last_offsets.items() if last is not None}
        try:
            consumer.subscribe([trial.topic.name])
            deadline = time.monotonic() + self.restart_timeout_s
            while todo and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                p = msg.partition()
                if last_offsets.get(p) is None or msg.offset() > last_offsets[p]:
                    continue
                out[p].append((msg.offset(), record_id(msg.value())))
                if msg.offset() >= last_offsets[p]:
                    todo.discard(p)
        finally:
            consumer.close()
        return out

    def _processed(self, path: Path) -> dict[int, list[tuple[int, str]]]:
        out: dict[int, list[tuple[int, str]]] = {}
        if not path.exists():
            return out
        with open(path) as f:
            for line in f:
                entry = json.loads(line)
                out.setdefault(entry["partition"], []).append((entry["offset"], entry["id"]))
        return out

    # -- counting -------------------------------------------------------------------------------
    def _outcome(self, r: _Running, committed: dict[int, int | None], last, cycles_after_stop: int) -> TrialOutcome:
        trial = r.trial
        parts = range(trial.topic.partitions)
        processed = self._processed(r.path)
        processed_ids = {i for records in processed.values() for _, i in records}
        # What the group processed is exactly what lies below its committed offsets.
        for p in parts:
            c = committed.get(p)
            beyond = [o for o, _ in processed.get(p, []) if c is None or o >= c]
            if beyond:
                raise AssertionError(f"{trial.group_id}[{p}] processed offsets {beyond[:5]} at or after c={c}")
        # ... and everything below its committed offsets was processed: a group that commits
        # records it never processed loses them itself, whatever the sync does.
        active_records = self._read_all(trial.active, trial.topic.name, {p: committed.get(p) or 0 for p in parts})
        skipped = [
            (p, o, i) for p in parts for o, i in active_records[p] if i not in processed_ids
        ]
        if skipped:
            raise AssertionError(
                f"{trial.group_id} committed past records it never processed on {trial.active}: {skipped[:5]} "
                f"(committed {committed}, processed up to "
                f"{ {p: max((o for o, _ in processed.get(p, [])), default=None) for p in parts} })"
            )
        synced = self._committed(trial.standby, trial.group_id, trial.topic)
        decisions = {p: d for (g, t, p), d in last.items() if g == trial.group_id and t == trial.topic.name}
        # Wait for the mirror to have copied everything the group processed: the copies are what
        # the restarted group would read again.
        deadline = time.monotonic() + self.mirror_wait_s
        while True:
            ends = self._log_end(trial.standby, trial.topic.name, trial.topic.partitions)
            standby_records = self._read_all(trial.standby, trial.topic.name, ends)
            on_standby = {i for records in standby_records.values() for _, i in records}
            missing = processed_ids - on_standby
            if not missing:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} processed records of {trial.group_id} never reached {trial.standby}")
            time.sleep(0.5)
        # Where the group resumes: its synced offset, or the log start when it has none.
        starts = {p: synced.get(p) if synced.get(p) is not None else 0 for p in parts}
        last_offsets = {
            p: max((o for o, _ in standby_records[p] if o >= starts[p]), default=None) for p in parts
        }
        restarted = self._restart_on_standby(trial, last_offsets)
        lost_ids, resumed = [], True
        for p in parts:
            t = synced.get(p)
            if t is not None:
                lost_ids += [i for o, i in standby_records[p] if o < t and i not in processed_ids]
            expected = [o for o, _ in standby_records[p] if o >= starts[p]]
            if [o for o, _ in restarted[p]] != expected:
                resumed = False  # it skipped, repeated or reordered records of [t, end)
        read_again = [i for records in restarted.values() for _, i in records if i in processed_ids]
        return TrialOutcome(
            trial=trial,
            processed=len(processed_ids),
            committed_active={p: c for p, c in committed.items() if c is not None},
            synced=synced,
            decisions=decisions,
            cycles_after_stop=cycles_after_stop,
            lost=len(lost_ids),
            duplicates=len(read_again),
            restart_read=sum(len(v) for v in restarted.values()),
            resumed_at_synced=resumed,
            lost_ids=tuple(sorted(map(str, lost_ids))[:10]),
        )


def summarize(outcomes: Iterable[TrialOutcome]) -> list[dict]:
    """Per (shape, timestamp pattern): trials, lost, duplicates (total, max, share of trials with
    none), unsynced trials, resumed-at-synced failures. Rows sorted by shape and pattern."""
    buckets: dict[tuple[str, str], list[TrialOutcome]] = {}
    for o in outcomes:
        buckets.setdefault((o.trial.shape, o.trial.pattern), []).append(o)
    rows = []
    for (shape, pattern), items in sorted(buckets.items()):
        dups = [o.duplicates for o in items]
        rows.append({
            "shape": shape, "pattern": pattern, "trials": len(items), "lost": sum(o.lost for o in items),
            "duplicates": sum(dups), "max_duplicates": max(dups),
            "zero_duplicate_share": sum(1 for d in dups if d == 0) / len(items),
            "unsynced": sum(1 for o in items if not o.synced_all),
            "not_resumed_at_synced": sum(1 for o in items if not o.resumed_at_synced),
            "processed": sum(o.processed for o in items),
        })
    return rows


def format_summary(rows: list[dict]) -> str:
    header = f"{'shape':<22}{'pattern':<20}{'trials':>7}{'lost':>6}{'dups':>7}{'max':>6}{'0-dup':>8}{'unsynced':>10}{'processed':>11}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['shape']:<22}{r['pattern']:<20}{r['trials']:>7}{r['lost']:>6}{r['duplicates']:>7}"
            f"{r['max_duplicates']:>6}{r['zero_duplicate_share']:>8.0%}{r['unsynced']:>10}{r['processed']:>11}"
        )
    total = Counter()
    for r in rows:
        total.update({k: r[k] for k in ("trials", "lost", "duplicates", "unsynced", "processed")})
    lines.append(
        f"{'all':<42}{total['trials']:>7}{total['lost']:>6}{total['duplicates']:>7}{'':>6}{'':>8}"
        f"{total['unsynced']:>10}{total['processed']:>11}"
    )
    return "\n".join(lines)


def dagster_sync_cycle(
    resources: Mapping[str, object],
    *,
    group_include: str,
    topic_shapes: Mapping[str, str],
    extra_run_config: Mapping[str, dict] | None = None,
    console_log_level: str | None = None,
) -> SyncCycle:
    """A :data:`SyncCycle` that materializes the project's ``offset_sync`` assets in this process
    (the same assets the sensor's job runs) and returns this run's commit decisions."""
    import dagster as dg

    from offset_pipeline.assets import all_assets
    from offset_pipeline.storage.commits import TABLE as COMMITS_TABLE

    sync_assets = [
        a for a in all_assets
        if isinstance(a, dg.AssetsDefinition) and set(a.group_names_by_key.values()) == {"offset_sync"}
    ]
    ops = {
        "offset_snapshot": {"config": {"group_include": group_include}},
        "offset_translations": {"config": {"topic_shapes": dict(topic_shapes)}},
    }
    for op, config in (extra_run_config or {}).items():
        ops.setdefault(op, {}).setdefault("config", {}).update(config)

    def cycle() -> dict[GroupPartition, CycleDecision]:
        run_config: dict = {"ops": ops}
        if console_log_level:  # e.g. "WARNING": a benchmark's table is not drowned in step events
            run_config["loggers"] = {"console": {"config": {"log_level": console_log_level}}}
        result = dg.materialize(sync_assets, resources=dict(resources), run_config=run_config)
        if not result.success:
            raise RuntimeError(f"sync cycle {result.run_id} failed")
        client = resources["clickhouse"].get_client()
        rows = client.query(
            f"SELECT group_id, topic, partition, decision, translation_status, reason FROM {COMMITS_TABLE} "
            f"WHERE snapshot_id = {{sid:String}}",
            parameters={"sid": result.run_id},
        ).result_rows
        return {(g, t, int(p)): CycleDecision(d, status, reason) for g, t, p, d, status, reason in rows}

    return cycle
