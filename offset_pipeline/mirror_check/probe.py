"""The mirror check: read both clusters' recent records and offset syncs, and judge every topic
and direction with :func:`~offset_pipeline.mirror_check.rules.mirror_verdict`.

Reads go through ``kafka_io`` (bounded; a cluster that cannot be read makes its directions
``cluster_unreadable``, an unreadable offset-syncs topic makes its flow ``offset_syncs_unreadable``);
this module only composes them. Both clusters are read at once.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from offset_pipeline.kafka_io.mirror_evidence import ClusterEvidence, read_cluster_evidence
from offset_pipeline.kafka_io.offset_syncs import OffsetSyncsRead, read_offset_syncs
from offset_pipeline.mirror_check.rules import (
    ClusterTopic,
    MirrorVerdict,
    OffsetSyncEvidence,
    SwitchEvidence,
    is_workload_topic,
    mirror_verdict,
    offset_syncs_flow,
    origin_counts,
)
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.translation.shape import TopicShape


@dataclass(frozen=True)
class ClusterAccess:
    """How to reach one cluster: its name (as the mirror writes it) and librdkafka settings."""

    name: str
    admin_config: dict[str, Any]
    client_config: dict[str, Any]


@dataclass(frozen=True)
class FlowPairs:
    """The pairs one offset-syncs topic holds, per mirrored topic: partitions and pair count."""

    syncs_topic: str
    partitions: dict[str, frozenset[int]]
    pairs: dict[str, int]
    problem: str = ""  # why the topic could not be read (then the rest is empty)


def flow_pairs(read: OffsetSyncsRead) -> FlowPairs:
    """Per mirrored topic: the partitions with pairs and the number of pairs, of one read."""
    partitions: dict[str, set[int]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for (topic, partition), pairs in read.pairs.items():
        partitions[topic].add(partition)
        counts[topic] += len(pairs)
    return FlowPairs(read.topic, {t: frozenset(p) for t, p in partitions.items()}, dict(counts), read.unreadable or "")


def check_mirrors(
    clusters: tuple[ClusterAccess, ClusterAccess], *, topics: list[str] | None = None,
    shapes: dict[str, TopicShape] | None = None, per_partition: int = 10, timeout_s: float = 10.0,
    syncs_topics: list[OffsetSyncsTopic] = (),
) -> list[MirrorVerdict]:
    """One verdict per topic and direction (the group's active -> standby), sorted by topic.
    ``shapes``: the configured topic shapes (what says a topic without origin headers is one-way);
    ``syncs_topics``: offset-syncs topics configured for the sync (``OFFSET_PIPELINE_OFFSET_SYNCS``),
    read besides those found by MirrorMaker 2's naming."""
    names = (clusters[0].name, clusters[1].name)
    wanted = set(topics) if topics else None

    def read(pair: tuple[ClusterAccess, ClusterAccess]) -> ClusterEvidence:
        access, peer = pair
        return read_cluster_evidence(
            access.admin_config, access.client_config, access.name, peer.name,
            lambda t: (t in wanted) if wanted is not None else is_workload_topic(t),
            per_partition=per_partition, timeout_s=timeout_s,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        evidence = dict(zip(names, pool.map(read, [(clusters[0], clusters[1]), (clusters[1], clusters[0])])))
    by_name = {c.name: c for c in clusters}
    flows = _offset_syncs(evidence, by_name, names, timeout_s, syncs_topics)

    verdicts = []
    for topic in sorted(set().union(*(e.topics for e in evidence.values())) | (wanted or set())):
        for active, standby in (names, names[::-1]):
            on_active = evidence[active]
            if not on_active.error and topic not in on_active.topic_names:
                continue  # no group reads it there
            verdicts.append(mirror_verdict(_switch_evidence(topic, active, standby, evidence, flows,
                                                            (shapes or {}).get(topic))))
    return verdicts


def _switch_evidence(topic: str, active: str, standby: str, evidence: dict[str, ClusterEvidence],
                     flows: dict[tuple[str, str], list[FlowPairs]], shape: TopicShape | None) -> SwitchEvidence:
    problems = [e.error for e in (evidence[active], evidence[standby]) if e.error]
    problems += [t.error for e in (evidence[active], evidence[standby]) if (t := e.topics.get(topic)) and t.error]
    if problems:
        return SwitchEvidence(topic, active, standby, unreadable_reason="; ".join(problems))
    on_standby = evidence[standby]
    renamed = tuple(n for n in sorted(on_standby.topic_names) if n == f"{active}.{topic}")
    return SwitchEvidence(
        topic, active, standby,
        ClusterTopic(True, origin_counts(evidence[active].topics[topic].origins, standby)),
        ClusterTopic(topic in on_standby.topic_names,
                     origin_counts(on_standby.topics[topic].origins, active) if topic in on_standby.topics else
                     origin_counts((), active), renamed),
        _sync_evidence(topic, flows.get((active, standby), [])),
        shape=shape,
        reverse_offset_syncs=_sync_evidence(topic, flows.get((standby, active), [])),
    )


def _sync_evidence(topic: str, flows: list[FlowPairs]) -> OffsetSyncEvidence:
    readable = [f for f in flows if not f.problem]
    return OffsetSyncEvidence(
        readable=len(readable) == len(flows), problem="; ".join(f.problem for f in flows if f.problem),
        syncs_topics=tuple(f.syncs_topic for f in flows),
        pairs_for_topic=sum(f.pairs.get(topic, 0) for f in readable),
        partitions_with_pairs=len(set().union(*(f.partitions.get(topic, frozenset()) for f in readable))),
    )


def _offset_syncs(evidence: dict[str, ClusterEvidence], by_name: dict[str, ClusterAccess], names: tuple[str, str],
                  timeout_s: float, configured: list[OffsetSyncsTopic]) -> dict[tuple[str, str], list[FlowPairs]]:
    wanted = {(listed_on, topic): flow for listed_on, cluster in evidence.items() for topic in cluster.topic_names
              if (flow := offset_syncs_flow(listed_on, topic, names)) is not None}
    wanted.update({(c.stored_on, c.topic): (c.source, c.target) for c in configured})
    flows: dict[tuple[str, str], list[FlowPairs]] = defaultdict(list)
    for (stored_on, topic), flow in sorted(wanted.items()):
        read = read_offset_syncs(by_name[stored_on].client_config, stored_on, topic, timeout_s=timeout_s)
        flows[flow].append(flow_pairs(read))
    return flows
