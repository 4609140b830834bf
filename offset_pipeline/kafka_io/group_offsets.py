"""Read one cluster's consumer groups, committed offsets and log ranges as plain data.

This is the snapshot's Kafka side: every call goes through an ``AdminClient`` built by
:class:`~offset_pipeline.resources.kafka.KafkaClusterResource`, and everything returned is a frozen
dataclass, ready to be written to ClickHouse. Group ids may hold any character; they are passed
through untouched.

Failures are kept as small as the request that failed (one bad group must not cost the others their
cycle): a cluster that cannot list its groups raises (the caller names the whole cluster unavailable),
but one group whose description or offsets cannot be read becomes that group's ``read_error`` (state
``UNREADABLE``), and one partition whose log range cannot be read becomes that partition's entry in
``errors``. Every wait is bounded by one deadline per call, so a cluster that stops answering costs
one timeout, not one per request.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

# Groups the pipeline itself or Kafka tooling creates: never synced unless included explicitly.
DEFAULT_GROUP_EXCLUDE = r"^(offset-pipeline-|console-consumer-|connect-|__)"

#: The state of a group whose description or offsets could not be read (``GroupState.read_error``).
UNREADABLE_GROUP_STATE = "UNREADABLE"


@dataclass(frozen=True)
class GroupFilter:
    include: str = ".*"
    exclude: str = DEFAULT_GROUP_EXCLUDE

    def matches(self, group_id: str) -> bool:
        return re.search(self.include, group_id) is not None and (
            not self.exclude or re.search(self.exclude, group_id) is None
        )


@dataclass(frozen=True)
class GroupState:
    cluster: str
    group_id: str
    state: str  # STABLE, EMPTY, PREPARING_REBALANCE, DEAD, ... as the broker reports it
    member_count: int
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    read_error: str = ""  # why this group's facts on this cluster are unknown ('' when read)


@dataclass(frozen=True)
class PartitionRange:
    cluster: str
    topic: str
    partition: int
    log_start: int
    log_end: int  # high watermark
    last_stable: int  # the end a read_committed reader sees


class Deadline:
    """One time budget shared by the waits of a call: after the first request times out, the
    others (failed by the same outage) are collected without waiting again."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._end = time.monotonic() + timeout_s

    def left(self) -> float:
        # A small floor: futures already resolved (with a result or an error) return at once.
        return max(0.05, self._end - time.monotonic())

    def result(self, future):
        return future.result(timeout=self.left())


def describe_error(exc: BaseException) -> str:
    """A one-line reason for a failed Kafka call (a timeout of ours says so)."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return "TimeoutError: no answer in time"
    return f"{type(exc).__name__}: {exc}"


def read_groups(admin: AdminClient, cluster: str, groups: GroupFilter, timeout_s: float = 15.0) -> list[GroupState]:
    """Every matching group's state, members and committed offsets. Listing the groups failing
    raises (the cluster is unavailable); a group that cannot be described or whose offsets cannot
    be read is returned with ``read_error`` and state ``UNREADABLE``."""
    deadline = Deadline(timeout_s)
    listing = deadline.result(admin.list_consumer_groups(request_timeout=timeout_s))
    if listing.errors and not listing.valid:
        # No broker answered the listing (a wrong CA or password, all brokers down): the cluster is
        # unreadable, not empty. (Some brokers answering: their groups are read; the others' groups
        # miss this cycle, as when a coordinator is down.)
        first = listing.errors[0]
        raise first if isinstance(first, BaseException) else KafkaException(first)
    ids = sorted(g.group_id for g in listing.valid if groups.matches(g.group_id))
    return _described_groups(admin, cluster, ids, deadline, timeout_s)


def read_named_groups(admin: AdminClient, cluster: str, group_ids: list[str], timeout_s: float = 15.0) -> list[GroupState]:
    """:func:`read_groups` for ``group_ids`` only, without listing every group (the groups a
    commit-log follower saw change). A group the cluster does not have (state DEAD, no offset) is left
    out, as a listing leaves it out; one that cannot be read is returned with ``read_error``."""
    states = _described_groups(admin, cluster, sorted(set(group_ids)), Deadline(timeout_s), timeout_s)
    absent = lambda g: ("GROUP_ID_NOT_FOUND" in g.read_error if g.read_error
                        else not g.committed and g.state.upper() == "DEAD")
    return [g for g in states if not absent(g)]


def _described_groups(admin: AdminClient, cluster: str, ids: list[str], deadline: Deadline,
                      timeout_s: float) -> list[GroupState]:
    if not ids:
        return []
    described = admin.describe_consumer_groups(ids, request_timeout=timeout_s)
    # One request per group (the admin API takes one group per offsets request), all in flight at once.
    offset_futures = {
        gid: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)], request_timeout=timeout_s)[gid]
        for gid in ids
    }
    states = []
    for gid in ids:
        try:
            description = deadline.result(described[gid])
            committed = {
                (tp.topic, tp.partition): tp.offset
                for tp in deadline.result(offset_futures[gid]).topic_partitions
                if tp.offset >= 0
            }
        except Exception as exc:  # noqa: BLE001 - this group's facts are unknown; the others' are not
            states.append(GroupState(cluster, gid, UNREADABLE_GROUP_STATE, 0, {}, read_error=describe_error(exc)))
            continue
        states.append(
            GroupState(
                cluster=cluster,
                group_id=gid,
                state=str(description.state.name if hasattr(description.state, "name") else description.state),
                member_count=len(description.members),
                committed=committed,
            )
        )
    return states


def refused_groups(admin: AdminClient, group_ids: list[str], timeout_s: float = 15.0) -> dict[str, str]:
    """Of ``group_ids`` (groups not in this cluster's listing), those the broker refuses to describe:
    group id -> the error. The listing answers only with the groups the principal may describe, so
    a group it may not is invisible there, not absent; a group that is simply absent is described
    (state DEAD) and left out, as is one whose description fails otherwise."""
    if not group_ids:
        return {}
    deadline = Deadline(timeout_s)
    out = {}
    for gid, future in admin.describe_consumer_groups(sorted(group_ids), request_timeout=timeout_s).items():
        try:
            deadline.result(future)
        except KafkaException as exc:
            # Any other failure is no refusal: the group stays absent, as it was before this check.
            if exc.args and exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                out[gid] = describe_error(exc)
        except TimeoutError:
            continue
    return out


def read_partition_ranges(
    admin: AdminClient,
    cluster: str,
    partitions: list[tuple[str, int]],
    timeout_s: float = 15.0,
    errors: dict[tuple[str, int], str] | None = None,
) -> list[PartitionRange]:
    """Log start, end and last stable offset of each partition. Without ``errors`` any failure
    raises; with it, a partition whose offsets cannot be read is left out and its reason put in
    ``errors`` (the others are returned)."""
    if not partitions:
        return []
    deadline = Deadline(timeout_s)
    failed: dict[tuple[str, int], str] = {}
    request = [TopicPartition(t, p) for t, p in partitions]
    # The three requests go out at once (each is one round trip per leader): a cycle waits for one,
    # not three in a row.
    asked = [admin.list_offsets({tp: spec for tp in request}, isolation_level=isolation, request_timeout=timeout_s)
             for spec, isolation in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                                     (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
                                     (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED))]

    def offsets(futures) -> dict[tuple[str, int], int]:
        out = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = deadline.result(future).offset
            except Exception as exc:  # noqa: BLE001 - raised below unless the caller collects errors
                if errors is None:
                    raise
                failed.setdefault((tp.topic, tp.partition), describe_error(exc))
        return out

    start, end, stable = (offsets(futures) for futures in asked)
    if errors is not None:
        errors.update(failed)
    return [
        PartitionRange(cluster, t, p, start[(t, p)], end[(t, p)], stable[(t, p)])
        for t, p in sorted(partitions)
        if (t, p) not in failed
    ]


def topic_partition_counts(admin: AdminClient, timeout_s: float = 15.0) -> dict[str, int]:
    """topic -> partition count, from one metadata request (raises when the cluster does not answer)."""
    metadata = admin.list_topics(timeout=timeout_s)
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def topic_timestamp_types(admin: AdminClient, topics: list[str], timeout_s: float = 15.0) -> dict[str, str]:
    """topic -> ``CreateTime`` or ``LogAppendTime`` (``message.timestamp.type``), for the topics
    that exist. One describe request for all of them: the timestamp search needs CreateTime on
    the standby (docs/concepts/strategies.md)."""
    if not topics:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
    deadline = Deadline(timeout_s)
    out: dict[str, str] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
        try:
            entries = deadline.result(future)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue  # the snapshot reports the topic missing
            raise
        entry = entries.get("message.timestamp.type")
        if entry is not None and entry.value:
            out[resource.name] = entry.value
    return out
