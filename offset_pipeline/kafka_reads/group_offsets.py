"""Read one cluster's consumer groups, committed offsets and log ranges as plain data.

This is the snapshot's Kafka side: every call goes through an ``AdminClient`` built by
:class:`~offset_pipeline.resources.kafka.KafkaClusterResource`, and everything returned is a frozen
dataclass, ready to be written to ClickHouse. Group ids may hold any character; they are passed
through untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

# Groups the pipeline itself or Kafka tooling creates: never synced unless included explicitly.
DEFAULT_GROUP_EXCLUDE = r"^(offset-pipeline-|console-consumer-|connect-|__)"


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


@dataclass(frozen=True)
class PartitionRange:
    cluster: str
    topic: str
    partition: int
    log_start: int
    log_end: int  # high watermark
    last_stable: int  # the end a read_committed reader sees


def _result(future, timeout_s: float):
    return future.result(timeout=timeout_s)


def read_groups(admin: AdminClient, cluster: str, groups: GroupFilter, timeout_s: float = 15.0) -> list[GroupState]:
    listing = _result(admin.list_consumer_groups(request_timeout=timeout_s), timeout_s)
    ids = sorted(g.group_id for g in listing.valid if groups.matches(g.group_id))
    if not ids:
        return []
    descriptions = {
        gid: _result(f, timeout_s) for gid, f in admin.describe_consumer_groups(ids, request_timeout=timeout_s).items()
    }
    states = []
    for gid in ids:
        # One request per group: the admin API takes one group per offsets request.
        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)], request_timeout=timeout_s)[gid]
        committed = {
            (tp.topic, tp.partition): tp.offset for tp in _result(future, timeout_s).topic_partitions if tp.offset >= 0
        }
        description = descriptions[gid]
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


def read_partition_ranges(
    admin: AdminClient, cluster: str, partitions: list[tuple[str, int]], timeout_s: float = 15.0
) -> list[PartitionRange]:
    if not partitions:
        return []

    def offsets(spec: OffsetSpec, isolation: IsolationLevel) -> dict[tuple[str, int], int]:
        request = {TopicPartition(t, p): spec for t, p in partitions}
        futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=timeout_s)
        return {(tp.topic, tp.partition): _result(f, timeout_s).offset for tp, f in futures.items()}

    start = offsets(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    end = offsets(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    stable = offsets(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    return [
        PartitionRange(cluster, t, p, start[(t, p)], end[(t, p)], stable[(t, p)]) for t, p in sorted(partitions)
    ]


def topic_partition_counts(admin: AdminClient, timeout_s: float = 15.0) -> dict[str, int]:
    metadata = admin.list_topics(timeout=timeout_s)
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def topic_timestamp_types(admin: AdminClient, topics: list[str], timeout_s: float = 15.0) -> dict[str, str]:
    """topic -> ``CreateTime`` or ``LogAppendTime`` (``message.timestamp.type``), for the topics
    that exist. One describe request for all of them: the timestamp search needs CreateTime on
    the standby (DESIGN.md §4.2)."""
    if not topics:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
    out: dict[str, str] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
        try:
            entries = future.result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue  # the snapshot reports the topic missing
            raise
        entry = entries.get("message.timestamp.type")
        if entry is not None and entry.value:
            out[resource.name] = entry.value
    return out
