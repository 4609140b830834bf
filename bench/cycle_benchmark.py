"""How long one full sync cycle takes at scale, and what bounds it. Prints figures; asserts nothing.

    python -m bench.cycle_benchmark [--topics 100 --partitions 20 --groups-per-topic 5 --cycles 5]

Set-up (not timed as a cycle): two KRaft clusters on free ports in a temporary folder, every topic
created on both, filled with a mix of shapes (two-way with producers on both sides; one-way with
increasing timestamps; one-way with equal-timestamp batches), mirrored both ways by the real
DataMirror until every record is copied (then the mirror stops: the cycles run over quiescent
logs), one real member per group on its active cluster (idc1 or idc2) with commits at varied
positions. Then:

* ``--cycles`` full cycles: every asset of the ``offset_sync`` group materialized in this process
  (``dg.materialize``) with the project's resources pointed at these clusters, an embedded
  ClickHouse in the temporary folder and a Spark session kept warm across cycles: through a Spark
  Connect server started for the benchmark (``--spark connect``, the default; the stack's shape)
  or local Spark in this process (``--spark local``);
* ``--launched-runs`` cycles as Dagster launches them: a fresh ``dagster job execute`` process each
  (code location load, Spark Connect session, run), so the per-run process cost shows too;
* the floor (``bench.floor_reads``): the same Kafka lookups by a minimal sequential script: the
  snapshot's and the commit step's admin calls and the translation reads, each stage compared
  with its own part of the floor and the whole cycle with their sum.

Stage times come from the run's step events (start to success); each asset's metadata adds its own
figures. Strategy rates come from this cycle's ``offset_translations`` rows.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
import dagster as dg

from bench.clusters import ActiveGroups, ScratchClusters, Workload, create_and_fill, free_port, mirror_both_ways
from bench.floor_reads import floor_partitions, run_floor, run_lookup_floor
from bench.sync_runs import offset_sync_assets, resources, run_window, step_seconds, table
from devstack.paths import REPO_ROOT
from offset_pipeline.monitoring.decision_log import LOGGER_NAME
from offset_pipeline.translation import TranslationStatus
from offset_pipeline.translation.facts import RecordFact
from offset_pipeline.translation.headers import CopiedFrom

CADENCE_S = 30.0


def translation_shares(dsn: str, snapshot_id: str) -> Counter:
    from offset_pipeline.resources.clickhouse import ClickHouseResource, close_embedded_clients

    client = ClickHouseResource(dsn=dsn).get_client()
    try:
        rows = client.query(
            "SELECT status, strategy, count() FROM offset_translations WHERE snapshot_id = {s:String} "
            "GROUP BY status, strategy",
            parameters={"s": snapshot_id},
        ).result_rows
    finally:
        close_embedded_clients(dsn)  # chdb: one process per data path (a launched run needs it)
    return Counter({(status, strategy): n for status, strategy, n in rows})


# -- two-way partitions carrying standby-origin records -----------------------------------------------
# "Carried": below the group's committed offset ``c`` on its active cluster there is a copy of a record
# produced on the standby (its origin header names the standby). Only then can a loss-free header anchor
# exist at all; a partition whose processed records were all produced on the active side has nothing to
# anchor on yet, whatever the strategy. Read once after the cycles (the logs are quiescent by then).


def standby_origin_offsets(bootstrap: str, cluster: str, peer: str, partitions: list[tuple[str, int]],
                           timeout_s: float = 300.0) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> offsets on ``cluster`` of copies of records produced on ``peer``."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"offset-pipeline-carried-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
        "auto.offset.reset": "earliest", "log_level": 3,
    })
    out: dict[tuple[str, int], list[int]] = defaultdict(list)
    pending = set(partitions)
    try:
        consumer.assign([TopicPartition(t, p, -2) for t, p in partitions])  # -2: OFFSET_BEGINNING
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} partitions of {cluster} not read to their end")
            for msg in consumer.consume(1000, timeout=1.0):
                key = (msg.topic(), msg.partition())
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(key)
                        continue
                    raise RuntimeError(f"{cluster} {key}: {msg.error()}")
                fact = RecordFact.from_headers(msg.offset(), msg.timestamp()[1], msg.headers() or [],
                                               read_from=cluster, peer=peer)
                if isinstance(fact.origin, CopiedFrom) and fact.origin.cluster == peer:
                    out[key].append(msg.offset())
    finally:
        consumer.close()
    return out


def carried_group_partitions(bootstraps: dict[str, str], shapes: dict[str, str], active_of: dict[str, str],
                             committed: dict[tuple[str, str, int], int]) -> set[tuple[str, str, int]]:
    """(group, topic, partition) of two-way topics where a standby-origin copy lies below ``c``."""
    clusters = sorted(bootstraps)
    rows = [(g, t, p, c) for (g, t, p), c in committed.items() if shapes.get(t) == "two_way"]
    copies = {}
    for cluster in clusters:
        peer = next(n for n in clusters if n != cluster)
        tps = sorted({(t, p) for g, t, p, _ in rows if active_of[g] == cluster})
        copies[cluster] = standby_origin_offsets(bootstraps[cluster], cluster, peer, tps) if tps else {}
    return {(g, t, p) for g, t, p, c in rows if any(o < c for o in copies[active_of[g]].get((t, p), ()))}


def carried_translated(client, snapshot_id: str, carried: set[tuple[str, str, int]]) -> tuple[int, int]:
    """(translated, total) over the carried group-partitions in one cycle's offset_translations."""
    rows = client.query(
        "SELECT group_id, topic, partition, status FROM offset_translations WHERE snapshot_id = {s:String}",
        parameters={"s": snapshot_id},
    ).result_rows
    statuses = {(g, t, int(p)): status for g, t, p, status in rows}
    translated = sum(1 for key in carried if key in statuses and TranslationStatus(statuses[key]).translated)
    return translated, len(carried)


def launched_run(clusters: ScratchClusters, dsn: str, shapes: dict, spark_connect_url: str | None, home: Path) -> dict:
    """One cycle as a fresh process (what the sensor's run launcher starts), timed from outside."""
    env = dict(os.environ)
    env.update({
        "DAGSTER_HOME": str(home),
        "OFFSET_PIPELINE_IDC1_BOOTSTRAP": clusters.bootstraps["idc1"],
        "OFFSET_PIPELINE_IDC2_BOOTSTRAP": clusters.bootstraps["idc2"],
        "OFFSET_PIPELINE_CLICKHOUSE_DSN": dsn,
        "OFFSET_PIPELINE_TOPIC_SHAPES": ",".join(f"{t}={s}" for t, s in shapes.items()),
    })
    env.pop("OFFSET_PIPELINE_SPARK_MASTER", None)
    env.pop("OFFSET_PIPELINE_SPARK_CONNECT_URL", None)
    if spark_connect_url:
        env["OFFSET_PIPELINE_SPARK_CONNECT_URL"] = spark_connect_url
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), "job", "execute", "-m", "offset_pipeline.definitions",
         "-j", "offset_sync_cycle"],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True,
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise RuntimeError(f"dagster job execute failed:\n{tail}")
    instance = dg.DagsterInstance.from_config(str(home))
    run = instance.get_runs(limit=1)[0]
    figures = {"wall": wall, "run": run_window(instance, run.run_id), "steps": step_seconds(instance, run.run_id),
               "run_id": run.run_id, "events": len(instance.all_logs(run.run_id))}
    instance.dispose()
    return figures


# -- printing ---------------------------------------------------------------------------------------


def s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--groups-per-topic", type=int, default=5)
    parser.add_argument("--topics-per-group", type=int, default=10, help="topics each group reads (fewer members)")
    parser.add_argument("--records-per-partition", type=int, default=40, help="per producing cluster")
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--launched-runs", type=int, default=1, help="cycles run as a fresh `dagster job execute`")
    parser.add_argument("--spark", choices=("connect", "local"), default="connect")
    parser.add_argument("--connect-url", help="use this Spark Connect server instead of starting one")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the brokers and the Spark server started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workload = Workload(args.topics, args.partitions, args.groups_per_topic, min(args.topics_per_group, args.topics),
                        args.records_per_partition, args.seed)
    print(f"offset_pipeline cycle benchmark: {os.cpu_count()} cores, Spark {args.spark}", flush=True)
    with tempfile.TemporaryDirectory(prefix="offset-pipeline-cycle-bench-") as tmp:
        tmp_dir = Path(tmp)
        server = None
        url = args.connect_url
        if args.spark == "connect" and url is None:
            from devstack.spark_connect import SparkConnectServer

            server = SparkConnectServer(free_port(), tmp_dir / "run")
            server.launch()  # the JVM starts while the brokers do
            url = server.url
        try:
            with ScratchClusters(tmp_dir / "kafka") as clusters:
                t = time.monotonic()
                filled = create_and_fill(clusters, workload)
                print(f"set-up: {workload.topics} topics x {workload.partitions} partitions on both clusters, "
                      f"records produced {filled.produced} in {filled.seconds:.1f}s", flush=True)
                _, mirror_s = mirror_both_ways(clusters, workload, filled.produced)
                print(f"set-up: mirrored both ways in {mirror_s:.1f}s", flush=True)
                with ActiveGroups(clusters, workload) as groups:
                    print(f"set-up: {len(groups.members)} groups with members and commits in {groups.seconds:.1f}s "
                          f"(set-up total {time.monotonic() - t:.1f}s)", flush=True)
                    if server is not None:
                        server.wait_ready()
                    report = run_benchmark(args, workload, clusters, groups, tmp_dir, url)
        finally:
            if server is not None:
                server.stop()
    print(report)
    return 0


def run_benchmark(args, workload: Workload, clusters: ScratchClusters, groups: ActiveGroups, tmp_dir: Path,
                  url: str | None) -> str:
    dsn = f"chdb://{tmp_dir / 'clickhouse'}"
    assets = offset_sync_assets()
    run_config = {
        "ops": {"offset_translations": {"config": {"topic_shapes": workload.shapes()}}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},  # the summary events: not to this console
    }
    # The decision lines (one per group-partition and step) are written as a deployment would route
    # them: to a file (monitoring/decision_log.py), so their cost counts but they do not flood this console.
    decisions = logging.getLogger(LOGGER_NAME)
    handler = logging.FileHandler(tmp_dir / "decisions.log")
    handler.setFormatter(logging.Formatter("%(message)s"))
    decisions.handlers, decisions.propagate = [handler], False
    decisions.setLevel(logging.INFO)
    runs: list[dict] = []

    def in_process(label: str, instance: dg.DagsterInstance) -> None:
        started = time.monotonic()
        result = dg.materialize(assets, resources=resources(clusters.bootstraps, dsn, url), run_config=run_config,
                                instance=instance, raise_on_error=False)
        wall = time.monotonic() - started
        if not result.success:
            failure = next((e for e in result.all_events if e.is_failure), None)
            raise RuntimeError(f"cycle {label} failed: {failure.event_specific_data if failure else result}")
        metadata = {
            a.key.to_user_string(): {
                k: v.value for k, v in result.asset_materializations_for_node(a.key.path[-1])[0].metadata.items()
            }
            for a in assets
        }
        runs.append({
            "label": label, "run_id": result.run_id, "wall": wall, "run": run_window(instance, result.run_id),
            "steps": step_seconds(instance, result.run_id), "events": len(instance.all_logs(result.run_id)),
            "metadata": metadata, "shares": translation_shares(dsn, result.run_id),
        })
        print(f"cycle {label}: {wall:.2f}s", flush=True)

    instance = dg.DagsterInstance.ephemeral()
    for n in range(1, args.cycles + 1):
        in_process(f"{n}" + (" (cold)" if n == 1 else ""), instance)

    for n in range(1, args.launched_runs + 1):
        figures = launched_run(clusters, dsn, workload.shapes(), url, tmp_dir / "dagster_home")
        figures["shares"] = translation_shares(dsn, figures["run_id"])
        figures["label"] = f"L{n} launched"
        runs.append(figures)
        print(f"launched run {n}: {figures['wall']:.2f}s", flush=True)

    if url and not args.connect_url:  # our own server: close the session before the server goes away
        from offset_pipeline.resources.spark import get_spark_session

        get_spark_session(connect_url=url).stop()
    carried = carried_group_partitions(
        clusters.bootstraps, workload.shapes(), {g.group_id: g.active for g in workload.groups()}, groups.committed,
    )
    from offset_pipeline.resources.clickhouse import ClickHouseResource, close_embedded_clients

    client = ClickHouseResource(dsn=dsn).get_client()
    try:
        for r in runs:
            r["carried"] = carried_translated(client, r["run_id"], carried)
    finally:
        close_embedded_clients(dsn)
    floor_inputs = floor_partitions(clusters, workload, groups)
    floors = [run_floor(clusters.bootstraps, floor_inputs) for _ in range(2)]
    floor = min(floors, key=lambda f: f.seconds)
    lookup_args = ({g.group_id: g.active for g in workload.groups()}, sorted({(fp.topic, fp.partition) for fp in floor_inputs}))
    lookups = min((run_lookup_floor(clusters.bootstraps, *lookup_args) for _ in range(2)),
                  key=lambda f: f.snapshot_seconds + f.commit_seconds)
    return format_report(args, workload, url, runs, floor, floor_inputs, lookups)


STEPS = {"offset_snapshot": "snapshot", "offset_translations": "translate", "offset_standby_commits": "commit",
         "offset_sync_metrics": "metrics"}


def format_report(args, workload, url, runs, floor, floor_inputs, lookups) -> str:
    keys = list(STEPS) + sorted({k for r in runs for k in r["steps"]} - set(STEPS))
    first = next((r for r in runs if "metadata" in r), {})
    group_partitions = first.get("metadata", {}).get("offset_translations", {}).get("group_partitions", "?")
    lines = [
        "",
        "=" * 100,
        f"workload: {workload.topics} topics x {workload.partitions} partitions, {len(workload.groups())} groups "
        f"({workload.groups_per_topic} per topic, {workload.topics_per_group} topics each, active on idc1 and idc2): "
        f"{workload.group_partitions} group-partitions ({group_partitions} translated rows per cycle)",
        f"spark: {'Spark Connect ' + url if url else 'local[*] in the benchmark process'}; cores: {os.cpu_count()}",
        "",
        "cycle time by stage, seconds (step start to success; run = run start to end; wall = the materialize call",
        "or, for launched runs, the whole `dagster job execute` process; events = event log entries of the run):",
    ]
    rows = []
    for r in runs:
        tr = r.get("metadata", {}).get("offset_translations", {})
        rows.append([
            r["label"], *[s(r["steps"].get(k)) for k in keys], s(tr.get("spark_seconds")), s(r["run"]), s(r["wall"]),
            f"{r['wall'] / CADENCE_S:.2f}", r.get("events", "-"),
        ])
    warm = [r for r in runs if r["label"][0].isdigit() and "cold" not in r["label"]] or runs[:1]
    median = {k: statistics.median([r["steps"][k] for r in warm]) for k in keys if all(k in r["steps"] for r in warm)}
    warm_wall = statistics.median([r["wall"] for r in warm])
    rows.append([
        "warm median", *[s(median.get(k)) for k in keys],
        s(statistics.median([r["metadata"].get("offset_translations", {}).get("spark_seconds", 0.0) for r in warm])),
        s(statistics.median([r["run"] for r in warm])), s(warm_wall), f"{warm_wall / CADENCE_S:.2f}", "",
    ])
    lines.append(table(["cycle", *[STEPS.get(k, k) for k in keys], "(spark)", "run", "wall", "/30s", "events"], rows))
    missing = [k for k in STEPS if not any(k in r["steps"] for r in runs)]
    if missing:
        lines.append(f"(no step {', '.join(missing)} in the offset_sync group yet: not measured)")
    full_floor = lookups.snapshot_seconds + floor.seconds + lookups.commit_seconds
    lines += [
        "",
        "floor (bench/floor_reads.py: the same Kafka lookups by a minimal sequential confluent-kafka script):",
        f"  snapshot lookups {lookups.snapshot_seconds:.2f}s ({lookups.groups_read} groups and "
        f"{lookups.partitions_ranged} partitions on both clusters)",
        f"  translation reads {floor.seconds:.2f}s over {len(floor_inputs)} topic-partitions ({floor.active_records} "
        f"active records, {floor.standby_records} standby records, {floor.offsets_for_times_calls} offsets_for_times; "
        "one consumer per cluster)",
        f"  commit-step lookups {lookups.commit_seconds:.2f}s (members on both clusters, committed offsets on the standby)",
        f"  whole cycle {full_floor:.2f}s",
    ]
    ratios = [["warm cycle (wall)", warm_wall, full_floor],
              ["warm snapshot step", median.get("offset_snapshot"), lookups.snapshot_seconds],
              ["warm translate step", median.get("offset_translations"), floor.seconds],
              ["warm commit step", median.get("offset_standby_commits"), lookups.commit_seconds],
              ["warm metrics step (no Kafka)", median.get("offset_sync_metrics"), None]]
    ratios += [[f"{r['label']} (wall)", r["wall"], full_floor] for r in runs if not r["label"][0].isdigit()]
    lines.append(table(
        ["measure", "seconds", "x 30 s cadence (target <= 0.5)", "floor", "x floor (target <= 3)"],
        [[name, s(v), f"{v / CADENCE_S:.2f}" if v else "-", s(f), f"{v / f:.2f}" if v and f else "-"]
         for name, v, f in ratios],
    ))

    lines += ["", "translations per cycle (share of group-partitions, from offset_translations):"]
    shares = [r["shares"] for r in runs]
    combos = sorted({k for sh in shares for k in sh})

    def share(sh: Counter, keep) -> str:
        total = sum(sh.values())
        return f"{100 * sum(v for k, v in sh.items() if keep(*k)) / total:.1f}%" if total else "-"

    rows2 = [[status, strategy, *[share(sh, lambda a, b, k=(status, strategy): (a, b) == k) for sh in shares]]
             for status, strategy in combos]
    for strategy in sorted({stg for _, stg in combos if stg != "none"}):
        rows2.append([f"translated via {strategy}", "", *[
            share(sh, lambda a, b, x=strategy: b == x and TranslationStatus(a).translated) for sh in shares
        ]])
    rows2.append(["translated (all)", "", *[share(sh, lambda a, b: TranslationStatus(a).translated) for sh in shares]])
    rows2.append(["exact (InSync candidates)", "", *[share(sh, lambda a, b: TranslationStatus(a).exact) for sh in shares]])
    two_way = [r["carried"] for r in runs]
    rows2.append(["two-way, carried a standby-origin", "record below c: translated (target >= 99%)", *[
        f"{100 * n / total:.1f}% of {total}" if total else "-" for n, total in two_way
    ]])
    labels = [r["label"].split(" ")[0] for r in runs]
    lines.append(table(["status", "strategy", *labels], rows2, align="ll" + "r" * len(labels)))
    lines.append("=" * 100)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
