"""The soak's faults. Each one injects its fault, restores what it broke, and returns its window:
from the moment the fault began to the moment the part was back (started and ready), with what it
did. A stop request (the soak interrupted) cuts the waits short and still restores.

ClickHouse is the embedded engine (chdb) inside the Dagster processes, so "ClickHouse down" means
its data folder cannot be opened: once no process holds it, the folder is moved aside and a plain
file put in its place (as a lost mount would look), then put back. Every process that opens the
engine meanwhile fails to, as a client of a stopped server would; nothing is faked inside the
product.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench.soak import procs

# The sync job and the step that commits, per mode (bench/soak/run.py sets them with use_sync_mode). A
# continuous run commits in its one step, every cycle that has changes: killed at any moment of it.
SYNC_JOB = "offset_sync_cycle"
COMMIT_STEP = "offset_standby_commits"
SYNC_STEPS = {"interval": ("offset_sync_cycle", "offset_standby_commits"),
              "continuous": ("offset_sync_continuous", "offset_continuous_sync")}


def use_sync_mode(mode: str) -> None:
    global SYNC_JOB, COMMIT_STEP
    SYNC_JOB, COMMIT_STEP = SYNC_STEPS[mode]
# A broker killed with -9 recovers every partition's log on start: at 10,000 group-partitions
# (2,000+ partitions per broker) that took more than the stack's 90 s on this 2-core machine.
BROKER_START_S = 600.0


class Interrupted(Exception):
    pass


@dataclass
class FaultContext:
    stack: object  # DevStack
    dagster: object  # soak.DagsterProcesses
    instance: Callable[[], object]  # the DagsterInstance
    clickhouse_path: Path
    stop: object  # threading.Event
    say: Callable[[str], None]
    rng: object  # random.Random
    durations: dict = field(default_factory=dict)

    def wait(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Interrupted()

    def cluster(self, name: str):
        return next(c for c in self.stack.clusters if c.spec.name == name)


def broker_kill(ctx: FaultContext) -> dict:
    name = ctx.rng.choice(["idc1", "idc2"])
    cluster = ctx.cluster(name)
    start = time.time()
    cluster.kill()
    ctx.say(f"fault broker_kill: {name}'s broker killed (-9); restarting it")
    cluster.start(timeout=BROKER_START_S)
    return {"start": start, "end": time.time(), "what": f"kill -9 of {name}'s broker, then started again"}


def cluster_down(ctx: FaultContext) -> dict:
    name = ctx.rng.choice(["idc1", "idc2"])
    down_s = ctx.durations.get("cluster_down", 120.0)
    cluster = ctx.cluster(name)
    start = time.time()
    cluster.stop()
    ctx.say(f"fault cluster_down: {name} stopped for {down_s:.0f}s")
    try:
        ctx.wait(down_s)
    finally:
        cluster.start(timeout=BROKER_START_S)
    return {"start": start, "end": time.time(), "what": f"{name} stopped {down_s:.0f}s, then started"}


def mirror_stop(ctx: FaultContext) -> dict:
    src, dst = ctx.rng.choice([("idc1", "idc2"), ("idc2", "idc1")])
    down_s = ctx.durations.get("mirror_stop", 300.0)
    proc = next(p for p in ctx.stack.processes() if p.name == f"mirror-{src}-to-{dst}")
    start = time.time()
    proc.stop()
    ctx.say(f"fault mirror_stop: {proc.name} stopped for {down_s:.0f}s")
    try:
        ctx.wait(down_s)
    finally:
        proc.start()
    return {"start": start, "end": time.time(), "what": f"{proc.name} stopped {down_s:.0f}s, then started"}


def spark_kill(ctx: FaultContext) -> dict:
    spark = ctx.stack.spark_connect
    wrapper = spark.pid()
    kids = procs.children_map()
    jvm = next((p for p in procs.tree(wrapper, kids) if "SparkConnectServer" in procs.cmdline(p) and p != wrapper),
               None) if wrapper else None
    start = time.time()
    if jvm:
        os.kill(jvm, signal.SIGKILL)
        ctx.say(f"fault spark_kill: Spark Connect JVM pid {jvm} killed (-9); restarting the server")
    deadline = time.monotonic() + 30
    while spark.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.2)  # the log wrapper ends with its part
    spark.start()
    return {"start": start, "end": time.time(), "what": f"kill -9 of the Spark Connect JVM (pid {jvm}), started again"}


def _commit_step_runs(instance) -> list:
    """Sync runs in flight whose commit step has started and not ended."""
    import dagster as dg
    from dagster._core.events import DagsterEventType

    records = instance.get_run_records(dg.RunsFilter(job_name=SYNC_JOB, statuses=[dg.DagsterRunStatus.STARTED]),
                                       limit=5)
    out = []
    for record in records:
        events = instance.all_logs(record.dagster_run.run_id, of_type={
            DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE})
        started = any(e.step_key == COMMIT_STEP and e.dagster_event.event_type == DagsterEventType.STEP_START
                      for e in events)
        ended = any(e.step_key == COMMIT_STEP and e.dagster_event.event_type != DagsterEventType.STEP_START
                    for e in events)
        if started and not ended:
            out.append(record.dagster_run.run_id)
    return out


def run_worker_pids(instance, run_id: str) -> list[int]:
    """The run worker's pid, from the run's own engine event ("Started process for run (pid: N)"),
    if that process still runs a Python (a pid is never reused while its run is STARTED, but check)."""
    from dagster._core.events import DagsterEventType

    out = []
    for event in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        data = event.dagster_event.event_specific_data if event.dagster_event else None
        pid = getattr(data, "metadata", {}).get("pid") if data is not None else None
        if pid is not None and "Started process for run" in (event.message or ""):
            pid = int(pid.value)
            if procs.alive(pid) and "python" in procs.cmdline(pid):
                out.append(pid)
    return out


def run_worker_kill(ctx: FaultContext) -> dict:
    """Wait for a sync run inside its commit step, kill -9 its run worker, and end the window when
    Dagster has marked the run ended (the daemon's run monitoring) -- at most 10 minutes."""
    import dagster as dg

    instance = ctx.instance()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for run_id in _commit_step_runs(instance):
            pids = run_worker_pids(instance, run_id)
            if not pids:
                continue
            start = time.time()
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            ctx.say(f"fault run_worker_kill: run {run_id[:8]} killed (-9) in its commit step, pids {pids}")
            status = None
            until = time.monotonic() + 600
            while time.monotonic() < until:
                ctx.wait(2)
                run = instance.get_run_by_id(run_id)
                status = run.status.value if run else "DELETED"
                if run is None or run.is_finished:
                    break
            events = instance.all_logs(run_id)
            committed = any(e.step_key == COMMIT_STEP and e.dagster_event is not None
                            and e.dagster_event.event_type_value == "STEP_SUCCESS" for e in events)
            return {"start": start, "end": time.time(), "run_id": run_id, "run_status": status,
                    "commit_step_finished": committed,
                    "what": f"kill -9 of run {run_id[:8]}'s worker in step {COMMIT_STEP}; run ended {status}"}
        ctx.wait(0.3)
    _ = dg
    return {"start": time.time(), "end": time.time(), "what": "no sync run was seen in its commit step in 10 min",
            "skipped": True}


def daemon_restart(ctx: FaultContext) -> dict:
    start = time.time()
    old = ctx.dagster.daemon_pid()
    ctx.dagster.stop_daemon()
    ctx.say(f"fault daemon_restart: dagster-daemon pid {old} stopped; starting it again")
    new = ctx.dagster.start_daemon()
    return {"start": start, "end": time.time(), "what": f"dagster-daemon {old} stopped (SIGTERM), started again as {new}"}


def clickhouse_down(ctx: FaultContext) -> dict:
    down_s = ctx.durations.get("clickhouse_down", 120.0)
    path = ctx.clickhouse_path
    aside = path.with_name(path.name + ".soak-down")
    deadline = time.monotonic() + 120
    while procs.holders_of(path) and time.monotonic() < deadline:
        ctx.wait(0.2)  # a run or a sensor tick is using the engine: take it away between uses
    start = time.time()
    os.rename(path, aside)
    path.write_text("ClickHouse is down (bench/soak fault)\n")
    ctx.say(f"fault clickhouse_down: {path} unavailable for {down_s:.0f}s")
    try:
        ctx.wait(down_s)
    finally:
        restore_clickhouse(path)
    return {"start": start, "end": time.time(), "what": f"embedded ClickHouse folder unavailable {down_s:.0f}s"}


def restore_clickhouse(path: Path) -> None:
    aside = path.with_name(path.name + ".soak-down")
    if aside.is_dir():
        if path.is_file():
            path.unlink()
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()  # an engine opened meanwhile made an empty folder
        os.rename(aside, path)


FAULTS: dict[str, Callable[[FaultContext], dict]] = {
    "broker_kill": broker_kill,
    "mirror_stop": mirror_stop,
    "cluster_down": cluster_down,
    "spark_kill": spark_kill,
    "run_worker_kill": run_worker_kill,
    "daemon_restart": daemon_restart,
    "clickhouse_down": clickhouse_down,
}
