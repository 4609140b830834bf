"""Side by side with MirrorMaker 2: failover cost and freshness of the standby offsets, on the same
clusters, traffic and consumer groups, measured in one run (issue 8).

    bin/compare-mm2 [--measure-s 600] [--warmup-s 90] [--settle-s 90] [--rate 10] [--seed 7]

Two scratch KRaft clusters. One-way topics produced on idc1 (increasing timestamps, batches of 10
records sharing one timestamp, a quarter of the records 2-10 s late), two partitions each, read on
idc1 by two consumer groups each. Two real MirrorMaker 2 instances (dedicated mode, jars from Maven
Central) mirror them to idc2 with ``IdentityReplicationPolicy`` and ``sync.group.offsets.enabled``:
one with MM2's defaults over the ``cmp.defaults.*`` topics, one tuned (``offset.lag.max=0``,
one-second intervals) over the ``cmp.tuned.*`` topics. This project's sync cycle runs over every
group at the same time, back to back, in dry-run (MM2 owns the groups' offsets on idc2). MM2 writes
no origin headers, so the translation uses its timestamp strategy.

While it runs, the groups report each commit on idc1 as they make it (time and offsets), MM2's
group offsets on idc2 and idc2's log ends are polled every second, and every cycle's standby offsets
are kept. Afterwards both logs are
read back and every record matched to its copy by its id. Then:

* **disaster trials**: every second of the measured window and every group is a failover at that
  moment: the group restarts on idc2 at the standby offset it had then (MM2's last write; the last
  cycle finished before then), and reads the idc2 log as it stood then. Lost and duplicated
  records are counted by identity (bench/mm2/counting.py). Our cycles are also taken every 30 s
  only (the sensor's default cadence), from the same cycles;
* **planned switchover**: at the end the groups stop; after ``--settle-s`` each system's final
  standby offsets are counted the same way (what a planned move costs once the sync caught up);
* **staleness**: how long the group had been past the position the standby offset restarts it
  from, per group-partition and second (median and max).
"""

from __future__ import annotations

import argparse
import logging
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _clusters import ScratchClusters
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from continuous_run import BenchContinuousRun
from mm2.counting import CommitSeries, active_position, failover_cost, staleness_s
from mm2.mirrormaker import TUNED, MirrorMaker2, mm2_jars

from offset_pipeline.monitoring.decision_log import LOGGER_NAME
from devstack.consumers import ConsumerGroupSpec, GroupRunner, record_id
from devstack.failover_trials import dagster_sync_cycle
from devstack.records import read_partition
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.storage.translations import TRANSLATIONS_TABLE

PREFIX = "cmp."
SETTINGS = {"defaults": {}, "tuned": TUNED}
PATTERNS = {"increasing": 1, "equal_batches": 10, "out_of_order": 1}  # pattern -> records per timestamp
PARTITIONS = 2
GROUPS_PER_TOPIC = 2
SLOW_CADENCE_S = 30.0

GP = tuple[str, str, int]  # group, topic, partition


def plan(rate: float) -> list[TopicTraffic]:
    return [
        TopicTraffic(f"{PREFIX}{setting}.{pattern}", PARTITIONS, ("idc1",), pattern, rate_per_s=rate, batch_size=batch)
        for setting in SETTINGS for pattern, batch in PATTERNS.items()
    ]


def setting_of(topic: str) -> str:
    return topic.split(".")[1]


def pattern_of(topic: str) -> str:
    return topic.split(".")[2]


# -- what runs while we measure ---------------------------------------------------------------------

@dataclass
class Recorder:
    """Polls, every ``interval_s``: each group's committed offsets on idc2 (MM2's writes), and idc2's
    log ends. The groups' commits on idc1 come from the groups themselves (:meth:`on_commit`), at the
    time each commit call started: a poll a second old made a sync that had read a newer commit look
    like it skipped records (a false loss), once its cycles got shorter than the poll."""

    bootstraps: dict[str, str]
    groups: dict[str, str]  # group -> topic
    interval_s: float = 1.0
    active: dict[GP, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    mm2: dict[GP, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    standby_end: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # transient read errors, by name

    def on_commit(self, group: str):
        """``GroupRunner``'s ``on_commit`` for ``group``: its committed offsets, exactly when committed."""
        lock = threading.Lock()

        def record(partitions: list[tuple[str, int, int]], at: float) -> None:
            with lock:
                for topic, partition, offset in partitions:
                    self.active[(group, topic, partition)].append((at, offset))

        return record

    def run(self, stop: threading.Event) -> None:
        admins = {c: AdminClient({"bootstrap.servers": b, "log_level": 3}) for c, b in self.bootstraps.items()}
        # A consumer per group and cluster that never joins its group (the group stays empty on
        # idc2, as MM2 requires) and only fetches committed offsets. The admin client's offset
        # fetch crashed librdkafka here (a segfault in rd_kafka_cgrp_op) for groups not yet on idc2.
        readers = {
            ("idc2", g): Consumer({"bootstrap.servers": self.bootstraps["idc2"], "group.id": g,
                                   "enable.auto.commit": False, "log_level": 3})
            for g in self.groups
        }
        topics = sorted(set(self.groups.values()))
        while not stop.is_set():
            started = time.time()
            # The log ends first: a copy counted as there was there before the offsets were read.
            specs = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(PARTITIONS)}
            try:
                ends = {tp: f.result(timeout=10).offset for tp, f in admins["idc2"].list_offsets(specs).items()}
            except KafkaException as exc:
                self.errors[str(exc.args[0].name())] += 1
                stop.wait(self.interval_s)
                continue
            now = time.time()
            for tp, end in ends.items():
                self.standby_end[(tp.topic, tp.partition)].append((now, end))
            for cluster, store in (("idc2", self.mm2),):
                for g, topic in self.groups.items():
                    try:
                        partitions = readers[(cluster, g)].committed(
                            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
                    except KafkaException as exc:  # e.g. NOT_COORDINATOR while a group's coordinator loads
                        self.errors[str(exc.args[0].name())] += 1
                        continue  # this poll has no value for the group: the previous one stands
                    now = time.time()
                    for tp in partitions:
                        if tp.offset >= 0:
                            store[(g, tp.topic, tp.partition)].append((now, tp.offset))
            stop.wait(max(0.0, self.interval_s - (time.time() - started)))
        for reader in readers.values():
            reader.close()


def outcome_keys(outcome, state) -> set:
    """The group-partitions a continuous cycle translated (their memory was renewed by it)."""
    newest = max((m.translated_at_s for m in state.memory.values()), default=None)
    return {k for k, m in state.memory.items() if m.translated_at_s == newest}


@dataclass
class OurSync:
    """This project's sync cycles back to back (dry-run); the standby offset ``t`` of every cycle."""

    cycle: object
    clickhouse: ClickHouseResource
    cycles: list[tuple[float, float, dict[GP, int]]] = field(default_factory=list)  # (start, end, t per gp)
    statuses: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    examples: dict[str, str] = field(default_factory=dict)  # status -> one reason it was given
    failures: int = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.time()
            try:
                self.cycle()
            except Exception as exc:  # noqa: BLE001 - counted and shown; the comparison goes on
                self.failures += 1
                logging.getLogger("mm2_comparison").warning("sync cycle failed: %s", exc)
                continue
            ended = time.time()
            rows = self.clickhouse.get_client().query(
                f"SELECT group_id, topic, partition, standby_offset, status, reason FROM {TRANSLATIONS_TABLE} "
                f"WHERE cycle_time = (SELECT max(cycle_time) FROM {TRANSLATIONS_TABLE})"
            ).result_rows
            offsets = {}
            for g, t, p, offset, status, reason in rows:
                self.statuses[status] += 1
                self.examples.setdefault(status, f"{g} {t}[{p}]: {reason}")
                if offset is not None:
                    offsets[(g, t, int(p))] = int(offset)
            self.cycles.append((started, ended, offsets))

    def watch(self, outcome, state) -> None:
        """A continuous run's cycle (``--our-sync continuous``): every group-partition's standby offset now."""
        ended = time.time()
        offsets = {}
        for key, row in state.results.items():
            if key in outcome_keys(outcome, state):
                self.statuses[row["status"]] += 1
                self.examples.setdefault(row["status"], f"{key[0]} {key[1]}[{key[2]}]: {row['reason']}")
            if row["standby_offset"] is not None:
                offsets[key] = int(row["standby_offset"])
        self.cycles.append((ended - outcome.seconds, ended, offsets))

    def series(self, cadence_s: float | None) -> dict[GP, list[tuple[float, int]]]:
        """Per group-partition, (time it took effect, t); with ``cadence_s``, only cycles started at
        least that long after the previous one taken (the sensor's cadence, from the same cycles)."""
        out: dict[GP, list[tuple[float, int]]] = defaultdict(list)
        last_start = None
        for start, end, offsets in self.cycles:
            if cadence_s is not None and last_start is not None and start < last_start + cadence_s:
                continue
            last_start = start
            for gp, t in offsets.items():
                out[gp].append((end, t))
        return out


class IdleMember:
    """A member of ``group`` on ``bootstrap`` that polls (to stay in the group) and never commits."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "log_level": 3})
        self.consumer.subscribe([topic])
        self.thread = threading.Thread(target=self._poll, daemon=True, name=f"idle-{group}")
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.2)
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


# -- reading the logs back --------------------------------------------------------------------------

def copies(bootstraps: dict[str, str], topic: str, partition: int) -> np.ndarray:
    """``copy_of`` for bench/mm2/counting.py: the idc1 offset of the record at each idc2 offset."""
    active = {record_id(r.value): r.offset for r in read_partition(bootstraps["idc1"], topic, partition, timeout_s=300)}
    active.pop(None, None)
    standby = read_partition(bootstraps["idc2"], topic, partition, timeout_s=300)
    out = np.full(max((r.offset for r in standby), default=-1) + 1, -1, dtype=np.int64)
    for r in standby:
        out[r.offset] = active.get(record_id(r.value), -1)
    return out


# -- the table --------------------------------------------------------------------------------------

@dataclass
class Row:
    system: str
    setting: str
    trials: int = 0
    unsynced: int = 0
    lost: int = 0
    trials_with_loss: int = 0
    duplicated: list[int] = field(default_factory=list)
    staleness: list[float] = field(default_factory=list)
    planned_lost: int = 0
    planned_duplicated: int = 0
    planned_trials: int = 0
    all_synced_at: float | None = None  # when the last group-partition got its first standby offset


def evaluate(row: Row, groups: dict[str, str], standby: dict[GP, list[tuple[float, int]]], recorder: Recorder,
             copy_of: dict[tuple[str, int], np.ndarray], samples: list[float], final_at: float) -> Row:
    def series(points: list[tuple[float, int]]) -> CommitSeries:
        return CommitSeries([w for w, _ in points], [v for _, v in points])

    active = {gp: series(points) for gp, points in recorder.active.items()}
    standby_at = {gp: series(points) for gp, points in standby.items()}
    ends = {tp: series(points) for tp, points in recorder.standby_end.items()}
    empty = CommitSeries([], [])
    firsts = [standby_at[(g, t, p)].times[0] if standby_at.get((g, t, p), empty).times else None
              for g, t in groups.items() for p in range(PARTITIONS)]
    row.all_synced_at = None if None in firsts else max(firsts)
    for group, topic in groups.items():
        gps = [(group, topic, p) for p in range(PARTITIONS)]
        for s in samples + [final_at]:
            lost = duplicated = 0
            synced = True
            for gp in gps:
                c = active[gp].at(s) if gp in active else None
                g = standby_at.get(gp, empty).at(s)
                end = ends.get((topic, gp[2]), empty).at(s) or 0
                if c is None:
                    continue  # the group had not committed yet: nothing to fail over
                if g is None:
                    synced = False
                    continue
                cost = failover_cost(copy_of[(topic, gp[2])], c, g, end)
                lost, duplicated = lost + cost.lost, duplicated + cost.duplicated
                if s != final_at:
                    row.staleness.append(staleness_s(active[gp], s, active_position(copy_of[(topic, gp[2])], g, end)))
            if s == final_at:
                row.planned_trials += 1
                row.planned_lost += lost
                row.planned_duplicated += duplicated
                continue
            row.trials += 1
            if not synced:
                row.unsynced += 1
                continue
            row.lost += lost
            row.trials_with_loss += lost > 0
            row.duplicated.append(duplicated)
    return row


def format_table(rows: list[Row], since: float) -> str:
    header = (f"{'system':<16}{'setting':<36}{'1st all':>8}{'trials':>7}{'no offset':>10}{'lost':>6}{'dup mean':>9}{'dup p50':>8}"
              f"{'dup max':>8}{'0-dup':>7}{'stale p50':>10}{'stale max':>10}{'planned lost':>13}{'planned dup':>12}")
    lines = [header, "-" * len(header)]
    for r in rows:
        d = r.duplicated or [0]
        st = r.staleness or [0.0]
        first = f"{r.all_synced_at - since:.0f}s" if r.all_synced_at is not None else "never"
        lines.append(
            f"{r.system:<16}{r.setting:<36}{first:>8}{r.trials:>7}{r.unsynced:>10}{r.lost:>6}{statistics.mean(d):>9.1f}"
            f"{statistics.median(d):>8.0f}{max(d):>8}{sum(1 for x in d if x == 0) / len(d):>7.0%}"
            f"{statistics.median(st):>9.1f}s{max(st):>9.1f}s{r.planned_lost:>13}{r.planned_duplicated:>12}"
        )
    return "\n".join(lines)


# -- the run ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure-s", type=float, default=600.0, help="the measured window (disaster trials)")
    parser.add_argument("--warmup-s", type=float, default=120.0, help="after MM2 starts, before measuring")
    parser.add_argument("--settle-s", type=float, default=90.0, help="after the groups stop (planned switchover)")
    parser.add_argument("--rate", type=float, default=10.0, help="records per second per topic")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--our-sync", choices=("continuous", "cycles"), default="continuous",
                        help="continuous: the default mode's run (dry run); cycles: full cycles back to back, "
                             "and every 30 s from the same cycles (the interval mode)")
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the scratch brokers and MM2 processes are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    started = time.monotonic()
    print(f"MirrorMaker 2 jars: {mm2_jars()}", flush=True)
    traffic = plan(args.rate)
    groups = {f"{t.name}.g{k}": t.name for t in traffic for k in range(GROUPS_PER_TOPIC)}
    with ScratchClusters() as clusters, tempfile.TemporaryDirectory(prefix="offset-pipeline-mm2-") as scratch:
        work = Path(scratch)
        bootstraps = clusters.bootstraps
        decisions = logging.getLogger(LOGGER_NAME)  # the sync's decision lines to a file, not the table
        handler = logging.FileHandler(work / "decisions.log")
        decisions.handlers, decisions.propagate = [handler], False
        ensure_topics(traffic, bootstraps)
        stop_traffic, stop_groups, stop_watch = threading.Event(), threading.Event(), threading.Event()
        generator = TrafficGenerator(traffic, bootstraps, seed=args.seed)
        threads = [threading.Thread(target=generator.run, args=(stop_traffic,), daemon=True, name="traffic")]
        group_threads = []
        recorder = Recorder(bootstraps, groups)
        for group, topic in groups.items():
            runner = GroupRunner(ConsumerGroupSpec(group, "idc1", (topic,), commit_every_records=10,
                                                   commit_interval_s=1.0), bootstraps["idc1"],
                                 on_commit=recorder.on_commit(group))
            group_threads.append(threading.Thread(target=runner.run, args=(stop_groups,), daemon=True, name=group))
        for thread in threads + group_threads:
            thread.start()
        time.sleep(15)  # the groups have committed before MM2 starts, so its first group scan finds them
        mirrors = [
            MirrorMaker2(setting, bootstraps["idc1"], bootstraps["idc2"], rf"{PREFIX}{setting}\..*",
                         rf"{PREFIX}{setting}\..*", work / f"mm2-{setting}", dict(settings))
            for setting, settings in SETTINGS.items()
        ]
        mm2_started = time.time()
        for mirror in mirrors:
            mirror.start()
        resources = {
            "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=bootstraps["idc1"]),
            "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=bootstraps["idc2"]),
            "clickhouse": ClickHouseResource(dsn=f"chdb://{work / 'clickhouse'}"),
            "spark": SparkResource(),
        }
        shapes = {t.name: "one_way:idc1" for t in traffic}
        continuous = None
        if args.our_sync == "continuous":
            ours = OurSync(None, resources["clickhouse"])
            continuous = BenchContinuousRun(bootstraps, f"chdb://{work / 'clickhouse'}", shapes,
                                            group_include=rf"^{PREFIX}", dry_run=True, mirror_writes_headers=False,
                                            watch=ours.watch)
        else:
            ours = OurSync(
                dagster_sync_cycle(resources, group_include=rf"^{PREFIX}", topic_shapes=shapes,
                                   extra_run_config={"offset_standby_commits": {"dry_run": True},
                                                     "offset_translations": {"mirror_writes_headers": False}},
                                   console_log_level="WARNING"),
                resources["clickhouse"],
            )
        recorder_thread = threading.Thread(target=recorder.run, args=(stop_watch,), daemon=True, name="recorder")
        recorder_thread.start()
        moments: dict[str, float] = {}

        def schedule() -> None:
            """The run's timeline; the sync cycles run in the main thread meanwhile (the embedded
            ClickHouse engine and local Spark stay in the thread that opened them)."""
            try:
                print(f"warming up {args.warmup_s:.0f} s, then measuring {args.measure_s:.0f} s "
                      f"({len(groups)} groups, {len(traffic)} topics at {args.rate:g}/s)", flush=True)
                time.sleep(args.warmup_s)
                moments["window_start"] = time.time()
                time.sleep(args.measure_s)
                moments["window_end"] = time.time()
                # Idle members join first and stay through the settling: they never commit, so each
                # group's offsets on idc1 end where its runner leaves them. Without a member, MM2's
                # writes on idc2 read to our direction rule as the group moving there (split brain, then
                # idc2 active): in a deployment only one syncer writes the standby group.
                holders = [IdleMember(bootstraps["idc1"], group, topic) for group, topic in groups.items()]
                time.sleep(5)
                stop_groups.set()
                for thread in group_threads:
                    thread.join(timeout=60)
                moments["groups_stopped"] = time.time()
                print(f"groups stopped; settling {args.settle_s:.0f} s for the planned switchover", flush=True)
                time.sleep(args.settle_s)
                moments["final_at"] = time.time()
                for holder in holders:
                    holder.close()
            finally:
                stop_watch.set()

        timeline = threading.Thread(target=schedule, daemon=True, name="timeline")
        timeline.start()
        try:
            if continuous is not None:
                continuous.start(args.warmup_s + args.measure_s + args.settle_s + 600)
                stop_watch.wait()
                continuous.stop.set()
                continuous.join(300)
            else:
                ours.run(stop_watch)
        finally:
            stop_watch.set()
            timeline.join(timeout=args.warmup_s + args.measure_s + args.settle_s + 120)
            recorder_thread.join(timeout=60)
            for mirror in mirrors:
                mirror.stop()
            stop_traffic.set()
            for thread in threads:
                thread.join(timeout=60)
            generator.close()
        window_start, window_end, final_at = moments["window_start"], moments["window_end"], moments["final_at"]
        copy_of = {(t.name, p): copies(bootstraps, t.name, p) for t in traffic for p in range(PARTITIONS)}

    samples = list(np.arange(window_start, window_end, 1.0))
    durations = [end - start for start, end, _ in ours.cycles]
    by_setting = {s: {g: t for g, t in groups.items() if setting_of(t) == s} for s in SETTINGS}
    fast = ours.series(None)
    slow = ours.series(SLOW_CADENCE_S)
    mean_cycle = statistics.mean(durations) if durations else float("nan")
    rows, per_pattern = [], []
    for setting in SETTINGS:
        mm2_label = "defaults" if setting == "defaults" else "tuned (lag 0, 1 s)"
        rows.append(evaluate(Row("MirrorMaker 2", mm2_label), by_setting[setting], recorder.mm2, recorder, copy_of,
                             samples, final_at))
        if continuous is not None:
            rows.append(evaluate(Row("offset_pipeline", f"continuous (default, cycles ~{mean_cycle:.1f} s) [{setting}]"),
                                 by_setting[setting], fast, recorder, copy_of, samples, final_at))
        else:
            rows.append(evaluate(Row("offset_pipeline", f"back to back (~{mean_cycle:.0f} s) [{setting}]"),
                                 by_setting[setting], fast, recorder, copy_of, samples, final_at))
            rows.append(evaluate(Row("offset_pipeline", f"every {SLOW_CADENCE_S:.0f} s [{setting}]"),
                                 by_setting[setting], slow, recorder, copy_of, samples, final_at))
        for pattern in PATTERNS:
            subset = {g: t for g, t in by_setting[setting].items() if pattern_of(t) == pattern}
            per_pattern.append(evaluate(Row("MirrorMaker 2", f"{mm2_label} / {pattern}"), subset, recorder.mm2,
                                        recorder, copy_of, samples, final_at))
            per_pattern.append(evaluate(Row("offset_pipeline", f"~{mean_cycle:.0f} s / {pattern} [{setting}]"), subset,
                                        fast, recorder, copy_of, samples, final_at))

    print()
    print(f"MirrorMaker 2 vs offset_pipeline on the same clusters, traffic and groups: {len(samples)} s measured, "
          f"{len(ours.cycles)} sync cycles (mean {mean_cycle:.1f} s, {ours.failures} failed), "
          f"{time.monotonic() - started:.0f} s in all")
    print("a trial = one group failing over at one second of the window; lost and duplicated records per trial, "
          "by record identity; staleness per group-partition and second; '1st all': seconds from MM2's start until "
          "every group-partition had a standby offset; 'no offset': trials with a partition that had none yet; "
          "planned: after the groups stopped and the sync settled")
    print(format_table(rows, mm2_started))
    print()
    print("by timestamp pattern:")
    print(format_table(per_pattern, mm2_started))
    print()
    # A mirror that copies a record twice (at-least-once) leaves the second copy after the first: any
    # restart before it reads it again, whatever the standby offset (every system pays it alike).
    twice = {f"{t}[{p}]": int(np.count_nonzero(c >= 0) - len(np.unique(c[c >= 0]))) for (t, p), c in copy_of.items()}
    print("records copied twice onto idc2 by MM2 (duplicates no standby offset avoids): "
          + (", ".join(f"{k} {v}" for k, v in sorted(twice.items()) if v) or "none"))
    print(f"polls: every {recorder.interval_s:g} s; transient read errors skipped: "
          + (", ".join(f"{k} {v}" for k, v in sorted(recorder.errors.items())) or "none"))
    print("translation statuses of our cycles: " + ", ".join(f"{k} {v}" for k, v in sorted(ours.statuses.items())))
    for status, example in sorted(ours.examples.items()):
        print(f"  {status}, e.g. {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
