"""Shared fixtures: two real single-node KRaft clusters (idc1, idc2) started once per test session.

The clusters run on free loopback ports in a temporary folder, apart from a developer's own
running stack. Nothing here mocks Kafka.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import hypothesis
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.cluster import ClusterSpec, KafkaCluster
from devstack.jars import fetch_jars
from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint
from devstack.paths import jars_dir
from tests.helpers import shared_pair
from tests.helpers.local_spark import stop_local_spark

# The session mirrors copy only topics with this prefix, so tests that run a mirror of their own
# (restarts, failures) use other names and never race the shared one.
MIRRORED_PREFIX = shared_pair.MIRRORED_PREFIX
#: this process's name among the run's workers ("main" without pytest-xdist)
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
# The Python mirror's threads (``python_mirrors``) copy only topics with this prefix: the
# session's clusters are every worker's, each worker's Python mirror copies its own topics.
PYTHON_MIRRORED_PREFIX = f"py.{WORKER}."

# SIGTERM grace for brokers a test owns and throws away with their data: in full runs, a broker
# that served transactional mirrors sometimes sat out the whole 30 s default stop timeout at
# teardown (five modules, ~2.5 min of the suite; never alone). A clean stop is not what these
# teardowns test (test_cluster and test_clean_stop do), so it is cut short.
THROWAWAY_BROKER_GRACE_S = 5.0
#: SIGTERM grace of a MirrorMaker 2 a fixture throws away (its graceful stop took 10-30 s, and nobody
#: reads its positions again)
THROWAWAY_MIRROR_GRACE_S = 2.0
# Memory of the JVMs a test run starts. The shipped sizes (1g per broker, 4g for a Spark driver)
# fit the soak's 2,000 partitions and a day of audit moments; a test's few partitions run in less,
# and bin/test runs two test workers side by side, each with its clusters, stacks and local Spark.
TEST_BROKER_HEAP = "512m"
TEST_SPARK_DRIVER_MEMORY = "1g"
os.environ.setdefault("OFFSET_PIPELINE_BROKER_HEAP", TEST_BROKER_HEAP)
os.environ.setdefault("OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY", TEST_SPARK_DRIVER_MEMORY)
# The tests start some 45 brokers and 20 MirrorMaker 2s, mostly to carry a few hundred records: JVMs
# that compile with C1 only, collect with the serial collector and leave their heap untouched start
# on half the CPU (a broker: about 3.5 CPU-s to ready instead of 6.5) and idle cheaper.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:-UseG1GC -XX:+UseSerialGC -XX:-AlwaysPreTouch"
os.environ.setdefault("OFFSET_PIPELINE_JVM_OPTIONS", TEST_JVM_OPTIONS)
# Every MirrorMaker 2 of the suite batches its source fetches (up to half a second): a quarter less
# CPU for a stack's brokers and a third less for MirrorMaker 2, whose JVMs were half the run's CPU
# (devstack/mirrormaker2.py, batched_fetch_wait_ms).
TEST_MM2_FETCH_WAIT_MS = "500"
os.environ.setdefault("OFFSET_PIPELINE_MM2_FETCH_WAIT_MS", TEST_MM2_FETCH_WAIT_MS)
# The product bounds a cycle's Spark job (120 s) and its translation reads (60 s). Up to four workers
# share two cores here, and a worker's first local Spark job has taken 75-120 s of that on a loaded
# run: the cycle then, rightly, defers its partitions, and a test of something else fails. The tests
# of the bounds set their own (tests/assets/test_outages.py, test_translation_deferral.py).
os.environ.setdefault("OFFSET_PIPELINE_SPARK_TIMEOUT_S", "600")
os.environ.setdefault("OFFSET_PIPELINE_TRANSLATION_BUDGET_S", "300")
# How long one example takes is not what a property test checks (a pure one took 260 ms on a loaded run).
hypothesis.settings.register_profile("offset_pipeline_tests", deadline=None)
hypothesis.settings.load_profile("offset_pipeline_tests")


#: Test modules that start a whole stack of JVMs and Dagster processes (each carries the
#: ``whole_stack`` marker; collection fails when the two disagree).
WHOLE_STACK_MODULES = frozenset({
    "tests/devstack/test_clean_stop.py",
    "tests/devstack/test_secure_stack.py",
    "tests/devstack/test_spark_connect.py",
    "tests/devstack/test_spark_standalone.py",
    "tests/devstack/test_stack.py",
    "tests/sensors/test_daemon_restart.py",
    "tests/sensors/test_dagster_on_postgres.py",
})
#: The browser tests' modules: one ``bin/up`` for both (tests/ui/conftest.py), a chain of its own
#: beside the whole-stack chain since the session's clusters are one pair for the run (memory left
#: for a second stack).
UI_STACK_MODULES = frozenset({
    "tests/ui/test_project_parts.py",
    "tests/ui/test_ui_runs.py",
})
#: Test modules that start Kafka brokers or a MirrorMaker 2 of their own, beside the session's pair
#: (the fault tests kill and stop them); each carries the ``own_clusters`` marker.
OWN_CLUSTER_MODULES = frozenset({
    "tests/assets/test_offset_sync_assets.py",
    "tests/assets/test_outages.py",
    "tests/assets/test_sync_faults_mm2.py",
    "tests/continuous/test_continuous_faults.py",
    "tests/devstack/test_broker_logs.py",
    "tests/devstack/test_cluster.py",
    "tests/devstack/test_failover_trials_mm2.py",
    "tests/devstack/test_mirror_recovery_mm2.py",
    "tests/devstack/test_mirrormaker2.py",
    "tests/fast_forward/test_stale_fast_forward_mm2.py",
    "tests/kafka_io/test_commit_log.py",
    "tests/kafka_io/test_offset_syncs.py",
    "tests/readiness/test_readiness_outage.py",
    "tests/sync/test_offset_sync_commit.py",
})
#: Work units whose modules one worker runs one after the other (unit: (marker, modules)), in the
#: order the workers take them first. Each keeps its kind of load on one worker: fault modules
#: starting their JVMs side by side starved the other workers' brokers of CPU, and two whole stacks
#: of the first chain at once, beside every worker's own pair of clusters, ran this 24 GiB machine
#: out of memory. With one pair for the run, the UI's stack runs beside the first chain's (12 GB
#: were still free at the lowest with one).
CHAINS = {
    "whole stacks": ("whole_stack", WHOLE_STACK_MODULES),
    "ui stack": ("ui_stack", UI_STACK_MODULES),
    "own clusters": ("own_clusters", OWN_CLUSTER_MODULES),
}
#: the chains the other workers yield to (``YIELDING_NICE``): all three, each a worker's whole run
UNYIELDING_CHAINS = frozenset(CHAINS)
#: The secure tests share one worker, so the session's secure pair (tests/secure/conftest.py) starts once.
SECURE_PAIR_UNIT, SECURE_PAIR_FOLDER = "secure pair", "tests/secure/"


def xdist_work_unit(nodeid: str) -> str:
    """What one pytest-xdist worker runs whole: a module (its module fixtures start once, its
    tests run in file order), or a chain of modules (``CHAINS``), or the secure tests."""
    module = nodeid.split("::", 1)[0]
    for unit, (_, modules) in CHAINS.items():
        if module in modules:
            return unit
    return SECURE_PAIR_UNIT if module.startswith(SECURE_PAIR_FOLDER) else module


def xdist_work_order(nodeids: list[str]) -> list[str]:
    """``nodeids`` in the order the workers take them: the chains first (a worker each, from the
    start: they are the longest), then the other units, those with the most tests first; within a
    unit, the tests keep their order (a module's tests stay together)."""
    units: dict[str, list[str]] = {}
    for nodeid in nodeids:
        units.setdefault(xdist_work_unit(nodeid), []).append(nodeid)
    chains = [u for u in CHAINS if u in units]
    others = sorted((u for u in units if u not in CHAINS), key=lambda u: -len(units[u]))  # stable
    return [nodeid for unit in chains + others for nodeid in units[unit]]


def pytest_xdist_make_scheduler(config, log):
    # bin/test runs pytest-xdist workers. xdist's own --dist loadgroup does not group under pytest 9
    # (tests of one group ran on both workers), so the work units are made here from the node ids,
    # and queued in the order of the collection, which pytest_collection_modifyitems sets.
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ModulesAndChains(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_work_unit(nodeid)

    return ModulesAndChains(config, log)


def pytest_collection_modifyitems(config, items):
    collected = {item.nodeid.split("::", 1)[0] for item in items}
    for marker, modules in CHAINS.values():
        marked = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker(marker)}
        listed = modules & collected
        if marked != listed:
            raise pytest.UsageError(
                f"tests/conftest.py's list of the {marker} modules and the modules marked {marker} differ: "
                f"marked only {sorted(marked - listed)}, listed only {sorted(listed - marked)}")
    position = {nodeid: i for i, nodeid in enumerate(xdist_work_order([item.nodeid for item in items]))}
    items.sort(key=lambda item: position[item.nodeid])


#: How much the workers yield to those running the chains: a chain is one worker's from the start,
#: so the longest ends the run, and its JVMs and Dagster processes slowed most when the workers
#: competed for the two cores; the other units are small and fill whatever time is left. The fault
#: chain yielded too until it was the longest (33.6 minutes of a 34.5-minute run, a test in it
#: 38 s alone and 424 s there). A worker lowers its own priority at its first test outside the
#: chains (an unprivileged process can lower its priority only), and what it starts inherits it.
YIELDING_NICE = 5


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if os.environ.get("PYTEST_XDIST_WORKER") and xdist_work_unit(item.nodeid) not in UNYIELDING_CHAINS:
        if os.getpriority(os.PRIO_PROCESS, 0) < YIELDING_NICE:
            os.setpriority(os.PRIO_PROCESS, 0, YIELDING_NICE)


def pytest_configure(config):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        # The run's main process: where its workers find the session's clusters, and who they
        # belong to (tests/helpers/shared_pair.py); they inherit this environment.
        os.environ[shared_pair.DIR_VARIABLE] = tempfile.mkdtemp(prefix="offset-pipeline-session-pair-")
        os.environ[shared_pair.MAIN_PID_VARIABLE] = str(os.getpid())
    from tests.helpers.timeline import Timeline

    artifacts = Path(os.environ.get("OFFSET_PIPELINE_TEST_ARTIFACTS") or Path(__file__).parent.parent / "test-artifacts")
    config.pluginmanager.register(Timeline(artifacts / "timeline", xdist_work_unit), "offset-pipeline-timeline")
    # This process's local Spark driver (the sync's default engine in the tests).
    from offset_pipeline.resources import spark

    spark.DRIVER_DEFAULTS["spark.driver.memory"] = TEST_SPARK_DRIVER_MEMORY
    # as the other JVMs of the run: a local session took 12 CPU-s to start and run its first jobs
    # instead of 23
    spark.DRIVER_DEFAULTS["spark.driver.extraJavaOptions"] = TEST_JVM_OPTIONS


def pytest_unconfigure(config):
    if not os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(shared_pair.DIR_VARIABLE):
        directory = Path(os.environ.pop(shared_pair.DIR_VARIABLE))
        shared_pair.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


def wait_for(predicate, timeout=60.0, what="condition"):
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Transactions:
    """Transactions of one transactional id, each committed or aborted whole: ``run(send, commit=)``
    runs the records ``send(producer)`` produces in one (written first, so an aborted transaction
    leaves its records and marker in the log). One producer serves them all.

    Under load the broker can answer EndTxn with INVALID_TXN_STATE (a known librdkafka race), a
    fatal error for that producer. A new producer of the same transactional id fences the old one
    and aborts what it left open, so the transaction is redone whole and never half-committed."""

    def __init__(self, bootstrap: str, transactional_id: str):
        self.conf = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 3}
        self.producer = None

    def run(self, send, *, commit: bool, attempts: int = 3) -> None:
        for attempt in range(attempts):
            try:
                if self.producer is None:
                    self.producer = Producer(self.conf)
                    self.producer.init_transactions(30)
                self.producer.begin_transaction()
                send(self.producer)
                self.producer.flush(30)
                if commit:
                    self.producer.commit_transaction(30)
                else:
                    self.producer.abort_transaction(30)
                return
            except KafkaException:
                self.producer = None  # the next attempt fences it with a new producer of the same id
                if attempt == attempts - 1:
                    raise


@contextmanager
def stopped_by_sigterm(cmd: list[str], log_path: Path, env: dict | None = None):
    """Run a CLI in its own process group for the ``with`` body, then SIGTERM it and require a
    clean exit (code 0); a process that hangs is killed so no test leaves one behind."""
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            yield proc
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log_path.read_text()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


free_port = shared_pair.free_port


def devstack_env(base: Path, kafka_jars: Path, rate_scale: float) -> dict[str, str]:
    """The environment for a whole local stack (``devstack up`` or ``bin/up``) in ``base`` on free
    ports, without a developer's own ``OFFSET_PIPELINE_*`` or ``DAGSTER_*`` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OFFSET_PIPELINE_", "DAGSTER_"))}
    env.update(
        OFFSET_PIPELINE_DEVSTACK_DIR=str(base), OFFSET_PIPELINE_JARS_DIR=str(kafka_jars),
        OFFSET_PIPELINE_RATE_SCALE=str(rate_scale), OFFSET_PIPELINE_SPARK_CONNECT_PORT=str(free_port()),
        OFFSET_PIPELINE_MM2_REST_PORT=str(free_port()), OFFSET_PIPELINE_BROKER_HEAP=TEST_BROKER_HEAP,
        OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY=TEST_SPARK_DRIVER_MEMORY,
        OFFSET_PIPELINE_JVM_OPTIONS=TEST_JVM_OPTIONS, OFFSET_PIPELINE_MM2_FETCH_WAIT_MS=TEST_MM2_FETCH_WAIT_MS,
    )
    for name in ("IDC1", "IDC2"):
        env[f"OFFSET_PIPELINE_{name}_PORT"] = str(free_port())
        env[f"OFFSET_PIPELINE_{name}_CONTROLLER_PORT"] = str(free_port())
    return env


@dataclass
class KafkaPair:
    idc1: KafkaCluster
    idc2: KafkaCluster

    def cluster(self, name: str) -> KafkaCluster:
        return {"idc1": self.idc1, "idc2": self.idc2}[name]

    def bootstrap(self, name: str) -> str:
        return self.cluster(name).spec.bootstrap_servers

    def endpoint(self, name: str) -> MirrorEndpoint:
        return MirrorEndpoint(name, self.bootstrap(name))

    def admin(self, name: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap(name), "log_level": 3})

    def create_topic(self, name: str, partitions: int = 1, on=("idc1", "idc2"), config=None) -> str:
        for cluster in on:
            admin = self.admin(cluster)  # keep the handle alive until the future resolves
            future = admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])[name]
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                # A session mirror may have created it first, from the other side.
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
                # Just created by the mirror: its metadata may not list the partitions yet (seen on a
                # loaded machine), so wait for them before comparing.
                existing = wait_for(lambda: admin.list_topics(name, timeout=10).topics[name].partitions, timeout=30,
                                    what=f"{name}'s partitions in the metadata of {cluster}")
                assert len(existing) == partitions, f"{name} exists with other partitions"
        return name


@pytest.fixture
def chdb_dsn(tmp_path):
    """A fresh embedded ClickHouse (chdb) data folder for one test."""
    from offset_pipeline.resources.clickhouse import close_embedded_clients

    dsn = f"chdb://{tmp_path / 'clickhouse'}"
    yield dsn
    # chdb holds one data path per process: release it so the next test can use its own folder.
    close_embedded_clients()


def close_kafka_clients_of_this_process() -> None:
    """Read consumers pooled by kafka_io and the shared admin clients (in this process) for clusters
    that stop would otherwise keep reconnecting to them, and logging it, to the end of the run."""
    from offset_pipeline.kafka_io.cluster_client import release_shared_admins
    from offset_pipeline.kafka_io.consumer_pool import close_all_pools

    close_all_pools()  # the translation reads' and the offset-syncs reads' pooled consumers
    release_shared_admins()
    # A client still held by a reference cycle (a kept traceback's frames, a callback) would live,
    # and reconnect, until the collector happened to run: collect now.
    gc.collect()


@pytest.fixture(scope="module", autouse=True)
def kafka_clients_of_this_process_closed_after_each_module():
    yield
    close_kafka_clients_of_this_process()


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    return fetch_jars(jars_dir())


@contextmanager
def started_pair(kafka_jars: Path, base: Path):
    """Two single-node clusters, idc1 and idc2, on free ports under ``base``; stopped on exit. For
    tests that stop, kill or fill brokers of their own (the session's pair is shared)."""
    clusters = [
        KafkaCluster(ClusterSpec(name, free_port(), free_port(), base / name), kafka_jars)
        for name in ("idc1", "idc2")
    ]
    try:
        with ThreadPoolExecutor(max_workers=len(clusters)) as pool:  # both brokers start at once
            list(pool.map(lambda cluster: cluster.start(), clusters))
        yield KafkaPair(*clusters)
    finally:
        close_kafka_clients_of_this_process()  # before their clusters go, not after the module
        # Both at once, as they started, each with the short grace of a throwaway broker.
        with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
            list(pool.map(lambda cluster: cluster.stop(timeout=THROWAWAY_BROKER_GRACE_S), clusters))


@pytest.fixture(scope="session")
def kafka_pair(kafka_jars) -> KafkaPair:
    """The run's two clusters, one pair for every worker (tests/helpers/shared_pair.py), with their
    MirrorMaker 2 (``session_mirrors``); the run's main process stops them at its end."""
    directory, main_pid = os.environ.get(shared_pair.DIR_VARIABLE), os.environ.get(shared_pair.MAIN_PID_VARIABLE)
    if not directory or not main_pid:
        raise pytest.UsageError(f"{shared_pair.DIR_VARIABLE} is not set: tests/conftest.py's pytest_configure sets it")
    pair = KafkaPair(*shared_pair.attach(Path(directory), kafka_jars, int(main_pid)))
    try:
        yield pair
    finally:
        # Clients of this process, and pooled read consumers (kafka_io) in it and in local Spark's
        # Python workers, closed before the main process stops the clusters: else they would keep
        # reconnecting (and logging) to the stopped brokers.
        stop_local_spark()
        close_kafka_clients_of_this_process()


@pytest.fixture(scope="session")
def session_mirrors(kafka_pair) -> KafkaPair:
    """The session's data mirror, both ways, for topics named ``t.*``: Apache Kafka's MirrorMaker 2
    with the project's origin-header transform (exactly-once), as the local stack runs it, kept
    running by its keeper (a failed task or a dead JVM is restarted) in the process that holds the
    session's clusters (tests/helpers/shared_pair.py), from their start to the run's end."""
    return kafka_pair


@pytest.fixture(scope="module")
def python_mirrors(kafka_pair):
    """The dev harness's Python mirror (``devstack/mirror.py``), both ways, for topics named ``py.*``,
    in threads until the module that asked for it ends: for the tests of that mirror itself (it still
    serves the soak) and of reading a mirror's positions from its consumer groups, which MirrorMaker 2
    does not keep. Not for the session: each mirror lists every topic of both clusters twice a second
    to find new ones, and the session's clusters gather hundreds of topics over a run."""
    stop = threading.Event()
    mirrors, threads = [], []
    for source, target in (("idc1", "idc2"), ("idc2", "idc1")):
        mirror = DataMirror(MirrorConfig(
            kafka_pair.endpoint(source), kafka_pair.endpoint(target),
            topic_pattern=rf"^{re.escape(PYTHON_MIRRORED_PREFIX)}", metadata_refresh_s=0.5,
            instance=WORKER,  # its own positions and transactional id: another worker's mirror fences none
        ))
        thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True, name=f"python-mirror-{source}")
        thread.start()
        mirrors.append(mirror)
        threads.append(thread)
    yield mirrors
    stop.set()
    for thread in threads:
        thread.join(timeout=30)


@pytest.fixture
def python_topic_name(request) -> str:
    """A topic name unique to the test, picked up by the Python mirror's threads (``python_mirrors``)."""
    return f"{PYTHON_MIRRORED_PREFIX}{request.node.name[:40].replace('[', '-').rstrip(']')}.{uuid.uuid4().hex[:6]}"


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to the test, picked up by the session mirrors."""
    return f"{MIRRORED_PREFIX}{request.node.name[:40].replace('[', '-').rstrip(']')}.{uuid.uuid4().hex[:6]}"


# -- topics shared by several folders' tests (their shape: tests/helpers/topics.py) -----------------


@pytest.fixture
def mirrored_topic(kafka_pair, session_mirrors, topic_name):
    """A two-way topic: both clusters produce, the session mirrors copy both ways. Returns
    (topic, records per partition on each cluster)."""
    from tests.helpers.records import records_in
    from tests.helpers.topics import PARTITIONS

    topic = kafka_pair.create_topic(topic_name, partitions=PARTITIONS)
    produced = 0
    for round_ in range(4):  # interleaved, so each side holds copies of the other's records
        for cluster in ("idc1", "idc2"):
            producer = Producer({"bootstrap.servers": kafka_pair.bootstrap(cluster), "log_level": 3})
            for p in range(PARTITIONS):
                for i in range(5):
                    producer.produce(topic, value=f"{cluster}-{round_}-{p}-{i}".encode(), partition=p)
                    produced += 1
            producer.flush(30)
    per_partition = produced // PARTITIONS
    for cluster in ("idc1", "idc2"):
        for p in range(PARTITIONS):
            # records, not the log end: exactly-once copies put transaction markers between them
            wait_for(lambda: records_in(kafka_pair.bootstrap(cluster), topic, p) >= per_partition, timeout=60,
                     what=f"mirrored {topic}[{p}] on {cluster}")
    return topic, per_partition


@pytest.fixture
def one_way_topic(kafka_pair, session_mirrors, topic_name):
    """A topic produced on idc1 only, copied to idc2 by the session mirror (origin headers): its
    translation is exact (timestamp search refined by the headers). Returns (topic, records per partition)."""
    from tests.helpers.records import records_in
    from tests.helpers.topics import ONE_WAY_RECORDS, PARTITIONS

    topic = kafka_pair.create_topic(topic_name, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for p in range(PARTITIONS):
        for i in range(ONE_WAY_RECORDS):
            producer.produce(topic, value=f"{topic}-{p}-{i}".encode(), partition=p)
    producer.flush(30)
    def copied(p: int) -> bool:
        try:
            # records, not the log end: exactly-once copies put transaction markers between them
            return records_in(kafka_pair.bootstrap("idc2"), topic, p) >= ONE_WAY_RECORDS
        except KafkaException:  # a topic the mirror has just created may have no leader yet
            return False

    for p in range(PARTITIONS):
        wait_for(lambda: copied(p), timeout=60, what=f"mirrored {topic}[{p}]")
    return topic, ONE_WAY_RECORDS


@pytest.fixture(scope="module")
def own_idc2(kafka_jars, tmp_path_factory):
    """An idc2 of the test module's own, which its tests stop and start (the session's is shared)."""
    cluster = KafkaCluster(ClusterSpec("idc2", free_port(), free_port(), tmp_path_factory.mktemp("idc2-outage")),
                           kafka_jars)
    cluster.start()
    yield cluster
    close_kafka_clients_of_this_process()  # before the cluster goes, not after the module
    cluster.stop(timeout=THROWAWAY_BROKER_GRACE_S)


@pytest.fixture
def outage_topic(kafka_pair, own_idc2):
    """A topic produced on the session's idc1, mirrored once (then the mirror stops) to ``own_idc2``:
    the one-way topic of the outage tests, which stop ``own_idc2`` and start it again."""
    from tests.helpers.records import log_end
    from tests.helpers.topics import OUTAGE_RECORDS, PARTITIONS

    topic = f"outage.{uuid.uuid4().hex[:8]}"
    kafka_pair.create_topic(topic, partitions=PARTITIONS, on=("idc1",))
    admin = AdminClient({"bootstrap.servers": own_idc2.spec.bootstrap_servers, "log_level": 3})  # alive until done
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for p in range(PARTITIONS):
        for i in range(OUTAGE_RECORDS):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    producer.flush(30)
    stop = threading.Event()
    mirror = DataMirror(MirrorConfig(
        kafka_pair.endpoint("idc1"), MirrorEndpoint("idc2", own_idc2.spec.bootstrap_servers),
        topic_pattern=rf"^{topic.replace('.', '[.]')}$", metadata_refresh_s=0.5, instance=topic,
    ))
    thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True)
    thread.start()
    try:
        for p in range(PARTITIONS):
            # OUTAGE_RECORDS copies and the mirror's commit marker
            wait_for(lambda: log_end(own_idc2.spec.bootstrap_servers, topic, p) >= OUTAGE_RECORDS, timeout=90,
                     what=f"{topic}[{p}] mirrored")
    finally:
        stop.set()
        thread.join(timeout=30)
    return topic
