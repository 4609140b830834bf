"""How much a sync cycle adds to DAGSTER_HOME and to the ClickHouse data folder, what dominates,
and what the run retention gives back.

Two scratch KRaft clusters on free ports with a mirrored workload and active groups
(``clusters.py``), a temporary ``DAGSTER_HOME`` made as ``bin/up`` makes it (``deploy/dagster.yaml``:
SQLite storage, local compute logs), an embedded ClickHouse folder; ``--cycles`` real sync cycles
(every asset of the ``offset_sync`` group, ``dg.materialize`` on that instance, as
``cycle_benchmark.py`` runs them). Prints:

* bytes per run of DAGSTER_HOME by part: ``history/runs.db`` (run rows, tags, snapshots),
  ``history/runs/index.db`` (asset events mirrored for cross-run queries), the per-run event
  shards ``history/runs/<run_id>.db``, the compute logs ``storage/<run_id>/``, ``schedules/``;
* the event log of one cycle by event type, and its materializations' metadata entry by entry
  (serialized bytes): what makes a run weigh what it weighs;
* bytes per cycle of the ClickHouse folder;
* the same after the run retention (``offset_pipeline/housekeeping/run_retention.py``) deleted every run, and
  after a VACUUM of the SQLite files (freed pages are reused by SQLite, not returned to the disk).

    .venv/bin/python -m bench.storage_growth [--cycles 20 --topics 10 --partitions 4 --groups-per-topic 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import dagster as dg

from bench.clusters import ActiveGroups, ScratchClusters, Workload, create_and_fill, mirror_both_ways
from bench.sync_runs import offset_sync_assets, resources
from devstack.paths import REPO_ROOT
from offset_pipeline.housekeeping.run_retention import DAY_S, RunRetention, apply_run_retention
from offset_pipeline.monitoring.decision_log import LOGGER_NAME

SYNC_RUNS_PER_DAY = 86_400 / 30


def du(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def home_parts(home: Path) -> dict[str, int]:
    """DAGSTER_HOME's bytes by part."""
    runs_dir = home / "history" / "runs"
    shards = sum(p.stat().st_size for p in runs_dir.glob("*.db") if p.name != "index.db") if runs_dir.exists() else 0
    parts = {
        "history/runs.db": du(home / "history" / "runs.db"),
        "history/runs/index.db": du(runs_dir / "index.db"),
        "history/runs/<run_id>.db (event shards)": shards,
        "storage/<run_id>/ (compute logs)": du(home / "storage"),
        "schedules/": du(home / "schedules"),
    }
    parts["other"] = du(home) - sum(parts.values())
    parts["total"] = du(home)
    return parts


def event_bytes(instance: dg.DagsterInstance, run_id: str) -> tuple[Counter, Counter, Counter]:
    """(bytes by event type, count by event type, bytes by materialization metadata entry)."""
    by_type, count, by_entry = Counter(), Counter(), Counter()
    for entry in instance.all_logs(run_id):
        kind = entry.dagster_event_type.value if entry.dagster_event_type else "log message"
        by_type[kind] += len(dg.serialize_value(entry))
        count[kind] += 1
        if entry.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            materialization = entry.asset_materialization
            for key, value in materialization.metadata.items():
                by_entry[f"{materialization.asset_key.to_user_string()}: {key}"] += len(dg.serialize_value(value))
    return by_type, count, by_entry


def vacuum(path: Path) -> None:
    if path.exists():
        with sqlite3.connect(path) as db:
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # in WAL mode VACUUM's result lands in the -wal file


def kb(n: float) -> str:
    return f"{n / 1024:,.1f} KB"


def mb(n: float) -> str:
    return f"{n / 1024 / 1024:,.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--groups-per-topic", type=int, default=2)
    parser.add_argument("--topics-per-group", type=int, default=5)
    parser.add_argument("--records-per-partition", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workload = Workload(args.topics, args.partitions, args.groups_per_topic, min(args.topics_per_group, args.topics),
                        args.records_per_partition, args.seed)
    with tempfile.TemporaryDirectory(prefix="offset-pipeline-storage-bench-") as tmp:
        tmp_dir = Path(tmp)
        with ScratchClusters(tmp_dir / "kafka") as clusters:
            filled = create_and_fill(clusters, workload)
            mirror_both_ways(clusters, workload, filled.produced)
            with ActiveGroups(clusters, workload) as groups:
                print(f"set-up: {workload.topics} topics x {workload.partitions} partitions, "
                      f"{len(groups.members)} groups", flush=True)
                report = measure(args, workload, clusters, tmp_dir)
    print(report)
    return 0


def measure(args, workload: Workload, clusters: ScratchClusters, tmp_dir: Path) -> str:
    home = tmp_dir / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    data = tmp_dir / "clickhouse"
    dsn = f"chdb://{data}"
    decisions = logging.getLogger(LOGGER_NAME)  # the decision lines to the step's stderr, as deployed
    decisions.setLevel(logging.INFO)
    assets = offset_sync_assets()
    run_config = {"ops": {"offset_translations": {"config": {"topic_shapes": workload.shapes()}}},
                  "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    lines = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run_ids = []
        for n in range(args.cycles + 1):
            if n == 1:  # cycle 0 warms up (tables created, Spark started): measured from cycle 1 on
                home_before, data_before = home_parts(home), du(data)
            started = time.monotonic()
            result = dg.materialize(assets, resources=resources(clusters.bootstraps, dsn, None), run_config=run_config,
                                    instance=instance, raise_on_error=False)
            run_ids.append(result.run_id)
            print(f"cycle {n}: {'ok' if result.success else 'FAILED'} in {time.monotonic() - started:.1f}s", flush=True)
        home_after, data_after = home_parts(home), du(data)
        n = args.cycles
        gps = sum(len(g.topics) for g in workload.groups()) * workload.partitions
        lines.append(f"\n{n} sync cycles measured, {gps} group-partitions; bytes added per run:")
        for part, size in home_after.items():
            lines.append(f"  {part:45s} {kb((size - home_before[part]) / n):>12s}   (now {mb(size)})")
        per_run = (home_after["total"] - home_before["total"]) / n
        per_ch = (data_after - data_before) / n
        lines.append(f"  {'ClickHouse data folder':45s} {kb(per_ch):>12s}   (now {mb(data_after)})")
        lines.append(f"  at one run per 30 s: DAGSTER_HOME +{mb(per_run * SYNC_RUNS_PER_DAY)}/day, "
                     f"ClickHouse +{mb(per_ch * SYNC_RUNS_PER_DAY)}/day (before merges and TTL)")

        by_type, count, by_entry = event_bytes(instance, run_ids[-1])
        lines.append(f"\nevent log of one cycle ({sum(count.values())} events, {kb(sum(by_type.values()))} serialized):")
        for kind, size in by_type.most_common():
            lines.append(f"  {kind:35s} {count[kind]:4d} events {kb(size):>12s}")
        lines.append("materialization metadata by entry (serialized):")
        for entry, size in by_entry.most_common():
            lines.append(f"  {entry:60s} {kb(size):>12s}")
        logs = home / "storage" / run_ids[-1]
        lines.append(f"compute logs of one cycle: {kb(du(logs))} "
                     f"({', '.join(f'{p.suffix} {kb(p.stat().st_size)}' for p in sorted(logs.rglob('*')) if p.is_file())})")

        done = apply_run_retention(instance, time.time() + 2 * DAY_S, RunRetention(max_runs_per_tick=10_000))
        after_retention = home_parts(home)
        lines.append(f"\nrun retention (2 days later): {json.dumps(done.summary()['by_job_status'])}")
    for db in (home / "history" / "runs.db", home / "history" / "runs" / "index.db"):
        vacuum(db)
    after_vacuum = home_parts(home)
    lines.append(f"  {'part':45s} {'before':>12s} {'retention':>12s} {'+ VACUUM':>12s}")
    for part in home_after:
        lines.append(f"  {part:45s} {mb(home_after[part]):>12s} {mb(after_retention[part]):>12s} "
                     f"{mb(after_vacuum[part]):>12s}")
    with sqlite3.connect(home / "history" / "runs" / "index.db") as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        counts = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    lines.append("index.db rows left after retention: "
                 + ", ".join(f"{t} {n}" for t, n in sorted(counts.items()) if n))
    steady = per_run * SYNC_RUNS_PER_DAY * RunRetention().success_days
    lines.append(f"steady state with the defaults (successful sync runs kept 1 day = {SYNC_RUNS_PER_DAY:.0f} runs): "
                 f"about {mb(steady)} of runs in DAGSTER_HOME, plus kept failures and audits")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
