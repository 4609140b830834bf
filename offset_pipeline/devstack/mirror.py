"""The data mirror: copies every matching topic from one cluster to the other (DESIGN.md §1).

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

Any ``IDC``/``Offset`` headers a producer wrote itself (for example a third cluster's name) are
replaced on the copy: the copy's origin headers always describe the record's real origin.
"""

from __future__ import annotations

import argparse
import logging
import re
import threading
import time
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

from offset_pipeline.devstack.cli import cluster_address, start_process_logging, stop_on_signals

ORIGIN_CLUSTER_HEADER = "IDC"
ORIGIN_OFFSET_HEADER = "Offset"
DEFAULT_TOPIC_PATTERN = r"^(?!__)(?!_)(?!offset-pipeline\.).*"

log = logging.getLogger("offset_pipeline.mirror")


@dataclass(frozen=True)
class MirrorEndpoint:
    name: str
    bootstrap_servers: str


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


def is_fatal(exc: KafkaException) -> bool:
    """A fatal client error (fenced by a newer instance, broken producer): the mirror must stop.
    Anything else leaves the transaction abortable and the batch safe to retry."""
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
    """Copies records one way. ``run()`` loops until ``stop`` is set; ``step()`` does one batch."""

    def __init__(self, config: MirrorConfig):
        self.config = config
        self.stats = MirrorStats()
        self._pattern = re.compile(config.topic_pattern)
        common = {"log_level": 3, **config.extra_client_config}
        self._source_admin = AdminClient({"bootstrap.servers": config.source.bootstrap_servers, **common})
        self._target_admin = AdminClient({"bootstrap.servers": config.target.bootstrap_servers, **common})
        # Partitions are assigned by the mirror itself (no group membership on the source), so
        # the group metadata sent with each transaction carries no generation to validate.
        self._consumer = Consumer(
            {
                "bootstrap.servers": config.source.bootstrap_servers,
                "group.id": config.group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                **common,
            }
        )
        # Reads the mirror's own committed positions, which live on the target cluster. It only
        # reads: it never subscribes nor commits.
        self._position_reader = Consumer(
            {
                "bootstrap.servers": config.target.bootstrap_servers,
                "group.id": config.group_id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                **common,
            }
        )
        self._producer = Producer(
            {
                "bootstrap.servers": config.target.bootstrap_servers,
                "transactional.id": config.transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "transaction.timeout.ms": 60000,
                **common,
            }
        )
        self._producer.init_transactions(60)  # fences any earlier instance of this mirror
        self._assigned: set[tuple[str, int]] = set()
        self._skip_topics: set[str] = set()
        self._next_refresh = 0.0

    # -- assignment -------------------------------------------------------------------------
    def _source_topics(self) -> dict[str, int]:
        metadata = self._source_admin.list_topics(timeout=10)
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and self._pattern.match(name)
        }

    def _ensure_target_topics(self, wanted: dict[str, int]) -> dict[str, int]:
        """Create missing target topics with the source's partition count; drop mismatches."""
        target = {n: len(t.partitions) for n, t in self._target_admin.list_topics(timeout=10).topics.items()}
        missing = [NewTopic(name, num_partitions=count) for name, count in wanted.items() if name not in target]
        if missing:
            for name, future in self._target_admin.create_topics(missing).items():
                try:
                    future.result()
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
        # A consumer's committed() rather than AdminClient.list_consumer_group_offsets: the admin
        # call can crash the process when a fresh broker answers NOT_COORDINATOR
        # (librdkafka#5040), while committed() retries. read_committed makes it wait for pending
        # transactional offsets (require-stable), so a restart sees the last committed batch.
        result = self._position_reader.committed([TopicPartition(t, p) for t, p in partitions], timeout=60)
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

    # -- copying ----------------------------------------------------------------------------
    def _produce(self, msg) -> None:
        ts_type, ts = msg.timestamp()
        kwargs = {"timestamp": ts} if ts_type != TIMESTAMP_NOT_AVAILABLE else {}
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
                self._producer.poll(0.05)  # local queue full: let deliveries drain

    def step(self) -> int:
        """Copy one batch in one transaction. Returns the number of source records consumed."""
        now = time.monotonic()
        if now >= self._next_refresh:
            self.refresh_assignment()
            self._next_refresh = now + self.config.metadata_refresh_s
        if not self._assigned:
            time.sleep(self.config.poll_timeout_s)
            return 0
        messages = self._consumer.consume(self.config.batch_size, self.config.poll_timeout_s)
        if not messages:
            return 0
        first: dict[tuple[str, int], int] = {}
        positions: dict[tuple[str, int], int] = {}
        self._producer.begin_transaction()
        try:
            copied = skipped = 0
            for msg in messages:
                if msg.error():
                    raise KafkaException(msg.error())
                tp = (msg.topic(), msg.partition())
                first.setdefault(tp, msg.offset())
                positions[tp] = msg.offset() + 1
                if is_copy_from(msg.headers(), self.config.target.name):
                    skipped += 1
                    continue
                self._produce(msg)
                copied += 1
            self._producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in positions.items()],
                self._consumer.consumer_group_metadata(),
                30,
            )
            self._producer.commit_transaction(60)
        except KafkaException as exc:
            if is_fatal(exc):
                raise
            log.warning("mirror %s: aborting a transaction: %s", self.config.group_id, exc)
            self._producer.abort_transaction(60)
            self.stats.aborted_transactions += 1
            # Rewind to the batch's first records: nothing of it was committed.
            for (t, p), offset in first.items():
                self._consumer.seek(TopicPartition(t, p, offset))
            return 0
        self.stats.copied += copied
        self.stats.skipped_loop += skipped
        self.stats.transactions += 1
        return len(messages)

    def run(self, stop: threading.Event | None = None, report_every_s: float = 30.0) -> MirrorStats:
        stop = stop or threading.Event()
        next_report = time.monotonic() + report_every_s
        try:
            while not stop.is_set():
                try:
                    self.step()
                except KafkaException as exc:
                    if is_fatal(exc):
                        raise
                    # e.g. COORDINATOR_LOAD_IN_PROGRESS on a fresh cluster: nothing was
                    # committed, so waiting and trying again loses nothing.
                    log.warning("mirror %s: %s; retrying", self.config.group_id, exc)
                    stop.wait(1.0)
                if time.monotonic() >= next_report:
                    log.info("mirror %s: %s", self.config.group_id, self.stats)
                    next_report = time.monotonic() + report_every_s
        finally:
            self.close()
        return self.stats

    def close(self) -> None:
        self._consumer.close()
        self._position_reader.close()
        self._producer.flush(10)


def _endpoint(text: str) -> MirrorEndpoint:
    return MirrorEndpoint(*cluster_address(text))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Mirror topics one way between two Kafka clusters.")
    parser.add_argument("--source", type=_endpoint, required=True, help="NAME=HOST:PORT, e.g. idc1=127.0.0.1:19092")
    parser.add_argument("--target", type=_endpoint, required=True, help="NAME=HOST:PORT")
    parser.add_argument("--topics", default=DEFAULT_TOPIC_PATTERN, help="regex of topics to mirror")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--instance", default="", help="name of this mirror when several copy one direction")
    args = parser.parse_args(argv)
    start_process_logging()
    stop = stop_on_signals()
    config = MirrorConfig(
        args.source, args.target, topic_pattern=args.topics, batch_size=args.batch_size, instance=args.instance
    )
    DataMirror(config).run(stop)


if __name__ == "__main__":
    main()
