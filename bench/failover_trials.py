"""Failover trials on real clusters: lost and duplicated records per trial, by topic shape and
timestamp pattern (issue 3, target: 0 lost in >= 100 trials; one-way topics with zero
translation duplicates in >= 99% of trials).

    .venv/bin/python bench/failover_trials.py [--trials 100] [--per-round 10] [--seed 1]

Two scratch KRaft clusters on free ports, the real data mirror both ways and the traffic generator
running all along, the project's sync assets materialized in this process (local Spark kept warm,
embedded ClickHouse in the scratch folder). Each trial is a fresh consumer group stopped at a
random moment and restarted on its standby (devstack/failover_trials.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

from _clusters import CLUSTERS, ScratchClusters

from devstack.failover_trials import (
    FailoverTrials,
    dagster_sync_cycle,
    format_summary,
    plan_trials,
    summarize,
)
from offset_pipeline.monitoring.decision_log import LOGGER_NAME
from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource

PREFIX = "ft."


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--per-round", type=int, default=12, help="trials run together (one group each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stop-range", type=float, nargs=2, default=(2.0, 12.0), metavar=("MIN_S", "MAX_S"))
    args = parser.parse_args(argv)

    plan = trial_plan()
    shapes = {t.name: "two_way" if t.two_way else f"one_way:{t.producers_on[0]}" for t in plan}
    started = time.monotonic()
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
        threads = []
        for src, dst in (("idc1", "idc2"), ("idc2", "idc1")):
            mirror = DataMirror(MirrorConfig(
                MirrorEndpoint(src, bootstraps[src]), MirrorEndpoint(dst, bootstraps[dst]),
                topic_pattern="^ft[.]", metadata_refresh_s=1.0,
            ))
            threads.append(threading.Thread(target=mirror.run, args=(stop,), daemon=True, name=f"mirror-{src}"))
        generator = TrafficGenerator(plan, bootstraps, seed=args.seed)
        threads.append(threading.Thread(target=generator.run, args=(stop,), daemon=True, name="traffic"))
        for thread in threads:
            thread.start()
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
        cycle = dagster_sync_cycle(resources, group_include=include, topic_shapes=shapes)
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
            batch = trials[start:start + args.per_round]
            outcomes += harness.run_round(batch)
            done = outcomes[-len(batch):]
            print(
                f"round {start // args.per_round + 1}: {len(batch)} trials, lost {sum(o.lost for o in done)}, "
                f"duplicates {sum(o.duplicates for o in done)}, unsynced {sum(1 for o in done if not o.synced_all)} "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        generator.close()

    rows = summarize(outcomes)
    print()
    print(f"failover trials on real clusters: {len(outcomes)} trials, {len(timed_cycles)} sync cycles "
          f"(mean {sum(timed_cycles) / len(timed_cycles):.1f} s), {time.monotonic() - started:.0f} s in all")
    print(format_summary(rows))
    one_way = [o for o in outcomes if o.trial.shape != "two_way"]
    print()
    print(f"lost records, all trials:                 {sum(o.lost for o in outcomes)}")
    print(f"one-way trials with zero duplicates:      {sum(1 for o in one_way if o.duplicates == 0)}/{len(one_way)} "
          f"({sum(1 for o in one_way if o.duplicates == 0) / max(1, len(one_way)):.1%})")
    two_way = [o for o in outcomes if o.trial.shape == "two_way"]
    if two_way:
        print(f"two-way trials synced loss-free:          {sum(1 for o in two_way if o.synced_all and o.lost == 0)}"
              f"/{len(two_way)}")
    print(f"trials resumed exactly at the synced offset: {sum(1 for o in outcomes if o.resumed_at_synced)}/{len(outcomes)}")
    for o in outcomes:
        if not o.synced_all or o.duplicates:
            print(f"{'UNSYNCED' if not o.synced_all else 'DUPLICATES'} {o.trial.group_id} {o.trial.shape} "
                  f"{o.trial.pattern} {o.trial.active}->{o.trial.standby}: {o.duplicates} duplicates, synced {o.synced}, "
                  + "; ".join(f"[{p}] {d}" for p, d in sorted(o.decisions.items())))
    bad = [o for o in outcomes if o.lost]
    for o in bad:
        print(f"LOSS {o.trial.group_id} {o.trial.topic.name} {o.trial.active}->{o.trial.standby}: {o.lost} "
              f"e.g. {o.lost_ids[:3]} decisions={ {p: str(d) for p, d in o.decisions.items()} } synced={o.synced}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
