"""The curve: one interval sync cycle at 1k, 10k, 30k and 100k group-partitions, on ``local[2]`` and on
a Spark standalone cluster. Prints a table, writes JSON and a PNG; asserts nothing.

    .venv/bin/python -m bench.scale_curve [--sizes 1k,10k,30k,100k] [--engines local,standalone]
        [--cycles 3] [--out bench/results/scale-curve]

Set-up, once and not timed: two scratch KRaft clusters (``clusters.py``), 100 topics x 20 partitions
(every topic shape of ``clusters.Workload``), filled and mirrored both ways by the real data mirror.
Every size reads these logs; the sizes differ in how many groups read each partition, since two
single-node brokers on 2 cores hold 2,000 partitions but not 20,000:

* 1k   = 10 topics x 20 partitions x 5 groups per partition;
* 10k  = 100 x 20 x 5 (``cycle_benchmark.py``'s workload);
* 30k  = 100 x 20 x 15;
* 100k = 100 x 20 x 50.

A group reads 10 topics (so 5, 50, 150 and 500 groups, one real member each on its active cluster;
ids tagged with the size, the snapshot includes only the size's groups).

Per size and engine, in a process of its own (``scale_cycles.py``): a warm-up cycle, then
``--cycles`` measured ones (``--cycles-from-100k`` from 100k): seconds per cycle (median), CPU-seconds of the process tree (driver,
Spark JVMs, executors, Python workers; with the standalone cluster its master and workers too; the
brokers are not in it) and its peak RSS. The floor per size (``floor_reads.py``): the same Kafka
lookups by a minimal sequential confluent-kafka script (snapshot's admin calls, translation reads,
commit step's lookups), best of two (once from 100k) before the engines, and once more right before
each measured cycle, in the cycles' process (not in the cycle's time or CPU): a cycle's ratio is to
the floor beside it, and a size's "x floor" is the median of its cycles' ratios. The machine's speed
moves by half within an hour here; a floor measured minutes before the cycles made ratios of the
drift (a run whose cycles slowed from 6.0 to 8.3 s after its floor read 1.12x; 0.80x beside its
first cycle).

The standalone cluster (``devstack/spark_standalone.py``): a master and two 1-core workers, executors
on the executor Python (``devstack/executor_python.py``), the project's code shipped with the job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.clusters import (
    ActiveGroups,
    ScratchClusters,
    Workload,
    create_and_fill,
    free_port,
    mirror_both_ways,
)
from bench.floor_reads import floor_partitions, run_floor, run_lookup_floor
from bench.sync_runs import table
from devstack.paths import REPO_ROOT

TOPICS, PARTITIONS, TOPICS_PER_GROUP = 100, 20, 10
ENGINES = ("local", "standalone")
LARGE = 100_000  # from this size: --cycles-from-100k measured cycles, the floor once


@dataclasses.dataclass(frozen=True)
class SizedWorkload(Workload):
    """A :class:`Workload` whose group ids carry ``tag`` (one size's groups apart from another's)."""

    tag: str = ""

    def groups(self):
        return [dataclasses.replace(g, group_id=f"{self.prefix}{self.tag}.{g.group_id[len(self.prefix):]}")
                for g in super().groups()]

    @property
    def group_include(self) -> str:
        return "^" + f"{self.prefix}{self.tag}.".replace(".", "[.]")


def parse_size(text: str) -> int:
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def workload_for(size: int, records_per_partition: int, seed: int) -> SizedWorkload:
    """``size`` group-partitions over (at most) the 100 x 20 partitions: more groups per partition."""
    topics = min(TOPICS, max(1, size // (PARTITIONS * 5)))
    groups_per_topic = max(1, round(size / (topics * PARTITIONS)))
    return SizedWorkload(topics, PARTITIONS, groups_per_topic, min(TOPICS_PER_GROUP, topics), records_per_partition,
                         seed, tag=f"s{size}")


def run_engine(engine: str, spec: dict, tmp: Path) -> dict:
    spec_path, out_path = tmp / f"spec-{engine}.json", tmp / f"out-{engine}.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "bench.scale_cycles", str(spec_path), str(out_path)],
                          cwd=REPO_ROOT, timeout=3 * 3600, check=False)
    if proc.returncode != 0:
        return {"error": f"scale_cycles.py exited {proc.returncode}"}
    return json.loads(out_path.read_text())


def summarize(size: int, workload: SizedWorkload, engine: str, report: dict, floor_s: float, floor_parts: dict) -> dict:
    row = {"size": size, "engine": engine, "shape": f"{workload.topics}x{workload.partitions}x{workload.groups_per_topic}",
           "groups": len(workload.groups()), "floor_seconds": floor_s, "floor_parts": floor_parts}
    if "error" in report:
        return {**row, "error": report["error"]}
    measured = [c for c in report["cycles"] if c["label"] not in ("warm-up", "profiled")] or report["cycles"]
    seconds = statistics.median(c["seconds"] for c in measured)
    beside = [c for c in measured if c.get("floor_seconds")]
    if beside:  # each cycle against the floor measured right before it
        row["floor_before_engines"] = floor_s
        floor_s = statistics.median(c["floor_seconds"] for c in beside)
        row.update(floor_seconds=floor_s, floor_parts={k: statistics.median(c["floor_parts"][k] for c in beside)
                                                       for k in floor_parts})
        ratio = statistics.median(c["seconds"] / c["floor_seconds"] for c in beside)
    else:
        ratio = seconds / floor_s
    cpu = statistics.median(c["cpu_seconds"] for c in measured)
    steps = sorted({k for c in measured for k in c["steps"]})
    return {
        **row, "master": report["master"], "seconds": seconds, "ratio": ratio,
        "cpu_seconds": cpu, "cpu_per_1k": cpu / (size / 1000), "peak_rss_mib": max(c["peak_rss_bytes"] for c in measured) / 2**20,
        "steps": {k: statistics.median(c["steps"].get(k, 0.0) for c in measured) for k in steps},
        "deferred_partitions": max(c.get("deferred_partitions") or 0 for c in measured), "cycles": report["cycles"],
    }


def format_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        if "error" in r:
            out.append([f"{r['size']:,}", r["shape"], r["engine"], "failed", "", "", "", "", "", r["error"]])
            continue
        st = r["steps"]
        batch = r.get("read_batch_partitions", "default")
        engine = r["engine"] if batch == "default" else f"{r['engine']} batch {batch}"
        out.append([
            f"{r['size']:,}", r["shape"], engine, f"{r['seconds']:.2f}", f"{r['floor_seconds']:.2f}",
            f"{r['ratio']:.2f}", f"{r['cpu_seconds']:.1f}", f"{r['cpu_per_1k']:.2f}", f"{r['peak_rss_mib']:.0f}",
            " / ".join(f"{st.get(k, 0.0):.1f}" for k in ("offset_snapshot", "offset_translations",
                                                          "offset_standby_commits", "offset_sync_metrics")),
        ])
    return table(["group-partitions", "topics x partitions x groups", "engine", "s/cycle", "floor s", "x floor",
                  "CPU-s", "CPU-s per 1k GP", "peak RSS MiB", "snapshot / translate / commit / metrics s"],
                 out, align="lll" + "r" * 7)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ok = [r for r in rows if "error" not in r]
    for engine in ENGINES:
        pts = sorted((r["size"], r["seconds"], r["cpu_per_1k"]) for r in ok if r["engine"] == engine)
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=engine)
            ax2.plot([p[0] for p in pts], [p[2] for p in pts], "o-", label=engine)
    by_size: dict[int, list[float]] = {}
    for r in rows:  # each engine's cycles had floors of their own: one point per size
        by_size.setdefault(r["size"], []).append(r["floor_seconds"])
    floors = sorted((size, statistics.median(values)) for size, values in by_size.items())
    ax1.plot([f[0] for f in floors], [f[1] for f in floors], "k--", label="sequential floor")
    if floors:
        base = floors[0]
        ax1.plot([f[0] for f in floors], [base[1] * f[0] / base[0] for f in floors], ":", color="grey",
                 label="linear from the floor's first point")
    ax1.axhline(30, color="red", lw=0.8, label="30 s (the 100k target)")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("group-partitions")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_yscale("log")
    ax1.set_ylabel("seconds per cycle")
    ax2.set_ylabel("CPU-seconds per 1,000 group-partitions")
    fig.suptitle("offset_pipeline: one interval sync cycle (bench/scale_curve.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1k,10k,30k,100k")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--cycles", type=int, default=3, help="measured cycles per size and engine (after a warm-up)")
    parser.add_argument("--cycles-from-100k", type=int, default=2, help="measured cycles at 100k and above")
    parser.add_argument("--records-per-partition", type=int, default=40, help="per producing cluster")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--read-threads", type=int, help="the translation's read_threads (default: its own)")
    parser.add_argument("--profile-driver", action="store_true",
                        help="write a cProfile of the driver in one more cycle, left out of the figures, to the out folder "
                             "(profile-<size>-<engine>.txt)")
    parser.add_argument("--read-batches", default="",
                        help="comma list of the translation's read_batch_partitions to compare (default: its own)")
    parser.add_argument("--op-config", default="{}",
                        help='JSON: more config per op, e.g. \'{"offset_standby_commits": {"parallel_groups": 32}}\'')
    parser.add_argument("--spark-conf", default="",
                        help="comma list of Spark settings for the cycles, e.g. spark.sql.shuffle.partitions=8")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results" / "scale-curve")
    parser.add_argument("--replot", type=Path, help="only draw the PNG (and print the table) of this scale_curve.json")
    args = parser.parse_args(argv)
    if args.replot:
        rows = json.loads(args.replot.read_text())
        print(format_table(rows))
        plot(rows, args.replot.with_suffix(".png"))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    EXTRA_SPEC["op_config"] = json.loads(args.op_config)
    EXTRA_SPEC["spark_conf"] = dict(kv.split("=", 1) for kv in args.spark_conf.split(",") if kv.strip())
    if any(EXTRA_SPEC.values()):
        print(f"settings beyond the defaults: {EXTRA_SPEC}", flush=True)
    sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    engines = [e.strip() for e in args.engines.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"offset_pipeline scale curve: sizes {sizes}, engines {engines}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="offset-pipeline-scale-") as tmp_name:
        tmp = Path(tmp_name)
        standalone, executor_python = None, None
        if "standalone" in engines:
            from devstack.executor_python import ensure_executor_python
            from devstack.paths import executor_python_dir
            from devstack.spark_standalone import SparkStandalone

            executor_python = ensure_executor_python(executor_python_dir())
            standalone = SparkStandalone(free_port(), free_port(), tuple(free_port() for _ in range(4)), tmp / "spark")
            standalone.start()
        try:
            with ScratchClusters(tmp / "kafka") as clusters:
                started = time.monotonic()
                workloads = {size: workload_for(size, args.records_per_partition, args.seed) for size in sizes}
                base = Workload(max(w.topics for w in workloads.values()), PARTITIONS, 1, 1,
                                args.records_per_partition, args.seed)
                filled = create_and_fill(clusters, base)
                _, mirror_s = mirror_both_ways(clusters, base, filled.produced)
                print(f"set-up: {base.topics} topics x {PARTITIONS} partitions filled in {filled.seconds:.0f}s, "
                      f"mirrored in {mirror_s:.0f}s", flush=True)
                for size in sizes:
                    cycles = args.cycles if size < LARGE else args.cycles_from_100k
                    rows += measure_size(size, workloads[size], clusters, engines, standalone, executor_python, tmp,
                                         cycles, args.read_threads,
                                         [int(b) for b in args.read_batches.split(",") if b.strip()] or [None],
                                         args.out if args.profile_driver else None)
                    (args.out / "scale_curve.json").write_text(json.dumps(rows, indent=1))
                print(f"total {time.monotonic() - started:.0f}s", flush=True)
        finally:
            if standalone is not None:
                standalone.stop()
    text = format_table(rows)
    header = (f"one interval sync cycle (median of {args.cycles} after a warm-up); floor = sequential "
              f"confluent-kafka lookups, measured beside each cycle (median; x floor: median of the cycles' ratios); CPU = driver + Spark JVMs + executors + Python workers (brokers excluded); "
              f"{os.cpu_count()} cores")
    print("\n" + header + "\n" + text)
    (args.out / "scale_curve.txt").write_text(header + "\n" + text + "\n")
    (args.out / "scale_curve.json").write_text(json.dumps(rows, indent=1))
    plot(rows, args.out / "scale_curve.png")
    print(f"written: {args.out}/scale_curve.{{txt,json,png}}")
    return 0


def measure_size(size: int, workload: SizedWorkload, clusters: ScratchClusters, engines: list[str], standalone,
                 executor_python: str | None, tmp: Path, cycles: int, read_threads: int | None,
                 read_batches: list[int | None], profile_dir: Path | None = None) -> list[dict]:
    with ActiveGroups(clusters, workload) as groups:
        print(f"[{size:,}] {workload.topics} topics x {workload.partitions} partitions x {workload.groups_per_topic} "
              f"groups per partition ({len(groups.members)} groups) ready in {groups.seconds:.0f}s", flush=True)
        floor_inputs = floor_partitions(clusters, workload, groups)
        runs = 2 if size < LARGE else 1  # the floor at 100k takes over a minute
        floor = min((run_floor(clusters.bootstraps, floor_inputs) for _ in range(runs)), key=lambda f: f.seconds)
        lookup_args = ({g.group_id: g.active for g in workload.groups()},
                       sorted({(fp.topic, fp.partition) for fp in floor_inputs}))
        lookups = min((run_lookup_floor(clusters.bootstraps, *lookup_args) for _ in range(runs)),
                      key=lambda f: f.snapshot_seconds + f.commit_seconds)
        parts = {"snapshot": lookups.snapshot_seconds, "translation": floor.seconds, "commit": lookups.commit_seconds}
        floor_s = sum(parts.values())
        print(f"[{size:,}] floor {floor_s:.2f}s ({', '.join(f'{k} {v:.2f}' for k, v in parts.items())})", flush=True)
        # the floor again beside each measured cycle (scale_cycles.py)
        floor_spec = {"partitions": [dataclasses.asdict(fp) for fp in floor_inputs], "groups": lookup_args[0],
                      "ranged": lookup_args[1]}
        rows = []
        for engine in engines:
            for read_batch in read_batches:
                rows.append(measure_engine(size, workload, engine, standalone, executor_python, tmp, cycles,
                                           read_threads, read_batch, clusters, floor_s, parts, profile_dir,
                                           floor_spec))
        return rows


EXTRA_SPEC: dict = {}  # --op-config and --spark-conf, for every engine's cycles


def measure_engine(size, workload, engine, standalone, executor_python, tmp, cycles, read_threads, read_batch,
                   clusters, floor_s, parts, profile_dir: Path | None = None, floor_spec: dict | None = None) -> dict:
    master = standalone.master_url if engine == "standalone" else "local[2]"
    extra = [p for p in ((part.pid() for part in standalone.parts()) if engine == "standalone" else ()) if p]
    label = f"{engine}-b{read_batch}" if read_batch else engine
    spec = {
        "bootstraps": clusters.bootstraps, "dsn": f"chdb://{tmp / f'clickhouse-{size}-{label}'}",
        "master": master, "executor_python": executor_python if engine == "standalone" else None,
        "group_include": workload.group_include, "topic_shapes": workload.shapes(),
        "cycles": cycles, "extra_pids": extra,
        "broker_pids": [p for p in (c.pid() for c in clusters.clusters.values()) if p],
        "decisions_log": str(tmp / f"decisions-{size}-{label}.log"),
        "read_threads": read_threads, "read_batch_partitions": read_batch,
        "profile_driver": str(profile_dir / f"profile-{size}-{label}.txt") if profile_dir else None,
        "floor": floor_spec,
        **EXTRA_SPEC,
    }
    print(f"[{size:,}] {label} ({master}):", flush=True)
    row = summarize(size, workload, engine, run_engine(label, spec, tmp), floor_s, parts)
    row["read_threads"] = read_threads or "default"
    row["read_batch_partitions"] = read_batch or "default"
    if "error" not in row:
        print(f"[{size:,}] {label}: {row['seconds']:.2f}s per cycle, {row['ratio']:.2f}x floor, "
              f"{row['cpu_per_1k']:.2f} CPU-s per 1k GP, peak RSS {row['peak_rss_mib']:.0f} MiB", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
