"""Failover trials on real clusters: lost and duplicated records per trial, by topic shape and
timestamp pattern (target: 0 lost in >= 100 trials; one-way topics with zero translation
duplicates in >= 99% of trials).

    .venv/bin/python -m bench.failover_trials [--trials 100] [--per-round 12] [--seed 1]
        [--mirror python|mm2] [--mm2-at-least-once] [--json PATH]

Two scratch KRaft clusters on free ports, a data mirror both ways and the traffic generator
running all along, the project's sync assets materialized in this process (local Spark kept warm,
embedded ClickHouse in the scratch folder). Each trial is a fresh consumer group stopped at a
random moment and restarted on its standby (devstack/failover_trials.py).

The mirror (``--mirror``):

* ``python``: the dev harness's mirror (devstack/mirror.py), one thread per direction;
* ``mm2``: Apache Kafka's MirrorMaker 2 (devstack/mirrormaker2.py): both flows in one JVM, topic
  names kept, the project's Connect transform writing the origin headers on every copy, copies
  never copied back, exactly-once source support unless ``--mm2-at-least-once``. Its topic regex
  covers the trial topics only (``ft[.].*``), so the sync sees the same topics either way.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bench.clusters import CLUSTERS, ScratchClusters, free_port
from devstack.failover_trials import (
    FailoverTrials,
    dagster_sync_cycle,
    format_summary,
    plan_trials,
    summarize,
)
from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint
from devstack.mirrormaker2 import PROBE_TOPIC, MirrorMaker2, MirrorMaker2Config
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from offset_pipeline.monitoring.decision_log import LOGGER_NAME
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource

PREFIX = "ft."
#: The trial topics as MirrorMaker 2 matches them (a Java regex against the whole name).
MM2_TOPICS = "ft[.].*"


def trial_plan() -> tuple[TopicTraffic, ...]:
    """Every shape and timestamp pattern the targets name, two partitions each."""
    return (
        TopicTraffic(f"{PREFIX}orders", 2, CLUSTERS, "increasing", rate_per_s=10.0),
        TopicTraffic(f"{PREFIX}shipments", 2, ("idc1",), "increasing", rate_per_s=10.0),
        TopicTraffic(f"{PREFIX}payments.batch", 2, ("idc1",), "equal_batches", rate_per_s=20.0, batch_size=20),
        TopicTraffic(f"{PREFIX}clicks.late", 2, ("idc1",), "out_of_order", rate_per_s=10.0),
        TopicTraffic(f"{PREFIX}inventory.batch", 2, ("idc2",), "equal_batches", rate_per_s=10.0, batch_size=10),
        TopicTraffic(f"{PREFIX}ledger.tx", 2, ("idc1",), "increasing", rate_per_s=10.0, batch_size=5,
                     transactional=True, abort_ratio=0.25),
    )


def start_python_mirrors(bootstraps: dict[str, str], stop: threading.Event) -> list[threading.Thread]:
    """The dev harness's mirror, one thread per direction, over the trial topics."""
    threads = []
    for src, dst in (("idc1", "idc2"), ("idc2", "idc1")):
        mirror = DataMirror(MirrorConfig(
            MirrorEndpoint(src, bootstraps[src]), MirrorEndpoint(dst, bootstraps[dst]),
            topic_pattern="^ft[.]", metadata_refresh_s=1.0,
        ))
        threads.append(threading.Thread(target=mirror.run, args=(stop,), daemon=True, name=f"mirror-{src}"))
    for thread in threads:
        thread.start()
    return threads


def start_mm2(bootstraps: dict[str, str], work_dir: Path, exactly_once: bool) -> MirrorMaker2:
    """MirrorMaker 2 both ways over the trial topics, started from this (the main) thread: its JVM's
    parent-death signal follows the starting thread, which must live as long as the mirror.

    Its probe topic is created here first, and awaited in both clusters' metadata: on brokers just
    started, the probe's first read of a topic created a moment before failed with "Unknown
    partition" (seen once here, on a loaded machine)."""
    probe = TopicTraffic(PROBE_TOPIC, 1, CLUSTERS, "increasing")
    ensure_topics((probe,), bootstraps)
    for name, bootstrap in bootstraps.items():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offset-pipeline-bench-probe-wait",
                             "log_level": 3})
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    consumer.get_watermark_offsets(TopicPartition(PROBE_TOPIC, 0), timeout=10)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            consumer.close()
    mirror = MirrorMaker2(MirrorMaker2Config(
        (MirrorEndpoint("idc1", bootstraps["idc1"]), MirrorEndpoint("idc2", bootstraps["idc2"])), work_dir,
        topics=MM2_TOPICS, rest_port=free_port(), exactly_once=exactly_once,
    ))
    mirror.start(timeout_s=240.0)
    return mirror


def report(outcomes, timed_cycles: list[float], wall_s: float, mirror_label: str) -> tuple[str, dict]:
    """The printed summary and the same figures as JSON-ready data."""
    rows = summarize(outcomes)
    one_way = [o for o in outcomes if o.trial.shape != "two_way"]
    two_way = [o for o in outcomes if o.trial.shape == "two_way"]
    zero_dup_one_way = sum(1 for o in one_way if o.duplicates == 0)
    lines = [
        f"failover trials on real clusters, mirror: {mirror_label}: {len(outcomes)} trials, "
        f"{len(timed_cycles)} sync cycles (mean {sum(timed_cycles) / max(1, len(timed_cycles)):.1f} s), "
        f"{wall_s:.0f} s in all",
        format_summary(rows),
        "",
        f"lost records, all trials:                 {sum(o.lost for o in outcomes)}",
        f"one-way trials with zero duplicates:      {zero_dup_one_way}/{len(one_way)} "
        f"({zero_dup_one_way / max(1, len(one_way)):.1%})",
    ]
    if two_way:
        lines.append(f"two-way trials synced loss-free:          "
                     f"{sum(1 for o in two_way if o.synced_all and o.lost == 0)}/{len(two_way)}")
    lines.append(f"trials resumed exactly at the synced offset: "
                 f"{sum(1 for o in outcomes if o.resumed_at_synced)}/{len(outcomes)}")
    for o in outcomes:
        if not o.synced_all or o.duplicates:
            lines.append(
                f"{'UNSYNCED' if not o.synced_all else 'DUPLICATES'} {o.trial.group_id} {o.trial.shape} "
                f"{o.trial.pattern} {o.trial.active}->{o.trial.standby}: {o.duplicates} duplicates, synced {o.synced}, "
                + "; ".join(f"[{p}] {d}" for p, d in sorted(o.decisions.items())))
    for o in outcomes:
        if o.lost:
            lines.append(
                f"LOSS {o.trial.group_id} {o.trial.topic.name} {o.trial.active}->{o.trial.standby}: {o.lost} "
                f"e.g. {o.lost_ids[:3]} decisions={ {p: str(d) for p, d in o.decisions.items()} } synced={o.synced}")
    figures = {
        "mirror": mirror_label,
        "trials": len(outcomes),
        "lost": sum(o.lost for o in outcomes),
        "duplicates": sum(o.duplicates for o in outcomes),
        "unsynced": sum(1 for o in outcomes if not o.synced_all),
        "not_resumed_at_synced": sum(1 for o in outcomes if not o.resumed_at_synced),
        "one_way_zero_duplicate_trials": zero_dup_one_way,
        "one_way_trials": len(one_way),
        "sync_cycles": len(timed_cycles),
        "mean_cycle_s": round(sum(timed_cycles) / max(1, len(timed_cycles)), 2),
        "wall_s": round(wall_s, 1),
        "by_shape_and_pattern": rows,
    }
    return "\n".join(lines), figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--per-round", type=int, default=12, help="trials run together (one group each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stop-range", type=float, nargs=2, default=(2.0, 12.0), metavar=("MIN_S", "MAX_S"))
    parser.add_argument("--mirror", choices=("python", "mm2"), default="python",
                        help="the dev harness's Python mirror, or MirrorMaker 2 with the origin-header transform")
    parser.add_argument("--mm2-at-least-once", action="store_true",
                        help="MirrorMaker 2 without exactly-once source support")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    plan = trial_plan()
    shapes = {t.name: "two_way" if t.two_way else f"one_way:{t.producers_on[0]}" for t in plan}
    mirror_label = "python" if args.mirror == "python" else (
        "mm2 (at-least-once)" if args.mm2_at_least_once else "mm2 (exactly-once)")
    started = time.monotonic()
    mm2: MirrorMaker2 | None = None
    with ScratchClusters() as clusters, tempfile.TemporaryDirectory(prefix="offset-pipeline-trials-") as scratch:
        bootstraps = clusters.bootstraps
        # The decision lines (monitoring/decision_log.py) to a file, as a deployment routes them, not this console.
        decisions = logging.getLogger(LOGGER_NAME)
        handler = logging.FileHandler(Path(scratch) / "decisions.log")
        handler.setFormatter(logging.Formatter("%(message)s"))
        decisions.handlers, decisions.propagate = [handler], False
        decisions.setLevel(logging.INFO)
        ensure_topics(plan, bootstraps)
        stop = threading.Event()
        threads: list[threading.Thread] = []
        generator: TrafficGenerator | None = None
        try:
            if args.mirror == "mm2":
                mm2 = start_mm2(bootstraps, Path(scratch) / "mm2", exactly_once=not args.mm2_at_least_once)
                print(f"MirrorMaker 2 copies both ways ({mirror_label}), {mm2.ready_after_s:.1f} s after its JVM "
                      f"started", flush=True)
            else:
                threads += start_python_mirrors(bootstraps, stop)
            generator = TrafficGenerator(plan, bootstraps, seed=args.seed)
            traffic = threading.Thread(target=generator.run, args=(stop,), daemon=True, name="traffic")
            traffic.start()
            threads.append(traffic)
            time.sleep(5)  # some history on every topic before the first group starts

            resources = {
                "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=bootstraps["idc1"]),
                "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=bootstraps["idc2"]),
                "clickhouse": ClickHouseResource(dsn=f"chdb://{Path(scratch) / 'clickhouse'}"),
                "spark": SparkResource(),
            }
            trials = plan_trials(plan, CLUSTERS, args.trials, seed=args.seed, prefix="trial",
                                 stop_range_s=tuple(args.stop_range))
            include = "^" + trials[0].group_id.rsplit("-", 1)[0] + "-"
            cycle = dagster_sync_cycle(resources, group_include=include, topic_shapes=shapes, console_log_level="WARNING")
            timed_cycles: list[float] = []

            def timed():
                t0 = time.monotonic()
                try:
                    return cycle()
                finally:
                    timed_cycles.append(time.monotonic() - t0)

            harness = FailoverTrials(bootstraps, timed, Path(scratch) / "trials")
            outcomes = []
            for start in range(0, len(trials), args.per_round):
                if mm2 is not None and not mm2.running():
                    raise RuntimeError(f"MirrorMaker 2 exited (code {mm2.proc.returncode}); "
                                       f"last lines of its log:\n{mm2.log_tail()}")
                batch = trials[start:start + args.per_round]
                outcomes += harness.run_round(batch)
                done = outcomes[-len(batch):]
                print(
                    f"round {start // args.per_round + 1}: {len(batch)} trials, lost {sum(o.lost for o in done)}, "
                    f"duplicates {sum(o.duplicates for o in done)}, unsynced {sum(1 for o in done if not o.synced_all)} "
                    f"({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            if mm2 is not None:
                mm2.stop()
            if generator is not None:
                generator.close()

    text, figures = report(outcomes, timed_cycles, time.monotonic() - started, mirror_label)
    print()
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**figures, "args": {k: (str(v) if isinstance(v, Path) else v)
                                                             for k, v in vars(args).items()}}, indent=2) + "\n")
    return 1 if figures["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
