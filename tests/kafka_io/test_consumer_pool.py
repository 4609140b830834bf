"""The per-process pool of read consumers (kafka_io/consumer_pool.py): which consumer a lease
gets, and when one is not kept. Real librdkafka consumers (they need no broker to exist); the
reads through the pool against real brokers are in test_partition_records.py."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer

from offset_pipeline.kafka_io.consumer_pool import ConsumerPool, config_key

from tests.conftest import free_port


def factory(conf):
    return Consumer({**conf, "group.id": "pool-test", "log_level": 0})


@pytest.fixture
def pool():
    pool = ConsumerPool(factory, max_idle_per_config=2)
    yield pool
    pool.close()


@pytest.fixture
def conf():
    return {"bootstrap.servers": f"127.0.0.1:{free_port()}"}


def test_a_returned_consumer_is_leased_again_for_the_same_config(pool, conf):
    with pool.lease(conf) as first:
        assert not first.reused
    with pool.lease(dict(conf)) as second:  # an equal config, another dict
        assert second.reused and second.consumer is first.consumer
    with pool.lease({**conf, "client.id": "other"}) as other:
        assert not other.reused and other.consumer is not first.consumer
    assert (pool.stats.created, pool.stats.reused) == (2, 1)


def test_concurrent_leases_never_share_a_consumer(pool, conf):
    with pool.lease(conf) as a, pool.lease(conf) as b:
        assert a.consumer is not b.consumer
    barrier = threading.Barrier(4)
    seen = []

    def borrow():
        with pool.lease(conf) as lease:
            seen.append(id(lease.consumer))
            barrier.wait(timeout=10)

    threads = [threading.Thread(target=borrow) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 4
    assert pool.idle_count() == 2  # at most max_idle_per_config kept; the others were closed


def test_a_lease_that_failed_closes_its_consumer(pool, conf):
    with pytest.raises(RuntimeError):
        with pool.lease(conf) as lease:
            failed = lease.consumer
            raise RuntimeError("read failed")
    assert pool.stats.discarded == 1 and pool.idle_count() == 0
    with pool.lease(conf) as lease:
        assert not lease.reused and lease.consumer is not failed
    with pytest.raises(RuntimeError):
        failed.assignment()  # closed


def test_close_empties_the_pool_and_it_stays_usable(pool, conf):
    with pool.lease(conf):
        pass
    assert pool.idle_count() == 1
    pool.close()
    assert pool.idle_count() == 0
    with pool.lease(conf) as lease:
        assert not lease.reused


def test_config_key_is_order_independent_and_tells_values_apart():
    assert config_key({"a": 1, "b": "x"}) == config_key({"b": "x", "a": 1})
    assert config_key({"a": 1}) != config_key({"a": "1"})
