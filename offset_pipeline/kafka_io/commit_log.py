"""A follower of one cluster's group-commit log (``__consumer_offsets``): a long-lived consumer of
every partition of it, whose records ``translation/group_commit_records.py`` decodes, so the sync
learns of a group's commit within milliseconds instead of at its next poll of every group.

* ``read_committed``: an offset commit of an aborted transaction (a transactional producer's
  ``send_offsets_to_transaction``) never counts; a committed one counts when its marker is written.
* Every record is counted by its kind (``offset_commit``, ``offset_deletion``, ``type_<n>`` for the
  other record types, ``unreadable``); only commits and deletions come out, never an exception.
* What keeps the log from being read (no Read right on the topic, the cluster away, a partition
  without a leader) is :attr:`FollowedBatch.error`, a reason: the caller polls the groups instead,
  for that cluster, and says why.
* Bounded: each :meth:`CommitLogFollower.poll` waits at most ``timeout_s`` and returns at most
  ``max_records`` records' facts; the consumer is closed by :meth:`CommitLogFollower.close`.

It reads the commits made since it began (what was committed before is the full listing's job),
found by their time, so none is missed while the log is still being created or a start is retried;
or, with ``from_beginning``, the whole log.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from offset_pipeline.translation.group_commit_records import (
    OffsetCommitRecord,
    OffsetDeletion,
    OtherRecord,
    parse_commit_log_record,
    record_kind,
)

COMMIT_LOG_TOPIC = "__consumer_offsets"
#: A follower reads the commits from this long before it began: a broker's clock may be behind this
#: host's (a commit read twice is translated twice, harmlessly; one missed would wait for a poll).
START_MARGIN_S = 10.0


@dataclass(frozen=True)
class FollowedCommit:
    """Group ``group`` committed ``offset`` on ``topic``/``partition`` of ``cluster`` at
    ``commit_time_ms``; ``offset`` None: the group's offset there was deleted (a tombstone)."""

    cluster: str
    group: str
    topic: str
    partition: int
    offset: int | None
    commit_time_ms: int | None
    log_partition: int
    log_offset: int


@dataclass(frozen=True)
class FollowedBatch:
    cluster: str
    commits: list[FollowedCommit] = field(default_factory=list)
    counts: Mapping[str, int] = field(default_factory=dict)  # records read by kind
    error: str | None = None  # why the log could not be read (then commits may be partial)
    # log partition -> the offset the follower reads next (past a transaction's marker once it has
    # reached the end); and how many partitions the log has (0 before the follower started)
    positions: Mapping[int, int] = field(default_factory=dict)
    partitions: int = 0
    follower_id: str = ""  # which follower read it: a new one may have missed what came between
    # groups with another record in the batch (a member joined or left, the group's state changed)
    group_records: list[str] = field(default_factory=list)


class CommitLogFollower:
    """Follows ``cluster``'s ``__consumer_offsets`` (see the module's docstring)."""

    def __init__(self, cluster: str, client_config: Mapping[str, Any], *, from_beginning: bool = False,
                 timeout_s: float = 10.0):
        self.cluster = cluster
        self.follower_id = uuid.uuid4().hex
        self._consumer = Consumer({
            **client_config,
            "group.id": f"offset-pipeline-commit-log-{self.follower_id}",  # never joins, never commits
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            # (fetch.wait.max.ms stays at its 500 ms: a broker answers a fetch as soon as one record is
            # there, so a commit is not delayed by it; a shorter wait only costs idle fetches)
            "enable.partition.eof": True,  # the end's offset: past a last marker, which is no record
        })
        self._started = False
        self._positions: dict[int, int] = {}
        # the commits since this moment (less a margin for the brokers' clocks), or all of them
        self._since_ms = None if from_beginning else int((time.time() - START_MARGIN_S) * 1000)
        self._timeout_s = timeout_s
        self.start_error: str | None = None

    def _start(self) -> str | None:
        try:
            metadata = self._consumer.list_topics(COMMIT_LOG_TOPIC, timeout=self._timeout_s)
        except KafkaException as exc:
            return f"{self.cluster} did not list {COMMIT_LOG_TOPIC}: {exc.args[0]}"
        topic = metadata.topics.get(COMMIT_LOG_TOPIC)
        if topic is None or topic.error is not None or not topic.partitions:
            why = topic.error if topic is not None and topic.error is not None else "no partitions"
            return f"{self.cluster} gave no {COMMIT_LOG_TOPIC} to read ({why})"
        partitions = sorted(topic.partitions)
        if self._since_ms is None:
            self._consumer.assign([TopicPartition(COMMIT_LOG_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
            self._positions = {p: 0 for p in partitions}
            self._started = True
            return None
        # Where the commits since the follower began start, in two batched lookups: the ends first,
        # then the first record at or after ``since``; a partition without one starts at the end read
        # before, so a commit appended between the two lookups is not missed (neither is one made
        # while the log was being created, or before this start was retried).
        try:
            ends = self._consumer.offsets_for_times(
                [TopicPartition(COMMIT_LOG_TOPIC, p, OFFSET_END) for p in partitions], timeout=self._timeout_s)
            since = self._consumer.offsets_for_times(
                [TopicPartition(COMMIT_LOG_TOPIC, p, self._since_ms) for p in partitions], timeout=self._timeout_s)
        except KafkaException as exc:
            return f"{self.cluster} did not give the positions of {COMMIT_LOG_TOPIC}: {exc.args[0]}"
        failed = [tp for tp in ends + since if tp.error is not None] + [tp for tp in ends if tp.offset < 0]
        if failed:
            return (f"{self.cluster} did not give the positions of {COMMIT_LOG_TOPIC} partition "
                    f"{failed[0].partition}: {failed[0].error or 'no end'}")
        start = [TopicPartition(COMMIT_LOG_TOPIC, e.partition, s.offset if s.offset >= 0 else e.offset)
                 for e, s in zip(ends, since)]
        self._consumer.assign(start)
        self._positions = {tp.partition: tp.offset for tp in start}
        self._started = True
        return None

    def ends(self) -> dict[int, int]:
        """Each log partition's end as a read_committed reader sees it (its last stable offset), now:
        once :attr:`FollowedBatch.positions` are there, every commit made before this call was read."""
        if not self._started:
            raise RuntimeError(f"the follower of {self.cluster} has not started: {self.start_error}")
        ends = self._consumer.offsets_for_times(
            [TopicPartition(COMMIT_LOG_TOPIC, p, OFFSET_END) for p in sorted(self._positions)], timeout=self._timeout_s)
        failed = [tp for tp in ends if tp.error is not None or tp.offset < 0]
        if failed:
            raise RuntimeError(f"{self.cluster} did not give the end of {COMMIT_LOG_TOPIC} partition "
                               f"{failed[0].partition}: {failed[0].error or 'no end'}")
        return {tp.partition: tp.offset for tp in ends}

    def poll(self, max_records: int = 10_000, timeout_s: float = 0.5) -> FollowedBatch:
        """The commits that arrived since the last poll (waiting at most ``timeout_s`` for the first)."""
        if not self._started:
            self.start_error = self._start()
            if self.start_error:
                return FollowedBatch(self.cluster, error=self.start_error, follower_id=self.follower_id)
        counts: Counter = Counter()
        commits: list[FollowedCommit] = []
        groups: list[str] = []
        errors: list[str] = []
        deadline = time.monotonic() + timeout_s
        while len(commits) < max_records:
            wait = max(0.0, deadline - time.monotonic()) if not commits and not counts else 0.0
            try:
                # What has arrived, at once; when nothing has, wait for the first record alone: a batch
                # consume waits out its whole timeout for a full batch, which delayed each commit by
                # a quarter of a second on average
                messages = self._consumer.consume(min(500, max_records - len(commits)), timeout=0)
                if not messages and wait > 0:
                    first = self._consumer.poll(wait)
                    messages = [first] if first is not None else []
            except KafkaException as exc:
                errors.append(str(exc.args[0]))
                break
            if not messages:
                break
            for message in messages:
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        self._positions[message.partition()] = max(message.offset(),
                                                                   self._positions.get(message.partition(), 0))
                    else:
                        errors.append(message.error().str())
                    continue
                self._positions[message.partition()] = message.offset() + 1
                record = parse_commit_log_record(message.key(), message.value())
                counts[record_kind(record)] += 1
                followed = _followed(self.cluster, record, message.partition(), message.offset())
                if followed is not None:
                    commits.append(followed)
                elif isinstance(record, OtherRecord) and record.group is not None:
                    groups.append(record.group)
            if time.monotonic() >= deadline:
                break
        error = f"{self.cluster} {COMMIT_LOG_TOPIC}: {'; '.join(sorted(set(errors)))}" if errors else None
        return FollowedBatch(self.cluster, commits, dict(counts), error, dict(self._positions), len(self._positions),
                             self.follower_id, groups)

    def close(self) -> None:
        try:
            self._consumer.close()
        except RuntimeError:  # closed already
            pass


def _followed(cluster: str, record, log_partition: int, log_offset: int) -> FollowedCommit | None:
    if isinstance(record, OffsetCommitRecord):
        return FollowedCommit(cluster, record.group, record.topic, record.partition, record.offset,
                              record.commit_timestamp_ms, log_partition, log_offset)
    if isinstance(record, OffsetDeletion):
        return FollowedCommit(cluster, record.group, record.topic, record.partition, None, None, log_partition,
                              log_offset)
    return None


# -- in a child process of the run (kafka_io/isolated.py): one follower per cluster, kept between calls

_FOLLOWERS: dict[str, CommitLogFollower] = {}


def follow(cluster: str, client_config: Mapping[str, Any], max_records: int, timeout_s: float,
           kafka_timeout_s: float = 10.0) -> FollowedBatch:
    """The next batch of ``cluster``'s follower in this process (started at the first call: the
    commits since then, less the start margin). A batch with an error keeps the follower; the caller
    decides whether to go on or :func:`stop_following`."""
    follower = _FOLLOWERS.get(cluster)
    if follower is None:
        follower = _FOLLOWERS[cluster] = CommitLogFollower(cluster, client_config, timeout_s=kafka_timeout_s)
    return follower.poll(max_records, timeout_s)


def followed_ends(cluster: str) -> dict[int, int]:
    """:meth:`CommitLogFollower.ends` of ``cluster``'s follower in this process."""
    follower = _FOLLOWERS.get(cluster)
    if follower is None:
        raise RuntimeError(f"no follower of {cluster} in this process")
    return follower.ends()


def stop_following(cluster: str) -> None:
    follower = _FOLLOWERS.pop(cluster, None)
    if follower is not None:
        follower.close()
