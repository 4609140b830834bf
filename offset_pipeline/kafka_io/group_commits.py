"""Write a standby group's offsets: ONE synchronous ``Consumer.commit`` per group, then re-read them.

The consumer has the group's id and never subscribes (it never joins the group). Kafka handles one
OffsetCommit request as one batch, so whatever happens every partition ends at its old offset or at
the new one (docs/concepts/no-loss.md, the commit guard). The broker itself refuses a non-member
commit to a group that has live members (``UNKNOWN_MEMBER_ID``): that comes back as an error, never as
a crash.

What was applied is read back, not assumed: confluent-kafka raises for the whole call when one
partition fails (say a topic missing on the standby) even though the broker applied the others.
So after the call the group's committed offsets are re-read, and a partition counts as applied
when the re-read shows the requested offset (when the re-read itself fails, the commit response
decides).

In the sync's commit step (a child process per cluster, ``kafka_io/group_io.py``) the same request
goes through the child's admin client instead (``admin``: AlterConsumerGroupOffsets is an
OffsetCommit with no member, refused alike for a group with live members), and is re-read with
one OffsetFetch: no consumer started per group and cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import concurrent.futures
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from offset_pipeline.kafka_io.standby_groups import (
    TP,
    group_client_config,
    read_committed_offsets,
    read_group_offsets,
)


@dataclass(frozen=True)
class PartitionWrite:
    """One partition of a group commit: what was asked, whether it landed, why not."""

    topic: str
    partition: int
    requested: int
    applied: bool
    error: str | None  # the broker's or the call's error for this partition, None when it succeeded
    committed_after: int | None  # re-read after the call (None: no committed offset, or the re-read failed)


@dataclass(frozen=True)
class GroupCommitWrite:
    """What one commit call did to one group on one cluster."""

    cluster: str
    group_id: str
    partitions: tuple[PartitionWrite, ...]
    committed_after: dict[TP, int]  # every re-read partition with a committed offset
    call_error: str | None = None  # the commit call raised (some partitions may still have landed)
    reread_error: str | None = None  # the re-read after the call failed

    @property
    def applied(self) -> dict[TP, int]:
        return {(w.topic, w.partition): w.requested for w in self.partitions if w.applied}

    @property
    def errors(self) -> dict[TP, str]:
        return {(w.topic, w.partition): w.error for w in self.partitions if w.error is not None}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
        error = exc.args[0]
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


def commit_group_offsets(
    cluster,
    group_id: str,
    offsets: Mapping[TP, int],
    *,
    reread: Iterable[TP] = (),
    timeout_s: float = 10.0,
    admin: AdminClient | None = None,
) -> GroupCommitWrite:
    """Commit ``offsets`` for ``group_id`` on ``cluster`` (a :class:`KafkaClusterResource`) in ONE
    synchronous call, then re-read the committed offsets of those partitions and of ``reread``.

    Never raises for Kafka errors: they come back per partition (``error``) and as ``call_error`` /
    ``reread_error``. Raises ValueError when ``offsets`` is empty (a caller bug: nothing to write).
    ``admin``: commit and re-read with this admin client instead of a consumer started for the group
    (one request each; only in a child process of its own, see ``standby_groups.read_group_offsets``).
    """
    if not offsets:
        raise ValueError(f"nothing to commit for group {group_id!r}")
    requested = dict(sorted(offsets.items()))
    if admin is not None:
        response, call_error, after, reread_error = _commit_with_admin(admin, group_id, requested, reread, timeout_s)
        return _write(cluster, group_id, requested, response, call_error, after, reread_error)
    consumer = Consumer(group_client_config(cluster, group_id, timeout_s))
    response: dict[TP, str | None] = {}
    call_error = reread_error = None
    after: dict[TP, int] | None = None
    try:
        try:
            answer = consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in requested.items()], asynchronous=False
            )
            for tp in answer or ():
                response[(tp.topic, tp.partition)] = None if tp.error is None else _describe(KafkaException(tp.error))
        except KafkaException as exc:
            call_error = _describe(exc)
        try:
            after = read_committed_offsets(consumer, set(requested) | set(reread), timeout_s=timeout_s)
        except (KafkaException, TimeoutError) as exc:
            reread_error = _describe(exc)
    finally:
        consumer.close()
    return _write(cluster, group_id, requested, response, call_error, after, reread_error)


def _commit_with_admin(admin: AdminClient, group_id: str, requested: dict[TP, int], reread: Iterable[TP],
                       timeout_s: float) -> tuple[dict[TP, str | None], str | None, dict[TP, int] | None, str | None]:
    """The one OffsetCommit request through the admin client (AlterConsumerGroupOffsets: the same
    request a non-member consumer sends, refused alike for a group with live members), then the
    re-read (OffsetFetch)."""
    response: dict[TP, str | None] = {}
    call_error = reread_error = None
    after: dict[TP, int] | None = None
    deadline = time.monotonic() + timeout_s
    request = [ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for (t, p), o in requested.items()])]
    try:
        answer = admin.alter_consumer_group_offsets(request, request_timeout=timeout_s)[group_id].result(
            timeout=timeout_s + 1.0)
        for tp in answer.topic_partitions or ():
            response[(tp.topic, tp.partition)] = None if tp.error is None else _describe(KafkaException(tp.error))
    except (KafkaException, TimeoutError, concurrent.futures.TimeoutError) as exc:
        call_error = _describe(exc)
    try:
        after = read_group_offsets(admin, group_id, set(requested) | set(reread),
                                   timeout_s=max(1.0, deadline - time.monotonic()))
    except (KafkaException, TimeoutError, concurrent.futures.TimeoutError) as exc:
        reread_error = _describe(exc)
    return response, call_error, after, reread_error


def _write(cluster, group_id: str, requested: dict[TP, int], response: dict[TP, str | None], call_error: str | None,
           after: dict[TP, int] | None, reread_error: str | None) -> GroupCommitWrite:
    writes = []
    for (topic, partition), offset in requested.items():
        reported = response.get((topic, partition)) or call_error
        if after is not None:  # the re-read is the truth
            committed = after.get((topic, partition))
            applied = committed == offset
            error = None if applied else reported or f"re-read shows {committed} after committing {offset}"
        else:
            committed = None
            applied = reported is None
            error = reported
        writes.append(PartitionWrite(topic, partition, offset, applied, error, committed))
    return GroupCommitWrite(
        cluster=cluster.cluster_name, group_id=group_id, partitions=tuple(writes), committed_after=dict(after or {}),
        call_error=call_error, reread_error=reread_error,
    )
