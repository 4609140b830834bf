"""How fresh the continuous mode keeps the standby offsets at scale. Prints figures; asserts nothing.

    .venv/bin/python -m bench.freshness [--topics 100 --partitions 20 --groups-per-topic 5
        --rate 10 --measure-s 300 --warmup-s 60] [--json out.json]

Set-up (not measured): two scratch KRaft clusters, the cycle benchmark's workload (100 topics x 20
partitions, read by 5 groups each: 10,000 group-partitions; two-way and one-way topics, mirrored
both ways by the real DataMirror with origin headers), one real member per group on its active
cluster. Then, live: the mirror keeps running, ``--rate`` records a second are produced to random
partitions on their producing cluster, and every ``--commit-every-s`` each group commits the log end
of every partition it reads that grew on its active cluster (a consumer keeping up). The product's
continuous sync (``ContinuousSync``, as job ``offset_sync_continuous`` runs it, with an embedded
ClickHouse and local Spark) runs the whole time, in a process of its own (as a Dagster run worker
does): the benchmark's load, 500 group members among it, does not share its interpreter.

Measured after the warm-up, per commit of a group: the **sync latency**, from the group's commit on
its active cluster to the end of the cycle that committed the standby for it (the translation of
that offset or a later one, written). Also: the cycles' seconds, what they revisited, which engine
translated them, and the checkpoints' seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from bench.clusters import (
    ActiveGroups,
    ScratchClusters,
    Workload,
    create_and_fill,
    mirror_both_ways,
)
from bench.process_tree_usage import ProcessTree
from bench.sync_runs import ProcessContinuousRun
from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint

GP = tuple[str, str, int]


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[min(int(q * 1000), 999) - 1]


class Traffic(threading.Thread):
    """``rate`` records a second to random partitions, each on a cluster that produces its topic."""

    def __init__(self, clusters: ScratchClusters, workload: Workload, rate: float, seed: int):
        super().__init__(name="traffic", daemon=True)
        self.stop = threading.Event()
        self.rate = rate
        self.rng = random.Random(seed)
        self.targets = [(t.name, t.partitions, t.producers_on) for t in workload.plan()]
        self.producers = {name: Producer({"bootstrap.servers": bs, "linger.ms": 5, "log_level": 3})
                          for name, bs in clusters.bootstraps.items()}
        self.produced = 0

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            topic, partitions, producers = self.rng.choice(self.targets)
            cluster = self.rng.choice(producers)
            self.producers[cluster].produce(topic, value=f"r{self.produced}".encode(),
                                            partition=self.rng.randrange(partitions))
            self.producers[cluster].poll(0)
            self.produced += 1
            next_at += 1.0 / self.rate
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        for producer in self.producers.values():
            producer.flush(10)


class Consumers(threading.Thread):
    """Every ``every_s``, each group commits the new log end of its partitions on its active cluster."""

    def __init__(self, clusters: ScratchClusters, workload: Workload, groups: ActiveGroups, every_s: float):
        super().__init__(name="consumers", daemon=True)
        self.stop = threading.Event()
        self.clusters, self.groups, self.every_s = clusters, groups, every_s
        self.specs = {g.group_id: g for g in workload.groups()}
        self.admins = {name: clusters.admin(name) for name in clusters.bootstraps}
        self.partitions = [(t.name, p) for t in workload.plan() for p in range(t.partitions)]
        self.lock = threading.Lock()
        self.pending: dict[GP, list[tuple[int, float]]] = {}  # gp -> [(c, committed at)]
        # gp -> (the highest committed offset a cycle left synced, when): a cycle can read a commit
        # before this thread has noted it (Latencies.on_cycle fills it)
        self.synced: dict[GP, tuple[int, float]] = {}
        self.settled_early: list[float] = []
        self.commits = 0
        self.measuring = False

    def log_ends(self, cluster: str) -> dict[tuple[str, int], int]:
        futures = self.admins[cluster].list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in self.partitions},
                                                    request_timeout=10)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            ends = {name: self.log_ends(name) for name in self.admins}
            for group_id, spec in self.specs.items():
                offsets = []
                for topic in spec.topics:
                    for p in range(self.groups.workload.partitions):
                        key = (group_id, topic, p)
                        end = ends[spec.active][(topic, p)]
                        if end > self.groups.committed.get(key, -1):
                            offsets.append(TopicPartition(topic, p, end))
                if not offsets:
                    continue
                at = time.monotonic()  # the commit call starts: no cycle can have read it before
                self.groups.members[group_id].commit(offsets=offsets, asynchronous=False)
                with self.lock:
                    for tp in offsets:
                        key = (group_id, tp.topic, tp.partition)
                        self.groups.committed[key] = tp.offset
                        if not self.measuring:
                            continue
                        synced_c, synced_at = self.synced.get(key, (-1, 0.0))
                        if synced_c >= tp.offset:  # a cycle was quicker than this thread
                            self.settled_early.append(max(0.0, synced_at - at))
                        else:
                            self.pending.setdefault(key, []).append((tp.offset, at))
                    self.commits += len(offsets)


class Latencies:
    """Settles each measured commit when a cycle leaves its group-partition synced at or past it."""

    def __init__(self, consumers: Consumers):
        self.consumers = consumers
        self.latencies: list[float] = []
        self.cycles: list[tuple[float, object]] = []

    def on_cycle(self, now: float, outcome, settled: dict) -> None:
        """A cycle of the run (``ProcessContinuousRun``), ended at ``now`` (monotonic, the same clock
        across processes), with the group-partitions it left synced and their committed offsets."""
        self.cycles.append((now, outcome))
        with self.consumers.lock:
            for key, translated_c in settled.items():
                if translated_c > self.consumers.synced.get(key, (-1, 0.0))[0]:
                    self.consumers.synced[key] = (translated_c, now)
                if key not in self.consumers.pending:
                    continue
                events = self.consumers.pending[key]
                done = [(c, at) for c, at in events if c <= translated_c]
                self.latencies += [now - at for _, at in done]
                left = [(c, at) for c, at in events if c > translated_c]
                if left:
                    self.consumers.pending[key] = left
                else:
                    del self.consumers.pending[key]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--groups-per-topic", type=int, default=5)
    parser.add_argument("--topics-per-group", type=int, default=10)
    parser.add_argument("--records-per-partition", type=int, default=40)
    parser.add_argument("--rate", type=float, default=10.0, help="records a second, over all partitions")
    parser.add_argument("--commit-every-s", type=float, default=1.0)
    parser.add_argument("--warmup-s", type=float, default=60.0)
    parser.add_argument("--measure-s", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--read-mode", choices=("follow", "poll"), default="follow",
                        help="follow the clusters' commit logs (the default) or list every group each cycle")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    workload = Workload(args.topics, args.partitions, args.groups_per_topic, min(args.topics_per_group, args.topics),
                        args.records_per_partition, args.seed)
    print(f"offset_pipeline continuous benchmark: {os.cpu_count()} cores, {workload.group_partitions} "
          f"group-partitions, {args.rate:g} records/s, reads: {args.read_mode}", flush=True)
    with tempfile.TemporaryDirectory(prefix="offset-pipeline-continuous-bench-") as tmp, \
            ScratchClusters(Path(tmp) / "kafka") as clusters:
        filled = create_and_fill(clusters, workload)
        mirror_both_ways(clusters, workload, filled.produced)
        stop_mirror = threading.Event()
        pattern = "^" + workload.prefix.replace(".", "[.]")
        mirrors = [threading.Thread(target=DataMirror(MirrorConfig(
            MirrorEndpoint(src, clusters.bootstraps[src]), MirrorEndpoint(dst, clusters.bootstraps[dst]),
            topic_pattern=pattern, metadata_refresh_s=1.0, poll_timeout_s=0.05)).run, args=(stop_mirror,), daemon=True)
            for src, dst in (("idc1", "idc2"), ("idc2", "idc1"))]
        for m in mirrors:
            m.start()
        with ActiveGroups(clusters, workload) as groups:
            consumers = Consumers(clusters, workload, groups, args.commit_every_s)
            latencies = Latencies(consumers)
            run = ProcessContinuousRun(latencies.on_cycle, bootstraps=clusters.bootstraps,
                                       dsn=f"chdb://{tmp}/clickhouse", shapes=workload.shapes(), group_include=pattern,
                                       follow_commit_log=args.read_mode == "follow")
            traffic = Traffic(clusters, workload, args.rate, args.seed)
            started = time.monotonic()
            run.start(args.warmup_s + args.measure_s + 5)
            traffic.start()
            consumers.start()
            time.sleep(args.warmup_s)
            with consumers.lock:
                consumers.measuring = True
            measure_started = time.monotonic()
            sync_tree = ProcessTree([run.pid])  # the run's process, its Kafka children, its translation child
            cpu_before = sync_tree.cpu_seconds()
            time.sleep(args.measure_s)
            with consumers.lock:
                consumers.measuring = False
            measured_until = time.monotonic()
            cpu_s = sync_tree.cpu_seconds() - cpu_before
            unsettled = sum(len(v) for v in consumers.pending.values())
            oldest = max((measured_until - at for v in consumers.pending.values() for _, at in v), default=0.0)
            traffic.stop.set()
            consumers.stop.set()
            summary = run.join(120)
            stop_mirror.set()
            figures = report(args, workload, latencies, summary, measure_started, measured_until, unsettled, oldest,
                             time.monotonic() - started, cpu_s)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def report(args, workload, latencies: Latencies, summary, since: float, until: float, unsettled: int, oldest: float,
           total_s: float, cpu_s: float) -> dict:
    measured = [o for t, o in latencies.cycles if since <= t <= until]
    cycle_s = [o.seconds for o in measured]
    revisited, engines = Counter(), Counter()
    for o in measured:
        revisited.update(o.revisited)
        engines[o.engine] += 1
    lat = latencies.latencies + latencies.consumers.settled_early
    checkpoints = [c.seconds for c in summary.checkpoints]
    figures = {
        "group_partitions": workload.group_partitions, "rate": args.rate, "measure_s": args.measure_s,
        "commits_measured": len(lat) + unsettled, "commits_settled": len(lat), "commits_unsettled_at_end": unsettled,
        "oldest_unsettled_s": round(oldest, 2),
        "latency_p50_s": quantile(lat, 0.5), "latency_p90_s": quantile(lat, 0.9),
        "latency_p99_s": quantile(lat, 0.99), "latency_max_s": max(lat, default=None),
        "cycles": len(measured), "cycle_p50_s": quantile(cycle_s, 0.5), "cycle_p99_s": quantile(cycle_s, 0.99),
        "cycle_max_s": max(cycle_s, default=None),
        "revisited_per_cycle": {k: round(v / max(len(measured), 1), 2) for k, v in sorted(revisited.items())},
        "engines": dict(engines), "checkpoints": len(checkpoints),
        "checkpoint_p50_s": quantile(checkpoints, 0.5), "checkpoint_max_s": max(checkpoints, default=None),
        "checkpoints_skipped": summary.checkpoints_skipped, "commit_errors": summary.commit_errors,
        "no_loss_offenders": len(summary.no_loss_offenders), "total_s": round(total_s, 1),
        "read_mode": args.read_mode, "sync_cpu_s": round(cpu_s, 1),
        "sync_cpu_s_per_hour": round(cpu_s / (until - since) * 3600, 0),
    }
    follow = summary.follow
    if follow is not None:
        figures.update(reads=dict(follow.reads), commit_log_modes=follow.modes, followed_differences=follow.differences,
                       followed_compared=follow.compared, followed_reconciliations=follow.reconciliations,
                       log_facts_read=follow.ranges_read, log_facts_carried=follow.ranges_carried,
                       own_commits_followed=follow.echoes)
    def f(x):
        return "-" if x is None else f"{x:.2f}"
    print(f"\n{workload.group_partitions} group-partitions, {args.rate:g} records/s, commits every "
          f"{args.commit_every_s:g}s, measured {args.measure_s:g}s")
    print(f"sync latency (group commit -> standby committed), {len(lat)} commits: p50 {f(figures['latency_p50_s'])}s, "
          f"p90 {f(figures['latency_p90_s'])}s, p99 {f(figures['latency_p99_s'])}s, max {f(figures['latency_max_s'])}s; "
          f"{unsettled} not settled at the end (oldest {oldest:.1f}s)")
    print(f"cycles: {len(measured)}, p50 {f(figures['cycle_p50_s'])}s, p99 {f(figures['cycle_p99_s'])}s, "
          f"max {f(figures['cycle_max_s'])}s; engines {dict(engines)}; revisited per cycle {figures['revisited_per_cycle']}")
    stages = Counter()
    for o in measured:
        stages.update(o.stage_seconds)
    figures["stage_mean_s"] = {k: round(v / max(len(measured), 1), 3) for k, v in stages.items()}
    print(f"cycle stages (mean s): {figures['stage_mean_s']}")
    print(f"checkpoints: {len(checkpoints)}, p50 {f(figures['checkpoint_p50_s'])}s, max {f(figures['checkpoint_max_s'])}s, "
          f"{summary.checkpoints_skipped} skipped; commit errors {summary.commit_errors}; "
          f"no-loss offenders {len(summary.no_loss_offenders)}")
    print(f"sync process tree CPU: {cpu_s:.1f} s in {until - since:.0f} s measured "
          f"({figures['sync_cpu_s_per_hour']:.0f} CPU-s per hour); reads {figures.get('reads')}; "
          f"commit logs {figures.get('commit_log_modes')}; differences {figures.get('followed_differences')} "
          f"of {figures.get('followed_compared')} compared in {figures.get('followed_reconciliations')} listings; "
          f"log facts read {figures.get('log_facts_read')}, carried {figures.get('log_facts_carried')}; "
          f"own commits followed without a read {figures.get('own_commits_followed')}")
    return figures


if __name__ == "__main__":
    sys.exit(main())
