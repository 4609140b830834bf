"""A sync cycle on a real Spark standalone cluster (a master and two workers from the pyspark
distribution) whose executors run a Python environment without offset_pipeline: the project's code
reaches them shipped with the job (``resources/spark.py``). The cycle's commits equal the same cycle's
on ``local[*]``, for groups with the same offsets on the same topics."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Producer

from devstack.executor_python import ensure_executor_python, imports
from devstack.liveness import pid_alive
from devstack.paths import executor_python_dir
from devstack.spark_standalone import SparkStandalone
from devstack.stack import DevStack, StackSettings
from offset_pipeline.resources import (
    ClickHouseResource,
    KafkaClusterResource,
    SparkResource,
)
from tests.conftest import devstack_env, free_port, wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.pairs import log_end
from tests.helpers.sync_cycles import SYNC_ASSETS

pytestmark = [pytest.mark.kafka, pytest.mark.spark_standalone, pytest.mark.whole_stack]

PARTITIONS = 2


@pytest.fixture(scope="module")
def executor_python() -> str:
    return ensure_executor_python(executor_python_dir())


def standalone_env(base, kafka_jars) -> dict[str, str]:
    env = devstack_env(base, kafka_jars, rate_scale=1.0)
    env.update(OFFSET_PIPELINE_SPARK_MASTER_PORT=str(free_port()), OFFSET_PIPELINE_SPARK_MASTER_UI_PORT=str(free_port()),
               OFFSET_PIPELINE_SPARK_WORKER_PORTS=",".join(str(free_port()) for _ in range(4)))
    return env


def devstack(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devstack", *args], env=env, capture_output=True, text=True,
                          timeout=180, check=False)


@pytest.fixture(scope="module")
def standalone_stack(tmp_path_factory, kafka_jars):
    """The dev stack's standalone cluster (the part ``bin/up`` starts with OFFSET_PIPELINE_DEVSTACK_SPARK=standalone),
    started as ``devstack up --spark standalone`` starts it, on free ports; ``devstack down`` at the end."""
    env = standalone_env(tmp_path_factory.mktemp("stack"), kafka_jars)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        stack = DevStack(StackSettings.from_env())
        try:
            stack.start_spark_standalone(echo=lambda line: None)
            yield stack, env
        finally:
            devstack(env, "down")


@pytest.fixture(scope="module")
def standalone(standalone_stack) -> SparkStandalone:
    return standalone_stack[0].spark_standalone


def test_the_executors_python_has_the_libraries_and_not_the_project(executor_python):
    assert imports(executor_python, "confluent_kafka") and imports(executor_python, "pyarrow")
    assert not imports(executor_python, "offset_pipeline")


# One sync cycle (the interval mode's job) in a process of its own: a process has one SparkContext,
# and this test process runs local[*].
_CYCLE = """
import json, sys
import dagster as dg
from offset_pipeline.assets import all_assets
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource

idc1, idc2, dsn, master, python, include, shapes = sys.argv[1:]
assets = [a for a in all_assets if isinstance(a, dg.AssetsDefinition)
          and set(a.group_names_by_key.values()) == {"offset_sync"}]
spark = SparkResource(master=master, spark_config={"spark.pyspark.python": python, "spark.executor.memory": "512m",
                                                   "spark.driver.memory": "1g", "spark.cores.max": "2"})
res = {"idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=idc1),
       "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=idc2),
       "clickhouse": ClickHouseResource(dsn=dsn), "spark": spark}
result = dg.materialize(assets, resources=res, run_config={"ops": {
    "offset_snapshot": {"config": {"group_include": include}},
    "offset_translations": {"config": {"topic_shapes": json.loads(shapes)}}}})
context = spark.spark_session.sparkContext
print(json.dumps({"success": result.success, "master": context.master, "app": context.applicationId}))
"""


def test_a_sync_cycle_on_the_standalone_cluster_commits_what_local_spark_commits(
    kafka_pair, session_mirrors, standalone, executor_python, chdb_dsn, tmp_path
):
    uid = uuid.uuid4().hex[:6]
    two_way = kafka_pair.create_topic(f"t.standalone-two.{uid}", partitions=PARTITIONS)
    one_way = kafka_pair.create_topic(f"t.standalone-one.{uid}", partitions=PARTITIONS)
    producers = {c: Producer({"bootstrap.servers": kafka_pair.bootstrap(c), "log_level": 3}) for c in ("idc1", "idc2")}
    base = int(time.time() * 1000) - 3_600_000
    for round_ in range(3):
        for cluster, producer in producers.items():
            for p in range(PARTITIONS):
                for i in range(4):
                    producer.produce(two_way, value=f"{cluster}-{round_}-{p}-{i}".encode(), partition=p)
        for p in range(PARTITIONS):
            for i in range(6):  # pairs share a timestamp
                producers["idc1"].produce(one_way, value=f"{round_}-{i}".encode(), partition=p,
                                          timestamp=base + round_ * 10 + i // 2)
        for producer in producers.values():
            assert producer.flush(30) == 0
    for topic, per_partition in ((two_way, 24), (one_way, 18)):
        for cluster in ("idc1", "idc2"):
            for p in range(PARTITIONS):
                wait_for(lambda c=cluster, t=topic, p=p, n=per_partition: log_end(kafka_pair, c, t, p) >= n,
                         timeout=90, what=f"{topic}[{p}] on {cluster}")
    time.sleep(1)  # the last mirror transactions' markers

    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    offsets = {two_way: {0: 22, 1: 20}, one_way: {0: 3, 1: 12}}  # near the end: copies of idc2 records below
    members = []
    try:
        for kind in ("sa", "lo"):  # the same offsets for the standalone groups and the local ones
            for k, topic in enumerate((two_way, one_way)):
                member = Member(b1, f"{kind}-{uid}-{k}", topic)
                members.append(member)
                member.commit(topic, offsets[topic])
        shapes = {two_way: "two_way", one_way: "one_way:idc1"}

        child = subprocess.run(
            [sys.executable, "-c", _CYCLE, b1, b2, f"chdb://{tmp_path / 'ch-standalone'}", standalone.master_url,
             executor_python, f"^sa-{uid}-", json.dumps(shapes)],
            capture_output=True, text=True, timeout=600, check=False,
        )
        assert child.returncode == 0, child.stderr[-3000:]
        report = json.loads(child.stdout.strip().splitlines()[-1])
        assert report["success"] and report["master"] == standalone.master_url, report
        apps = standalone.status()
        assert report["app"] in {a["id"] for a in apps.get("completedapps", []) + apps.get("activeapps", [])}

        res = {"idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=b1),
               "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=b2),
               "clickhouse": ClickHouseResource(dsn=chdb_dsn), "spark": SparkResource()}
        local = dg.materialize(SYNC_ASSETS, resources=res, run_config={"ops": {
            "offset_snapshot": {"config": {"group_include": f"^lo-{uid}-"}},
            "offset_translations": {"config": {"topic_shapes": shapes}}}})
        assert local.success

        for k, topic in enumerate((two_way, one_way)):
            on_standalone = committed(b2, f"sa-{uid}-{k}", topic)
            on_local = committed(b2, f"lo-{uid}-{k}", topic)
            assert on_standalone == on_local, (topic, on_standalone, on_local)
            assert set(on_local) == set(range(PARTITIONS)), (topic, on_local)  # every partition synced
    finally:
        for member in members:
            member.close()


def test_the_stack_reports_the_cluster_and_stops_it(standalone_stack):
    stack, env = standalone_stack
    status = devstack(env, "status").stdout
    for part in ("spark-master", "spark-worker-0", "spark-worker-1"):
        assert "running pid" in next(line for line in status.splitlines() if line.startswith(part)), status
    assert f"{stack.spark_standalone.master_url}  2 of 2 workers ALIVE" in status, status
    # what bin/up exports for the runs: this master, and the executors' Python that lacks the project
    assert devstack(env, "spark-master-url").stdout.strip() == stack.spark_standalone.master_url
    conf = devstack(env, "spark-standalone-conf").stdout.strip()
    assert f"spark.pyspark.python={executor_python_dir() / 'bin' / 'python'}" in conf.split(","), conf

    pids = [part.pid() for part in stack.spark_standalone.parts()]
    down = devstack(env, "down")
    assert down.returncode == 0, down.stderr
    assert all(pid is not None and not pid_alive(pid) for pid in pids), pids
    after = devstack(env, "status").stdout
    assert "spark-master" not in after and "spark-worker" not in after, after
