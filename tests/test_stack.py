"""The main command's stack, end to end: `devstack up` brings clusters, mirrors, traffic, consumers
and the Spark Connect server up; records flow both ways with origin headers; `status` and `down`
tell the truth."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient

from offset_pipeline.devstack.mirror import ORIGIN_CLUSTER_HEADER
from offset_pipeline.devstack.records import read_partition

from .conftest import devstack_env, wait_for

pytestmark = pytest.mark.kafka


@pytest.fixture
def stack_env(tmp_path, kafka_jars):
    env = devstack_env(tmp_path / "stack", kafka_jars, rate_scale=2.0)
    yield env
    subprocess.run([sys.executable, "-m", "offset_pipeline.devstack", "down"], env=env, timeout=120)


def devstack(env, *args, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "offset_pipeline.devstack", *args],
        env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_up_status_down(stack_env):
    up = devstack(stack_env, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    status = devstack(stack_env, "status").stdout
    for name in ("idc1", "idc2"):
        assert f"cluster {name}" in status and "ready" in status
    for proc in ("mirror-idc1-to-idc2", "mirror-idc2-to-idc1", "traffic", "consumers", "spark-connect"):
        assert f"{proc}" in status and "running pid" in status.split(proc, 1)[1].splitlines()[0], status
    # The Spark Connect server answers on its configured port (status probes a real session).
    spark_line = status.split("spark-connect", 1)[1].splitlines()[0]
    assert " ready " in spark_line and f"sc://127.0.0.1:{stack_env['OFFSET_PIPELINE_SPARK_CONNECT_PORT']}" in spark_line
    url = devstack(stack_env, "spark-url").stdout.strip()  # what bin/up exports: the runs' shared session
    assert url.startswith(f"sc://127.0.0.1:{stack_env['OFFSET_PIPELINE_SPARK_CONNECT_PORT']}/;session_id="), url

    bootstrap = {n: f"127.0.0.1:{stack_env[f'OFFSET_PIPELINE_{n.upper()}_PORT']}" for n in ("idc1", "idc2")}
    # Copies arrive on both sides, and consumer groups commit on their active clusters.
    deadline = time.monotonic() + 120
    seen_copies = {"idc1": False, "idc2": False}
    while time.monotonic() < deadline and not all(seen_copies.values()):
        for name, other in (("idc1", "idc2"), ("idc2", "idc1")):
            topics = AdminClient({"bootstrap.servers": bootstrap[name], "log_level": 3}).list_topics(timeout=10).topics
            for topic, meta in topics.items():
                if topic.startswith("_") or seen_copies[name]:
                    continue
                for partition in meta.partitions:
                    if any(r.header(ORIGIN_CLUSTER_HEADER) == other.encode()
                           for r in read_partition(bootstrap[name], topic, partition)):
                        seen_copies[name] = True
                        break
        time.sleep(1)
    assert all(seen_copies.values()), seen_copies

    def consumer_groups(bootstrap_servers):
        admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})  # kept alive
        listed = admin.list_consumer_groups(request_timeout=10).result(30).valid
        return {g.group_id for g in listed if not g.group_id.startswith("offset-pipeline-mirror")}

    # Consumer groups are members on their active cluster: some on idc1, some on idc2.
    for name in ("idc1", "idc2"):
        wait_for(lambda: consumer_groups(bootstrap[name]), timeout=60, what=f"consumer groups on {name}")

    down = devstack(stack_env, "down")
    assert down.returncode == 0, down.stderr
    after = devstack(stack_env, "status").stdout
    assert "ready" not in after and "running pid" not in after, after
