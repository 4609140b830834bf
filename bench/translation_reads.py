"""The translation's reads and rules alone, outside Spark and Dagster: one Spark task's work
(``spark_translation.translate_keyed_rows``) over every Kafka partition of a workload, read one
partition per round trip (``--batches 1``) or batched (``kafka_io/batched_reads.py``). Prints wall
seconds, this process's CPU-seconds (librdkafka's threads included) and, with ``--profile``, the
top of a cProfile of the batched run. Asserts nothing.

    .venv/bin/python -m bench.translation_reads [--topics 100 --partitions 20 --groups-per-topic 5]
        [--batches 1,64,256] [--threads 1] [--profile]

Set-up, not timed: two scratch KRaft clusters, the workload of ``cycle_benchmark.py`` filled and
mirrored both ways, one member per group with its commits. The work rows are built from the
groups' committed offsets and the partitions' log ranges, as the snapshot builds them.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

from bench.clusters import (
    CLUSTERS,
    ActiveGroups,
    ScratchClusters,
    Workload,
    create_and_fill,
    mirror_both_ways,
)
from bench.floor_reads import run_floor
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.sync.spark_translation import PARTITION_KEY, translate_keyed_rows


def work_by_key(clusters: ScratchClusters, workload: Workload, groups: ActiveGroups) -> dict[tuple, list[dict]]:
    shapes = workload.shapes()
    active_of = {g.group_id: g.active for g in workload.groups()}
    tps = sorted({(t, p) for _, t, p in groups.committed})
    ranges = {name: {(r.topic, r.partition): r for r in read_partition_ranges(clusters.admin(name), name, tps)}
              for name in CLUSTERS}
    out: dict[tuple, list[dict]] = {}
    for (group_id, topic, p), c in sorted(groups.committed.items()):
        active = active_of[group_id]
        standby = next(n for n in CLUSTERS if n != active)
        a, s = ranges[active][(topic, p)], ranges[standby][(topic, p)]
        row = {"group_id": group_id, "topic": topic, "partition": p, "active": active, "standby": standby,
               "committed": c, "standby_committed": None, "active_log_start": a.log_start,
               "active_log_end": a.log_end, "standby_log_start": s.log_start, "standby_log_end": s.log_end,
               "shape": shapes[topic], "standby_timestamp_type": "CreateTime"}
        out.setdefault(tuple(row[k] for k in PARTITION_KEY), []).append(row)
    return out


def run_once(by_key, confs, batch: int, threads: int) -> tuple[float, float, dict]:
    wall, cpu = time.monotonic(), time.process_time()
    statuses: dict[str, int] = {}
    for rows in translate_keyed_rows(by_key, confs, snapshot_id="bench", cycle_time_ms=0, threads=threads,
                                     batch_keys=batch):
        for r in rows:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return time.monotonic() - wall, time.process_time() - cpu, statuses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--groups-per-topic", type=int, default=5)
    parser.add_argument("--records-per-partition", type=int, default=40)
    parser.add_argument("--batches", default="1,64,256")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    workload = Workload(args.topics, args.partitions, args.groups_per_topic, min(10, args.topics),
                        args.records_per_partition, 7)
    with tempfile.TemporaryDirectory(prefix="offset-pipeline-reads-") as tmp, ScratchClusters(Path(tmp)) as clusters:
        filled = create_and_fill(clusters, workload)
        mirror_both_ways(clusters, workload, filled.produced)
        with ActiveGroups(clusters, workload) as groups:
            by_key = work_by_key(clusters, workload, groups)
            confs = {name: {"bootstrap.servers": bootstrap} for name, bootstrap in clusters.bootstraps.items()}
            from bench.floor_reads import floor_partitions

            floor = run_floor(clusters.bootstraps, floor_partitions(clusters, workload, groups))
            print(f"{sum(map(len, by_key.values()))} group-partitions, {len(by_key)} keys; "
                  f"floor (sequential reads) {floor.seconds:.2f}s", flush=True)
            run_once(by_key, confs, 64, 1)  # warm: consumers pooled, topics known
            for batch in [int(b) for b in args.batches.split(",")]:
                for _ in range(args.repeat):
                    wall, cpu, statuses = run_once(by_key, confs, batch, args.threads)
                    print(f"batch {batch:>4} threads {args.threads}: {wall:6.2f}s wall, {cpu:6.2f} CPU-s  {statuses}",
                          flush=True)
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                run_once(by_key, confs, int(args.batches.split(",")[-1]), 1)
                profile.disable()
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
                print(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
