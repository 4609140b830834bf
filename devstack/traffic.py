"""The seeded traffic generator: the record streams the offset sync has to cope with (docs/concepts/problem.md).

A *plan* is a tuple of :class:`TopicTraffic`, one per topic. Every (topic, producing cluster) pair
is a *stream*. Everything about a stream's records except wall-clock time is decided by a
:class:`random.Random` seeded with ``f"{seed}:{topic}:{origin}"``: the record ids, keys,
partitions, which records of an out-of-order stream are late and by how much, and which
transactions are aborted. Two generators with the same seed and plan therefore produce the same
sequence of records per stream, whatever the pacing or interleaving of streams.

Record layout:

* key ``p<partition>-k<n>`` (a key always lands in the same partition); the partition is chosen
  by the seeded RNG and passed explicitly, never left to the client partitioner;
* value: compact JSON ``{"id", "origin", "topic", "seq", "pattern", "batch", "txn", "late_ms"}``,
  the id being ``f"{seed}:{topic}:{origin}:{seq}"`` (unique across streams and seeds);
* CreateTime set explicitly, by the stream's ``timestamps`` shape:

  ``increasing``     wall clock in ms, forced strictly increasing per stream;
  ``equal_batches``  one timestamp for a whole batch of ``batch_size`` records (a batch producer);
  ``out_of_order``   the (strictly increasing) clock minus a seeded lateness: a quarter of the
                     records are 2-10 s late, so they carry an earlier timestamp than the record
                     before them.

Transactional streams write ``batch_size`` records per transaction with a transactional producer
(``transactional.id`` = ``offset-pipeline-traffic.<topic>.<cluster>``), flush them (so aborted
records really reach the log and leave offset gaps), then commit, or abort a seeded
``abort_ratio`` of the transactions (which ones is random, but after k transactions the number
aborted is within one of ``k * abort_ratio``). Each :class:`ProducedRecord` says whether it was
committed.

``TrafficGenerator.emit(n)`` produces exactly ``n`` records per stream as fast as possible (tests);
``TrafficGenerator.run(stop)`` paces every stream at its rate until stopped (the stack's
``traffic`` process, see :func:`main`).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.cli import (
    add_login_argument,
    cluster_address,
    login_configs,
    start_process_logging,
    stop_on_signals,
)
from devstack.errors import DevStackError

log = logging.getLogger("offset_pipeline.traffic")

TIMESTAMP_SHAPES = ("increasing", "equal_batches", "out_of_order")
KEYS_PER_PARTITION = 50
# Out-of-order streams: this share of records is late by LATE_STEPS_S seconds (whole seconds, so
# "later than the record before" never depends on how fast records were produced).
LATE_PROBABILITY = 0.25
LATE_STEPS_S = (2, 10)
TRANSACTIONAL_ID_PREFIX = "offset-pipeline-traffic"


class TrafficError(DevStackError):
    """Records could not be produced (delivery failed, transaction failed)."""


class TopicLayoutError(DevStackError):
    """A topic exists with another partition count than the plan (copies must keep partitions)."""


@dataclass(frozen=True)
class TopicTraffic:
    """One topic of the plan and how it is written.

    ``rate_per_s`` is per producing cluster (a two-way topic at 5/s gets 10 records/s in all).
    ``batch_size`` is the number of records sharing one timestamp (``equal_batches``) and the
    number of records per transaction (``transactional``).
    """

    name: str
    partitions: int
    producers_on: tuple[str, ...] = ("idc1",)
    timestamps: str = "increasing"
    rate_per_s: float = 1.0
    batch_size: int = 1
    transactional: bool = False
    abort_ratio: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "producers_on", tuple(self.producers_on))
        if not self.name:
            raise ValueError("a topic needs a name")
        if self.partitions < 1:
            raise ValueError(f"{self.name}: partitions must be >= 1, got {self.partitions}")
        if not self.producers_on or len(set(self.producers_on)) != len(self.producers_on):
            raise ValueError(f"{self.name}: producers_on must name distinct clusters, got {self.producers_on}")
        if self.timestamps not in TIMESTAMP_SHAPES:
            raise ValueError(f"{self.name}: timestamps must be one of {TIMESTAMP_SHAPES}, got {self.timestamps!r}")
        if self.rate_per_s <= 0:
            raise ValueError(f"{self.name}: rate_per_s must be > 0, got {self.rate_per_s}")
        if self.batch_size < 1:
            raise ValueError(f"{self.name}: batch_size must be >= 1, got {self.batch_size}")
        if not 0.0 <= self.abort_ratio <= 1.0:
            raise ValueError(f"{self.name}: abort_ratio must be within [0, 1], got {self.abort_ratio}")
        if self.abort_ratio and not self.transactional:
            raise ValueError(f"{self.name}: abort_ratio needs transactional=True")

    @property
    def two_way(self) -> bool:
        return len(self.producers_on) > 1


def default_plan(prefix: str = "") -> tuple[TopicTraffic, ...]:
    """The stack's traffic: every topic shape the offset sync must handle, several partitions each.

    Rates are per producing cluster at ``rate_scale=1.0``; about 31 records/s in all.
    """
    return (
        # Two-way (50:50): both clusters produce, local and mirrored records interleave.
        TopicTraffic(f"{prefix}orders", 6, ("idc1", "idc2"), "increasing", rate_per_s=5.0),
        # One-way from idc1, three timestamp shapes.
        TopicTraffic(f"{prefix}shipments", 3, ("idc1",), "increasing", rate_per_s=3.0),
        TopicTraffic(f"{prefix}payments.batch", 4, ("idc1",), "equal_batches", rate_per_s=4.0, batch_size=20),
        TopicTraffic(f"{prefix}clicks.late", 4, ("idc1",), "out_of_order", rate_per_s=8.0),
        # One-way from idc2 (groups are active on idc2 too).
        TopicTraffic(f"{prefix}inventory", 4, ("idc2",), "increasing", rate_per_s=4.0),
        # Low traffic: one record a minute.
        TopicTraffic(f"{prefix}audit.low", 2, ("idc1",), "increasing", rate_per_s=1 / 60),
        # Transactions that commit or abort: offset gaps, markers, aborted records.
        TopicTraffic(
            f"{prefix}ledger.tx", 3, ("idc1",), "increasing", rate_per_s=2.0,
            batch_size=10, transactional=True, abort_ratio=0.25,
        ),
    )


def ensure_topics(plan: Iterable[TopicTraffic], bootstraps: Mapping[str, str], timeout_s: float = 60.0,
                  client_configs: Mapping[str, Mapping[str, object]] | None = None) -> None:
    """Create every topic of ``plan`` on every cluster of ``bootstraps`` with its partition count
    (``client_configs``: a cluster's login, when it is secure).

    Idempotent: an existing topic (made by an earlier run, or by the mirror from the other side)
    is fine when its partition count matches; otherwise :class:`TopicLayoutError`. Returns once
    every topic is visible with its partitions in each cluster's metadata.
    """
    wanted = {t.name: t.partitions for t in plan}
    for cluster, bootstrap in bootstraps.items():
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3, **(client_configs or {}).get(cluster, {})})
        try:
            existing = _partition_counts(admin, timeout_s)
        except KafkaException as exc:
            raise TrafficError(f"{cluster} ({bootstrap}) did not answer a metadata request: {exc}") from exc
        _check_counts(cluster, wanted, existing)
        missing = [NewTopic(name, num_partitions=count) for name, count in wanted.items() if name not in existing]
        if missing:
            futures = admin.create_topics(missing, operation_timeout=timeout_s, request_timeout=timeout_s)
            for name, future in futures.items():
                try:
                    future.result(timeout=timeout_s)
                    log.info("created topic %s (%d partitions) on %s", name, wanted[name], cluster)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise TrafficError(f"creating topic {name} on {cluster} failed: {exc}") from exc
        deadline = time.monotonic() + timeout_s
        while True:
            existing = _partition_counts(admin, timeout_s)
            _check_counts(cluster, wanted, existing)
            absent = sorted(name for name in wanted if name not in existing)
            if not absent:
                break
            if time.monotonic() > deadline:
                raise TrafficError(f"topics {absent} are still not visible on {cluster} after {timeout_s:.0f}s")
            time.sleep(0.2)  # metadata propagation after CreateTopics


def _partition_counts(admin: AdminClient, timeout_s: float) -> dict[str, int]:
    metadata = admin.list_topics(timeout=timeout_s)
    return {name: len(meta.partitions) for name, meta in metadata.topics.items() if meta.error is None}


def _check_counts(cluster: str, wanted: Mapping[str, int], existing: Mapping[str, int]) -> None:
    wrong = {name: (existing[name], count) for name, count in wanted.items() if existing.get(name, count) != count}
    if wrong:
        details = ", ".join(f"{n} has {have} partitions, the plan wants {want}" for n, (have, want) in sorted(wrong.items()))
        raise TopicLayoutError(
            f"on {cluster}: {details}. A mirrored topic must have the same partition count on both "
            "clusters; delete it or change the plan."
        )


@dataclass(frozen=True)
class ProducedRecord:
    """One record as acknowledged by the broker on its origin cluster."""

    id: str
    topic: str
    origin: str
    partition: int
    offset: int
    key: str
    seq: int
    timestamp: int  # CreateTime in ms, as sent
    late_ms: int  # out_of_order: how far behind the stream clock the timestamp is (0 = on time)
    batch: int | None  # equal_batches: the batch sharing one timestamp
    txn: int | None  # transactional: the stream's transaction number
    committed: bool  # False for records of aborted transactions

    @property
    def aborted(self) -> bool:
        return not self.committed


@dataclass(frozen=True)
class _Planned:
    """Everything about a record that the seed decides."""

    seq: int
    id: str
    key: str
    partition: int
    late_ms: int
    batch: int | None
    txn: int | None
    abort: bool


@dataclass
class _Pending:
    planned: _Planned
    topic: str
    origin: str
    timestamp: int
    offset: int = -1
    error: KafkaError | None = None
    delivered: bool = False


@dataclass
class StreamStats:
    acked: int = 0
    committed: int = 0
    aborted: int = 0
    failed: int = 0
    transactions: int = 0
    aborted_transactions: int = 0


class _Stream:
    """One (topic, origin cluster) stream: its seeded RNG, sequence number and clock."""

    def __init__(self, topic: TopicTraffic, origin: str, seed: int):
        self.topic = topic
        self.origin = origin
        self.seed = seed
        self.rng = random.Random(f"{seed}:{topic.name}:{origin}")
        self.seq = 0
        self.last_ms = 0  # the stream clock: strictly increasing
        self.batch_ts: int | None = None
        self.txn_abort = False
        self.abort_debt = 0.0
        self.stats = StreamStats()

    @property
    def label(self) -> str:
        return f"{self.topic.name}@{self.origin}"

    @property
    def grouped(self) -> bool:
        """Records come in groups of batch_size (shared timestamp, or one transaction)."""
        return self.topic.transactional or self.topic.timestamps == "equal_batches"

    def unit_size(self) -> int:
        """Records until the end of the current batch/transaction (1 for single-record streams)."""
        if not self.grouped:
            return 1
        return self.topic.batch_size - self.seq % self.topic.batch_size

    def plan_next(self) -> _Planned:
        topic, rng, seq = self.topic, self.rng, self.seq
        group = seq // topic.batch_size
        if topic.transactional and seq % topic.batch_size == 0:
            # Seeded, but never far from the ratio: after k transactions the number aborted is
            # within one of k * abort_ratio (so even a short run sees both outcomes).
            self.abort_debt += topic.abort_ratio
            self.txn_abort = rng.random() < self.abort_debt
            if self.txn_abort:
                self.abort_debt -= 1.0
        partition = rng.randrange(topic.partitions)
        key = f"p{partition}-k{rng.randrange(KEYS_PER_PARTITION)}"
        late_ms = 0
        if topic.timestamps == "out_of_order":
            late = rng.random() < LATE_PROBABILITY
            steps = rng.randint(*LATE_STEPS_S)
            late_ms = steps * 1000 if late else 0
        self.seq += 1
        return _Planned(
            seq=seq,
            id=f"{self.seed}:{topic.name}:{self.origin}:{seq}",
            key=key,
            partition=partition,
            late_ms=late_ms,
            batch=group if topic.timestamps == "equal_batches" else None,
            txn=group if topic.transactional else None,
            abort=topic.transactional and self.txn_abort,
        )

    def timestamp_for(self, planned: _Planned) -> int:
        now_ms = int(time.time() * 1000)
        if self.topic.timestamps == "equal_batches":
            if planned.seq % self.topic.batch_size == 0 or self.batch_ts is None:
                self.batch_ts = self.last_ms = max(now_ms, self.last_ms + 1)
            return self.batch_ts
        self.last_ms = max(now_ms, self.last_ms + 1)
        return self.last_ms - planned.late_ms

    def value(self, planned: _Planned) -> bytes:
        return json.dumps(
            {
                "id": planned.id,
                "origin": self.origin,
                "topic": self.topic.name,
                "seq": planned.seq,
                "pattern": self.topic.timestamps,
                "batch": planned.batch,
                "txn": planned.txn,
                "late_ms": planned.late_ms,
            },
            separators=(",", ":"),
        ).encode()


class TrafficGenerator:
    """Produces the plan's streams to their clusters. Not thread-safe: use from one thread.

    ``bootstraps`` maps cluster names (``idc1``) to bootstrap servers; every cluster a topic is
    produced on must be present. ``produced_log``, when given, receives one JSON line per
    acknowledged record (id, topic, origin, partition, offset, timestamp, committed), so a
    long-running generator leaves an exact account of what was produced and what was aborted.
    """

    def __init__(
        self,
        plan: Iterable[TopicTraffic],
        bootstraps: Mapping[str, str],
        seed: int,
        rate_scale: float = 1.0,
        *,
        produced_log: Path | None = None,
        client_config: Mapping[str, object] | None = None,
        cluster_configs: Mapping[str, Mapping[str, object]] | None = None,
        transaction_timeout_s: float = 60.0,
    ):
        self.plan = tuple(plan)
        self.bootstraps = dict(bootstraps)
        self.seed = seed
        if rate_scale <= 0:
            raise ValueError(f"rate_scale must be > 0, got {rate_scale}")
        self.rate_scale = rate_scale
        self.transaction_timeout_s = transaction_timeout_s
        names = [t.name for t in self.plan]
        if len(set(names)) != len(names):
            raise ValueError(f"the plan names a topic twice: {sorted(names)}")
        unknown = sorted({c for t in self.plan for c in t.producers_on} - set(self.bootstraps))
        if unknown:
            raise ValueError(f"the plan produces on {unknown} but no bootstrap was given for them")
        self._client_config = {"log_level": 3, **(client_config or {})}
        # per cluster, on top of client_config: a secure cluster's login (devstack/secure_cluster.py)
        self._cluster_configs = {name: dict(config) for name, config in (cluster_configs or {}).items()}
        self.streams = [_Stream(t, origin, seed) for t in self.plan for origin in t.producers_on]
        self._streams_by_key = {(s.topic.name, s.origin): s for s in self.streams}
        self._producers: dict[str, Producer] = {}
        self._tx_producers: dict[tuple[str, str], Producer] = {}
        self._log_file = open(produced_log, "a", buffering=1) if produced_log else None
        self.started = time.monotonic()

    # -- producers ----------------------------------------------------------------------------
    def _producer(self, cluster: str) -> Producer:
        if cluster not in self._producers:
            self._producers[cluster] = Producer(
                {
                    "bootstrap.servers": self.bootstraps[cluster],
                    "client.id": f"{TRANSACTIONAL_ID_PREFIX}.{cluster}",
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    **self._client_config,
                    **self._cluster_configs.get(cluster, {}),
                }
            )
        return self._producers[cluster]

    def _tx_producer(self, stream: _Stream) -> Producer:
        key = (stream.topic.name, stream.origin)
        if key not in self._tx_producers:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstraps[stream.origin],
                    "transactional.id": f"{TRANSACTIONAL_ID_PREFIX}.{stream.topic.name}.{stream.origin}",
                    "client.id": f"{TRANSACTIONAL_ID_PREFIX}.{stream.topic.name}.{stream.origin}",
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "transaction.timeout.ms": int(self.transaction_timeout_s * 1000),
                    **self._client_config,
                    **self._cluster_configs.get(stream.origin, {}),
                }
            )
            producer.init_transactions(self.transaction_timeout_s)  # fences an earlier instance
            self._tx_producers[key] = producer
        return self._tx_producers[key]

    # -- producing ----------------------------------------------------------------------------
    def _produce(self, producer: Producer, stream: _Stream, on_acked: Callable[[_Pending], None] | None) -> _Pending:
        planned = stream.plan_next()
        pending = _Pending(planned, stream.topic.name, stream.origin, stream.timestamp_for(planned))

        def delivered(err, msg, pending=pending):
            pending.delivered = True
            if err is not None:
                pending.error = err
                stream.stats.failed += 1
                log.warning("%s: record %s was not delivered: %s", stream.label, pending.planned.id, err)
            else:
                pending.offset = msg.offset()
                stream.stats.acked += 1
            if on_acked is not None:
                on_acked(pending)

        while True:
            try:
                producer.produce(
                    stream.topic.name,
                    value=stream.value(planned),
                    key=planned.key.encode(),
                    partition=planned.partition,
                    timestamp=pending.timestamp,
                    on_delivery=delivered,
                )
                return pending
            except BufferError:
                producer.poll(0.05)  # local queue full: let deliveries drain

    def _plain_acked(self, pending: _Pending) -> None:
        if pending.error is None:
            self._stream_of(pending).stats.committed += 1
            self._write_log(pending, committed=True)

    def _stream_of(self, pending: _Pending) -> _Stream:
        return self._streams_by_key[(pending.topic, pending.origin)]

    def _write_log(self, pending: _Pending, committed: bool) -> None:
        if self._log_file is None:
            return
        self._log_file.write(
            json.dumps(
                {
                    "id": pending.planned.id, "topic": pending.topic, "origin": pending.origin,
                    "partition": pending.planned.partition, "offset": pending.offset,
                    "timestamp": pending.timestamp, "committed": committed,
                },
                separators=(",", ":"),
            )
            + "\n"
        )

    def _transaction(self, stream: _Stream, count: int) -> tuple[list[_Pending], bool]:
        """Produce ``count`` records (within one planned transaction) in one real transaction.

        Returns the records and whether the transaction committed.
        """
        producer = self._tx_producer(stream)
        timeout = self.transaction_timeout_s
        producer.begin_transaction()
        pending: list[_Pending] = []
        try:
            pending = [self._produce(producer, stream, None) for _ in range(count)]
            # Flush first, so even an aborted transaction's records are written: real offset gaps.
            if producer.flush(timeout) != 0:
                raise TrafficError(f"{stream.label}: records still queued after {timeout:.0f}s")
            failed = [p for p in pending if p.error is not None]
            if failed:
                raise TrafficError(f"{stream.label}: {len(failed)} records failed: {failed[0].error}")
            if pending[0].planned.abort:
                producer.abort_transaction(timeout)
                committed = False
            else:
                self._commit(producer, timeout)
                committed = True
        except (KafkaException, TrafficError) as exc:
            self._abort_after_error(stream, producer, exc)
            # Aborted, or left open for the coordinator to abort when the producer is replaced.
            stream.stats.aborted += sum(1 for p in pending if p.error is None)
            stream.stats.aborted_transactions += 1
            for p in pending:
                if p.error is None:
                    self._write_log(p, committed=False)
            raise
        stream.stats.transactions += 1
        if committed:
            stream.stats.committed += len(pending)
        else:
            stream.stats.aborted += len(pending)
            stream.stats.aborted_transactions += 1
        for p in pending:
            self._write_log(p, committed)
        return pending, committed

    @staticmethod
    def _commit(producer: Producer, timeout: float, attempts: int = 5) -> None:
        for attempt in range(attempts):
            try:
                producer.commit_transaction(timeout)
                return
            except KafkaException as exc:
                # A retriable error leaves the outcome unknown: retrying the commit is the documented way.
                if not exc.args[0].retriable() or attempt == attempts - 1:
                    raise

    def _abort_after_error(self, stream: _Stream, producer: Producer, exc: Exception) -> None:
        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if error is not None and error.fatal():
            log.error("%s: transactional producer failed fatally (%s); it will be recreated", stream.label, exc)
            self._tx_producers.pop((stream.topic.name, stream.origin), None)
            return
        try:
            producer.abort_transaction(self.transaction_timeout_s)
        except KafkaException as abort_exc:
            log.error("%s: aborting after %s failed too (%s); recreating the producer", stream.label, exc, abort_exc)
            self._tx_producers.pop((stream.topic.name, stream.origin), None)

    def emit(self, count_per_stream: int) -> list[ProducedRecord]:
        """Produce exactly ``count_per_stream`` records per stream, as fast as possible.

        Returns the records in production order per stream (streams in plan order), each with the
        offset its origin cluster acknowledged. Raises :class:`TrafficError` if any record failed.
        """
        if count_per_stream < 0:
            raise ValueError("count_per_stream must be >= 0")
        results: list[tuple[_Pending, bool]] = []
        for stream in self.streams:
            if stream.topic.transactional:
                remaining = count_per_stream
                while remaining > 0:
                    n = min(remaining, stream.unit_size())
                    pending, committed = self._transaction(stream, n)
                    results.extend((p, committed) for p in pending)
                    remaining -= n
            else:
                producer = self._producer(stream.origin)
                results.extend(
                    (self._produce(producer, stream, self._plain_acked), True) for _ in range(count_per_stream)
                )
        for cluster, producer in self._producers.items():
            if producer.flush(60) != 0:
                raise TrafficError(f"records to {cluster} were still not delivered after 60s")
        failed = [p for p, _ in results if p.error is not None or not p.delivered]
        if failed:
            raise TrafficError(
                f"{len(failed)} records were not delivered, e.g. {failed[0].planned.id}: {failed[0].error}"
            )
        return [
            ProducedRecord(
                id=p.planned.id, topic=p.topic, origin=p.origin, partition=p.planned.partition, offset=p.offset,
                key=p.planned.key, seq=p.planned.seq, timestamp=p.timestamp, late_ms=p.planned.late_ms,
                batch=p.planned.batch, txn=p.planned.txn, committed=committed,
            )
            for p, committed in results
        ]

    def _produce_unit(self, stream: _Stream) -> int:
        """One paced step of a stream: a record, a timestamp batch, or a transaction."""
        n = stream.unit_size()
        if stream.topic.transactional:
            self._transaction(stream, n)
        else:
            producer = self._producer(stream.origin)
            for _ in range(n):
                self._produce(producer, stream, self._plain_acked)
        return n

    def run(
        self,
        stop: threading.Event,
        duration_s: float | None = None,
        report_every_s: float = 30.0,
        max_behind_s: float = 5.0,
    ) -> None:
        """Produce every stream at ``rate_per_s * rate_scale`` until ``stop`` is set (or ``duration_s``).

        Batches and transactions go out whole, spaced so the stream keeps its average rate. A
        stream that falls more than ``max_behind_s`` behind (a slow broker) skips ahead rather
        than bursting to catch up. Errors are logged and counted; the loop carries on.
        """
        start = time.monotonic()
        end = start + duration_s if duration_s is not None else None
        due = [start] * len(self.streams)
        next_report = start + report_every_s
        try:
            while not stop.is_set():
                now = time.monotonic()
                if end is not None and now >= end:
                    break
                for i, stream in enumerate(self.streams):
                    if due[i] > now or stop.is_set():
                        continue
                    try:
                        n = self._produce_unit(stream)
                    except (KafkaException, TrafficError) as exc:
                        stream.stats.failed += 1
                        log.warning("%s: %s", stream.label, exc)
                        n = stream.unit_size()
                    due[i] += n / (stream.topic.rate_per_s * self.rate_scale)
                    if due[i] < now - max_behind_s:
                        due[i] = now
                for producer in self._producers.values():
                    producer.poll(0)
                if time.monotonic() >= next_report:
                    log.info("%s", self.summary())
                    next_report = time.monotonic() + report_every_s
                wait = min(due) - time.monotonic()
                if end is not None:
                    wait = min(wait, end - time.monotonic())
                if wait > 0:
                    stop.wait(min(wait, 0.5))
        finally:
            for cluster, producer in self._producers.items():
                left = producer.flush(30)
                if left:
                    log.warning("%d records to %s were not delivered at shutdown", left, cluster)
            log.info("%s", self.summary())

    # -- reporting ----------------------------------------------------------------------------
    def totals(self) -> StreamStats:
        total = StreamStats()
        for stream in self.streams:
            for name in total.__dataclass_fields__:
                setattr(total, name, getattr(total, name) + getattr(stream.stats, name))
        return total

    def summary(self) -> str:
        t = self.totals()
        per_stream = " ".join(f"{s.label}={s.stats.acked}" for s in self.streams)
        return (
            f"traffic seed={self.seed} scale={self.rate_scale:g} up {time.monotonic() - self.started:.0f}s: "
            f"{t.acked} acked ({t.committed} committed, {t.aborted} aborted in {t.aborted_transactions}/"
            f"{t.transactions} transactions, {t.failed} failed) | {per_stream}"
        )

    def close(self) -> None:
        for producer in self._producers.values():
            producer.flush(30)
        self._producers.clear()
        self._tx_producers.clear()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "TrafficGenerator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.traffic",
        description="Produce the seeded default traffic plan to both clusters until SIGTERM.",
    )
    parser.add_argument("--bootstrap", type=cluster_address, action="append", required=True,
                        help="NAME=HOST:PORT, once per cluster (idc1=127.0.0.1:19092)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rate-scale", type=float, default=1.0, help="multiplies every stream's rate")
    parser.add_argument("--prefix", default="", help="prepended to every topic name of the plan")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--report-every", type=float, default=30.0, help="seconds between summary lines")
    parser.add_argument("--produced-log", type=Path, default=None,
                        help="append one JSON line per acknowledged record (id, offset, committed) here")
    add_login_argument(parser)
    args = parser.parse_args(argv)
    start_process_logging()

    stop = stop_on_signals()
    bootstraps = dict(args.bootstrap)
    plan = default_plan(args.prefix)
    logins = login_configs(args.login)
    try:
        ensure_topics(plan, bootstraps, client_configs=logins)
        generator = TrafficGenerator(
            plan, bootstraps, seed=args.seed, rate_scale=args.rate_scale, produced_log=args.produced_log,
            cluster_configs=logins,
        )
    except (DevStackError, ValueError) as exc:
        log.error("traffic cannot start: %s", exc)
        return 1
    log.info(
        "traffic started: seed %d, rate scale %g, %d streams on %s",
        args.seed, args.rate_scale, len(generator.streams), ", ".join(f"{k}={v}" for k, v in bootstraps.items()),
    )
    try:
        generator.run(stop, duration_s=args.duration, report_every_s=args.report_every)
    finally:
        generator.close()
    log.info("traffic stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
