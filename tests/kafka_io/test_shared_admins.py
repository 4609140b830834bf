"""The per-process shared admin clients (kafka_io/cluster_client.py): one per admin config, reused
until released. Real librdkafka admin clients (they need no broker to exist)."""

from __future__ import annotations

import weakref

from offset_pipeline.kafka_io.cluster_client import release_shared_admins, shared_admin

from tests.conftest import free_port


def config(port: int) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0}


def test_one_admin_per_config_until_released_and_none_kept_after():
    release_shared_admins()
    first_port, second_port = free_port(), free_port()
    first = shared_admin(config(first_port))
    assert shared_admin(dict(config(first_port))) is first  # an equal config, another dict
    second = shared_admin(config(second_port))
    assert second is not first
    gone = weakref.ref(first)

    assert release_shared_admins() == 2
    assert release_shared_admins() == 0
    assert shared_admin(config(first_port)) is not first  # a new client after the release
    del first, second
    assert gone() is None, "a released admin client is still referenced"
    assert release_shared_admins() == 1
