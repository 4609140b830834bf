"""The brokers' logs are bounded: log4j2 rolls ``broker.log`` over by size and keeps a fixed number
of older files (an unattended stack's logs rotate)."""

from __future__ import annotations

import re

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from devstack import cluster as cluster_module
from devstack.cluster import ClusterSpec, KafkaCluster, log4j2_properties

from tests.conftest import free_port, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]


def properties(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)


def test_the_broker_config_rolls_its_log_by_size_into_a_bounded_number_of_files(tmp_path):
    log = tmp_path / "broker.log"
    props = properties(log4j2_properties(log))
    [root_appender] = [v for k, v in props.items() if k.startswith("rootLogger.appenderRef.") and k.endswith(".ref")]
    appender = next(key.rsplit(".", 1)[0] for key, value in props.items()
                    if key.startswith("appender.") and key.endswith(".name") and value == root_appender)
    assert props[f"{appender}.type"] == "RollingFile"
    assert props[f"{appender}.fileName"] == str(log)
    assert props[f"{appender}.filePattern"] == f"{log}.%i"
    assert props[f"{appender}.policies.size.type"] == "SizeBasedTriggeringPolicy"
    assert props[f"{appender}.policies.size.size"] == "20MB"
    assert props[f"{appender}.strategy.type"] == "DefaultRolloverStrategy"
    assert props[f"{appender}.strategy.max"] == "5"
    assert not any(value == "Console" for key, value in props.items() if key.endswith(".type"))


def test_a_running_broker_rolls_its_log_over_and_keeps_only_the_newest_files(tmp_path, kafka_jars, monkeypatch):
    # Small files, so a start and a few topics roll the log over more often than it keeps files.
    monkeypatch.setattr(cluster_module, "BROKER_LOG_MAX_SIZE", "16KB")
    monkeypatch.setattr(cluster_module, "BROKER_LOG_BACKUPS", 2)
    cluster = KafkaCluster(ClusterSpec("idcx", free_port(), free_port(), tmp_path / "idcx"), kafka_jars)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers, "log_level": 3})
        for batch in range(4):  # each topic created logs a few INFO lines
            futures = admin.create_topics([NewTopic(f"rotation.{batch}.{i}", 1) for i in range(10)])
            for future in futures.values():
                future.result(timeout=30)
        logs = lambda: sorted(p.name for p in cluster.spec.data_dir.glob("broker.log*"))  # noqa: E731
        wait_for(lambda: logs() == ["broker.log", "broker.log.1", "broker.log.2"], timeout=60,
                 what=f"two rolled broker logs (now {logs()})")
        assert cluster.status().ready  # the broker runs on, logging to the new file
        current = cluster.log_path.read_text(errors="replace")
        assert re.search(r"^\[\d{4}-\d\d-\d\d ", current, re.MULTILINE), current[:2000]
        # The oldest lines are gone: the start marker and the first of the broker's own lines.
        everything = "".join((cluster.spec.data_dir / name).read_text(errors="replace") for name in logs())
        assert "=== starting idcx" not in everything
        for name in logs():
            # A file rolls over before the event that finds it full: one event (the broker's config
            # dump is the largest) may pass the size.
            assert (cluster.spec.data_dir / name).stat().st_size < 16 * 1024 + 64 * 1024, name
    finally:
        cluster.stop()
