"""The soak: the real stack, the real Dagster daemon with its real sensors and schedules,
at 10,000 group-partitions on the default 30-second cadence, for an hour, with faults injected.

    bin/soak [--duration-s 3600 --group-partitions 10000 --faults all --out soak-out --seed 7]

What runs (everything in a temporary folder on free ports, stopped on exit, SIGINT or SIGTERM):

* the dev stack (``DevStack``): two single-node KRaft clusters, the data mirror both ways, the Spark
  Connect server; its own small traffic and consumers are left out;
* the load (``soak/load.py``, a process): ``clusters.Workload``'s topics (two-way and one-way), the
  devstack's traffic generator on them, and one member per group committing on its active cluster
  every few seconds, near the log end;
* ``dagster-daemon run`` (and ``dagster-webserver`` with ``--webserver``) with DAGSTER_HOME in the
  folder: ``offset_sync_sensor`` launches a cycle every 30 s, ``stale_partition_sensor`` and
  ``dagster_run_retention`` run, run monitoring ends dead runs;
* the faults (``soak/faults.py``), spaced through the run after a warm-up, each with its window;
* samplers every ``--sample-s``: runs from the Dagster instance, RSS of every process by role,
  bytes of DAGSTER_HOME, the ClickHouse folder, its spool and the logs;
* the no-loss checker (``soak/checker.py``, ``soak/rules.py``), every ``--check-every-s``: by record
  identity, without the product's translation code.

At the end (after Dagster stopped, so the embedded ClickHouse folder is free) each fault's recovery
is counted from ``offset_sync_metrics``: cycles after the window until every group-partition synced
by the last cycle before it is synced again. It prints the table and writes ``soak.json`` and
``soak.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.clusters import free_port
from bench.soak import faults as fault_mod
from bench.soak import procs, report
from bench.soak.checker import GroupInfo, NoLossChecker
from bench.soak.dagster_procs import DagsterProcesses
from bench.soak.rules import (
    ALL_FAULTS, Cycle, RunSeen, Window, bytes_growth, cycles_to_recover, fault_schedule, instance_peak_slope,
    rss_slope_pct_per_hour,
    run_counts,
)
from devstack.paths import REPO_ROOT

SYNC_JOBS = {"interval": "offset_sync_cycle", "continuous": "offset_sync_continuous"}


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} soak: {text}", flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration-s", type=float, default=3600.0)
    p.add_argument("--group-partitions", type=int, default=10_000,
                   help="topics = this / (partitions x groups-per-topic)")
    p.add_argument("--partitions", type=int, default=20)
    p.add_argument("--groups-per-topic", type=int, default=5)
    p.add_argument("--topics-per-group", type=int, default=10)
    p.add_argument("--rate-scale", type=float, default=1.0, help="traffic: about 1 record/s per topic and producing cluster")
    p.add_argument("--commit-every-s", type=float, default=15.0,
                   help="how often each group commits all its partitions (the first soak's 5 s, 2,000 commits/s on "
                        "top of both brokers, mirrors, Spark and Dagster, kept a 2-core box at load 15-20)")
    p.add_argument("--faults", default="all", help=f"comma-separated from {','.join(ALL_FAULTS)}, 'all' or 'none'")
    p.add_argument("--fault-durations", default="",
                   help="name=seconds,... overrides (mirror_stop=300, cluster_down=120, clickhouse_down=120)")
    p.add_argument("--warmup-s", type=float, default=None, help="default: min(600, 20%% of the duration)")
    p.add_argument("--tail-s", type=float, default=None, help="fault-free end; default: min(300, 10%% of the duration)")
    p.add_argument("--sync-mode", choices=("continuous", "interval"), default="continuous",
                   help="OFFSET_PIPELINE_SYNC_MODE (default: the product's continuous)")
    p.add_argument("--sync-interval-s", type=float, default=None, help="OFFSET_PIPELINE_SYNC_INTERVAL_S (default: the product's 30)")
    p.add_argument("--sample-s", type=float, default=15.0)
    p.add_argument("--check-every-s", type=float, default=30.0)
    p.add_argument("--check-partitions", type=int, default=20, help="partitions per checker round (all their groups)")
    p.add_argument("--webserver", action="store_true", help="also run dagster-webserver (and measure it)")
    p.add_argument("--out", type=Path, default=Path("soak-out"))
    p.add_argument("--work-dir", type=Path, default=None, help="default: a new temporary folder")
    p.add_argument("--keep", action="store_true", help="keep the work folder (clusters' data, DAGSTER_HOME, logs)")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    unit = args.partitions * args.groups_per_topic
    args.topics = max(1, round(args.group_partitions / unit))
    args.topics_per_group = min(args.topics_per_group, args.topics)
    if args.faults == "all":
        args.fault_list = list(ALL_FAULTS)
    elif args.faults == "none":
        args.fault_list = []
    else:
        args.fault_list = [f.strip() for f in args.faults.split(",") if f.strip()]
        unknown = set(args.fault_list) - set(ALL_FAULTS)
        if unknown:
            p.error(f"unknown faults {sorted(unknown)}; known: {', '.join(ALL_FAULTS)}")
    args.durations = {k: float(v) for k, v in (kv.split("=") for kv in args.fault_durations.split(",") if kv)}
    args.warmup_s = min(600.0, 0.2 * args.duration_s) if args.warmup_s is None else args.warmup_s
    args.tail_s = min(300.0, 0.1 * args.duration_s) if args.tail_s is None else args.tail_s
    return args


def scratch_env(base: Path) -> dict[str, str]:
    """As tests/conftest.py's ``devstack_env``: the stack in ``base`` on free ports, without the
    developer's own ``OFFSET_PIPELINE_*``/``DAGSTER_*`` settings."""
    from devstack.paths import jars_dir

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OFFSET_PIPELINE_", "DAGSTER_"))}
    env.update(OFFSET_PIPELINE_DEVSTACK_DIR=str(base), OFFSET_PIPELINE_JARS_DIR=str(jars_dir()),
               OFFSET_PIPELINE_SPARK_CONNECT_PORT=str(free_port()))
    for name in ("IDC1", "IDC2"):
        env[f"OFFSET_PIPELINE_{name}_PORT"] = str(free_port())
        env[f"OFFSET_PIPELINE_{name}_CONTROLLER_PORT"] = str(free_port())
    return env


def store_bounds(brokers: int) -> dict[str, dict]:
    """What bounds each store at the defaults (README "Retention: bounded storage"), for the 30-day
    figure under retention: successful runs kept 1 day (failures 14), ClickHouse rows 35 days,
    logs by rotation (each wrapped process and each broker), Kafka by the brokers' 7-day retention."""
    from devstack.cluster import BROKER_LOG_BACKUPS
    from devstack.logpipe import log_limits
    from offset_pipeline.housekeeping.run_retention import run_retention
    from offset_pipeline.storage.retention import clickhouse_retention

    max_bytes, backups = log_limits()
    wrapped = 4  # two mirrors, the Spark Connect server, dagster-daemon (the soak's webserver is optional)
    logs_cap = wrapped * max_bytes * (backups + 1) + brokers * 20 * 2**20 * (BROKER_LOG_BACKUPS + 1)
    return {
        "dagster_home": {"retention_days": run_retention().success_days,
                         "bound": f"run retention: successful runs {run_retention().success_days:g} d"},
        "clickhouse": {"retention_days": clickhouse_retention().history_days,
                       "bound": f"TTL {clickhouse_retention().history_days} d"},
        "clickhouse_spool": {"bound": "replayed when ClickHouse returns"},
        "logs": {"cap_bytes": logs_cap, "bound": f"rotation: at most {logs_cap / 2**20:.0f} MB"},
        "kafka_data": {"retention_days": 7.0, "bound": "broker retention 7 d (the load's records)"},
    }


class Soak:
    def __init__(self, args):
        self.args = args
        self.sync_job = SYNC_JOBS[args.sync_mode]
        fault_mod.use_sync_mode(args.sync_mode)
        self.stop = threading.Event()
        self.base = (args.work_dir or Path(tempfile.mkdtemp(prefix="offset-pipeline-soak-"))).resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        self.samples = {"rss": [], "rss_anon": [], "bytes": [], "runs": [], "load": [], "code_servers": []}
        self.runs: dict[str, RunSeen] = {}
        self.windows: list[dict] = []
        self.stack = None
        self.load: subprocess.Popen | None = None
        self.dagster: DagsterProcesses | None = None
        self.checker: NoLossChecker | None = None
        self._instance = None
        self.started = time.time()

    # -- set-up ---------------------------------------------------------------------------------

    def start(self) -> None:
        args = self.args
        os.environ.clear()
        os.environ.update(scratch_env(self.base))
        from devstack.stack import DevStack, StackSettings, plan_topic_shapes
        from bench.soak.load import workload_from

        self.workload = workload_from(args)
        say(f"work folder {self.base}; {self.workload.group_partitions} group-partitions "
            f"({args.topics} topics x {args.partitions} partitions x {args.groups_per_topic} groups)")
        # The Python mirror: the soak's mirror faults stop and start its per-direction processes.
        self.stack = DevStack(StackSettings(self.base, seed=args.seed, traffic=False, consumers=False, spark="connect",
                                            mirror="python"))
        self.stack.up(echo=lambda line: say(line))
        bootstraps = self.stack.bootstraps
        run_dir = self.base / "run"
        self.load_status = run_dir / "soak-load.json"
        cmd = [sys.executable, "-m", "bench.soak.load",
               *(a for n, b in bootstraps.items() for a in ("--bootstrap", f"{n}={b}")),
               "--topics", str(args.topics), "--partitions", str(args.partitions),
               "--groups-per-topic", str(args.groups_per_topic), "--topics-per-group", str(args.topics_per_group),
               "--rate-scale", str(args.rate_scale), "--seed", str(args.seed), "--status-file", str(self.load_status),
               "--commit-every-s", str(args.commit_every_s)]
        with open(run_dir / "soak-load.log", "ab") as log:
            self.load = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, cwd=REPO_ROOT)
        self._wait_for_groups(timeout_s=900)

        home = self.base / "dagster_home"
        subprocess.run([sys.executable, "-m", "devstack", "instance-config", str(home)],
                       check=True, cwd=REPO_ROOT)
        shapes = ",".join(f"{t}={s}" for t, s in self.workload.shapes().items())
        env = dict(os.environ)
        env.update(DAGSTER_HOME=str(home), OFFSET_PIPELINE_SPARK_CONNECT_URL=self.stack.spark_connect.url,
                   OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE="1",
                   OFFSET_PIPELINE_TOPIC_SHAPES=plan_topic_shapes() + "," + shapes)
        env["OFFSET_PIPELINE_SYNC_MODE"] = args.sync_mode
        if args.sync_interval_s:
            env["OFFSET_PIPELINE_SYNC_INTERVAL_S"] = str(args.sync_interval_s)
        os.environ["DAGSTER_HOME"] = str(home)
        # The instance's SQLite schema is made here, before the daemon starts: made by both at once,
        # the daemon died at start on "table runs already exists".
        self.instance().get_run_records(limit=1)
        self.dagster = DagsterProcesses(REPO_ROOT, env, run_dir, free_port() if args.webserver else None)
        self.dagster.start_daemon()
        web = self.dagster.start_webserver()
        say(f"dagster-daemon pid {self.dagster.daemon_pid()}" + (f", webserver http://127.0.0.1:{self.dagster.webserver_port}" if web else ""))
        groups = [GroupInfo(g.group_id, g.active, g.topics) for g in self.workload.groups()]
        self.checker = NoLossChecker(bootstraps, groups, args.partitions, args.seed, args.check_partitions)
        from offset_pipeline.settings import default_clickhouse_dsn

        self.clickhouse_path = Path(default_clickhouse_dsn().removeprefix("chdb://"))
        self.started = time.time()

    def _wait_for_groups(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            if self.load.poll() is not None:
                raise RuntimeError(f"the load process ended (code {self.load.returncode}); see {self.base}/run/soak-load.log")
            try:
                status = json.loads(self.load_status.read_text())
                if status["assigned"] == status["groups"] and status["rounds_ok"] > 0:
                    say(f"load: {status['groups']} groups joined and committing")
                    return
            except (FileNotFoundError, ValueError, KeyError):
                pass
            time.sleep(2)
        raise RuntimeError("the load's groups did not all join and commit in time")

    def instance(self):
        if self._instance is None:
            import dagster as dg

            self._instance = dg.DagsterInstance.get()
        return self._instance

    # -- sampling -------------------------------------------------------------------------------

    def _watch_daemon(self) -> None:
        """A daemon that ended outside the daemon_restart fault is an unplanned failure: said,
        recorded as a window, and started again (as an operator's supervisor would)."""
        in_restart = self.windows and self.windows[-1]["name"] == "daemon_restart" and self.windows[-1]["end"] is None
        proc = self.dagster.daemon
        if proc is None or proc.poll() is None or in_restart:
            return
        began = time.time()
        say(f"dagster-daemon ended on its own (exit code {proc.returncode}); see {self.base}/run/dagster-daemon.log; "
            "starting it again")
        pid = self.dagster.start_daemon()
        self.windows.append({"name": "daemon_died", "start": began, "end": time.time(),
                             "what": f"dagster-daemon exited with {proc.returncode} (not injected); started again as {pid}"})

    def sample(self) -> None:
        self._watch_daemon()
        now = time.time()
        kids = procs.children_map()
        roles: dict[str, tuple[int, int]] = {}
        for cluster in self.stack.clusters:
            pid = cluster.pid()
            if procs.alive(pid):
                roles[f"broker-{cluster.spec.name}"] = (pid, *procs.memory_of(procs.tree(pid, kids)))
        parts = [(p.name, p.pid()) for p in self.stack.processes()] + [("spark-connect", self.stack.spark_connect.pid())]
        for name, pid in parts:
            if procs.alive(pid):
                roles[name] = (pid, *procs.memory_of(procs.tree(pid, kids)))
        if self.load and self.load.poll() is None:
            roles["soak-load"] = (self.load.pid, *procs.memory(self.load.pid))
        roles.update(self.dagster.roles(kids))
        roles["soak-driver"] = (os.getpid(), *procs.memory(os.getpid()))
        for role, (pid, rss, anon) in roles.items():
            self.samples["rss"].append((now, role, pid, rss))
            self.samples["rss_anon"].append((now, role, pid, anon))
        for pid, (rss, anon) in self.dagster.code_servers(kids).items():
            self.samples["code_servers"].append((now, pid, rss, anon))
        ch = self.clickhouse_path
        ch_dir = ch if ch.is_dir() else ch.with_name(ch.name + ".soak-down")
        # the product's and the stack's logs; not the soak's own load generator's
        harness = sum(procs.du(f) for f in (self.base / "run").glob("soak-load.log*"))
        logs = procs.du(self.base / "run") - harness + sum(procs.du(c.log_path) for c in self.stack.clusters)
        stores = {
            "dagster_home": procs.du(self.base / "dagster_home"),
            "clickhouse": procs.du(ch_dir),
            "clickhouse_spool": procs.du(ch.with_name(ch.name + "-spool")),
            "logs": logs,
            "kafka_data": sum(procs.du(self.base / c.spec.name) for c in self.stack.clusters) - sum(
                procs.du(c.log_path) for c in self.stack.clusters),
        }
        for store, size in stores.items():
            self.samples["bytes"].append((now, store, size))
        try:
            for record in self.instance().get_run_records(limit=100):
                run = record.dagster_run
                self.runs[run.run_id] = RunSeen(run.run_id, run.job_name, run.status.value,
                                                record.start_time, record.end_time)
        except Exception as exc:  # noqa: BLE001 - SQLite busy: next sample
            say(f"runs not read this time: {exc}")
        try:
            self.samples["load"].append(json.loads(self.load_status.read_text()))
        except (OSError, ValueError):
            pass

    # -- faults ---------------------------------------------------------------------------------

    def fault_runner(self) -> None:
        ctx = fault_mod.FaultContext(self.stack, self.dagster, self.instance, self.clickhouse_path, self.stop,
                                     say, random.Random(f"{self.args.seed}:faults"), self.args.durations)
        schedule = fault_schedule(self.args.fault_list, self.args.duration_s, self.args.warmup_s, self.args.tail_s,
                                  self.args.durations)
        say("fault schedule: " + ", ".join(f"{name} at {at / 60:.1f} min" for at, name in schedule))
        for at, name in schedule:
            if self.stop.wait(max(0.0, self.started + at - time.time())):
                return
            began = time.time()
            self.windows.append({"name": name, "start": began, "end": None, "what": "in progress"})
            try:
                window = fault_mod.FAULTS[name](ctx)
            except fault_mod.Interrupted:
                self.windows[-1].update(end=time.time(), what="interrupted")
                return
            except Exception as exc:  # noqa: BLE001 - reported, the soak goes on
                say(f"fault {name} failed: {type(exc).__name__}: {exc}")
                window = {"start": began, "end": time.time(), "what": f"failed: {exc}", "error": True}
            self.windows[-1] = {"name": name, **window}
            say(f"fault {name} over after {window['end'] - window['start']:.0f}s: {window['what']}")

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> None:
        faults = threading.Thread(target=self.fault_runner, name="faults", daemon=True)
        faults.start()
        end = self.started + self.args.duration_s
        next_sample = next_check = time.time()
        last_note = 0.0
        while not self.stop.is_set() and time.time() < end:
            now = time.time()
            if now >= next_sample:
                self.sample()
                next_sample = now + self.args.sample_s
            if now >= next_check and now - self.started >= min(120.0, self.args.warmup_s):
                self.checker.round()
                next_check = time.time() + self.args.check_every_s
            if now - last_note >= 300:
                last_note = now
                sync = [r for r in self.runs.values() if r.job == self.sync_job]
                c = self.checker.totals
                say(f"{(now - self.started) / 60:.0f} min: sync runs {sum(r.status == 'SUCCESS' for r in sync)} ok, "
                    f"{sum(r.status in ('FAILURE', 'CANCELED') for r in sync)} failed; checker {c.checks} checks, "
                    f"{len(c.distinct)} group-partitions, {c.unsafe} unsafe")
            self.stop.wait(1.0)
        self.stop.set()
        faults.join(timeout=400)

    def shutdown(self) -> None:
        say("stopping")
        if self.dagster:
            self.dagster.stop_all()
        fault_mod.restore_clickhouse(getattr(self, "clickhouse_path", self.base / "data" / "clickhouse"))
        if self.load and self.load.poll() is None:
            self.load.terminate()
            try:
                self.load.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.load.kill()
        if self.checker:
            self.checker.close()
        if self.stack:
            self.stack.down(echo=lambda line: say(line))

    # -- results --------------------------------------------------------------------------------

    def sync_cycles(self) -> list[Cycle]:
        """Sync runs with the group-partitions each left synced (``offset_sync_metrics``)."""
        runs = sorted((r for r in self.runs.values() if r.job == self.sync_job and r.start and r.end),
                      key=lambda r: r.start)
        synced_at: dict[float, set] = {}
        try:
            import clickhouse_connect

            client = clickhouse_connect.get_client(dsn=f"chdb://{self.clickhouse_path}")
            rows = client.query(
                "SELECT toUnixTimestamp64Milli(cycle_time) / 1000.0, cityHash64(group_id, topic, partition), synced "
                "FROM offset_sync_metrics WHERE cycle_time >= fromUnixTimestamp64Milli({t0:Int64})",
                parameters={"t0": int(self.started * 1000) - 600_000}).result_rows
            client.close()
        except Exception as exc:  # noqa: BLE001 - the report says recovery is unknown
            say(f"offset_sync_metrics not read: {exc}")
            return []
        for ts, key, synced in rows:  # a cycle that synced nothing is an empty set, not "no cycle"
            keys = synced_at.setdefault(ts, set())
            if synced:
                keys.add(key)
        cycles = []
        times = sorted(synced_at)
        if self.args.sync_mode == "continuous":
            # A continuous run writes its state every checkpoint (30 s): each checkpoint counts as a cycle.
            return [Cycle(ts, ts, frozenset(synced_at[ts])) for ts in times]
        for run in runs:
            inside = [ts for ts in times if run.start - 1 <= ts <= run.end + 1]
            keys = frozenset().union(*(synced_at[ts] for ts in inside)) if inside else None
            cycles.append(Cycle(run.start, run.end, keys))
        return cycles

    def results(self) -> dict:
        args = self.args
        windows = [Window(w["name"], w["start"], w["end"] or time.time()) for w in self.windows]
        cycles = self.sync_cycles()
        faults = []
        for w, raw in zip(windows, self.windows):
            k, baseline = cycles_to_recover(w, cycles) if cycles else (None, 0)
            shares = []
            if cycles and baseline:
                base = [cy for cy in cycles if cy.end <= w.start and cy.synced]
                base_set = base[-1].synced
                for cy in [cy for cy in cycles if cy.start >= w.end][:3]:
                    shares.append(None if cy.synced is None else len(base_set & cy.synced) / len(base_set))
            faults.append({**raw, "at_min": (w.start - self.started) / 60, "window_s": w.end - w.start,
                           "cycles_to_recover": k, "baseline": baseline, "shares": shares})
        sync_runs = [r for r in self.runs.values() if r.job == self.sync_job]
        all_runs = list(self.runs.values())
        def slopes(series: str) -> dict:
            by_role: dict[str, list] = {}
            for ts, role, pid, value in self.samples[series]:
                by_role.setdefault(role, []).append((ts, pid, value))
            return {role: rss_slope_pct_per_hour(s, args.warmup_s, min_span_s=min(600.0, args.duration_s / 4))
                    for role, s in by_role.items() if not role.endswith("run-workers")}

        rss = slopes("rss")
        for role, anon in slopes("rss_anon").items():
            if role in rss:
                rss[role]["anon_mean_mb"] = anon["mean_mb"]
                rss[role]["anon_slope_pct_per_h"] = anon["slope_pct_per_h"]
        by_store: dict[str, list] = {}
        for ts, store, size in self.samples["bytes"]:
            by_store.setdefault(store, []).append((ts, size))
        bounds = store_bounds(len(self.stack.clusters))
        stores = {store: {**bytes_growth(s, args.warmup_s, self.started, **bounds.get(store, {}))}
                  for store, s in by_store.items()}
        c = self.checker.totals
        return {
            "meta": {"started": self.started, "duration_s": time.time() - self.started,
                     "group_partitions": self.workload.group_partitions, "topics": args.topics,
                     "partitions": args.partitions, "groups_per_topic": args.groups_per_topic,
                     "sync_interval_s": args.sync_interval_s or 30, "sync_mode": args.sync_mode,
                     "warmup_s": args.warmup_s, "seed": args.seed,
                     "commit_every_s": args.commit_every_s,
                     "faults": args.fault_list, "work_dir": str(self.base)},
            "runs": {**run_counts(sync_runs, windows), "all_jobs": run_counts(all_runs, windows)},
            "faults": faults,
            "checker": {"unsafe": c.unsafe, "checks": c.checks, "distinct_group_partitions": len(c.distinct),
                        "records_judged": c.records, "rounds": c.rounds, "not_synced": c.not_synced,
                        "unidentified": c.unidentified, "read_errors": c.read_errors,
                        "unsafe_examples": c.unsafe_examples, "read_error_examples": c.read_error_examples},
            "rss": rss,
            "code_server_instances": {
                "rss": instance_peak_slope([(ts, pid, rss) for ts, pid, rss, _ in self.samples["code_servers"]],
                                           args.warmup_s, self.started, min_span_s=min(600.0, args.duration_s / 4)),
                "anon": instance_peak_slope([(ts, pid, anon) for ts, pid, _, anon in self.samples["code_servers"]],
                                            args.warmup_s, self.started, min_span_s=min(600.0, args.duration_s / 4)),
            },
            "stores": stores,
        }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    soak = Soak(args)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: soak.stop.set())
    code = 0
    try:
        soak.start()
        soak.run()
    except Exception as exc:  # noqa: BLE001 - stop everything, then say why
        say(f"soak failed: {type(exc).__name__}: {exc}")
        code = 1
    finally:
        soak.shutdown()
    if soak.checker is not None:
        result = soak.results()
        samples = {"rss": soak.samples["rss"], "bytes": soak.samples["bytes"], "load": soak.samples["load"][-1:],
                   "runs": [r.__dict__ for r in soak.runs.values()], "code_servers": soak.samples["code_servers"]}
        args.out.mkdir(parents=True, exist_ok=True)
        text = report.table(result)
        (args.out / "soak.txt").write_text(text + "\n")
        report.write_json(result, samples, args.out)
        png = report.write_png(result, samples, args.out)
        print(text)
        say(f"wrote {args.out / 'soak.json'}, {args.out / 'soak.txt'}" + (f", {png}" if png else ""))
        if result["checker"]["unsafe"] or result["runs"]["outside"]["failed"]:
            code = code or 2
    if not args.keep and args.work_dir is None:
        shutil.rmtree(soak.base, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
