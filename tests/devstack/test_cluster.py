"""The KRaft cluster harness: start, status, stop, and the errors of a bad start."""

from __future__ import annotations

import re
import socket

import pytest

from devstack.cluster import ClusterSpec, KafkaCluster
from devstack.errors import BrokerStartError

from tests.conftest import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]


def new_cluster(tmp_path, kafka_jars, name="idcx", **spec) -> KafkaCluster:
    return KafkaCluster(ClusterSpec(name, free_port(), free_port(), tmp_path / name, **spec), kafka_jars)


def test_both_clusters_answer_metadata_and_are_independent(kafka_pair):
    ids = set()
    for name in ("idc1", "idc2"):
        status = kafka_pair.cluster(name).status()
        assert status.ready and status.running and status.pid
        metadata = kafka_pair.admin(name).list_topics(timeout=10)
        assert len(metadata.brokers) == 1
        ids.add(metadata.cluster_id)
    assert len(ids) == 2  # two clusters, not one reached twice


def test_port_in_use_is_refused_with_the_port_named(tmp_path, kafka_jars):
    cluster = new_cluster(tmp_path, kafka_jars)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", cluster.spec.port))
        squatter.listen()
        with pytest.raises(BrokerStartError, match=rf"port 127\.0\.0\.1:{cluster.spec.port} is already in use"):
            cluster.start(timeout=30)
    assert not cluster.status().running


def test_missing_java_is_a_clear_error(tmp_path, kafka_jars, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder with no java in it
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(BrokerStartError, match="'java' was not found"):
        new_cluster(tmp_path, kafka_jars).start(timeout=30)


def test_broker_dying_on_start_reports_the_tail_of_its_log(tmp_path, kafka_jars):
    cluster = new_cluster(tmp_path, kafka_jars)
    cluster.start()
    assert cluster.status().ready
    assert cluster.stop()
    assert not cluster.status().running
    # Point the broker at a data directory formatted for another node: it exits during start-up.
    meta = cluster.spec.data_dir / "kraft-logs" / "meta.properties"
    meta.write_text(re.sub(r"node\.id=\d+", "node.id=7", meta.read_text()))
    with pytest.raises(BrokerStartError) as raised:
        cluster.start(timeout=60)
    message = str(raised.value)
    assert "exited during start-up" in message
    assert "Last lines of" in message and str(cluster.log_path) in message
    assert re.search(r"node\.?id|node id", message, re.IGNORECASE), message  # the broker's own reason
    assert not cluster.status().running


def test_bad_setting_fails_with_kafkas_own_message(tmp_path, kafka_jars):
    cluster = new_cluster(tmp_path, kafka_jars, overrides={"num.io.threads": "many"})
    with pytest.raises(BrokerStartError, match="num.io.threads"):
        cluster.start(timeout=60)
    assert not cluster.status().running


def test_kafka_cluster_resource_describes_a_live_cluster(kafka_pair):
    from offset_pipeline.resources.kafka import KafkaClusterResource

    for name in ("idc1", "idc2"):
        described = KafkaClusterResource(cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(name)).describe()
        assert described["cluster_name"] == name
        assert described["broker_count"] == 1
        assert described["cluster_id"] == kafka_pair.admin(name).list_topics(timeout=10).cluster_id
