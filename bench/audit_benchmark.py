"""How long the failover audit of one day takes (target: one day of 30-second snapshots for
1,000 group-partitions audited in <= 10 minutes on this machine). Prints figures; asserts nothing.

    .venv/bin/python -m bench.audit_benchmark [--topics 50 --partitions 4 --groups-per-topic 5
                                               --records-per-partition 2000 --snapshots 2880]

Set-up (not timed as the audit):

* two scratch KRaft clusters on free ports (``clusters.ScratchClusters``), the workload's topics
  created on both (``clusters.Workload``, as in ``cycle_benchmark.py``: of every ten topics 4
  two-way, 4 one-way from idc1 and 2 one-way from idc2);
* records produced in ``--rounds`` rounds (``TrafficGenerator.emit``) while the real
  ``DataMirror`` runs both ways; each round waits until the mirrors copied everything, so a two-way
  partition's logs interleave local records and copies (with ``IDC``/``Offset`` headers) in chunks
  of about ``--records-per-partition / --rounds`` records, as a running mirror interleaves them;
* both clusters' logs read back whole (read_committed, headers parsed as the audit parses them),
  and one consistent history of each partition built from them: an order of all its records on
  both clusters in which every copy comes after its original; snapshot ``k`` of the day sees the
  first ``(k + 1) / snapshots`` of that history, which gives both log ends then;
* one UTC day (``--day``, default yesterday) of ``--snapshots`` 30-second snapshots for every
  group-partition of the workload (``topics x partitions x groups-per-topic``; groups active on
  idc1 or idc2 as the workload places them, so every partition is audited in both directions),
  written to an embedded ClickHouse (chdb) as the sync cycles write them: two ``offset_snapshots``
  rows (active and standby cluster) and one ``offset_translations`` row per group-partition and
  snapshot (INSERT ... SELECT FROM a Parquet file of the generated columns, inside the engine).
  The active group's committed offset ``c`` trails the active log end then by up to ``--max-lag``
  records and never goes back; the standby offset ``t`` is what a correct sync committed one cycle
  earlier: the largest loss-free standby offset for the previous snapshot's ``c``, within the
  standby log then (so a failover loses nothing and reads again what the group processed in the
  last 30 seconds). A ``--wrong-share`` of the moments instead have ``t`` at the standby log end
  (too high: those lose records, and the no-loss check fails, as it must).

Then the day is audited as Dagster runs it: ``dg.materialize([offset_failover_audit])`` for the day's
partition with the project's resources pointed at these clusters, the embedded ClickHouse and local
Spark (``SparkResource``: local[*] with the project's defaults, plus ``--spark-config`` settings, and
``-XX:+ExitOnOutOfMemoryError`` for the driver so that running out of memory fails the run instead
of hanging it), ``exactly_once_mirror`` on (the devstack mirror is). Printed: the asset's own
total and Spark seconds (its metadata) and the materialize wall time against the 600 s target,
``moments_of_day`` alone (the ClickHouse read, timed once before the run), the moments and their
statuses, records read, lost and duplicated totals, and per status how many moments equal the
model's own answer (lost and duplicated counted from the logs read back). ``--profile N`` then runs
the Spark task's per-partition work for N partition directions in this process under cProfile and
prints where the time goes.

Measured (2 cores, the defaults, 1.12 M records per cluster; set-up ~2 min): with the project's
Spark defaults (``spark.driver.memory`` 1g) the run fails within a minute, the driver out of heap
building the 2.88 M-row moments DataFrame (tasks of ~157 MB). With ``--spark-config
spark.driver.memory=4g``: 1,568 s (2.6 x the target), of which Spark 1,531 s, ``moments_of_day``
14 s, writing the results ~20 s; every audited moment equals the model. The profile: two Kafka reads
per snapshot and partition direction (the cache reads only what each new moment adds at the top,
as the logs grow through the day): ~2/3 of the per-moment time is librdkafka (poll, consume,
assign/unassign), the rest mostly building each moment's region; the rule itself ~10%.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
import numpy as np

from bench.clusters import CLUSTERS, ScratchClusters, Workload
from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint
from devstack.traffic import TrafficGenerator, ensure_topics
from offset_pipeline.translation.headers import CopiedFrom, parse_origin

TARGET_S = 600.0
CYCLE_S = 30
LOCAL = -1  # origin of a record produced on the cluster it was read from (or unreadable headers)
NEVER = 1 << 62  # the A position of a standby record never copied to A


# -- the logs -------------------------------------------------------------------------------------


def produce_and_mirror(clusters: ScratchClusters, workload: Workload, rounds: int,
                       timeout_s: float = 600) -> tuple[dict[str, int], float]:
    """Create the topics, then produce ``rounds`` rounds of records with the mirror running both
    ways, each round copied completely before the next. Returns records produced per origin."""
    started = time.monotonic()
    plan = workload.plan()
    ensure_topics(plan, clusters.bootstraps, timeout_s=120)
    generator = TrafficGenerator(plan, clusters.bootstraps, seed=workload.seed)
    stop = threading.Event()
    pattern = "^" + workload.prefix.replace(".", "[.]")
    mirrors = {
        src: DataMirror(MirrorConfig(
            MirrorEndpoint(src, clusters.bootstraps[src]), MirrorEndpoint(dst, clusters.bootstraps[dst]),
            topic_pattern=pattern, metadata_refresh_s=1.0, batch_size=2000,
        ))
        for src, dst in (("idc1", "idc2"), ("idc2", "idc1"))
    }
    threads = [threading.Thread(target=m.run, args=(stop,), daemon=True, name=f"mirror-{s}") for s, m in mirrors.items()]
    for thread in threads:
        thread.start()
    produced = {name: 0 for name in CLUSTERS}
    per_stream = workload.records_per_partition * workload.partitions
    try:
        for r in range(rounds):
            count = per_stream * (r + 1) // rounds - per_stream * r // rounds
            for record in generator.emit(count):
                produced[record.origin] += record.committed
            deadline = time.monotonic() + timeout_s
            while any(m.stats.copied < produced[src] for src, m in mirrors.items()):
                if time.monotonic() > deadline or not all(t.is_alive() for t in threads):
                    raise RuntimeError("the mirror did not copy every record: " + ", ".join(
                        f"{s}: {m.stats.copied}/{produced[s]}" for s, m in mirrors.items()))
                time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        generator.close()
    return produced, time.monotonic() - started


class Log:
    """One cluster's partition read back whole: record offsets and, per record, the offset of its
    original on the other cluster (LOCAL when produced here)."""

    def __init__(self, offsets: list[int], origins: list[int], log_start: int, log_end: int):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.origins = np.asarray(origins, dtype=np.int64)
        self.log_start, self.log_end = log_start, log_end
        # offset of the next record not yet in the log, by records in the log (the log end then)
        self.ends = np.append(self.offsets, np.int64(log_end))


def read_logs(clusters: ScratchClusters, topics: list[str], partitions: int) -> dict[tuple[str, str, int], Log]:
    """(cluster, topic, partition) -> its whole log, read_committed (one consumer per cluster)."""
    out = {}
    for name in CLUSTERS:
        peer = next(c for c in CLUSTERS if c != name)
        consumer = Consumer({
            "bootstrap.servers": clusters.bootstraps[name], "group.id": f"audit-bench-read-{name}",
            "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
            "fetch.max.bytes": 64 << 20, "log_level": 3,
        })
        try:
            tps = [TopicPartition(t, p, 0) for t in topics for p in range(partitions)]
            marks = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=30) for tp in tps}
            records: dict[tuple[str, int], tuple[list[int], list[int]]] = {k: ([], []) for k in marks}
            pending = {k for k, (low, high) in marks.items() if high > low}
            consumer.assign([tp for tp in tps if (tp.topic, tp.partition) in pending])
            deadline = time.monotonic() + 600
            while pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"reading {name} back did not finish: {len(pending)} partitions left")
                for msg in consumer.consume(10000, 1.0):
                    key = (msg.topic(), msg.partition())
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            pending.discard(key)
                            continue
                        raise RuntimeError(f"reading {name} {key}: {msg.error()}")
                    origin = parse_origin(msg.headers(), read_from=name, peer=peer)
                    offsets, origins = records[key]
                    offsets.append(msg.offset())
                    origins.append(origin.offset if isinstance(origin, CopiedFrom) else LOCAL)
        finally:
            consumer.close()
        for (topic, p), (offsets, origins) in records.items():
            low, high = marks[(topic, p)]
            out[(name, topic, p)] = Log(offsets, origins, low, high)
    return out


def history(logs: dict[str, Log]) -> dict[str, np.ndarray]:
    """One order of all the partition's records on both clusters in which every copy comes after
    its original (the two logs advancing at the same pace where both may). Returns, per cluster,
    the number of its records present after each step of that order (length: all records + 1)."""
    one, two = logs["idc1"], logs["idc2"]
    n1, n2 = len(one.offsets), len(two.offsets)
    off1, off2, org1, org2 = one.offsets.tolist(), two.offsets.tolist(), one.origins.tolist(), two.origins.tolist()
    picks = bytearray()
    i1 = i2 = 0
    while i1 < n1 or i2 < n2:
        # a copy is ready once its original (at that offset on the other cluster) is present
        ready1 = i1 < n1 and (org1[i1] == LOCAL or i2 == n2 or off2[i2] > org1[i1])
        ready2 = i2 < n2 and (org2[i2] == LOCAL or i1 == n1 or off1[i1] > org2[i2])
        if ready1 and ready2:
            take_two = i2 * n1 < i1 * n2  # the one behind in its own log
        elif ready1 or ready2:
            take_two = ready2
        else:
            raise RuntimeError("the logs hold a copy whose original is later than the copy itself")
        picks.append(1 if take_two else 0)
        if take_two:
            i2 += 1
        else:
            i1 += 1
    taken2 = np.concatenate(([0], np.cumsum(np.frombuffer(bytes(picks), dtype=np.uint8), dtype=np.int64)))
    return {"idc1": np.arange(len(taken2), dtype=np.int64) - taken2, "idc2": taken2}


def standby_positions(active: Log, standby: Log) -> np.ndarray:
    """For each standby record: where it is on the active cluster (its original's offset for a copy;
    its first copy's offset for a standby-produced record; NEVER when not copied)."""
    copies = {}
    for offset, origin in zip(active.offsets.tolist(), active.origins.tolist()):
        if origin != LOCAL:
            copies.setdefault(origin, offset)
    return np.array([o if o != LOCAL else copies.get(s, NEVER)
                     for s, o in zip(standby.offsets.tolist(), standby.origins.tolist())], dtype=np.int64)


# -- the day's snapshots --------------------------------------------------------------------------


def day_of_moments(workload: Workload, logs: dict[tuple[str, str, int], Log], *, snapshots: int, max_lag: int,
                   wrong_share: float, seed: int) -> tuple[dict[str, np.ndarray], int]:
    """Columns of one row per group-partition and snapshot (k, group, topic, partition, active,
    standby, c, t, both log starts and ends then, the model's lost and duplicated counts), and how
    many moments have t set too high."""
    rng = np.random.default_rng(seed)
    shares = (np.arange(1, snapshots + 1, dtype=np.int64))
    counts: dict[tuple[str, int], dict[str, np.ndarray]] = {}  # records present at each snapshot
    for t in workload.plan():
        for p in range(t.partitions):
            pair = {name: logs[(name, t.name, p)] for name in CLUSTERS}
            taken = history(pair)
            steps = len(taken["idc1"]) - 1
            at = shares * steps // snapshots  # history steps done at snapshot k (all at the last)
            counts[(t.name, p)] = {name: taken[name][at] for name in CLUSTERS}
    positions: dict[tuple[str, int, str], np.ndarray] = {}
    columns: dict[str, list] = {n: [] for n in ("group_id", "topic", "partition", "active", "standby", "c", "t", "a_start",
                                                "a_end", "b_start", "b_end", "lost", "duplicated")}
    wrong_moments = 0
    for spec in workload.groups():
        active = spec.active
        standby = next(c for c in CLUSTERS if c != active)
        for topic in spec.topics:
            for p in range(workload.partitions):
                a_log, b_log = logs[(active, topic, p)], logs[(standby, topic, p)]
                if (topic, p, active) not in positions:
                    positions[(topic, p, active)] = standby_positions(a_log, b_log)
                pos = positions[(topic, p, active)]
                reach = np.maximum.accumulate(pos) if len(pos) else pos  # first index >= c: not loss-free
                n_a, n_b = counts[(topic, p)][active], counts[(topic, p)][standby]
                # c: up to max_lag records behind the active log end then, never going back
                c_idx = np.maximum.accumulate(np.maximum(n_a - rng.integers(0, max_lag + 1, snapshots), 0))
                c = a_log.ends[c_idx]
                # t: the sync's translation of the previous snapshot's c within the standby log then
                prev = np.concatenate(([0], np.arange(snapshots - 1)))
                t_idx = np.minimum(np.searchsorted(reach, c[prev], side="left"), n_b[prev])
                wrong = rng.random(snapshots) < wrong_share
                t_idx = np.where(wrong, n_b, t_idx)
                wrong_moments += int(wrong.sum())
                # the model's answer: lost = standby records below t whose place on A is >= c,
                # duplicated = those in [t, standby end then) whose place on A is below c
                lost = np.zeros(snapshots, dtype=np.int64)
                for k in np.flatnonzero(wrong):
                    lost[k] = np.count_nonzero(pos[:t_idx[k]] >= c[k])
                duplicated = np.array([np.count_nonzero(pos[lo:hi] < ck) if hi > lo else 0
                                       for lo, hi, ck in zip(t_idx.tolist(), n_b.tolist(), c.tolist())], dtype=np.int64)
                columns["lost"].append(lost)
                columns["duplicated"].append(duplicated)
                columns["group_id"].append(np.full(snapshots, spec.group_id, dtype=object))
                columns["topic"].append(np.full(snapshots, topic, dtype=object))
                columns["partition"].append(np.full(snapshots, p, dtype=np.uint32))
                columns["active"].append(np.full(snapshots, active, dtype=object))
                columns["standby"].append(np.full(snapshots, standby, dtype=object))
                columns["c"].append(c)
                columns["t"].append(b_log.ends[t_idx])
                columns["a_start"].append(np.full(snapshots, a_log.log_start, dtype=np.int64))
                columns["a_end"].append(a_log.ends[n_a])
                columns["b_start"].append(np.full(snapshots, b_log.log_start, dtype=np.int64))
                columns["b_end"].append(b_log.ends[n_b])
    out = {name: np.concatenate(parts) for name, parts in columns.items()}
    out["k"] = np.tile(np.arange(snapshots, dtype=np.int32), len(columns["c"]))
    return out, wrong_moments


def fill_clickhouse(client, columns: dict[str, np.ndarray], folder: Path, day: date) -> int:
    """Write the columns to a Parquet file, then insert the day's snapshot and translation rows from
    it inside the engine. Returns the rows inserted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from offset_pipeline.storage import snapshots, translations

    path = folder / "moments.parquet"
    pq.write_table(pa.table({name: pa.array(values) for name, values in columns.items()}), path)
    start = int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp())
    params = {"path": str(path), "start": start, "day": day.isoformat()}
    sid = "concat({day:String}, '-', leftPad(toString(k), 4, '0'))"
    at = "toDateTime64({start:Int64} + k * 30, 3, 'UTC')"
    for cluster, offset, log_start, log_end, state, members in (
        ("active", "c", "a_start", "a_end", "'Stable'", 1), ("standby", "t", "b_start", "b_end", "'Empty'", 0),
    ):
        client.command(
            f"INSERT INTO {snapshots.TABLE} (snapshot_id, snapshot_time, cluster, group_id, group_state, member_count, "
            "topic, partition, committed_offset, topic_present, log_start, log_end, last_stable, timestamp_type) "
            f"SELECT {sid}, {at}, {cluster}, group_id, {state}, {members}, topic, partition, {offset}, true, {log_start}, "
            f"{log_end}, {log_end}, 'CreateTime' FROM file({{path:String}}, Parquet)",
            parameters=params,
        )
    client.command(
        f"INSERT INTO {translations.TRANSLATIONS_TABLE} (snapshot_id, cycle_time, group_id, topic, partition, active, "
        "standby, committed, standby_committed, strategy, standby_offset, status, reason, expected_duplicates, "
        "timestamp_inversion) "
        f"SELECT {sid}, {at}, group_id, topic, partition, active, standby, c, t, 'header_anchor', t, 'header_anchor', "
        "'bench', toInt64(0), false FROM file({path:String}, Parquet)",
        parameters=params,
    )
    return 3 * len(columns["k"])


# -- the audit ------------------------------------------------------------------------------------


def run_audit(clusters: ScratchClusters, dsn: str, day: date, shapes: dict[str, str], spark_config: dict) -> dict:
    import dagster as dg

    from offset_pipeline.assets import offset_failover_audit
    from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource

    resources = {
        **{name: KafkaClusterResource(cluster_name=name, bootstrap_servers=bs) for name, bs in clusters.bootstraps.items()},
        "clickhouse": ClickHouseResource(dsn=dsn),
        "spark": SparkResource(spark_config=spark_config),
    }
    started = time.monotonic()
    result = dg.materialize(
        [offset_failover_audit], resources=resources, partition_key=day.isoformat(), raise_on_error=False,
        run_config={
            "ops": {"offset_failover_audit": {"config": {"exactly_once_mirror": True, "topic_shapes": shapes}}},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        },
    )
    wall = time.monotonic() - started
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        error, messages = getattr(getattr(failure, "event_specific_data", None), "error", None), []
        while error is not None:  # the step's error and what caused it
            messages.append(error.message.strip().splitlines()[0][:300] if error.message.strip() else error.cls_name)
            error = error.cause or error.context
        return {"wall": wall, "error": " <- ".join(messages) or str(failure)}
    [materialization] = result.asset_materializations_for_node("offset_failover_audit")
    checks = result.get_asset_check_evaluations()
    return {"wall": wall, "metadata": {k: v.value for k, v in materialization.metadata.items()},
            "check": checks[0] if checks else None}


def stop_spark(spark_config: dict) -> None:
    """Stop this process's Spark session (its Python workers keep pooled consumers: before the
    brokers go), if it is still usable."""
    from pyspark.sql import SparkSession

    try:
        session = SparkSession._instantiatedSession or SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    except Exception as exc:  # noqa: BLE001 - a JVM that died (out of memory) is gone anyway
        print(f"(stopping Spark: {type(exc).__name__}: {exc})", flush=True)


def compare_with_model(client, folder: Path, day: date) -> dict:
    """The audit's rows against the model's answers for the same moments: per status, the moments,
    how many of them equal the model (lost and duplicated), and the model's totals over them."""
    rows = client.query(
        "SELECT a.status, count(), countIf(a.lost = e.m_lost AND a.duplicated = e.m_dup), sum(e.m_lost), sum(e.m_dup) "
        "FROM offset_failover_audits AS a INNER JOIN ("
        "  SELECT concat({day:String}, '-', leftPad(toString(k), 4, '0')) AS sid, group_id, topic, "
        "  toUInt32(partition) AS partition, lost AS m_lost, duplicated AS m_dup FROM file({path:String}, Parquet)"
        ") AS e ON a.snapshot_id = e.sid AND a.group_id = e.group_id AND a.topic = e.topic AND a.partition = e.partition "
        "WHERE a.window_date = {d:Date} GROUP BY a.status ORDER BY a.status",
        parameters={"day": day.isoformat(), "d": day, "path": str(folder / "moments.parquet")},
    ).result_rows
    return {status: (n, same, lost, dup) for status, n, same, lost, dup in rows}


def profile_sample(clusters: ScratchClusters, client, day: date, shapes: dict[str, str], keys: int) -> str:
    """The Spark task's per-partition work (``audit_partition_rows``) for the first ``keys``
    topic-partition directions, in this process under cProfile: where the time goes."""
    import cProfile
    import io
    import pstats

    from offset_pipeline.assets.audit import moments_of_day
    from offset_pipeline.audit.spark_audit import PARTITION_KEY, audit_partition_rows
    from offset_pipeline.resources import KafkaClusterResource

    by_key: dict[tuple, list[dict]] = {}
    for row in moments_of_day(client, day, shapes):
        by_key.setdefault(tuple(row[k] for k in PARTITION_KEY), []).append(row)
    confs = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=bs).client_config()
             for name, bs in clusters.bootstraps.items()}
    sample = [by_key[k] for k in sorted(by_key)[:keys]]
    profile = cProfile.Profile()
    started = time.monotonic()
    profile.enable()
    for rows in sample:
        audit_partition_rows(rows, confs, exactly_once_mirror=True, timeout_s=30.0)
    profile.disable()
    elapsed = time.monotonic() - started
    moments = sum(len(rows) for rows in sample)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
    body = "\n".join(line for line in text.getvalue().splitlines() if line.strip() and "Ordered by" not in line
                     and "List reduced" not in line)
    return (f"profile: {len(sample)} of {len(by_key)} partition directions, {moments:,} moments in {elapsed:.1f}s "
            f"in this process (cProfile on): {1e6 * elapsed / max(moments, 1):.0f} us per moment\n{body}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--groups-per-topic", type=int, default=5)
    parser.add_argument("--topics-per-group", type=int, default=10, help="topics each group reads")
    parser.add_argument("--records-per-partition", type=int, default=2000, help="per producing cluster")
    parser.add_argument("--rounds", type=int, default=40, help="production rounds, each mirrored before the next")
    parser.add_argument("--snapshots", type=int, default=86400 // CYCLE_S, help="30-second snapshots of the day")
    parser.add_argument("--max-lag", type=int, default=10, help="records c trails the active log end by, at most")
    parser.add_argument("--wrong-share", type=float, default=0.001, help="moments whose t is too high (lose records)")
    parser.add_argument("--day", type=date.fromisoformat,
                        default=datetime.now(timezone.utc).date() - timedelta(days=1), help="the UTC day audited")
    parser.add_argument("--spark-config", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark settings, e.g. spark.driver.memory=4g (default: the project's)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="after the run, profile the per-partition work of N partition directions in-process")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the brokers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # A driver out of memory exits (the step fails and says so) instead of hanging the run.
    spark_config = {"spark.driver.extraJavaOptions": "-XX:+ExitOnOutOfMemoryError",
                    **dict(item.split("=", 1) for item in args.spark_config)}

    workload = Workload(args.topics, args.partitions, args.groups_per_topic, min(args.topics_per_group, args.topics),
                        args.records_per_partition, args.seed, prefix="audit.")
    shapes = workload.shapes()
    print(f"offset_pipeline audit benchmark: {os.cpu_count()} cores; {workload.group_partitions} group-partitions "
          f"({workload.topics} topics x {workload.partitions} partitions x {workload.groups_per_topic} groups), "
          f"{args.snapshots} snapshots of {args.day}", flush=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix="offset-pipeline-audit-bench-"))
    profile = None
    try:
        with ScratchClusters(tmp_dir / "kafka") as clusters:
            produced, produce_s = produce_and_mirror(clusters, workload, args.rounds)
            print(f"set-up: produced {produced} records and mirrored them both ways in {produce_s:.1f}s", flush=True)
            t = time.monotonic()
            logs = read_logs(clusters, [tt.name for tt in workload.plan()], workload.partitions)
            sizes = {name: sum(len(lg.offsets) for (c, _, _), lg in logs.items() if c == name) for name in CLUSTERS}
            print(f"set-up: read the logs back ({sizes} records) in {time.monotonic() - t:.1f}s", flush=True)
            t = time.monotonic()
            columns, wrong_moments = day_of_moments(workload, logs, snapshots=args.snapshots, max_lag=args.max_lag,
                                                    wrong_share=args.wrong_share, seed=args.seed)
            print(f"set-up: {len(columns['k']):,} moments generated in {time.monotonic() - t:.1f}s", flush=True)

            from offset_pipeline.assets.audit import moments_of_day
            from offset_pipeline.resources.clickhouse import ClickHouseResource, close_embedded_clients
            from offset_pipeline.storage import audits, snapshots, translations

            dsn = f"chdb://{tmp_dir / 'ch'}"
            client = ClickHouseResource(dsn=dsn).get_client()
            for module in (snapshots, audits):
                module.ensure_table(client)
            translations.ensure_tables(client)
            t = time.monotonic()
            rows = fill_clickhouse(client, columns, tmp_dir, args.day)
            print(f"set-up: {rows:,} snapshot and translation rows inserted in {time.monotonic() - t:.1f}s", flush=True)
            del columns
            t = time.monotonic()
            moments = moments_of_day(client, args.day, shapes)
            moments_s = time.monotonic() - t
            n_moments = len(moments)
            del moments
            close_embedded_clients(dsn)  # the run opens the engine itself
            print(f"moments_of_day alone: {n_moments:,} moments in {moments_s:.2f}s", flush=True)

            print("auditing the day (dg.materialize offset_failover_audit) ...", flush=True)
            try:
                audit = run_audit(clusters, dsn, args.day, shapes, spark_config)
            finally:
                stop_spark(spark_config)
            if audit.get("error"):
                print(f"\nthe audit run FAILED after {audit['wall']:.1f}s (target {TARGET_S:.0f} s): {audit['error']}")
                return 1
            client = ClickHouseResource(dsn=dsn).get_client()
            model = compare_with_model(client, tmp_dir, args.day)
            if args.profile:
                print(f"profiling {args.profile} partition directions in this process ...", flush=True)
                profile = profile_sample(clusters, client, args.day, shapes, args.profile)
            close_embedded_clients(dsn)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)

    m, check = audit["metadata"], audit["check"]
    total, spark_s = float(m.get("total_seconds", audit["wall"])), float(m.get("spark_seconds", 0.0))
    statuses = {k[len("status_"):]: v for k, v in m.items() if k.startswith("status_")}
    print()
    print("=" * 100)
    print(f"day {m.get('days')}: {m.get('moments'):,} moments, {m.get('group_partitions')} group-partitions, "
          f"{m.get('rows_written'):,} rows written to offset_failover_audits")
    print(f"audit (asset total)   : {total:8.1f} s   target <= {TARGET_S:.0f} s   ratio {total / TARGET_S:.2f}")
    print(f"  Spark step          : {spark_s:8.1f} s   (moments DataFrame, Kafka reads, failover_cost, collect)")
    print(f"  outside Spark       : {total - spark_s:8.1f} s   (moments_of_day, writing the results)")
    print(f"  moments_of_day alone: {moments_s:8.1f} s   (timed once before the run)")
    print(f"materialize wall      : {audit['wall']:8.1f} s   ratio {audit['wall'] / TARGET_S:.2f}")
    print("statuses              : " + ", ".join(f"{k} {v:,}" for k, v in sorted(statuses.items())))
    print(f"records read          : {m.get('records_read'):,}")
    print(f"lost                  : {m.get('records_lost'):,} records ({wrong_moments:,} moments have t set too high)")
    print(f"duplicated            : {m.get('records_duplicated'):,} records, max {m.get('duplicated_max')}, mean "
          f"{m.get('duplicated_mean')} per audited moment")
    if check is not None:
        print(f"no-loss check         : {'passed' if check.passed else 'failed'} ({check.description})")
    print("against the model (lost and duplicated counted from the logs read back, per moment):")
    for status, (n, same, lost, dup) in model.items():
        print(f"  {status:20}: {n:9,} moments, {same:9,} equal to the model; model totals there: {lost:,} lost, "
              f"{dup:,} duplicated")
    print("=" * 100)
    if profile:
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
