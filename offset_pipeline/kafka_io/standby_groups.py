"""Re-read one consumer group's live state on one cluster, just before the commit step writes to it.

* **Members**: ``AdminClient.describe_consumer_groups`` (a group that never existed reads as state
  ``DEAD`` with no members, or ``GROUP_ID_NOT_FOUND``: 0 members either way).
* **Committed offsets**: ``Consumer.committed()`` of a consumer with the group's id that never
  subscribes, so it never joins the group. Not ``AdminClient.list_consumer_group_offsets`` in a
  process that must survive: it can crash the process on ``NOT_COORDINATOR`` (librdkafka#5040). The
  sync's commit step runs its calls in a child process per cluster (``kafka_io/group_io.py``), where
  such a crash costs one cycle's calls; there the admin client reads them (``offsets_via_admin``),
  one request per group instead of a consumer started per group.

Everything returned is plain data. Coordinator errors right after a group or cluster appears
(``NOT_COORDINATOR``, ``COORDINATOR_LOAD_IN_PROGRESS``, ``COORDINATOR_NOT_AVAILABLE``) are retried
until ``timeout_s``; any other error, and a cluster that does not answer in time, raises
``KafkaException``/``TimeoutError`` for the caller to record against the group. Group ids may hold
any character; they are passed through untouched.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from offset_pipeline.kafka_io.thread_pools import shared_pool

TP = tuple[str, int]
OFFSET_READ_THREADS = 32  # a cycle's groups re-read at once (parallel_groups), with room to spare
T = TypeVar("T")

_COORDINATOR_SETTLING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}
#: Errors that say the cluster (not the group) is unreachable or too slow.
UNREACHABLE_ERRORS = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._WAIT_COORD,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
}


def cluster_unreachable(exc: BaseException) -> bool:
    """The error says the cluster did not answer (so other groups on it will not get answers either)."""
    if isinstance(exc, (TimeoutError, concurrent.futures.TimeoutError)):
        return True
    if not isinstance(exc, KafkaException) or not exc.args or not hasattr(exc.args[0], "code"):
        return False
    return exc.args[0].code() in UNREACHABLE_ERRORS


@dataclass(frozen=True)
class GroupMembers:
    cluster: str
    group_id: str
    state: str  # as the broker reports it: STABLE, EMPTY, DEAD, ...; ABSENT for GROUP_ID_NOT_FOUND
    member_count: int


@dataclass(frozen=True)
class LiveGroupState:
    """A group's members and committed offsets on one cluster (partitions without a committed
    offset are absent from ``committed``)."""

    cluster: str
    group_id: str
    state: str
    member_count: int
    committed: dict[TP, int] = field(default_factory=dict)


def _settled(call: Callable[[], T], deadline: float) -> T:
    while True:
        try:
            return call()
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code not in _COORDINATOR_SETTLING or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def group_client_config(cluster, group_id: str, timeout_s: float) -> dict[str, Any]:
    """Settings for a consumer that reads and commits ``group_id``'s offsets and never subscribes.

    ``session.timeout.ms`` has no group effect for a consumer that never joins; librdkafka uses it
    to bound how long a synchronous commit waits for the group coordinator (45 s by default), so it
    is set to the call's timeout.
    """
    return cluster.consumer_config(
        group_id,
        **{"enable.auto.offset.store": False, "session.timeout.ms": max(1000, int(timeout_s * 1000))},
    )


def read_group_members(cluster, group_id: str, *, timeout_s: float = 10.0,
                       admin: AdminClient | None = None) -> GroupMembers:
    """Member count and state of ``group_id`` on ``cluster`` (a :class:`KafkaClusterResource`)."""
    admin = admin if admin is not None else cluster.admin()
    deadline = time.monotonic() + timeout_s

    def describe():
        remaining = max(1.0, deadline - time.monotonic())
        future = admin.describe_consumer_groups([group_id], request_timeout=remaining)[group_id]
        return future.result(timeout=remaining + 1.0)

    try:
        description = _settled(describe, deadline)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return GroupMembers(cluster.cluster_name, group_id, "ABSENT", 0)
        raise
    state = description.state
    return GroupMembers(
        cluster.cluster_name, group_id, str(getattr(state, "name", state)), len(description.members or ()),
    )


def read_committed_offsets(consumer: Consumer, partitions: Iterable[TP], *, timeout_s: float = 10.0) -> dict[TP, int]:
    """The committed offsets of ``consumer``'s group for ``partitions`` (absent: none committed).
    Raises ``KafkaException`` for a partition the broker answered with an error."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    deadline = time.monotonic() + timeout_s
    answer = _settled(
        lambda: consumer.committed(
            [TopicPartition(t, p) for t, p in wanted], timeout=max(1.0, deadline - time.monotonic())
        ),
        deadline,
    )
    out: dict[TP, int] = {}
    for tp in answer:
        if tp.error is not None:
            raise KafkaException(tp.error)
        if tp.offset >= 0:
            out[(tp.topic, tp.partition)] = tp.offset
    return out


def read_group_offsets(admin: AdminClient, group_id: str, partitions: Iterable[TP], *,
                       timeout_s: float = 10.0) -> dict[TP, int]:
    """The committed offsets of ``group_id`` for ``partitions`` (absent: none committed), with the
    admin client: one OffsetFetch request, no consumer to start per group (the continuous mode asks
    this of every group it commits, every second). Raises ``KafkaException`` for a partition the
    broker answered with an error. Only in a child process of its own (``kafka_io/group_io.py``):
    librdkafka can abort the process here on ``NOT_COORDINATOR`` (librdkafka#5040), which then costs
    that child's calls of one cycle."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    deadline = time.monotonic() + timeout_s

    def fetch():
        remaining = max(1.0, deadline - time.monotonic())
        request = [ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p) for t, p in wanted])]
        return admin.list_consumer_group_offsets(request, request_timeout=remaining)[group_id].result(
            timeout=remaining + 1.0)

    out: dict[TP, int] = {}
    for tp in _settled(fetch, deadline).topic_partitions:
        if tp.error is not None:
            raise KafkaException(tp.error)
        if tp.offset >= 0:
            out[(tp.topic, tp.partition)] = tp.offset
    return out


def read_live_group_state(cluster, group_id: str, partitions: Iterable[TP], *, timeout_s: float = 10.0,
                          admin: AdminClient | None = None, offsets_via_admin: bool = False) -> LiveGroupState:
    """Members and committed offsets of ``group_id`` on ``cluster``. ``offsets_via_admin``: read the
    offsets with the admin client (:func:`read_group_offsets`), only in a child process of its own,
    alongside the members' request; otherwise with a consumer of the group, after it."""
    if offsets_via_admin:
        admin = admin if admin is not None else cluster.admin()
        # Both requests in flight at once (the continuous mode asks this before every commit): each
        # is a snapshot taken before the commit, whichever the broker answers first.
        offsets = shared_pool("group-offsets", OFFSET_READ_THREADS).submit(
            read_group_offsets, admin, group_id, partitions, timeout_s=timeout_s)
        members = read_group_members(cluster, group_id, timeout_s=timeout_s, admin=admin)
        committed = offsets.result()
        return LiveGroupState(cluster.cluster_name, group_id, members.state, members.member_count, committed)
    members = read_group_members(cluster, group_id, timeout_s=timeout_s, admin=admin)
    consumer = Consumer(group_client_config(cluster, group_id, timeout_s))
    try:
        committed = read_committed_offsets(consumer, partitions, timeout_s=timeout_s)
    finally:
        consumer.close()
    return LiveGroupState(cluster.cluster_name, group_id, members.state, members.member_count, committed)
