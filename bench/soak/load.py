"""The soak's load: the scaled workload's traffic and its consumer groups committing steadily on
their active clusters, in one process of its own (its RSS is measured like the others).

``python -m bench.soak.load --bootstrap idc1=HOST:PORT --bootstrap idc2=HOST:PORT --topics 100
--partitions 20 --groups-per-topic 5 --status-file F``

* traffic: the devstack's seeded :class:`TrafficGenerator` over ``clusters.Workload``'s plan (two-way
  and one-way topics, increasing and equal-batch timestamps), paced at ``rate_per_s * rate_scale``
  per topic and producing cluster;
* groups: one real member per group on its active cluster (subscribed, assigned, paused: it fetches
  nothing), which every ``--commit-every-s`` commits each partition at the current log end minus a
  small seeded lag (never backwards): a group that keeps up with its topics, as a consumer that
  processed and committed would. Members are polled every round, so they stay in their group
  across the soak and rejoin after a broker restart.

A status JSON (``--status-file``) is rewritten every round: joined groups, commit rounds ok/failed.
SIGTERM/SIGINT stop it.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.clusters import Workload
from devstack.cli import cluster_address, start_process_logging, stop_on_signals
from devstack.traffic import TrafficGenerator, ensure_topics
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges

log = logging.getLogger("soak.load")
PREFIX = "soak."


def workload_from(args) -> Workload:
    return Workload(topics=args.topics, partitions=args.partitions, groups_per_topic=args.groups_per_topic,
                    topics_per_group=min(args.topics_per_group, args.topics), seed=args.seed, prefix=PREFIX)


class CommittingGroups:
    def __init__(self, workload: Workload, bootstraps: dict[str, str], seed: int, max_lag: int):
        self.workload = workload
        self.bootstraps = bootstraps
        self.rng = random.Random(f"{seed}:soak-commits")
        self.max_lag = max_lag
        self.specs = workload.groups()
        self.members: dict[str, Consumer] = {}
        self.assigned: set[str] = set()
        self.committed: dict[tuple[str, str, int], int] = {}
        self.admins = {name: AdminClient({"bootstrap.servers": bs, "log_level": 3}) for name, bs in bootstraps.items()}
        self.rounds_ok = self.rounds_failed = self.commit_errors = 0

    def join(self) -> None:
        for spec in self.specs:
            member = Consumer({
                "bootstrap.servers": self.bootstraps[spec.active], "group.id": spec.group_id,
                "enable.auto.commit": False, "auto.offset.reset": "latest",
                "session.timeout.ms": 45000, "max.poll.interval.ms": 600_000, "log_level": 3,
                # a member never reads records: keep its prefetch queue tiny should it ever fetch
                "queued.max.messages.kbytes": 64,
            })

            def on_assign(consumer, partitions, group_id=spec.group_id):
                # Assign here, then pause: a pause before the client's own assign() after this callback
                # is undone by it, and each member then prefetched up to 64 MB of records it never read
                # (the first 10k soak's load grew by 3 MB/s).
                consumer.assign(partitions)
                consumer.pause(partitions)  # fetch nothing: the commits below say how far it got
                self.assigned.add(group_id)

            member.subscribe(list(spec.topics), on_assign=on_assign)
            self.members[spec.group_id] = member

    def poll_all(self) -> None:
        for member in self.members.values():
            member.poll(0)

    def commit_round(self) -> None:
        tps = [(t.name, p) for t in self.workload.plan() for p in range(t.partitions)]
        ends: dict[str, dict[tuple[str, int], int]] = {}
        for name, admin in self.admins.items():
            errors: dict = {}
            ranges = read_partition_ranges(admin, name, tps, timeout_s=10, errors=errors)
            ends[name] = {(r.topic, r.partition): r.log_end for r in ranges}
        failed = 0
        for spec in self.specs:
            member = self.members[spec.group_id]
            member.poll(0)
            offsets = []
            for topic in spec.topics:
                for p in range(self.workload.partitions):
                    end = ends[spec.active].get((topic, p))
                    if end is None:
                        continue
                    key = (spec.group_id, topic, p)
                    c = max(self.committed.get(key, 0), end - self.rng.randint(0, self.max_lag))
                    offsets.append((key, TopicPartition(topic, p, c)))
            if not offsets:
                continue
            try:
                member.commit(offsets=[tp for _, tp in offsets], asynchronous=False)
                for key, tp in offsets:
                    self.committed[key] = tp.offset
            except KafkaException as exc:
                failed += 1
                self.commit_errors += 1
                log.warning("commit of %s failed: %s", spec.group_id, exc)
        if failed:
            self.rounds_failed += 1
        else:
            self.rounds_ok += 1

    def close(self) -> None:
        for member in self.members.values():
            try:
                member.close()
            except Exception:  # noqa: BLE001 - closing on the way out
                pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=cluster_address, action="append", required=True)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--groups-per-topic", type=int, default=5)
    parser.add_argument("--topics-per-group", type=int, default=10)
    parser.add_argument("--rate-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--commit-every-s", type=float, default=5.0)
    parser.add_argument("--max-lag", type=int, default=3, help="records a commit may stay behind the log end")
    parser.add_argument("--status-file", type=Path, required=True)
    args = parser.parse_args(argv)
    start_process_logging()
    stop = stop_on_signals()
    bootstraps = dict(args.bootstrap)
    workload = workload_from(args)
    ensure_topics(workload.plan(), bootstraps, timeout_s=180)
    traffic = TrafficGenerator(workload.plan(), bootstraps, seed=args.seed, rate_scale=args.rate_scale)
    producer = threading.Thread(target=traffic.run, args=(stop,), kwargs={"report_every_s": 60.0},
                                name="traffic", daemon=True)
    producer.start()
    groups = CommittingGroups(workload, bootstraps, args.seed, args.max_lag)
    groups.join()
    started = time.monotonic()
    try:
        while not stop.is_set():
            groups.poll_all()
            if len(groups.assigned) == len(groups.specs) or time.monotonic() - started > 300:
                try:
                    groups.commit_round()
                except Exception as exc:  # noqa: BLE001 - a cluster down: the next round tries again
                    groups.rounds_failed += 1
                    log.warning("commit round failed: %s", exc)
            status = {"groups": len(groups.specs), "assigned": len(groups.assigned),
                      "group_partitions": workload.group_partitions, "rounds_ok": groups.rounds_ok,
                      "rounds_failed": groups.rounds_failed, "commit_errors": groups.commit_errors,
                      "time": time.time()}
            tmp = args.status_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(status))
            tmp.replace(args.status_file)
            stop.wait(args.commit_every_s)
    finally:
        groups.close()
        producer.join(timeout=30)
        traffic.close()
    log.info("load stopped: %s", traffic.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
