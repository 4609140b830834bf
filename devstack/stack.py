"""The whole local stack: two clusters, the mirror both ways, traffic and consumer groups, and the
Spark the sync runs use: a Spark Connect server (the default) or a Spark standalone cluster (a master
and two workers whose executors lack offset_pipeline, ``--spark standalone``).

A secure stack (``OFFSET_PIPELINE_DEVSTACK_SECURE=1``, ``up --secure``): both clusters are the secure
broker of ``devstack/secure_cluster.py`` (SASL_SSL, SCRAM-SHA-512, ACLs enforced); the mirror,
traffic and consumers log in as ``admin`` (``--login``: the path of the cluster's 0600 access file,
never the password itself); ``up`` grants ``sync`` the least rights of ``devstack/sync_acls.py`` for
the workload's topics and groups; ``sync-env`` prints the product's settings for logging in as
``sync`` (``bin/up`` exports them for Dagster). The data folder remembers: a stack made secure stays
secure for ``status``, ``down`` and ``up`` until ``clean``.

The data mirror (``OFFSET_PIPELINE_DEVSTACK_MIRROR``, ``up --mirror``): ``mm2``, the default,
Apache Kafka's MirrorMaker 2 with the project's origin-header transform (``devstack/mirrormaker2.py``,
both ways in one process, part ``mirrormaker2``, restarted by its keeper when its JVM exits or a
task fails), or ``python``, the Python mirror of ``devstack/mirror.py`` (one process per direction;
the soak's faults still act on its two processes). ``up`` with one stops the other first (two
mirrors would copy every record twice); ``down`` and ``status`` cover both. MirrorMaker 2 keeps its
positions in its Connect offsets topics, not in consumer groups: ``python -m devstack
mirror-positions`` prints the ``OFFSET_PIPELINE_MIRROR_POSITIONS`` naming them, which ``bin/up``
exports.

``DevStack.up()`` is what the README's main command runs before it starts the Dagster UI.
Everything lives under :func:`~devstack.paths.stack_dir`.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from devstack.cluster import ClusterSpec, KafkaCluster
from devstack.errors import DevStackError
from devstack.executor_python import ensure_executor_python
from devstack.jars import fetch_jars
from devstack.paths import (
    cluster_ports,
    executor_python_dir,
    jars_dir,
    spark_connect_port,
    spark_standalone_ports,
    stack_dir,
)
from devstack.postgres import LocalPostgres, dagster_storage
from devstack.processes import ManagedProcess, PartState
from devstack.secure_cluster import (
    ADMIN_USER,
    SCRAM_MECHANISM,
    SYNC_USER,
    SecureAccess,
    access_file,
    secure_cluster,
)
from devstack.spark_connect import SparkConnectServer
from devstack.spark_standalone import SparkStandalone

#: What ``up --spark`` can start for the sync runs: nothing, the Spark Connect server, or a standalone cluster.
SPARK_CHOICES = ("connect", "standalone", "none")
#: The data mirror ``up`` starts (see the module docstring).
MIRROR_CHOICES = ("python", "mm2")
MIRROR_ENV = "OFFSET_PIPELINE_DEVSTACK_MIRROR"


# How long ``down`` lets each part stop after SIGTERM (a clean stop takes a few seconds, even on a
# loaded machine); two waves of it stay within bin/up's 30 s.
DOWN_GRACE_S = 12.0


@dataclass(frozen=True)
class StackSettings:
    base_dir: Path
    seed: int = 7
    rate_scale: float = 1.0
    traffic: bool = True
    consumers: bool = True
    spark: str = "connect"  # one of SPARK_CHOICES
    # Dagster's storage on the stack's own PostgreSQL server (OFFSET_PIPELINE_DAGSTER_STORAGE=postgres)
    postgres: bool = False
    # secure clusters (OFFSET_PIPELINE_DEVSTACK_SECURE=1, or a data folder made secure before)
    secure: bool = False
    mirror: str = "mm2"  # one of MIRROR_CHOICES

    def __post_init__(self) -> None:
        if self.spark not in SPARK_CHOICES:
            raise ValueError(f"spark: {self.spark!r} is not one of {', '.join(SPARK_CHOICES)}")
        if self.mirror not in MIRROR_CHOICES:
            raise DevStackError(f"mirror ({MIRROR_ENV}, --mirror): {self.mirror!r} is not one of {', '.join(MIRROR_CHOICES)}")

    @classmethod
    def from_env(cls) -> StackSettings:
        return cls(
            base_dir=stack_dir(),
            seed=int(os.environ.get("OFFSET_PIPELINE_SEED", "7")),
            rate_scale=float(os.environ.get("OFFSET_PIPELINE_RATE_SCALE", "1.0")),
            postgres=dagster_storage() == "postgres",
            secure=stack_security(stack_dir()),
            mirror=(os.environ.get(MIRROR_ENV) or "mm2").strip().lower(),
        )


SECURE_ENV = "OFFSET_PIPELINE_DEVSTACK_SECURE"


def stack_security(base_dir: Path, env=None) -> bool:
    """Whether the stack in ``base_dir`` is secure: ``OFFSET_PIPELINE_DEVSTACK_SECURE`` (``1``/``0``)
    when set, else whether its clusters' data folders were made secure (so ``bin/stack status`` and
    ``down`` from another shell find a secure stack without the variable)."""
    text = ((os.environ if env is None else env).get(SECURE_ENV) or "").strip().lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    if text:
        raise DevStackError(f"{SECURE_ENV}={text!r}: expected 1 or 0")
    return any(access_file(base_dir / p.name).exists() for p in cluster_ports())


def plan_topic_shapes(prefix: str = "") -> str:
    """The traffic plan's topic shapes, as ``OFFSET_PIPELINE_TOPIC_SHAPES`` wants them: the stack
    knows which cluster produces each topic, so the sync need not guess."""
    from devstack.traffic import default_plan

    return ",".join(
        f"{t.name}=" + ("two_way" if len(t.producers_on) > 1 else f"one_way:{t.producers_on[0]}")
        for t in default_plan(prefix)
    )


def workload_sync_rights(topics: list[str], groups: list[str], mirror_position_group: str):
    """The sync's rights on one cluster of the stack (devstack/sync_acls.py): every topic of the
    traffic plan and every consumer group by its exact name, its own groups, the mirror's position
    group kept there."""
    from devstack.sync_acls import sync_rights

    # sync_rights covers one topic and one group a call: pair them up until both lists are covered
    rights = [right for i in range(max(len(topics), len(groups)))
              for right in sync_rights(topics[i % len(topics)], groups[i % len(groups)], mirror_position_group,
                                       prefixed=False)]
    return list(dict.fromkeys(rights))


class DevStack:
    def __init__(self, settings: StackSettings):
        self.settings = settings
        self.run_dir = settings.base_dir / "run"
        self.access: dict[str, SecureAccess] = {}  # a secure stack's clusters: how to log in
        self.clusters = [
            KafkaCluster(ClusterSpec(p.name, p.port, p.controller_port, settings.base_dir / p.name), jars_dir())
            for p in cluster_ports()
        ]
        if settings.secure and all(access_file(c.spec.data_dir).exists() for c in self.clusters):
            self._secure_clusters()

    def _secure_clusters(self) -> None:
        """The secure clusters in place of the plain ones; their certificates and passwords are made
        on the first call for a data folder (keytool, both clusters at once)."""
        with ThreadPoolExecutor(max_workers=len(self.clusters), thread_name_prefix="certificates") as pool:
            built = list(pool.map(
                lambda c: secure_cluster(c.spec.name, c.spec.port, c.spec.controller_port, c.spec.data_dir,
                                         jars_dir()), self.clusters))
        self.clusters = [cluster for cluster, _ in built]
        self.access = {cluster.spec.name: access for cluster, access in built}

    def _check_security(self) -> None:
        """Refuse clusters whose data was formatted otherwise: a plain broker's storage has no SCRAM
        credentials, and a secure one's access file would be left behind."""
        for cluster in self.clusters:
            formatted = (cluster.spec.data_dir / "kraft-logs" / "meta.properties").exists()
            secure_data = access_file(cluster.spec.data_dir).exists()
            if formatted and secure_data != self.settings.secure:
                made, wanted = ("secure", "plain") if secure_data else ("plain", "secure")
                raise DevStackError(
                    f"{cluster.spec.name}: its data in {cluster.spec.data_dir} was made for a {made} cluster, "
                    f"and a {wanted} one was asked for ({SECURE_ENV}); run `bin/stack clean` first, or choose "
                    f"another OFFSET_PIPELINE_DEVSTACK_DIR")

    def admin_configs(self) -> dict[str, dict[str, str]]:
        """Cluster name -> the librdkafka login of ``admin`` (all but the bootstrap servers); empty
        for a plain stack."""
        return {name: {k: v for k, v in access.client_config(ADMIN_USER).items() if k != "bootstrap.servers"}
                for name, access in self.access.items()}

    def sync_env(self) -> dict[str, str]:
        """The product's settings for logging in to each secure cluster as ``sync``
        (``OFFSET_PIPELINE_<CLUSTER>_...``, the password included): what ``bin/up`` exports for
        Dagster. Empty for a plain stack."""
        env = {}
        for name, access in self.access.items():
            prefix = f"OFFSET_PIPELINE_{name.upper()}_"
            env.update({prefix + "SECURITY_PROTOCOL": "SASL_SSL", prefix + "SASL_MECHANISM": SCRAM_MECHANISM,
                        prefix + "SASL_USERNAME": SYNC_USER, prefix + "SASL_PASSWORD": access.passwords[SYNC_USER],
                        prefix + "SSL_CA_LOCATION": str(access.ca_pem)})
        return env

    def grant_sync_rights(self, echo=print) -> None:
        """``sync``'s least rights on each secure cluster (idempotent: an existing ACL stays)."""
        from devstack.consumers import default_groups
        from devstack.mirror import MirrorConfig, MirrorEndpoint
        from devstack.sync_acls import connect_offsets_rights, grant
        from devstack.traffic import default_plan

        topics, groups = [t.name for t in default_plan()], [g.group_id for g in default_groups()]
        for name, config in self.admin_configs().items():
            others = [other for other in self.bootstraps if other != name]
            position_groups = [MirrorConfig(MirrorEndpoint(other, ""), MirrorEndpoint(name, "")).group_id
                               for other in others]
            rights = list(dict.fromkeys(right for group in position_groups
                                        for right in workload_sync_rights(topics, groups, group)))
            if self.settings.mirror == "mm2":  # its positions: each flow's Connect offsets topic on its target
                rights += [right for other in others for right in connect_offsets_rights(f"mm2-offsets.{other}.internal")]
            grant({"bootstrap.servers": self.bootstraps[name], "log_level": 3, **config}, f"User:{SYNC_USER}", rights)
            echo(f"cluster {name:5} {SYNC_USER!r} may read {len(topics)} topics and sync {len(groups)} groups "
                 f"({sum(len(r.operations) for r in rights)} ACLs)")

    @property
    def spark_connect(self) -> SparkConnectServer:
        """The long-lived Spark driver the sync runs connect to (``OFFSET_PIPELINE_SPARK_CONNECT_URL``)."""
        return SparkConnectServer(spark_connect_port(), self.run_dir)

    @property
    def postgres(self) -> LocalPostgres:
        """The PostgreSQL server holding Dagster's storage when ``settings.postgres`` (``.devstack/postgres``)."""
        return LocalPostgres(self.settings.base_dir / "postgres")

    @property
    def spark_standalone(self) -> SparkStandalone:
        """The local Spark standalone cluster (``OFFSET_PIPELINE_SPARK_MASTER=`` its :attr:`master_url`)."""
        ports = spark_standalone_ports()
        return SparkStandalone(ports.master, ports.master_ui, ports.workers, self.run_dir)

    def spark_standalone_conf(self) -> str:
        """``OFFSET_PIPELINE_SPARK_CONF`` for runs on the standalone cluster: its executors' Python
        (without offset_pipeline), and a share of the two workers' cores and memory."""
        python = executor_python_dir() / "bin" / "python"
        return ",".join(f"{k}={v}" for k, v in {
            "spark.pyspark.python": python, "spark.executor.memory": "512m", "spark.cores.max": "2",
        }.items())

    @property
    def bootstraps(self) -> dict[str, str]:
        return {c.spec.name: c.spec.bootstrap_servers for c in self.clusters}

    def _bootstrap_args(self) -> tuple[str, ...]:
        return tuple(arg for name, bs in self.bootstraps.items() for arg in ("--bootstrap", f"{name}={bs}"))

    def _login_args(self) -> tuple[str, ...]:
        """A secure stack's processes log in as admin with each cluster's access file (its path on
        the command line, never the password)."""
        return tuple(arg for c in self.clusters if c.spec.name in self.access
                     for arg in ("--login", f"{c.spec.name}={access_file(c.spec.data_dir)}"))

    def mirror_parts(self, kind: str) -> list[ManagedProcess]:
        """The processes of one kind of data mirror (``MIRROR_CHOICES``)."""
        names = list(self.bootstraps)
        if kind == "mm2":
            from devstack.mirrormaker2 import mm2_rest_port

            clusters = tuple(arg for name in names for arg in ("--cluster", f"{name}={self.bootstraps[name]}"))
            return [ManagedProcess(
                "mirrormaker2", "devstack.mirrormaker2",
                (*clusters, "--work-dir", str(self.run_dir / "mirrormaker2"), "--rest-port", str(mm2_rest_port()),
                 *self._login_args()),
                self.run_dir,
            )]
        return [
            ManagedProcess(
                f"mirror-{src}-to-{dst}",
                "devstack.mirror",
                ("--source", f"{src}={self.bootstraps[src]}", "--target", f"{dst}={self.bootstraps[dst]}",
                 *self._login_args()),
                self.run_dir,
            )
            for src in names
            for dst in names
            if src != dst
        ]

    def other_mirror_parts(self) -> list[ManagedProcess]:
        """The parts of the mirror kinds not chosen that left a pid file (running, or dead): ``up``
        stops them before starting the chosen one, ``down`` stops them, ``status`` shows them."""
        return [proc for kind in MIRROR_CHOICES if kind != self.settings.mirror
                for proc in self.mirror_parts(kind) if proc.pid_path.exists()]

    def processes(self) -> list[ManagedProcess]:
        """In start order; stopped in reverse."""
        procs = self.mirror_parts(self.settings.mirror)
        if self.settings.traffic:
            procs.append(
                ManagedProcess(
                    "traffic",
                    "devstack.traffic",
                    (*self._bootstrap_args(), "--seed", str(self.settings.seed),
                     "--rate-scale", str(self.settings.rate_scale), *self._login_args()),
                    self.run_dir,
                )
            )
        if self.settings.consumers:
            procs.append(
                ManagedProcess(
                    "consumers",
                    "devstack.consumers",
                    (*self._bootstrap_args(), "--processed-dir", str(self.settings.base_dir / "processed"),
                     *self._login_args()),
                    self.run_dir,
                )
            )
        return procs

    def up(self, echo=print) -> None:
        """Start every part that does not run: a first start, or a restart of exactly the parts
        that died (a broker, a mirror, ...); living parts are left alone."""
        echo(f"Kafka jars: {fetch_jars(jars_dir())}")
        if self.settings.mirror == "mm2":
            from devstack.connect_transform import transform_jar
            from devstack.mirrormaker2 import mm2_jars

            echo(f"MirrorMaker 2 jars: {mm2_jars()}  transform: {transform_jar()}")
        self._check_security()
        if self.settings.secure and not self.access:
            self._secure_clusters()  # a first secure start: certificates and passwords made now
        spark = self.spark_connect if self.settings.spark == "connect" else None
        standalone_before = self._standalone_state() if self.settings.spark == "standalone" else None
        spark_before = spark.process().state() if spark is not None else None
        if spark is not None:
            spark.launch()  # the JVM starts while the brokers do; readiness is awaited at the end
        # Both brokers start at once (each JVM spends seconds on its own start-up and storage format).
        was_dead = [cluster.status().dead for cluster in self.clusters]
        with ThreadPoolExecutor(max_workers=len(self.clusters), thread_name_prefix="broker-start") as pool:
            statuses = list(pool.map(lambda cluster: cluster.start(), self.clusters))
        for status, dead in zip(statuses, was_dead):
            echo(f"cluster {status.line()}" + ("  (restarted: it had died)" if dead else ""))
        # Topics first, on both sides with equal partition counts, so the mirror finds them.
        from devstack.traffic import default_plan, ensure_topics

        ensure_topics(default_plan(), self.bootstraps, client_configs=self.admin_configs())
        if self.access:
            echo(f"secure clusters (SASL_SSL, {SCRAM_MECHANISM}, ACLs): mirror, traffic and consumers log in as "
                 f"{ADMIN_USER!r}, the sync as {SYNC_USER!r} (`python -m devstack sync-env`; bin/up exports it)")
            self.grant_sync_rights(echo)
        for proc in self.other_mirror_parts():  # one mirror at a time: two would copy every record twice
            if proc.stop(timeout=DOWN_GRACE_S):
                echo(f"stopped {proc.name} (the {self.settings.mirror} mirror replaces it)")
        for proc in self.processes():
            before = proc.state()
            echo(f"{proc.name:22} pid {proc.start()}  {_how_started(*before)}  log {proc.log_path}")
        if spark is not None:
            pid = spark.start()
            echo(f"{spark.name:22} pid {pid}  {_how_started(*spark_before)}  {spark.url}  log {spark.process().log_path}")
        if standalone_before is not None:
            self.start_spark_standalone(echo, standalone_before)
        if self.settings.postgres:
            postgres, was_running = self.postgres, self.postgres.pid() is not None
            pid = postgres.start()
            echo(f"{postgres.name:22} pid {pid}  {'already running' if was_running else 'started'}  "
                 f"{postgres.socket_dir}  log {postgres.log_path}")

    def _standalone_state(self) -> list[tuple[PartState, int | None]]:
        return [part.state() for part in self.spark_standalone.parts()]

    def start_spark_standalone(self, echo=print, before: list | None = None) -> str:
        """The standalone cluster up (its executors' Python made first, once): returns the master URL
        when every worker is ALIVE."""
        before = self._standalone_state() if before is None else before
        python = ensure_executor_python(executor_python_dir())
        cluster = self.spark_standalone
        url = cluster.start()
        for part, state in zip(cluster.parts(), before):
            echo(f"{part.name:22} pid {part.pid()}  {_how_started(*state)}  log {part.log_path}")
        echo(f"{'spark-standalone':22} {url}  executors' Python {python} (without offset_pipeline)")
        return url

    def restart_dead(self, echo=print) -> int:
        """Start again every part that does not run (a broker, a process, the Spark Connect
        server), leaving the living ones alone. Returns how many were restarted; a part that
        fails to start is reported and tried again next time."""
        restarted = 0
        parts = [(f"cluster {c.spec.name}", lambda c=c: not c.status().running, lambda c=c: c.start().line())
                 for c in self.clusters]
        parts += [(p.name, lambda p=p: p.pid() is None, lambda p=p: f"pid {p.start()}") for p in self.processes()]
        if self.settings.spark == "connect":
            spark = self.spark_connect
            parts.append((spark.name, lambda: spark.pid() is None, lambda: f"pid {spark.start()}"))
        if self.settings.spark == "standalone":
            # a dead worker restarts through the cluster's own start (it waits for every worker ALIVE)
            cluster = self.spark_standalone
            parts.append(("spark-standalone", lambda: any(p.pid() is None for p in cluster.parts()),
                          lambda: cluster.start()))
        if self.settings.postgres:
            postgres = self.postgres
            parts.append((postgres.name, lambda: postgres.pid() is None, lambda: f"pid {postgres.start()}"))
        for name, is_down, start in parts:
            if not is_down():
                continue
            echo(f"{name} is not running: restarting it")
            try:
                echo(f"{name} restarted: {start()}")
                restarted += 1
            except DevStackError as exc:
                echo(f"{name} did not start: {exc}")
        return restarted

    def watch(self, stop: threading.Event, every_s: float = 10.0, echo=print) -> None:
        """``up``, then every ``every_s`` seconds restart whatever died, until ``stop`` is set
        (SIGINT/SIGTERM on the command line). Stopping the watch leaves the stack running."""
        self.up(echo)
        echo(f"watching the stack every {every_s:g}s (Ctrl-C stops watching; the stack keeps running)")
        while not stop.wait(every_s):
            _reap_children()  # parts this process started and that died are zombies until reaped
            self.restart_dead(lambda line: echo(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}"))

    def down(self, echo=print, grace_s: float = DOWN_GRACE_S, leave_postgres: bool = False) -> None:
        """Stop everything in two waves, each part of a wave in parallel, so a stop of ``bin/up``
        fits in 30 s: the Spark Connect server and the processes (which still reach the brokers
        while they finish), then the clusters and the PostgreSQL server. A part still running
        ``grace_s`` after SIGTERM is killed. ``leave_postgres``: bin/up stops the PostgreSQL server
        itself once Dagster has ended (Dagster's last writes, a run ending, go there)."""
        clients = [(self.spark_connect.name, self.spark_connect.process().stop)]
        # workers before their master, each in the first wave (whatever ``up`` started: down stops it all)
        clients += [(part.name, part.stop) for part in reversed(self.spark_standalone.parts())]
        clients += [(proc.name, proc.stop) for proc in [*reversed(self.processes()), *self.other_mirror_parts()]]
        brokers = [(f"cluster {cluster.spec.name}", cluster.stop) for cluster in reversed(self.clusters)]
        if not leave_postgres:
            brokers.append((self.postgres.name, self.postgres.stop))
        for wave in (clients, brokers):
            with ThreadPoolExecutor(max_workers=len(wave)) as pool:
                stopped = list(pool.map(lambda part: part[1](timeout=grace_s), wave))
            for (name, _), was_running in zip(wave, stopped):
                if was_running:
                    echo(f"stopped {name}")

    def status_lines(self) -> list[str]:
        lines = [f"cluster {c.status().line()}" for c in self.clusters]
        if self.settings.secure:
            lines.append(f"{'security':22} SASL_SSL {SCRAM_MECHANISM}, ACLs; logins and CA in "
                         f"{', '.join(str(access_file(c.spec.data_dir)) for c in self.clusters)} (0600)")
        for proc in [*self.other_mirror_parts(), *self.processes()]:
            lines.append(f"{proc.name:22} {_state_text(*proc.state()):16} log {proc.log_path}")
        spark = self.spark_connect
        state, pid = spark.process().state()
        if state is PartState.DEAD:
            lines.append(f"{spark.name:22} {_state_text(state, pid):16} {spark.address}  log {spark.process().log_path}")
        else:
            lines.append(spark.status_line())
        standalone = self.spark_standalone
        parts = [(part, part.state()) for part in standalone.parts()]
        if any(state is not PartState.STOPPED for part, (state, _) in parts):
            status = standalone.status()
            alive = "master does not answer" if status is None else \
                f"{standalone.alive_workers(status)} of {standalone.workers} workers ALIVE"
            for part, (state, pid) in parts:
                lines.append(f"{part.name:22} {_state_text(state, pid):16} log {part.log_path}")
            lines.append(f"{'spark-standalone':22} {standalone.master_url}  {alive}")
        if self.settings.postgres or self.postgres.pid() is not None:
            lines.append(self.postgres.status_line())
        return lines

    def clean(self, echo=print) -> None:
        """Stop everything and delete cluster data, logs and Dagster state; the jar cache stays."""
        self.down(echo)
        for child in self.settings.base_dir.iterdir() if self.settings.base_dir.exists() else []:
            if child.resolve() == jars_dir():
                continue
            shutil.rmtree(child) if child.is_dir() else child.unlink()
            echo(f"removed {child}")


def _state_text(state: PartState, pid: int | None) -> str:
    if state is PartState.RUNNING:
        return f"running pid {pid}"
    if state is PartState.DEAD:
        return f"dead (pid {pid} gone; `up` restarts it)"
    return "stopped"


def _how_started(state: PartState, pid: int | None) -> str:
    return {
        PartState.RUNNING: "already running",
        PartState.DEAD: f"restarted (pid {pid} had died)",
        PartState.STOPPED: "started",
    }[state]


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
