"""Kafka consumers kept for the life of a process, keyed by their client config.

The translation reads (:mod:`offset_pipeline.kafka_io.partition_records`) only ever ``assign``,
read and ``unassign``: no ``subscribe``, no group membership, no commits. A consumer can therefore
serve one partition after another, and a Spark Python worker (reused across tasks and cycles)
keeps its consumers instead of paying a new client's connection set-up and metadata round trips
for every partition.

* :meth:`ConsumerPool.lease` hands out an idle consumer for the config (or a new one from the
  factory) to one borrower at a time; on a normal return the consumer is unassigned and kept, on an
  exception it is closed (its state is unknown) and the next lease gets a fresh one.
* A process that forked (``os.fork``) after consumers were made never uses them: librdkafka
  clients do not survive a fork, so the child starts an empty pool.
* :meth:`ConsumerPool.close` closes every idle consumer; pools close at interpreter exit. A Spark
  worker ended with ``os._exit`` or a signal skips that: its connections just drop, which is
  harmless for consumers that hold no group membership and never commit.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer

ConfigKey = tuple[tuple[str, str], ...]

_POOLS: "weakref.WeakSet[ConsumerPool]" = weakref.WeakSet()


def config_key(conf: Mapping[str, Any]) -> ConfigKey:
    """A hashable key for a librdkafka config dict (values compared by their repr)."""
    return tuple(sorted((str(k), repr(v)) for k, v in conf.items()))


@dataclass(frozen=True)
class Lease:
    consumer: Consumer
    reused: bool  # False: made for this lease


@dataclass
class PoolStats:
    created: int = 0
    reused: int = 0
    discarded: int = 0  # closed after a failed lease


class ConsumerPool:
    """Idle consumers per client config. ``factory(conf)`` makes a consumer (the caller's settings:
    isolation level, no auto-commit, ...). Thread-safe; a consumer has one borrower at a time."""

    def __init__(self, factory: Callable[[Mapping[str, Any]], Consumer], max_idle_per_config: int = 4):
        self._factory = factory
        self._max_idle = max_idle_per_config
        self._lock = threading.Lock()
        self._idle: dict[ConfigKey, list[Consumer]] = {}
        self._pid = os.getpid()
        self.stats = PoolStats()
        _POOLS.add(self)

    def _forked(self) -> None:
        # Called with the lock held: consumers made before a fork belong to the parent.
        if os.getpid() != self._pid:
            self._idle = {}
            self._pid = os.getpid()
            self.stats = PoolStats()

    @contextmanager
    def lease(self, conf: Mapping[str, Any]) -> Iterator[Lease]:
        key = config_key(conf)
        with self._lock:
            self._forked()
            idle = self._idle.get(key)
            consumer = idle.pop() if idle else None
            if consumer is not None:
                self.stats.reused += 1
        reused = consumer is not None
        if consumer is None:
            consumer = self._factory(conf)
            with self._lock:
                self.stats.created += 1
        try:
            yield Lease(consumer, reused)
        except BaseException:
            self._discard(consumer)
            raise
        try:
            consumer.unassign()  # readers unassign already; make sure nothing is fetched while idle
        except Exception:  # noqa: BLE001 - a consumer that cannot unassign is not reused
            self._discard(consumer)
            return
        with self._lock:
            if os.getpid() == self._pid and len(self._idle.setdefault(key, [])) < self._max_idle:
                self._idle[key].append(consumer)
                return
        consumer.close()

    def _discard(self, consumer: Consumer) -> None:
        with self._lock:
            self.stats.discarded += 1
        try:
            consumer.close()
        except Exception:  # noqa: BLE001 - closing a broken client is best effort
            pass

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def close(self) -> None:
        """Close every idle consumer; the pool stays usable (later leases make new ones)."""
        with self._lock:
            if os.getpid() != self._pid:
                self._idle = {}
                return
            consumers = [c for idle in self._idle.values() for c in idle]
            self._idle = {}
        for consumer in consumers:
            try:
                consumer.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass


@atexit.register
def close_all_pools() -> None:
    """Close every pool's idle consumers in this process (at exit, and by an owner whose clusters go away)."""
    for pool in list(_POOLS):
        pool.close()
