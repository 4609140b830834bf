"""A secure pair of clusters (SASL_SSL, SCRAM-SHA-512, ACLs enforced; devstack/secure_cluster.py)
per test module, on free loopback ports; nothing here mocks Kafka."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from devstack.cluster import KafkaCluster
from devstack.mirror import MirrorEndpoint
from devstack.secure_cluster import ADMIN_USER, SecureAccess, secure_cluster
from tests.conftest import free_port

CLUSTERS = ("idc1", "idc2")


@dataclass
class SecurePair:
    clusters: dict[str, KafkaCluster]
    access: dict[str, SecureAccess]

    def admin_config(self, name: str) -> dict:
        return {**self.access[name].client_config(ADMIN_USER), "log_level": 3}

    def admin(self, name: str) -> AdminClient:
        return AdminClient(self.admin_config(name))

    def admin_endpoint(self, name: str) -> MirrorEndpoint:
        """``name`` for a data mirror logged in as ``admin``."""
        config = self.access[name].client_config(ADMIN_USER)
        return MirrorEndpoint(name, config.pop("bootstrap.servers"), client_config=config)


@contextmanager
def started_secure_pair(kafka_jars: Path, base: Path):
    """idc1 and idc2, each secure with a CA of its own, started at once; stopped on exit."""
    with ThreadPoolExecutor(max_workers=len(CLUSTERS)) as pool:  # certificates: keytool runs at once
        built = dict(zip(CLUSTERS, pool.map(
            lambda name: secure_cluster(name, free_port(), free_port(), base / name, kafka_jars), CLUSTERS)))
    clusters = {name: cluster for name, (cluster, _) in built.items()}
    try:
        with ThreadPoolExecutor(max_workers=len(CLUSTERS)) as pool:
            list(pool.map(lambda cluster: cluster.start(), clusters.values()))
        yield SecurePair(clusters, {name: access for name, (_, access) in built.items()})
    finally:
        with ThreadPoolExecutor(max_workers=len(CLUSTERS)) as pool:
            list(pool.map(lambda cluster: cluster.stop(), clusters.values()))


@pytest.fixture(scope="module")
def secure_pair(kafka_jars, tmp_path_factory) -> SecurePair:
    with started_secure_pair(kafka_jars, tmp_path_factory.mktemp("secure")) as pair:
        yield pair
        # This process's pooled read consumers (kafka_io) would keep reconnecting to the stopped brokers.
        from offset_pipeline.kafka_io.partition_records import CONSUMERS

        CONSUMERS.close()
