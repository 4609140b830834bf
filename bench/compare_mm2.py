"""Side by side with MirrorMaker 2: failover cost and freshness of the standby offsets, on the same
clusters and traffic, measured in one run, with this project's sync COMMITTING behind MirrorMaker 2.

    bin/compare-mm2 [--measure-s 600] [--warmup-s 120] [--settle-s 90] [--rate 10] [--seed 7]
                    [--families defaults,tuned,headers,twoway] [--trial-step-s 0.1]

Two scratch KRaft clusters. Topics of four families, each in three timestamp patterns (increasing
timestamps, batches of 10 records sharing one timestamp, a quarter of the records 2-10 s late),
two partitions each, read on idc1 by consumer groups:

* ``cmp.defaults.*`` and ``cmp.tuned.*``: one-way (produced on idc1), each mirrored to idc2 by a plain
  MirrorMaker 2 of its own (dedicated mode, jars from Maven Central, ``IdentityReplicationPolicy``,
  no plugin), one with MM2's defaults, one tuned (``offset.lag.max=0``, one-second intervals). Each
  topic is read by two groups ``.g0``/``.g1`` whose offsets MM2 itself syncs onto idc2
  (``sync.group.offsets.enabled``, its ``groups`` naming only them), and by two groups ``.p0``/``.p1``
  that MM2 never writes and this project's sync commits, translating through MM2's own offset-syncs
  topic (``mm2-offset-syncs.<target alias>.internal`` on idc1, the sync's offset-sync anchors);
* ``cmp.headers.*``: one-way, mirrored by MirrorMaker 2 with the project's transform
  (``devstack.mirrormaker2.MirrorMaker2``: ``OriginHeaders`` with ``drop.copies``, both
  flows, exactly-once); groups ``.p0``/``.p1`` committed by this project's sync through the origin
  headers;
* ``cmp.twoway.*``: produced on both clusters, mirrored both ways by the same MirrorMaker 2 with the
  transform; groups ``.p0``/``.p1`` active on idc1, committed by this project's sync. MM2's own
  checkpoints cannot serve these (they translate only records copied from the group's cluster).

This project's sync runs as the product's continuous run (bench/sync_runs.py), committing,
three of them, each in a process of its own (as Dagster runs one asset per run worker): one behind
each plain MirrorMaker 2 (``mirror_writes_headers`` off, that MM2's offset-syncs topic read for
idc1->idc2), one behind MirrorMaker 2 with the transform (origin headers).

While it runs, the groups report each commit on idc1 as they make it (time and offsets); every
group's offset commits on idc2 (MM2's writes for ``.g*``, the sync's commits for ``.p*``) are read from
idc2's ``__consumer_offsets`` with the broker's append time, and idc2's log ends are polled every half
second: both systems are measured alike, by what actually stood on idc2 and when.
Afterwards both logs are read back and every record matched to its counterpart by its id (for a
two-way topic, each idc2 record to the idc1 record of the same id, original or copy). Then:

* **disaster trials**: every ``--trial-step-s`` (0.1 s) of the measured window and every group is a
  failover at that moment (a whole-second step would meet the once-a-second commits and batches at
  one phase of their cycle all run long, and measure that phase, not the mean): the group restarts on idc2 at the offset committed there then, and reads the idc2 log as
  it stood then. Lost and duplicated records are counted by identity (bench/mm2/counting.py);
* **planned switchover**: at the end the groups stop; after ``--settle-s`` the offsets on idc2 are
  counted the same way (what a planned move costs once the sync caught up);
* **staleness**: how long the group had been past the position the standby offset restarts it
  from, per group-partition and trial moment (median and max).

Targets printed at the end: 0 lost in every row (trials and planned switchover); each row of this
project with at most a tenth of tuned MirrorMaker 2's mean duplicates per failover (judged only when
the tuned family ran). ``--families`` runs some families only: each plain family costs a MirrorMaker 2
JVM and a sync, the transform's two families one of each, and a 2-core machine running all four is
saturated, which delays every commit it measures (``--families tuned,headers``: tuned MirrorMaker 2's
checkpoints, and this project behind it and behind the transform).
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
import numpy as np

from bench.clusters import ScratchClusters, free_port
from bench.mm2.consumer_offsets import OffsetCommitLog
from bench.mm2.counting import (
    NO_COPY,
    NO_RECORD,
    CommitSeries,
    active_position,
    commit_delays,
    failover_cost,
    fewest_duplicates,
    staleness_s,
)
from bench.mm2.mirrormaker import TUNED, MirrorMaker2, mm2_jars
from bench.mm2.transform_mirror import start_transform_mirror
from bench.sync_runs import ProcessContinuousRun
from devstack.consumers import ConsumerGroupSpec, GroupRunner, record_id
from devstack.records import read_partition
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.translation import offset_syncs_topic

PREFIX = "cmp."
PLAIN = {"defaults": {}, "tuned": TUNED}  # plain MirrorMaker 2 instances: family -> its settings
HEADERS, TWO_WAY = "headers", "twoway"  # families mirrored by MirrorMaker 2 with the transform
FAMILIES = (*PLAIN, HEADERS, TWO_WAY)
PATTERNS = {"increasing": 1, "equal_batches": 10, "out_of_order": 1}  # pattern -> records per timestamp
PARTITIONS = 2
MM2_GROUPS = ("g0", "g1")  # MirrorMaker 2's own group offset sync writes these on idc2 (plain families)
OUR_GROUPS = ("p0", "p1")  # this project's sync commits these on idc2 (every family)
DUP_TARGET_RATIO = 0.1  # this project's mean duplicates per failover <= a tenth of tuned MM2's

GP = tuple[str, str, int]  # group, topic, partition


def plan(rate: float, families: tuple[str, ...] = FAMILIES) -> list[TopicTraffic]:
    return [
        TopicTraffic(f"{PREFIX}{family}.{pattern}", PARTITIONS, ("idc1", "idc2") if family == TWO_WAY else ("idc1",),
                     pattern, rate_per_s=rate, batch_size=batch)
        for family in FAMILIES if family in families for pattern, batch in PATTERNS.items()
    ]


def trial_moments(start: float, end: float, step_s: float) -> list[float]:
    """The failover moments of the window ``[start, end)``, one every ``step_s``. The groups commit
    about once a second and the batches come once a second: a step of a whole second would meet them
    at one phase of that cycle for the whole run (the moment just after a commit, or just before the
    sync's), so the figure would depend on that phase; a step well below their period weighs every
    phase alike."""
    if step_s <= 0:
        raise ValueError(f"the trial step must be > 0 s, got {step_s}")
    return [float(s) for s in np.arange(start, end, step_s)]


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seconds expected, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 s, got {text!r}")
    return value


def chosen_families(text: str) -> tuple[str, ...]:
    """``--families``: a comma-separated subset of :data:`FAMILIES`, in their order."""
    asked = {f.strip() for f in text.split(",") if f.strip()}
    unknown = asked - set(FAMILIES)
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"families must be some of {', '.join(FAMILIES)}; got {text!r}")
    return tuple(f for f in FAMILIES if f in asked)


def family_of(topic: str) -> str:
    return topic.split(".")[1]


def pattern_of(topic: str) -> str:
    return topic.split(".")[2]


def groups_of(traffic: list[TopicTraffic]) -> dict[str, str]:
    """group -> topic: MM2's groups on the plain families' topics, ours on every topic."""
    out = {}
    for t in traffic:
        names = (MM2_GROUPS + OUR_GROUPS) if family_of(t.name) in PLAIN else OUR_GROUPS
        out.update({f"{t.name}.{n}": t.name for n in names})
    return out


def is_ours(group: str) -> bool:
    return group.rsplit(".", 1)[1] in OUR_GROUPS


# -- what runs while we measure ---------------------------------------------------------------------

@dataclass
class Recorder:
    """What stood on idc2 when: every offset commit of the groups on idc2 (MM2's group offset writes
    for its groups, this project's commits for ours) with the broker's append time, from idc2's
    ``__consumer_offsets`` (bench/mm2/consumer_offsets.py), and idc2's log ends, polled every
    ``interval_s``. The groups' commits on idc1 come from the groups themselves (:meth:`on_commit`),
    at the time each commit call started: a poll a second old made a sync that had read a newer
    commit look like it skipped records (a false loss), once its cycles got shorter than the poll."""

    bootstraps: dict[str, str]
    groups: dict[str, str]  # group -> topic
    interval_s: float = 0.5
    active: dict[GP, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    standby_end: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # transient read errors, by name
    commit_log: OffsetCommitLog | None = None

    @property
    def standby(self) -> dict[GP, list[tuple[float, int]]]:
        """Per group-partition, (broker time, offset) of each commit on idc2, in time order."""
        return {gp: sorted(points) for gp, points in self.commit_log.commits.items()} if self.commit_log else {}

    def on_commit(self, group: str):
        """``GroupRunner``'s ``on_commit`` for ``group``: its committed offsets, exactly when committed."""
        lock = threading.Lock()

        def record(partitions: list[tuple[str, int, int]], at: float) -> None:
            with lock:
                for topic, partition, offset in partitions:
                    self.active[(group, topic, partition)].append((at, offset))

        return record

    def run(self, stop: threading.Event) -> None:
        self.commit_log = OffsetCommitLog(self.bootstraps["idc2"], set(self.groups))
        commits = threading.Thread(target=self.commit_log.run, args=(stop,), daemon=True, name="idc2-commits")
        commits.start()
        admin = AdminClient({"bootstrap.servers": self.bootstraps["idc2"], "log_level": 3})
        topics = sorted(set(self.groups.values()))
        while not stop.is_set():
            started = time.time()
            specs = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(PARTITIONS)}
            try:
                ends = {tp: f.result(timeout=10).offset for tp, f in admin.list_offsets(specs).items()}
            except KafkaException as exc:
                self.errors[str(exc.args[0].name())] += 1
                stop.wait(self.interval_s)
                continue
            now = time.time()  # after the read: every record counted as there was there by then
            for tp, end in ends.items():
                self.standby_end[(tp.topic, tp.partition)].append((now, end))
            stop.wait(max(0.0, self.interval_s - (time.time() - started)))
        commits.join(timeout=30)


@dataclass
class OurSync:
    """One of this project's continuous runs (committing), in a process of its own: its cycles and the
    translation statuses it gave (with one reason each)."""

    name: str
    cycles: list[float] = field(default_factory=list)  # seconds per cycle
    statuses: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # status -> one reason it was given
    stage_seconds: Counter = field(default_factory=Counter)  # stage -> seconds over every cycle
    revisited: Counter = field(default_factory=Counter)  # why group-partitions were translated again
    run: ProcessContinuousRun | None = None

    def on_cycle(self, _at: float, outcome, _settled) -> None:
        self.cycles.append(outcome.seconds)
        self.stage_seconds.update(outcome.stage_seconds)
        self.revisited.update({str(getattr(k, "value", k)): v for k, v in outcome.revisited.items()})
        self.statuses.update({str(getattr(k, "value", k)): v for k, v in outcome.statuses.items()})

    def on_reason(self, status: str, example: str) -> None:
        self.examples.setdefault(status, example)

    def start(self, run_for_s: float, **kwargs) -> None:
        self.run = ProcessContinuousRun(self.on_cycle, self.on_reason, run_id=f"bench-mm2-{self.name}", **kwargs)
        self.run.start(run_for_s)


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
    """``copy_of`` for bench/mm2/counting.py: the idc1 offset of the record with the identity of the
    record at each idc2 offset (for a two-way topic the idc1 log holds originals and copies alike)."""
    active = {record_id(r.value): r.offset for r in read_partition(bootstraps["idc1"], topic, partition, timeout_s=300)}
    active.pop(None, None)
    standby = read_partition(bootstraps["idc2"], topic, partition, timeout_s=300)
    # Offsets read_partition returns no record at (read_committed: transaction markers of the
    # exactly-once mirror, aborted records) stay NO_RECORD: counted as neither lost nor duplicated.
    out = np.full(max((r.offset for r in standby), default=-1) + 1, NO_RECORD, dtype=np.int64)
    for r in standby:
        out[r.offset] = active.get(record_id(r.value), NO_COPY)
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
    fewest: list[int] = field(default_factory=list)  # per trial: the best any standby offset could do then
    staleness: list[float] = field(default_factory=list)
    planned_lost: int = 0
    planned_duplicated: int = 0
    planned_trials: int = 0
    all_synced_at: float | None = None  # when the last group-partition got its first standby offset
    delays: list[float | None] = field(default_factory=list)  # per group commit in the window (counting.commit_delays)


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
        for gp in gps:
            if gp in active and samples:
                points = standby.get(gp, [])
                # against the final log: the polled ends lag by up to their interval, and a standby
                # offset at the end then is the offset its next copy took
                log = copy_of[(topic, gp[2])]
                positions = [active_position(log, g, len(log)) for _, g in points]
                row.delays += commit_delays(active[gp], [w for w, _ in points], positions, samples[0], samples[-1])
        for s in samples + [final_at]:
            lost = duplicated = fewest = 0
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
                fewest += fewest_duplicates(copy_of[(topic, gp[2])], c, end)
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
            row.fewest.append(fewest)
    return row


def format_delays(rows: list[Row]) -> str:
    """Per row: from a group's commit to the first standby offset that covers it (counting.commit_delays)."""
    lines = []
    for r in rows:
        reached = sorted(d for d in r.delays if d is not None)
        if not reached:
            lines.append(f"  {r.system} {r.setting}: no commit reached the standby")
            continue
        q = lambda f: reached[min(len(reached) - 1, int(f * len(reached)))]  # noqa: E731
        lines.append(f"  {r.system} {r.setting}: {len(reached)} commits, p50 {q(0.5):.3f} s, p90 {q(0.9):.3f} s, "
                     f"p99 {q(0.99):.3f} s, mean {statistics.mean(reached):.3f} s "
                     f"({sum(d for d in reached if d > 0.3) / max(sum(reached), 1e-9):.0%} of it in commits over 0.3 s); "
                     f"{len(r.delays) - len(reached)} never covered")
    return "\n".join(lines)


def format_table(rows: list[Row], since: float) -> str:
    header = (f"{'system':<16}{'setting':<40}{'1st all':>8}{'trials':>7}{'no offset':>10}{'lost':>6}{'dup mean':>9}{'dup p50':>8}"
              f"{'dup max':>8}{'0-dup':>7}{'best dup':>9}{'stale p50':>10}{'stale max':>10}{'planned lost':>13}{'planned dup':>12}")
    lines = [header, "-" * len(header)]
    for r in rows:
        d = r.duplicated or [0]
        st = r.staleness or [0.0]
        first = f"{r.all_synced_at - since:.0f}s" if r.all_synced_at is not None else "never"
        lines.append(
            f"{r.system:<16}{r.setting:<40}{first:>8}{r.trials:>7}{r.unsynced:>10}{r.lost:>6}{statistics.mean(d):>9.1f}"
            f"{statistics.median(d):>8.0f}{max(d):>8}{sum(1 for x in d if x == 0) / len(d):>7.0%}"
            f"{statistics.mean(r.fewest or [0]):>9.1f}"
            f"{statistics.median(st):>9.1f}s{max(st):>9.1f}s{r.planned_lost:>13}{r.planned_duplicated:>12}"
        )
    return "\n".join(lines)


# -- the run ----------------------------------------------------------------------------------------

def targets(rows: list[Row]) -> list[str]:
    """One line per target: met or not, with the figures it was judged by."""
    lines = []
    for r in rows:
        ok = r.lost == 0 and r.planned_lost == 0
        lines.append(f"{'MET    ' if ok else 'NOT MET'} 0 lost: {r.system} {r.setting}: {r.lost} lost in {r.trials} "
                     f"trials, {r.planned_lost} at the planned switchover")
    tuned = next((r for r in rows if r.system == "MirrorMaker 2" and "tuned" in r.setting), None)
    if tuned is None:
        return lines + ["NOT JUDGED duplicates <= 1/10 of tuned MM2's: the tuned family was not in this run (--families)"]
    bound = DUP_TARGET_RATIO * statistics.mean(tuned.duplicated or [0])
    for r in rows:
        if r.system != "offset_pipeline":
            continue
        mean = statistics.mean(r.duplicated or [0])
        lines.append(f"{'MET    ' if mean <= bound else 'NOT MET'} duplicates <= 1/10 of tuned MM2's: {r.setting}: "
                     f"{mean:.2f} per failover against {bound:.2f} (tuned MM2 {bound / DUP_TARGET_RATIO:.1f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure-s", type=float, default=600.0, help="the measured window (disaster trials)")
    parser.add_argument("--warmup-s", type=float, default=120.0, help="after MM2 starts, before measuring")
    parser.add_argument("--settle-s", type=float, default=90.0, help="after the groups stop (planned switchover)")
    parser.add_argument("--rate", type=float, default=10.0, help="records per second per topic and producing cluster")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trial-step-s", type=positive_seconds, default=0.1,
                        help="a failover trial every this many seconds of the measured window (default 0.1: every "
                             "phase of the groups' once-a-second commits counts alike)")
    parser.add_argument("--revisit-s", type=positive_seconds, default=None,
                        help="the syncs' revisit_s (default: the product's): how soon an unsettled partition "
                             "is translated again once its log ends moved")
    parser.add_argument("--families", type=chosen_families, default=FAMILIES,
                        help=f"which topic families run (comma-separated, default all: {','.join(FAMILIES)}); "
                             "fewer families, fewer MirrorMaker 2 JVMs and syncs: 'tuned,headers' on a 2-core machine "
                             "the whole run saturates")
    args = parser.parse_args(argv)
    plain = {family: settings for family, settings in PLAIN.items() if family in args.families}
    transformed = [family for family in (HEADERS, TWO_WAY) if family in args.families]
    # SIGTERM unwinds like Ctrl-C, so the scratch brokers and MM2 processes are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    started = time.monotonic()
    print(f"MirrorMaker 2 jars: {mm2_jars()}", flush=True)
    traffic = plan(args.rate, args.families)
    groups = groups_of(traffic)
    shapes = {t.name: "two_way" if family_of(t.name) == TWO_WAY else "one_way:idc1" for t in traffic}
    syncs = {family: OurSync(family) for family in plain} | ({"transform": OurSync("transform")} if transformed else {})
    mirrors: list[MirrorMaker2] = []
    transform_mirror = None
    with ScratchClusters() as clusters, tempfile.TemporaryDirectory(prefix="offset-pipeline-mm2-") as scratch:
        work = Path(scratch)
        bootstraps = clusters.bootstraps
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
        # One plain MM2 per family; its group offset sync names MM2's groups only, so it never writes
        # the groups this project commits (MM2 would otherwise overwrite them every interval).
        mirrors = [
            MirrorMaker2(family, bootstraps["idc1"], bootstraps["idc2"], rf"{re.escape(PREFIX + family)}\..*",
                         rf"{re.escape(PREFIX + family)}\..*\.({'|'.join(MM2_GROUPS)})", work / f"mm2-{family}",
                         dict(settings))
            for family, settings in plain.items()
        ]
        mm2_started = time.time()
        try:
            for mirror in mirrors:
                mirror.start()
            if transformed:
                transform_mirror = start_transform_mirror(
                    bootstraps, rf"{re.escape(PREFIX)}({'|'.join(transformed)})\..*", work / "mm2-transform", free_port())
                print(f"MirrorMaker 2 with the transform copies both ways, {transform_mirror.ready_after_s:.1f} s after "
                      "its JVM started", flush=True)
            run_for_s = args.warmup_s + args.measure_s + args.settle_s + 600
            common = {"bootstraps": bootstraps, "shapes": shapes, "dry_run": False, "revisit_s": args.revisit_s}
            for family, mirror in zip(plain, mirrors):
                syncs[family].start(
                    run_for_s, dsn=f"chdb://{work / ('clickhouse-' + family)}", **common,
                    group_include=rf"^{re.escape(PREFIX + family)}\..*\.({'|'.join(OUR_GROUPS)})$",
                    mirror_writes_headers=False,
                    offset_syncs_topics=(OffsetSyncsTopic("idc1", "idc2", "idc1", offset_syncs_topic(*mirror.aliases)),))
            if transformed:
                syncs["transform"].start(
                    run_for_s, dsn=f"chdb://{work / 'clickhouse-transform'}", **common,
                    group_include=rf"^{re.escape(PREFIX)}({'|'.join(transformed)})\..*\.({'|'.join(OUR_GROUPS)})$",
                    mirror_writes_headers=True)
            recorder_thread = threading.Thread(target=recorder.run, args=(stop_watch,), daemon=True, name="recorder")
            recorder_thread.start()
            moments: dict[str, float] = {}
            print(f"warming up {args.warmup_s:.0f} s, then measuring {args.measure_s:.0f} s "
                  f"({len(groups)} groups, {len(traffic)} topics at {args.rate:g}/s per producing cluster)", flush=True)
            time.sleep(args.warmup_s)
            moments["window_start"] = time.time()
            time.sleep(args.measure_s)
            moments["window_end"] = time.time()
            # Idle members join first and stay through the settling: they never commit, so each
            # group's offsets on idc1 end where its runner leaves them, and the group stays active
            # on idc1 (a group with no member on either side reads to the sync's direction rule as
            # one that may be moving).
            holders = [IdleMember(bootstraps["idc1"], group, topic) for group, topic in groups.items()]
            time.sleep(5)
            stop_groups.set()
            for thread in group_threads:
                thread.join(timeout=60)
            moments["groups_stopped"] = time.time()
            print(f"groups stopped; settling {args.settle_s:.0f} s for the planned switchover", flush=True)
            time.sleep(args.settle_s)
            moments["final_at"] = time.time()
            stop_watch.set()
            recorder_thread.join(timeout=60)
            for holder in holders:
                holder.close()
        finally:
            stop_watch.set()
            for sync in syncs.values():
                if sync.run is not None:
                    sync.run.terminate()  # its cycles were reported as they ran; no summary is needed
            if transform_mirror is not None:
                transform_mirror.stop()
            for mirror in mirrors:
                mirror.stop()
            stop_traffic.set()
            for thread in threads:
                thread.join(timeout=60)
            generator.close()
        window_start, window_end, final_at = moments["window_start"], moments["window_end"], moments["final_at"]
        copy_of = {(t.name, p): copies(bootstraps, t.name, p) for t in traffic for p in range(PARTITIONS)}

    samples = trial_moments(window_start, window_end, args.trial_step_s)

    def chosen(family: str, ours: bool, pattern: str | None = None) -> dict[str, str]:
        return {g: t for g, t in groups.items() if family_of(t) == family and is_ours(g) == ours
                and (pattern is None or pattern_of(t) == pattern)}

    labels = [
        ("MirrorMaker 2", "checkpoints, defaults", "defaults", False),
        ("offset_pipeline", "offset syncs of plain MM2 defaults", "defaults", True),
        ("MirrorMaker 2", "checkpoints, tuned (lag 0, 1 s)", "tuned", False),
        ("offset_pipeline", "offset syncs of plain MM2 tuned", "tuned", True),
        ("offset_pipeline", "MM2+transform, one-way", HEADERS, True),
        ("offset_pipeline", "MM2+transform, two-way", TWO_WAY, True),
    ]
    labels = [label for label in labels if label[2] in args.families]
    rows = [evaluate(Row(system, setting), chosen(family, ours), recorder.standby, recorder, copy_of, samples, final_at)
            for system, setting, family, ours in labels]
    per_pattern = [evaluate(Row(system, f"{setting} / {pattern}"), chosen(family, ours, pattern), recorder.standby,
                            recorder, copy_of, samples, final_at)
                   for system, setting, family, ours in labels for pattern in PATTERNS]

    print()
    print(f"MirrorMaker 2 vs offset_pipeline committing behind MirrorMaker 2, same clusters and traffic: "
          f"{window_end - window_start:.0f} s measured ({len(samples)} moments, one every {args.trial_step_s:g} s), "
          f"{time.monotonic() - started:.0f} s in all")
    for name, sync in syncs.items():
        mean = statistics.mean(sync.cycles) if sync.cycles else float("nan")
        print(f"  sync behind {'MM2+transform' if name == 'transform' else 'plain MM2 ' + name}: "
              f"{len(sync.cycles)} cycles, mean {mean:.2f} s ("
              + ", ".join(f"{k} {v / max(1, len(sync.cycles)):.2f}" for k, v in sync.stage_seconds.items()) + "); "
              + "translated again: " + (", ".join(f"{k} {v}" for k, v in sorted(sync.revisited.items())) or "none"))
    print(f"a trial = one group failing over at one moment of the window (every {args.trial_step_s:g} s), restarting at the offset committed on idc2 "
          "then (its commit's append time in idc2's __consumer_offsets); lost and duplicated records per trial, by record identity; staleness per "
          "group-partition and moment; '1st all': seconds from MM2's start until every group-partition had an "
          "offset on idc2; 'no offset': trials with a partition that had none yet; 'best dup': mean duplicates of the best "
          "standby offset any syncer could have committed then (the first record on idc2 the group had not processed): "
          "0 on one-way topics, the mirror's interleaving on two-way ones; planned: after the groups "
          "stopped and the sync settled")
    print(format_table(rows, mm2_started))
    print()
    print("by timestamp pattern:")
    print(format_table(per_pattern, mm2_started))
    print()
    print("delay from a group's commit to the first standby offset that covers it (a failover within it "
          "reads that commit's records again):")
    print(format_delays(rows))
    print()
    print("targets:")
    for line in targets(rows):
        print(f"  {line}")
    print()
    # A mirror that copies a record twice (at-least-once) leaves the second copy after the first: any
    # restart before it reads it again, whatever the standby offset (every system pays it alike).
    twice = {f"{t}[{p}]": int(np.count_nonzero(c >= 0) - len(np.unique(c[c >= 0]))) for (t, p), c in copy_of.items()}
    print("records copied twice onto idc2 (duplicates no standby offset avoids): "
          + (", ".join(f"{k} {v}" for k, v in sorted(twice.items()) if v) or "none"))
    print(f"idc2 log ends polled every {recorder.interval_s:g} s; transient read errors skipped: "
          + (", ".join(f"{k} {v}" for k, v in sorted(recorder.errors.items())) or "none")
          + f"; __consumer_offsets read errors: {recorder.commit_log.errors if recorder.commit_log else 'not read'}")
    for name, sync in syncs.items():
        print(f"translation statuses behind {name}: "
              + (", ".join(f"{k} {v}" for k, v in sorted(sync.statuses.items())) or "none"))
        for status, example in sorted(sync.examples.items()):
            print(f"  {status}, e.g. {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
