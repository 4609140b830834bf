"""The data mirror: copies every matching topic from one cluster to the other (docs/concepts/problem.md).

Run one per direction (``idc1 -> idc2`` and ``idc2 -> idc1``). For each source record it writes a
copy to the same topic and partition on the target, with the same key, value, CreateTime
timestamp and headers, plus the origin headers ``IDC=<source>`` and ``Offset=<source offset>``.

Guarantees, each tested against real brokers:

* **No loops.** A record whose ``IDC`` header names the target is itself a copy from the target
  and is never mirrored back.
* **Per-origin order.** One source partition is copied, in order, by one transactional
  (idempotent) producer into one target partition.
* **read_committed.** Aborted transactional records on the source are never copied.
* **Exactly once across restarts.** Copies are written in target-side transactions that also
  commit the mirror's source positions (stored on the *target* cluster under :attr:`group_id`),
  so a crash at any point either keeps a batch and its position or drops both; a restart resumes
  from the committed position, neither losing nor repeating nor reordering records.

* **Survives its clusters.** A broker of either cluster killed and restarted (or down for
  minutes) costs the mirror time, never records: a failed transaction is aborted, a producer in a
  fatal state (``INVALID_TXN_STATE`` or fenced after the target came back) is abandoned for a new
  one, and in both cases the mirror rewinds to the position committed on the target, which says
  whether the failed transaction counted. Every client call has a bounded timeout (a producer
  call that ignores its own is given up on, and its producer replaced); a cluster that does not
  answer is retried with backoff, logged at most every :data:`WAIT_LOG_EVERY_S`. Each recovery is
  one log line: ``mirror <group> recovered <s>s after its failed transaction began: <reason>; <action>``.

Any ``IDC``/``Offset`` headers a producer wrote itself (for example a third cluster's name) are
replaced on the copy: the copy's origin headers always describe the record's real origin.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.cli import (
    add_login_argument,
    cluster_address,
    login_configs,
    start_process_logging,
    stop_on_signals,
)

ORIGIN_CLUSTER_HEADER = "IDC"
ORIGIN_OFFSET_HEADER = "Offset"
DEFAULT_TOPIC_PATTERN = r"^(?!__)(?!_)(?!offset-pipeline\.).*"

WAIT_LOG_EVERY_S = 30.0

log = logging.getLogger("offset_pipeline.mirror")


@dataclass(frozen=True)
class MirrorEndpoint:
    name: str
    bootstrap_servers: str
    # librdkafka settings of this cluster beyond its address (a secure cluster's SASL_SSL login and
    # CA, devstack/secure_cluster.py); kept out of the repr: it may hold a password.
    client_config: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def settings(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.client_config}


@dataclass
class MirrorConfig:
    source: MirrorEndpoint
    target: MirrorEndpoint
    topic_pattern: str = DEFAULT_TOPIC_PATTERN
    batch_size: int = 500
    poll_timeout_s: float = 0.2
    metadata_refresh_s: float = 2.0
    # Distinguishes mirrors of the same direction over different topics: each instance has its
    # own transactional id and positions, so one never fences the other.
    instance: str = ""
    extra_client_config: dict[str, str] = field(default_factory=dict)
    # The bound of each blocking client call (metadata, committed positions, init, commit, abort).
    call_timeout_s: float = 30.0
    # How long the target broker lets an open transaction live before it aborts it by itself.
    transaction_timeout_s: float = 60.0
    # The longest pause between attempts while a cluster does not answer.
    max_backoff_s: float = 10.0

    @property
    def group_id(self) -> str:
        """Where the mirror keeps its source positions, on the target cluster."""
        base = f"offset-pipeline-mirror.{self.source.name}-to-{self.target.name}"
        return f"{base}.{self.instance}" if self.instance else base

    @property
    def transactional_id(self) -> str:
        return self.group_id


@dataclass
class MirrorStats:
    copied: int = 0
    skipped_loop: int = 0
    transactions: int = 0
    aborted_transactions: int = 0
    topics: int = 0
    partitions: int = 0
    mismatched_topics: list[str] = field(default_factory=list)
    # Recoveries: a failed transaction handled and the mirror back at its committed position.
    recoveries: int = 0
    new_producers: int = 0  # producers replaced after a fatal error (the first one not counted)
    recovery_seconds: deque = field(default_factory=lambda: deque(maxlen=100))  # the latest ones

    def summary(self) -> str:
        slowest = max(self.recovery_seconds, default=0.0)
        return (
            f"copied={self.copied} skipped_loop={self.skipped_loop} transactions={self.transactions} "
            f"aborted={self.aborted_transactions} recoveries={self.recoveries} new_producers={self.new_producers} "
            f"slowest_recent_recovery={slowest:.1f}s topics={self.topics} partitions={self.partitions} "
            f"mismatched={self.mismatched_topics}"
        )


class MirrorStopped(Exception):
    """The stop event was set while the mirror waited for a cluster: nothing is half done."""


class StuckClientCall(KafkaException):
    """A client call outlived its own timeout by :data:`STUCK_MARGIN_S`: its client is abandoned."""


class TooManyStuckCalls(RuntimeError):
    """More than :data:`MAX_STUCK_CALLS` abandoned calls still block their threads: the mirror
    stops (its process exits, and ``bin/stack up``/``watch`` starts a clean one)."""


STUCK_MARGIN_S = 10.0
# TxnOffsetCommit takes milliseconds; this call is the one that can hang (see DataMirror._bounded),
# so it gets a short bound: a false alarm costs only a new producer.
SEND_OFFSETS_TIMEOUT_S = 10.0
MAX_STUCK_CALLS = 5


def is_fatal(exc: KafkaException) -> bool:
    """A fatal client error (fenced by a newer instance, broken producer, a call that never
    returned): the client is unusable and must be replaced. Anything else leaves the transaction
    abortable and the batch safe to retry."""
    if isinstance(exc, StuckClientCall):
        return True
    error = exc.args[0] if exc.args else None
    return not isinstance(error, KafkaError) or error.fatal()


def copy_headers(headers, source_name: str, source_offset: int) -> list[tuple[str, bytes]]:
    """Headers of the copy: the record's own, with the origin headers set to its real origin."""
    kept = [
        (key, value)
        for key, value in (headers or [])
        if key not in (ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER)
    ]
    return kept + [
        (ORIGIN_CLUSTER_HEADER, source_name.encode()),
        (ORIGIN_OFFSET_HEADER, str(source_offset).encode()),
    ]


def is_copy_from(headers, cluster_name: str) -> bool:
    """True when the record's origin header says it was mirrored from ``cluster_name``."""
    expected = cluster_name.encode()
    return any(key == ORIGIN_CLUSTER_HEADER and value == expected for key, value in (headers or []))


class DataMirror:
    """Copies records one way. ``run()`` loops until ``stop`` is set; ``step()`` does one batch.

    Invariant: the consumer's position on each source partition is the committed position on the
    target plus the records of the one transaction in progress. Whenever a transaction fails, the
    position is read back from the target (after the transaction is resolved: aborted, or fenced
    by a new producer) and the consumer rewinds to it, so a batch is copied again exactly when its
    transaction did not count.

    ``stop`` ends waits for a cluster that does not answer (:class:`MirrorStopped`); the
    constructor already waits, so a mirror can start while its target is down.
    """

    def __init__(self, config: MirrorConfig, stop: threading.Event | None = None):
        self.config = config
        self.stats = MirrorStats()
        self._stop = stop or threading.Event()
        self._pattern = re.compile(config.topic_pattern)
        # Reconnect backoff from 1 s: with librdkafka's 100 ms a cluster that is down floods the
        # log with ~20 "Connection refused" lines a second per client (measured: 10x fewer).
        self._common = {
            "log_level": 3, "reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 5000,
            **config.extra_client_config,
        }
        self._source_admin = AdminClient({**config.source.settings(), **self._common})
        self._target_admin = AdminClient({**config.target.settings(), **self._common})
        # Partitions are assigned by the mirror itself (no group membership on the source), so
        # the group metadata sent with each transaction carries no generation to validate.
        self._consumer = Consumer(
            {
                **config.source.settings(),
                "group.id": config.group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                # librdkafka prefetches up to 64 MB by default; a source back from an outage with a
                # backlog filled that, and the process kept the memory (soak: 108 -> 160 MB RSS).
                # 500-record batches need far less read-ahead.
                "queued.max.messages.kbytes": 8192,
                "fetch.max.bytes": 8 * 1024 * 1024,
                **self._common,
            }
        )
        # Reads the mirror's own committed positions, which live on the target cluster. It only
        # reads: it never subscribes nor commits.
        self._position_reader = Consumer(
            {
                **config.target.settings(),
                "group.id": config.group_id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                **self._common,
            }
        )
        self._assigned: set[tuple[str, int]] = set()
        self._skip_topics: set[str] = set()
        self._next_refresh = 0.0
        self._next_wait_log = 0.0
        self._consumer_errors_logged: dict[str, float] = {}
        self._stuck_calls: list[threading.Thread] = []
        self._transaction_began = 0.0
        self._producer: Producer | None = None
        try:
            self._producer = self._ready_producer()  # fences any earlier instance of this mirror
        except BaseException:
            self.close()
            raise

    # -- the producer -----------------------------------------------------------------------
    def _new_producer(self) -> Producer:
        return Producer(
            {
                **self.config.target.settings(),
                "transactional.id": self.config.transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "transaction.timeout.ms": int(self.config.transaction_timeout_s * 1000),
                **self._common,
            }
        )

    def _ready_producer(self) -> Producer:
        """A new transactional producer whose ``init_transactions`` succeeded: that fences every
        earlier producer of this mirror and resolves its open transaction (committed if it was
        being committed, aborted otherwise). Waits, with backoff, while the target does not answer."""
        producer, since, attempt = None, time.monotonic(), 0
        while True:
            if self._stop.is_set():
                if producer is not None:
                    self._abandon(producer)
                raise MirrorStopped()
            if producer is None:
                producer = self._new_producer()
            try:
                timeout = self.config.call_timeout_s
                self._bounded("init_transactions", timeout, lambda: producer.init_transactions(timeout), stoppable=True)
                return producer
            except KafkaException as exc:
                if is_fatal(exc) or not (isinstance(exc.args[0], KafkaError) and exc.args[0].retriable()):
                    self._abandon(producer)  # a timed-out init may be retried; anything else may not
                    producer = None
                self._pause(f"starting a transactional producer on {self.config.target.name}", exc, since, attempt)
                attempt += 1

    def _abandon(self, producer: Producer) -> None:
        """Let go of a producer in any state, in bounded time, never raising: its queued records
        belong to a transaction that is (or will be) aborted."""
        try:
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(5)
        except Exception as exc:  # a producer in a fatal state may raise here; it is discarded anyway
            log.info("mirror %s: discarding a producer: %s", self.config.group_id, exc)

    # -- waiting ----------------------------------------------------------------------------
    def _pause(self, what: str, exc: BaseException, since: float, attempt: int) -> None:
        """Back off after a failed attempt, logging at most every WAIT_LOG_EVERY_S."""
        delay = min(self.config.max_backoff_s, 0.5 * 2**attempt)
        now = time.monotonic()
        if now >= self._next_wait_log:
            log.warning(
                "mirror %s: %s failing for %.0fs: %s; next try in %.1fs (this is logged every %.0fs at most)",
                self.config.group_id, what, now - since, exc, delay, WAIT_LOG_EVERY_S,
            )
            self._next_wait_log = now + WAIT_LOG_EVERY_S
        self._stop.wait(delay)

    def _retry(self, what: str, call) -> None:
        """``call()`` until it succeeds, pausing after each failure that waiting can cure."""
        since, attempt = time.monotonic(), 0
        while True:
            if self._stop.is_set():
                raise MirrorStopped()
            try:
                return call()
            except (KafkaException, concurrent.futures.TimeoutError) as exc:
                if isinstance(exc, KafkaException) and is_fatal(exc):
                    raise
                self._pause(what, exc, since, attempt)
                attempt += 1

    # -- assignment -------------------------------------------------------------------------
    def _source_topics(self) -> dict[str, int]:
        metadata = self._source_admin.list_topics(timeout=self.config.call_timeout_s)
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and self._pattern.match(name)
        }

    def _ensure_target_topics(self, wanted: dict[str, int]) -> dict[str, int]:
        """Create missing target topics with the source's partition count; drop mismatches."""
        listed = self._target_admin.list_topics(timeout=self.config.call_timeout_s).topics
        target = {n: len(t.partitions) for n, t in listed.items()}
        missing = [NewTopic(name, num_partitions=count) for name, count in wanted.items() if name not in target]
        if missing:
            timeout = self.config.call_timeout_s
            created = self._target_admin.create_topics(missing, request_timeout=timeout, operation_timeout=timeout)
            for name, future in created.items():
                try:
                    future.result(timeout=timeout + 5)
                    log.info("mirror %s created topic %s on %s", self.config.group_id, name, self.config.target.name)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
            target.update({t.topic: t.num_partitions for t in missing})
        usable = {}
        for name, count in wanted.items():
            if target.get(name, count) != count:
                if name not in self._skip_topics:
                    log.error(
                        "mirror %s: topic %s has %d partitions on %s but %d on %s; not mirrored "
                        "(a copy must keep its partition)",
                        self.config.group_id, name, count, self.config.source.name,
                        target[name], self.config.target.name,
                    )
                    self._skip_topics.add(name)
                    self.stats.mismatched_topics.append(name)
                continue
            usable[name] = count
        return usable

    def _committed_positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The committed position of each partition that has one. Raises when any partition's
        position could not be read: guessing "none" would copy the partition again from its start."""
        # A consumer's committed() rather than AdminClient.list_consumer_group_offsets: the admin
        # call can crash the process when a fresh broker answers NOT_COORDINATOR
        # (librdkafka#5040), while committed() retries. read_committed makes it wait for pending
        # transactional offsets (require-stable), so a restart sees the last committed batch.
        result = self._position_reader.committed(
            [TopicPartition(t, p) for t, p in partitions], timeout=self.config.call_timeout_s
        )
        failed = [tp for tp in result if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)
        return {(tp.topic, tp.partition): tp.offset for tp in result if tp.offset >= 0}

    def refresh_assignment(self) -> None:
        topics = self._ensure_target_topics(self._source_topics())
        new = sorted(
            (name, p) for name, count in topics.items() for p in range(count) if (name, p) not in self._assigned
        )
        if new:
            committed = self._committed_positions(new)
            self._consumer.incremental_assign(
                [TopicPartition(t, p, committed.get((t, p), OFFSET_BEGINNING)) for t, p in new]
            )
            self._assigned.update(new)
            log.info(
                "mirror %s assigned %d new partitions (%d resumed from committed positions)",
                self.config.group_id, len(new), len(committed),
            )
        self.stats.topics = len(topics)
        self.stats.partitions = len(self._assigned)

    def _rewind_to_committed(self) -> int:
        """Forget every partition's position: the next step assigns them again from their
        committed positions on the target, as a restarted mirror would (waiting while the target
        does not answer). Returns how many partitions were rewound."""
        partitions = len(self._assigned)
        self._assigned.clear()
        self._next_refresh = 0.0
        self._consumer.unassign()  # also drops what was fetched beyond the failed batch
        return partitions

    # -- copying ----------------------------------------------------------------------------
    def _produce(self, msg) -> None:
        ts_type, ts = msg.timestamp()
        kwargs = {"timestamp": ts} if ts_type != TIMESTAMP_NOT_AVAILABLE else {}
        deadline = time.monotonic() + self.config.call_timeout_s
        while True:
            try:
                self._producer.produce(
                    msg.topic(),
                    value=msg.value(),
                    key=msg.key(),
                    partition=msg.partition(),
                    headers=copy_headers(msg.headers(), self.config.source.name, msg.offset()),
                    **kwargs,
                )
                return
            except BufferError:
                if time.monotonic() > deadline:  # the target takes nothing: fail the transaction
                    raise KafkaException(KafkaError(KafkaError._QUEUE_FULL, "producer queue full"))
                self._producer.poll(0.05)  # local queue full: let deliveries drain

    def _records(self, messages) -> list:
        """The batch's records. Error events (a broker down, a reset position) are logged, at
        most once per WAIT_LOG_EVERY_S each, and skipped: the consumer recovers on its own."""
        records = []
        for msg in messages:
            error = msg.error()
            if error is None:
                records.append(msg)
                continue
            if error.fatal():
                raise KafkaException(error)
            key, now = error.str(), time.monotonic()
            if now >= self._consumer_errors_logged.get(key, 0.0):
                log.warning("mirror %s: source consumer: %s", self.config.group_id, error)
                self._consumer_errors_logged[key] = now + WAIT_LOG_EVERY_S
        return records

    def _copy_in_transaction(self, records) -> tuple[int, int]:
        positions: dict[tuple[str, int], int] = {}
        copied = skipped = 0
        self._transaction_began = time.monotonic()
        self._producer.begin_transaction()
        for msg in records:
            tp = (msg.topic(), msg.partition())
            positions[tp] = msg.offset() + 1
            if is_copy_from(msg.headers(), self.config.target.name):
                skipped += 1
                continue
            self._produce(msg)
            copied += 1
        offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
        metadata = self._consumer.consumer_group_metadata()
        producer, timeout = self._producer, self.config.call_timeout_s
        send_timeout = min(timeout, SEND_OFFSETS_TIMEOUT_S)
        self._bounded(
            "send_offsets_to_transaction", send_timeout,
            lambda: producer.send_offsets_to_transaction(offsets, metadata, send_timeout),
        )
        self._bounded("commit_transaction", timeout, lambda: producer.commit_transaction(timeout))
        return copied, skipped

    def _bounded(self, what: str, timeout_s: float, call, stoppable: bool = False) -> None:
        """``call()`` (a blocking call of the transactional producer) in a thread of its own, given
        up after ``timeout_s`` plus STUCK_MARGIN_S.

        librdkafka's send_offsets_to_transaction() can ignore its timeout and block for good when
        the group coordinator went away and came back (librdkafka#5456, #5511; seen here with a
        target broker killed and restarted). A call given up on raises :class:`StuckClientCall`, so
        its producer is replaced; its thread is left blocked (it keeps the old producer alive).
        ``stoppable``: the stop event ends the wait (:class:`MirrorStopped`), for calls that wait
        for a cluster to come back and change nothing while they wait."""
        self._stuck_calls = [t for t in self._stuck_calls if t.is_alive()]
        if len(self._stuck_calls) >= MAX_STUCK_CALLS:
            raise TooManyStuckCalls(f"{len(self._stuck_calls)} client calls never returned")
        outcome: list[BaseException] = []

        def attempt() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome.append(exc)

        thread = threading.Thread(target=attempt, name=f"mirror-{what}", daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout_s + STUCK_MARGIN_S
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.2)
            if stoppable and self._stop.is_set() and thread.is_alive():
                raise MirrorStopped()
        if thread.is_alive():
            self._stuck_calls.append(thread)
            raise StuckClientCall(f"{what} did not return within {timeout_s + STUCK_MARGIN_S:.0f}s")
        if outcome:
            raise outcome[0]

    def _recover(self, failure: KafkaException) -> None:
        """After a failed transaction: resolve it (abort, or a new producer when the producer is
        unusable or the abort fails), then rewind to the committed positions."""
        started = self._transaction_began  # the outage began at the latest with the failed transaction
        # Unassign first: an assigned consumer keeps fetching while the target is waited for, and
        # librdkafka holds each fetch response for its queued records (measured: +50 MB of RSS
        # over a 2-minute target outage at 2,000 partitions, never given back). The positions
        # are read back from the target only once the transaction is resolved (below).
        partitions = self._rewind_to_committed()
        if is_fatal(failure):
            action = "fatal error: new producer"
            self._replace_producer()
        else:
            try:
                producer, timeout = self._producer, self.config.call_timeout_s
                self._bounded("abort_transaction", timeout, lambda: producer.abort_transaction(timeout))
                self.stats.aborted_transactions += 1
                action = "transaction aborted"
            except KafkaException as exc:
                action = f"abort failed ({exc}): new producer"
                self._replace_producer()
        self._retry("reading committed positions", self.refresh_assignment)
        took = time.monotonic() - started
        self.stats.recoveries += 1
        self.stats.recovery_seconds.append(took)
        log.warning(
            "mirror %s recovered %.1fs after its failed transaction began: %s; %s; %d partitions resumed "
            "from committed positions on %s",
            self.config.group_id, took, failure, action, partitions, self.config.target.name,
        )

    def _replace_producer(self) -> None:
        old, self._producer = self._producer, None
        if old is not None:
            self._abandon(old)
        self._producer = self._ready_producer()
        self.stats.new_producers += 1

    def step(self) -> int:
        """Copy one batch in one transaction. Returns the number of source records copied or
        skipped (0 when the batch's transaction failed: it is read again from the committed position)."""
        now = time.monotonic()
        if now >= self._next_refresh:
            self.refresh_assignment()
            self._next_refresh = now + self.config.metadata_refresh_s
        if not self._assigned:
            self._stop.wait(self.config.poll_timeout_s)
            return 0
        records = self._records(self._consumer.consume(self.config.batch_size, self.config.poll_timeout_s))
        if not records:
            return 0
        try:
            copied, skipped = self._copy_in_transaction(records)
        except KafkaException as exc:
            self._recover(exc)
            return 0
        self.stats.copied += copied
        self.stats.skipped_loop += skipped
        self.stats.transactions += 1
        return len(records)

    def run(self, stop: threading.Event | None = None, report_every_s: float = 30.0) -> MirrorStats:
        """Copy until ``stop`` is set. A cluster that does not answer is waited for (with backoff)
        however long it takes. Only a fatal error of a consumer, or :class:`TooManyStuckCalls`, ends
        the loop, by raising (the process exits; ``bin/stack up``/``watch`` restarts it)."""
        if stop is not None:
            self._stop = stop
        stop = self._stop
        next_report = time.monotonic() + report_every_s
        since, attempt = None, 0
        try:
            while not stop.is_set():
                try:
                    self.step()
                    since, attempt = None, 0
                except MirrorStopped:
                    break
                except (KafkaException, concurrent.futures.TimeoutError) as exc:
                    if isinstance(exc, KafkaException) and is_fatal(exc):
                        raise
                    # e.g. a cluster down, or COORDINATOR_LOAD_IN_PROGRESS on a fresh one: nothing
                    # was committed, so waiting and trying again loses nothing.
                    since = since or time.monotonic()
                    self._pause("reading metadata and positions", exc, since, attempt)
                    attempt += 1
                if time.monotonic() >= next_report:
                    log.info("mirror %s: %s", self.config.group_id, self.stats.summary())
                    next_report = time.monotonic() + report_every_s
        finally:
            self.close()
        return self.stats

    def close(self) -> None:
        """Release the clients in bounded time; never raises (it runs on the way out of errors)."""
        for name, close in (
            ("consumer", self._consumer.close),
            ("position reader", self._position_reader.close),
            ("producer", lambda: self._producer is not None and self._producer.flush(5)),
        ):
            try:
                close()
            except Exception as exc:
                log.warning("mirror %s: closing the %s: %s", self.config.group_id, name, exc)


def _endpoint(text: str) -> MirrorEndpoint:
    return MirrorEndpoint(*cluster_address(text))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Mirror topics one way between two Kafka clusters.")
    parser.add_argument("--source", type=_endpoint, required=True, help="NAME=HOST:PORT, e.g. idc1=127.0.0.1:19092")
    parser.add_argument("--target", type=_endpoint, required=True, help="NAME=HOST:PORT")
    parser.add_argument("--topics", default=DEFAULT_TOPIC_PATTERN, help="regex of topics to mirror")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--instance", default="", help="name of this mirror when several copy one direction")
    add_login_argument(parser)
    args = parser.parse_args(argv)
    start_process_logging()
    stop = stop_on_signals()
    logins = login_configs(args.login)
    source, target = (MirrorEndpoint(e.name, e.bootstrap_servers, client_config=logins.get(e.name, {}))
                      for e in (args.source, args.target))
    config = MirrorConfig(
        source, target, topic_pattern=args.topics, batch_size=args.batch_size, instance=args.instance
    )
    try:
        mirror = DataMirror(config, stop)
    except MirrorStopped:
        return
    mirror.run(stop)


if __name__ == "__main__":
    main()
