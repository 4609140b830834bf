"""work_tasks and translate_groups through a real Spark Connect server (the stack's long-lived Spark) against the
real test brokers: the closure reaches the server's Python workers as plain data, the workers
import offset_pipeline, and the results equal the same work done in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer

from devstack.spark_connect import SparkConnectServer
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.resources.spark import get_spark_session
from offset_pipeline.sync.spark_translation import (
    RESULT_COLUMNS,
    collected_rows,
    translate_groups,
    translate_partition_rows,
    work_tasks,
)
from offset_pipeline.translation import TranslationStatus

from tests.conftest import free_port, wait_for
from tests.helpers.pairs import log_end

pytestmark = [pytest.mark.kafka, pytest.mark.spark_connect, pytest.mark.whole_stack]

PARTITIONS = 3


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory):
    server = SparkConnectServer(free_port(), tmp_path_factory.mktemp("spark-connect"))
    server.start()
    try:
        yield server
    finally:
        from pyspark.sql.connect.session import SparkSession as ConnectSparkSession

        session = ConnectSparkSession._get_default_session() or ConnectSparkSession.getActiveSession()
        if session is not None:
            try:
                session.stop()  # before its server goes: no client left retrying at exit
            except Exception:  # noqa: BLE001 - the server may have closed it already
                pass
        server.stop()


@pytest.fixture
def connect_session(spark_connect_server):
    # The stack's URL: the sync runs' shared session, which is never stopped (it ends with the server).
    session = get_spark_session(connect_url=spark_connect_server.url)
    try:
        yield session
    finally:
        # get_spark_session marked this process as a Connect client; later tests use local Spark.
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def test_translate_groups_over_spark_connect_equals_the_same_work_in_process(
    kafka_pair, session_mirrors, connect_session, spark_connect_server
):
    uid = uuid.uuid4().hex[:6]
    two_way = kafka_pair.create_topic(f"t.connect-two.{uid}", partitions=PARTITIONS)
    one_way = kafka_pair.create_topic(f"t.connect-one.{uid}", partitions=PARTITIONS)
    producers = {c: Producer({"bootstrap.servers": kafka_pair.bootstrap(c), "log_level": 3}) for c in ("idc1", "idc2")}
    base = int(time.time() * 1000) - 3_600_000
    for round_ in range(3):
        for cluster, producer in producers.items():
            for p in range(PARTITIONS):
                for i in range(4):
                    producer.produce(two_way, value=f"{cluster}-{round_}-{p}-{i}".encode(), partition=p)
        for p in range(PARTITIONS):
            for i in range(6):  # pairs share a timestamp
                producers["idc1"].produce(one_way, value=json.dumps({"r": round_, "i": i}).encode(), partition=p,
                                          timestamp=base + round_ * 10 + i // 2)
        for producer in producers.values():
            assert producer.flush(30) == 0
    for topic, per_partition in ((two_way, 24), (one_way, 18)):
        for cluster in ("idc1", "idc2"):
            for p in range(PARTITIONS):
                wait_for(lambda: log_end(kafka_pair, cluster, topic, p) >= per_partition, timeout=90,
                         what=f"{topic}[{p}] on {cluster}")
    time.sleep(1)  # the last mirror transactions' markers

    rows = []
    for topic, shape in ((two_way, "two_way"), (one_way, "one_way:idc1")):
        ranges = {c: {r.partition: r for r in read_partition_ranges(
            kafka_pair.admin(c), c, [(topic, p) for p in range(PARTITIONS)])} for c in ("idc1", "idc2")}
        for p in range(PARTITIONS):
            a, s = ranges["idc1"][p], ranges["idc2"][p]
            for k, c in enumerate((a.log_start, (a.log_start + a.log_end) // 2, a.log_end - 3, a.log_end)):
                rows.append({
                    "group_id": f"connect-{k} \"q\" ü", "topic": topic, "partition": p, "active": "idc1",
                    "standby": "idc2", "committed": c, "standby_committed": None,
                    "active_log_start": a.log_start, "active_log_end": a.log_end,
                    "standby_log_start": s.log_start, "standby_log_end": s.log_end,
                    "anchor_active_offset": None, "anchor_standby_offset": None, "shape": shape,
                })
    confs = {c: {"bootstrap.servers": kafka_pair.bootstrap(c)} for c in ("idc1", "idc2")}

    out = translate_groups(
        work_tasks(connect_session, rows, 4, salt="s-connect"), confs, snapshot_id="s-connect", cycle_time_ms=1,
        window=5, refine_window=10,
    )
    assert type(out).__module__.startswith("pyspark.sql.connect")  # really through Spark Connect
    remote = sorted(([r[c] for c in RESULT_COLUMNS] for r in collected_rows(out)), key=lambda v: v[2:5])

    local = []
    for topic in (two_way, one_way):
        for p in range(PARTITIONS):
            part = [r for r in rows if (r["topic"], r["partition"]) == (topic, p)]
            local += [
                [row[c] for c in RESULT_COLUMNS]
                for row in translate_partition_rows(part, confs, snapshot_id="s-connect", cycle_time_ms=1,
                                                    window=5, refine_window=10)
            ]
    local.sort(key=lambda v: v[2:5])
    assert remote == local

    column = {c: i for i, c in enumerate(RESULT_COLUMNS)}
    strategies = {(v[column["topic"]], v[column["strategy"]]) for v in remote if v[column["standby_offset"]] is not None}
    assert {(two_way, "header_anchor"), (one_way, "timestamp_search")} <= strategies, strategies
    assert all(v[column["status"]] != TranslationStatus.CLUSTER_UNAVAILABLE.value for v in remote)
    assert len(remote) == len(rows) == 2 * PARTITIONS * 4


_WORKER_PIDS = """
import sys
import pyarrow as pa
from offset_pipeline.resources.spark import get_spark_session

def pids(batches):
    import os
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"pid": os.getpid()}], schema=pa.schema([("pid", pa.int64())]))

spark = get_spark_session(connect_url=sys.argv[1])
rows = spark.range(0, 8, numPartitions=4).mapInArrow(pids, schema="pid long").collect()
print(" ".join(str(r.pid) for r in rows))
"""


def test_runs_in_fresh_processes_share_the_servers_python_workers(spark_connect_server):
    # Each Dagster run is a new process with a new Spark Connect client: with the stack's URL (one
    # shared session) its tasks run in the Python workers the previous run warmed up, where the
    # pooled Kafka consumers live.
    def worker_pids() -> set[int]:
        out = subprocess.run([sys.executable, "-c", _WORKER_PIDS, spark_connect_server.url],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return {int(p) for p in out.stdout.split()}

    first, second = worker_pids(), worker_pids()
    assert first & second, (first, second)


_STOP_AFTER_USE = """
import sys
from offset_pipeline.resources.spark import get_spark_session

spark = get_spark_session(connect_url=sys.argv[1])
assert spark.range(3).count() == 3
if sys.argv[2] == "stop":
    spark.stop()
"""


def test_a_stopped_shared_session_is_created_again_by_the_next_run(spark_connect_server):
    # Runs share one session id; a run (or a person) stopping it must not lock later runs out.
    for action in ("stop", "keep"):
        out = subprocess.run([sys.executable, "-c", _STOP_AFTER_USE, spark_connect_server.url, action],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]


_RUN_JOB = """
import sys
from offset_pipeline.resources.spark import SparkResource, SparkUnavailable

spark = SparkResource(connect_url=sys.argv[1], connect_timeout_s=3.0, job_timeout_s=60.0)
try:
    print("count", spark.run_job(lambda session: session.range(5).count(), what="a count"))
except SparkUnavailable as exc:
    print("unavailable", exc)
"""


def test_a_killed_spark_connect_server_is_spark_unavailable_until_it_returns(tmp_path):
    # Each Dagster run is a fresh process: a down server must cost it a named failure within the
    # connect bound (Spark Connect's own client retries a refused server for minutes), and the
    # first run after the server is back must work with nothing done by hand.
    server = SparkConnectServer(free_port(), tmp_path / "own-spark-connect", driver_memory="1g")

    def run() -> str:
        out = subprocess.run([sys.executable, "-c", _RUN_JOB, server.url], capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    server.start()
    try:
        assert run() == "count 5"
        pid = server.pid()
        os.kill(pid, 9)
        wait_for(lambda: not server.listening(), timeout=30, what="the server gone")
        down = run()  # bounded by run()'s own 180 s: Spark Connect's client alone retries longer
        assert down.startswith("unavailable Spark Connect server 127.0.0.1:") and "did not accept" in down, down
        server.start()  # what bin/stack up or watch does
        assert run() == "count 5"
    finally:
        server.stop()
