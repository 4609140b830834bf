"""A secure pair of clusters (SASL_SSL, SCRAM-SHA-512, ACLs enforced; devstack/secure_cluster.py)
for the test run, on free loopback ports, its ``sync`` principal's rights cleared for each module;
nothing here mocks Kafka."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from devstack.cluster import KafkaCluster
from devstack.mirror import MirrorEndpoint
from devstack.secure_cluster import ADMIN_USER, SYNC_USER, SecureAccess, secure_cluster
from devstack.sync_acls import revoke_all
from tests.conftest import THROWAWAY_BROKER_GRACE_S, close_kafka_clients_of_this_process, free_port

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
            list(pool.map(lambda cluster: cluster.stop(timeout=THROWAWAY_BROKER_GRACE_S), clusters.values()))


@pytest.fixture(scope="session")
def session_secure_pair(kafka_jars, tmp_path_factory) -> SecurePair:
    """One secure pair for the whole test run (a pair takes ~25 s to make and start)."""
    with started_secure_pair(kafka_jars, tmp_path_factory.mktemp("secure")) as pair:
        yield pair
        close_kafka_clients_of_this_process()  # before the brokers stop


@pytest.fixture(scope="module")
def secure_pair(session_secure_pair) -> SecurePair:
    """The run's secure pair, with the ``sync`` principal holding no right at all when the module
    starts, as on a fresh pair: each module grants (and denies) what its tests need, and what one
    module granted or denied never decides another's outcome. (Topics and groups of every module
    carry unique names.)"""
    for name in CLUSTERS:
        revoke_all(session_secure_pair.admin_config(name), f"User:{SYNC_USER}")
    return session_secure_pair
