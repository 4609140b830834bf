"""Consumer groups that consume and commit on their active cluster (docs/concepts/problem.md).

Each :class:`GroupRunner` is a real group member (``subscribe``) on its group's active cluster. It
reads with ``isolation.level=read_committed``, processes each record (counts it and, when asked,
appends its id to a JSONL file), and commits offsets itself, synchronously, every
``commit_every_records`` records or every ``commit_interval_s`` seconds, on a partition revoke and
on a clean stop. Auto-commit is off.

What is committed is the consumer's *position* for each assigned partition: the offset after the
last record handed to the application, moved further past transaction markers and aborted
records the consumer has skipped (as the Java consumer does). A group that has read everything
therefore commits the log end offset (the last stable offset for a topic with transactions),
and a committed offset may point at a marker or at the end of the log, exactly the cases the
offset sync must handle (docs/concepts/no-loss.md).

The processed-ids file (one JSON object per line: group, cluster, topic, partition, offset, id,
timestamp) is written line-buffered *before* the offsets covering it are committed, so after a
crash or a failover it holds at least every committed record: trials count lost records (ids
produced but never processed) and duplicates (ids processed twice) exactly.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from devstack.cli import (
    add_login_argument,
    cluster_address,
    login_configs,
    start_process_logging,
    stop_on_signals,
)

log = logging.getLogger("offset_pipeline.consumers")


@dataclass(frozen=True)
class ConsumerGroupSpec:
    group_id: str
    active_cluster: str
    topics: tuple[str, ...]
    commit_every_records: int = 100
    commit_interval_s: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        if not self.group_id:
            raise ValueError("a group needs a group_id")
        if not self.topics:
            raise ValueError(f"group {self.group_id}: no topics")
        if self.commit_every_records < 1:
            raise ValueError(f"group {self.group_id}: commit_every_records must be >= 1")
        if self.commit_interval_s <= 0:
            raise ValueError(f"group {self.group_id}: commit_interval_s must be > 0")


def default_groups(prefix: str = "") -> tuple[ConsumerGroupSpec, ...]:
    """The stack's groups, over the topics of :func:`~devstack.traffic.default_plan`.

    Group ids and topic names both get ``prefix``. Every topic has a reader; groups are active on
    both clusters, on the producing side of one-way topics and on the copy side.
    """
    p = prefix
    return (
        # The two-way topic, read on either side.
        ConsumerGroupSpec(f"{p}billing", "idc1", (f"{p}orders",)),
        ConsumerGroupSpec(f"{p}analytics", "idc2", (f"{p}orders",), commit_every_records=50, commit_interval_s=3.0),
        # One-way topics from idc1, read on idc1; one group reads two topics.
        ConsumerGroupSpec(f"{p}settlement", "idc1", (f"{p}payments.batch",), commit_every_records=20),
        ConsumerGroupSpec(f"{p}sessionizer", "idc1", (f"{p}clicks.late", f"{p}shipments")),
        # A one-way topic from idc1 read from its copies on idc2.
        ConsumerGroupSpec(f"{p}tracking", "idc2", (f"{p}shipments",), commit_every_records=25),
        # The one-way topic from idc2: read on idc2, and from its copies on idc1.
        ConsumerGroupSpec(f"{p}stock", "idc2", (f"{p}inventory",)),
        ConsumerGroupSpec(f"{p}reporting", "idc1", (f"{p}inventory",), commit_interval_s=10.0),
        # Transactions: read_committed over aborted records and markers.
        ConsumerGroupSpec(f"{p}ledger", "idc1", (f"{p}ledger.tx",), commit_every_records=10),
        # Low traffic: one record a minute.
        ConsumerGroupSpec(f"{p}auditor", "idc1", (f"{p}audit.low",), commit_every_records=1, commit_interval_s=5.0),
    )


def processed_file_name(group_id: str) -> str:
    """A file name for a group's processed ids (group ids may hold any character)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", group_id)
    return f"{safe}.jsonl"


def record_id(value: bytes | None) -> str | None:
    """The traffic generator's unique id from a record value, or None for foreign records."""
    if not value:
        return None
    try:
        decoded = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded.get("id") if isinstance(decoded, dict) else None


class GroupRunner:
    """One member of ``spec.group_id`` on ``bootstrap`` (the group's active cluster).

    ``run(stop)`` may be called again after it returns (a fresh member each time);
    :attr:`processed` and :attr:`commits` keep counting across runs.
    """

    def __init__(
        self,
        spec: ConsumerGroupSpec,
        bootstrap: str,
        processed_path: Path | None = None,
        *,
        poll_timeout_s: float = 0.2,
        client_config: Mapping[str, object] | None = None,
        on_commit: Callable[[list[tuple[str, int, int]], float], None] | None = None,
    ):
        self.spec = spec
        # called after each commit with its (topic, partition, offset) that landed and the wall time
        # the commit call started (benchmarks: the committed offsets' exact history, not a poll's)
        self.on_commit = on_commit
        self.bootstrap = bootstrap
        self.processed_path = Path(processed_path) if processed_path else None
        self.poll_timeout_s = poll_timeout_s
        self._client_config = dict(client_config or {})
        self.processed = 0
        self.commits = 0
        self.commit_errors = 0
        self._consumer: Consumer | None = None
        self._last_committed: dict[tuple[str, int], int] = {}
        self._next_offset: dict[tuple[str, int], int] = {}  # last processed offset + 1
        self._since_commit = 0
        self._last_commit_time = time.monotonic()
        self._out = None

    @property
    def label(self) -> str:
        return f"{self.spec.group_id}@{self.spec.active_cluster}"

    def _config(self) -> dict[str, object]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.spec.group_id,
            "client.id": f"offset-pipeline-consumer.{self.spec.group_id}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            # Notice topics created after the group started within seconds, not minutes.
            "topic.metadata.refresh.interval.ms": 10000,
            "log_level": 3,
            **self._client_config,
        }

    # -- committing ---------------------------------------------------------------------------
    def _commit(self, partitions: list[TopicPartition] | None = None) -> bool:
        """Commit, for ``partitions`` (default: the whole assignment), the offset after the last
        record processed, where it moved.

        Not ``consumer.position()``: with transaction markers in the log librdkafka's position can
        run ahead of the records handed to the application (librdkafka#3400), and committing it
        would skip records never processed."""
        consumer = self._consumer
        if consumer is None:
            return False
        try:
            partitions = consumer.assignment() if partitions is None else partitions
        except KafkaException as exc:
            log.warning("%s: reading the assignment failed: %s", self.label, exc)
            return False
        if not partitions:
            return True
        moved = [
            TopicPartition(tp.topic, tp.partition, self._next_offset[(tp.topic, tp.partition)])
            for tp in partitions
            if (tp.topic, tp.partition) in self._next_offset
            and self._last_committed.get((tp.topic, tp.partition)) != self._next_offset[(tp.topic, tp.partition)]
        ]
        self._since_commit = 0
        self._last_commit_time = time.monotonic()
        if not moved:
            return True
        started = time.time()
        try:
            result = consumer.commit(offsets=moved, asynchronous=False)
        except KafkaException as exc:
            self.commit_errors += 1
            log.warning("%s: commit failed (will retry): %s", self.label, exc)
            return False
        ok = True
        for tp in result or moved:
            if tp.error is not None:
                ok = False
                self.commit_errors += 1
                log.warning("%s: commit of %s[%d] failed: %s", self.label, tp.topic, tp.partition, tp.error)
            else:
                self._last_committed[(tp.topic, tp.partition)] = tp.offset
        self.commits += 1
        if self.on_commit is not None:
            self.on_commit([(tp.topic, tp.partition, tp.offset) for tp in result or moved if tp.error is None], started)
        return ok

    def _on_assign(self, consumer, partitions) -> None:
        log.info("%s: assigned %s", self.label, _describe(partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        self._commit(partitions)  # hand over exactly what was processed
        for tp in partitions:
            self._last_committed.pop((tp.topic, tp.partition), None)
            self._next_offset.pop((tp.topic, tp.partition), None)
        log.info("%s: revoked %s", self.label, _describe(partitions))

    def _on_lost(self, consumer, partitions) -> None:
        for tp in partitions:
            self._last_committed.pop((tp.topic, tp.partition), None)
            self._next_offset.pop((tp.topic, tp.partition), None)
        log.warning("%s: lost %s (not committed)", self.label, _describe(partitions))

    # -- processing ---------------------------------------------------------------------------
    def _process(self, msg) -> None:
        if self._out is not None:
            self._out.write(
                json.dumps(
                    {
                        "group": self.spec.group_id, "cluster": self.spec.active_cluster,
                        "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                        "id": record_id(msg.value()), "timestamp": msg.timestamp()[1],
                    },
                    separators=(",", ":"),
                )
                + "\n"
            )
        self._next_offset[(msg.topic(), msg.partition())] = msg.offset() + 1
        self.processed += 1
        self._since_commit += 1

    def run(self, stop: threading.Event) -> None:
        """Consume and commit until ``stop`` is set; then commit what was processed and leave."""
        if self.processed_path is not None:
            self.processed_path.parent.mkdir(parents=True, exist_ok=True)
            self._out = open(self.processed_path, "a", buffering=1)  # line-buffered: one write per record
        self._consumer = consumer = Consumer(self._config())
        self._last_committed.clear()
        self._next_offset.clear()
        self._since_commit = 0
        self._last_commit_time = time.monotonic()
        clean = False
        try:
            consumer.subscribe(
                list(self.spec.topics), on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
            while not stop.is_set():
                msg = consumer.poll(self.poll_timeout_s)
                if msg is not None:
                    error = msg.error()
                    if error is None:
                        self._process(msg)
                    elif error.fatal():
                        raise KafkaException(error)
                    elif error.code() != KafkaError._PARTITION_EOF:
                        # A topic not created yet, a broker away for a moment: librdkafka retries.
                        log.debug("%s: %s", self.label, error)
                if (
                    self._since_commit >= self.spec.commit_every_records
                    or time.monotonic() - self._last_commit_time >= self.spec.commit_interval_s
                ):
                    self._commit()
            clean = True
        finally:
            try:
                if clean:
                    self._commit()
                consumer.close()  # leaves the group (its revoke callback commits as well)
            finally:
                self._consumer = None
                if self._out is not None:
                    self._out.close()
                    self._out = None


def _describe(partitions) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"


def _supervise(runner: GroupRunner, stop: threading.Event, restart_after_s: float = 5.0) -> None:
    """Run a group until ``stop``; a member that fails is logged and started again."""
    while not stop.is_set():
        try:
            runner.run(stop)
        except Exception:  # keep the other groups and this one going
            log.exception("%s failed; restarting in %.0fs", runner.label, restart_after_s)
            stop.wait(restart_after_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.consumers",
        description="Run the default consumer groups, each on its active cluster, until SIGTERM.",
    )
    parser.add_argument("--bootstrap", type=cluster_address, action="append", required=True,
                        help="NAME=HOST:PORT, once per cluster (idc1=127.0.0.1:19092)")
    parser.add_argument("--prefix", default="", help="prepended to every group id and topic name")
    parser.add_argument("--processed-dir", type=Path, default=None,
                        help="append each group's processed record ids to DIR/<group>.jsonl")
    parser.add_argument("--report-every", type=float, default=30.0, help="seconds between summary lines")
    add_login_argument(parser)
    args = parser.parse_args(argv)
    start_process_logging()

    stop = stop_on_signals()
    bootstraps = dict(args.bootstrap)
    logins = login_configs(args.login)
    groups = default_groups(args.prefix)
    missing = sorted({g.active_cluster for g in groups} - set(bootstraps))
    if missing:
        log.error("no --bootstrap given for %s", ", ".join(missing))
        return 2
    runners = [
        GroupRunner(
            spec, bootstraps[spec.active_cluster],
            args.processed_dir / processed_file_name(spec.group_id) if args.processed_dir else None,
            client_config=logins.get(spec.active_cluster),
        )
        for spec in groups
    ]
    threads = [
        threading.Thread(target=_supervise, args=(runner, stop), name=runner.spec.group_id, daemon=True)
        for runner in runners
    ]
    for thread in threads:
        thread.start()
    log.info("consumers started: %s", ", ".join(r.label for r in runners))
    next_report = time.monotonic() + args.report_every
    while not stop.wait(0.5):
        if time.monotonic() >= next_report:
            log.info("consumers: %s", " ".join(f"{r.label}={r.processed}" for r in runners))
            next_report = time.monotonic() + args.report_every
    for thread in threads:
        thread.join(timeout=60)
    log.info("consumers stopped: %s", " ".join(f"{r.label}={r.processed}/{r.commits} commits" for r in runners))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
