"""One engine's cycles for ``scale_curve.py``, in a process of its own (a process has one SparkContext).

    .venv/bin/python -m bench.scale_cycles SPEC.json OUT.json

SPEC: ``bootstraps`` (cluster -> bootstrap), ``dsn`` (chdb), ``master`` (``local[2]`` or
``spark://...``), ``executor_python`` (or null), ``group_include``, ``topic_shapes``, ``cycles``,
``extra_pids`` (the standalone master and workers: their trees count too), ``broker_pids`` (optional: the
brokers, whose CPU per cycle is reported apart, never in the CPU figure), ``decisions_log``,
``read_threads``, ``read_batch_partitions`` (optional: the translation's settings),
``profile_driver`` (optional: a path; one more cycle, under cProfile and left out of the figures, is written there),
``op_config`` (optional: op -> more config), ``spark_conf`` (optional: Spark settings), ``floor`` (optional: ``partitions``, the
``floor_reads.FloorPartition`` fields of each, ``groups`` and ``ranged``, ``run_lookup_floor``'s
arguments: the floor is measured right before each measured cycle, outside its time and CPU).

A warm-up cycle (session, JVM and Python workers start; first commits), then ``cycles`` measured
ones: every asset of the ``offset_sync`` group through ``dg.materialize``, as ``cycle_benchmark.py``.
Per cycle: seconds (the materialize call), stage seconds, CPU-seconds and peak RSS of this process's
tree plus ``extra_pids``' trees (``process_tree_usage.py``). The read budget and the Spark bound are
raised so a large cycle is measured whole, not cut into deferrals. Writes OUT.json; asserts nothing.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import dagster as dg

from bench.process_tree_usage import PeakRss, ProcessTree
from bench.sync_runs import offset_sync_assets, step_seconds
from offset_pipeline.monitoring.decision_log import LOGGER_NAME

BOUND_S = 1800.0  # Spark bound and read budget of a measured cycle: measured whole, never deferred


def resources(spec: dict) -> dict:
    from offset_pipeline.resources import (
        ClickHouseResource,
        KafkaClusterResource,
        SparkResource,
    )

    spark_config = {"spark.driver.memory": "2g", "spark.ui.showConsoleProgress": "false", **spec.get("spark_conf", {})}
    if spec["executor_python"]:
        spark_config.update({"spark.pyspark.python": spec["executor_python"], "spark.executor.memory": "768m",
                             "spark.cores.max": "2"})
    return {
        **{name: KafkaClusterResource(cluster_name=name, bootstrap_servers=bs) for name, bs in spec["bootstraps"].items()},
        "clickhouse": ClickHouseResource(dsn=spec["dsn"]),
        "spark": SparkResource(master=spec["master"], spark_config=spark_config, job_timeout_s=BOUND_S),
    }


def floor_beside(spec: dict, bootstraps: dict[str, str]) -> dict | None:
    """The floor (``floor_reads.py``) of the spec's ``floor``, measured now: ``floor_seconds`` and
    ``floor_parts`` (snapshot, translation, commit), or None without one."""
    if not spec.get("floor"):
        return None
    from bench.floor_reads import FloorPartition, run_floor, run_lookup_floor

    partitions = [FloorPartition(**{**fp, "committed": tuple(fp["committed"])}) for fp in spec["floor"]["partitions"]]
    reads = run_floor(bootstraps, partitions)
    lookups = run_lookup_floor(bootstraps, spec["floor"]["groups"], [tuple(tp) for tp in spec["floor"]["ranged"]])
    parts = {"snapshot": lookups.snapshot_seconds, "translation": reads.seconds, "commit": lookups.commit_seconds}
    return {"floor_seconds": sum(parts.values()), "floor_parts": parts}


def route_decisions(path: str) -> None:
    """Decision lines to a file, as a deployment routes them (their cost counts; no console flood)."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    decisions = logging.getLogger(LOGGER_NAME)
    decisions.handlers, decisions.propagate = [handler], False
    decisions.setLevel(logging.INFO)


class GcClock:
    """Seconds this process spent in the garbage collector (``gc.callbacks``), by generation."""

    def __init__(self):
        import gc

        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._started


def stage_report(ui_url: str, app_id: str, last: int = 6) -> list[dict]:
    """The newest ``last`` stages: tasks, wall seconds (submission to completion), and the tasks'
    summed run and CPU seconds (a mapInArrow task's run time includes its Python worker's)."""
    import urllib.request
    from datetime import datetime

    def at(text: str) -> datetime:
        return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")

    with urllib.request.urlopen(f"{ui_url}/api/v1/applications/{app_id}/stages", timeout=10) as answer:
        stages = json.loads(answer.read())
    out = []
    for st in sorted(stages, key=lambda st: st["stageId"])[-last:]:
        wall = (at(st["completionTime"]) - at(st["submissionTime"])).total_seconds() \
            if st.get("completionTime") and st.get("submissionTime") else None
        with urllib.request.urlopen(f"{ui_url}/api/v1/applications/{app_id}/stages/{st['stageId']}/"
                                    f"{st['attemptId']}/taskList?length=64", timeout=10) as answer:
            tasks = json.loads(answer.read())
        out.append({"stage": st["stageId"], "name": st["name"][:60], "tasks": st["numTasks"], "wall_s": wall,
                    "task_run_s": st["executorRunTime"] / 1000, "task_cpu_s": st["executorCpuTime"] / 1e9,
                    "task_seconds": sorted(round(t.get("duration", 0) / 1000, 2) for t in tasks)})
        print(f"  stage {out[-1]}", flush=True)
    return out


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    route_decisions(spec["decisions_log"])
    assets = offset_sync_assets()
    res = resources(spec)
    run_config = {
        "ops": {
            "offset_snapshot": {"config": {"group_include": spec["group_include"]}},
            "offset_translations": {"config": {"topic_shapes": spec["topic_shapes"], "read_budget_s": BOUND_S}},
        },
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    for op, extra in spec.get("op_config", {}).items():
        run_config["ops"].setdefault(op, {"config": {}})["config"].update(extra)
    for key in ("read_threads", "read_batch_partitions"):
        if spec.get(key):
            run_config["ops"]["offset_translations"]["config"][key] = spec[key]
    instance = dg.DagsterInstance.ephemeral()
    tree = ProcessTree([os.getpid(), *spec["extra_pids"]])
    # The brokers' own CPU in a cycle: not ours (left out of the CPU figure), but on the same 2 cores.
    brokers = ProcessTree(spec.get("broker_pids", []))
    gc_clock = GcClock()
    cycles = []
    # With a profile, one more cycle runs under cProfile, labelled "profiled" and left out of the
    # figures: the profiler slows the driver's Python by about a third.
    profiled = spec["cycles"] + 1 if spec.get("profile_driver") else None
    for n in range(spec["cycles"] + (2 if profiled else 1)):
        floor = floor_beside(spec, spec["bootstraps"]) if n > 0 and n != profiled else None
        cpu_before = tree.cpu_seconds()
        brokers_before = brokers.cpu_seconds()
        gc_before = list(gc_clock.seconds)
        kinds_before = tree.cpu_seconds_by_kind()
        started = time.monotonic()
        profile = None
        if n == profiled:
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        with PeakRss(tree) as peak:
            result = dg.materialize(assets, resources=res, run_config=run_config, instance=instance,
                                    raise_on_error=False)
        if profile is not None:
            import io
            import pstats

            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(40)
            pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(60)
            Path(spec["profile_driver"]).write_text(text.getvalue())
        seconds = time.monotonic() - started
        cpu_s = tree.cpu_seconds() - cpu_before
        kinds = {k: round(v - kinds_before.get(k, 0.0), 2) for k, v in tree.cpu_seconds_by_kind().items()}
        if not result.success:
            failure = next((e for e in result.all_events if e.is_failure), None)
            raise RuntimeError(f"cycle {n} failed: {failure.event_specific_data if failure else result}")
        translation = {k: v.value for k, v in
                       result.asset_materializations_for_node("offset_translations")[0].metadata.items()}
        if translation.get("group_partitions") and not translation.get("translated"):
            # The Spark job failed as a whole (its rows say why): a figure of nothing translated is no figure.
            raise RuntimeError(f"cycle {n}: nothing translated of {translation.get('group_partitions')} group-partitions "
                               f"(spark_error: {translation.get('spark_error')})")
        cycles.append({
            "label": "warm-up" if n == 0 else "profiled" if n == profiled else str(n), "seconds": seconds, "cpu_seconds": cpu_s,
            "peak_rss_bytes": peak.bytes, "steps": step_seconds(instance, result.run_id),
            "group_partitions": translation.get("group_partitions"), "translated": translation.get("translated"),
            "deferred_partitions": translation.get("deferred_partitions"),
            "spark_seconds": translation.get("spark_seconds"), "cpu_seconds_by_kind": kinds,
            "driver_gc_seconds": [round(a - b, 3) for a, b in zip(gc_clock.seconds, gc_before)],
            "broker_cpu_seconds": round(brokers.cpu_seconds() - brokers_before, 2),
            **(floor or {}),
        })
        beside = f" (floor beside it {floor['floor_seconds']:.2f}s: {seconds / floor['floor_seconds']:.2f}x)" if floor else ""
        print(f"  cycle {cycles[-1]['label']}: {seconds:.2f}s{beside}, {cpu_s:.1f} CPU-s, "
              f"peak RSS {peak.bytes / 2**20:.0f} MiB, {translation.get('translated')} translated, CPU by process {kinds}, "
              f"brokers {cycles[-1]['broker_cpu_seconds']} CPU-s, "
              f"driver GC s by generation {cycles[-1]['driver_gc_seconds']}, steps {cycles[-1]['steps']}", flush=True)
    context = res["spark"].spark_session.sparkContext
    report = {"master": context.master, "cycles": cycles}
    if context.uiWebUrl:  # --spark-conf spark.ui.enabled=true: the last cycle's stages, from Spark's REST API
        report["stages"] = stage_report(context.uiWebUrl, context.applicationId)
    res["spark"].spark_session.stop()
    Path(out_path).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
