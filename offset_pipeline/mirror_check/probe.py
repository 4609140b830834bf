"""The mirror check: read both clusters' recent records and offset syncs, and judge every topic
and direction with :func:`~offset_pipeline.mirror_check.rules.mirror_verdict`.

Reads go through ``kafka_io`` (bounded; a cluster that cannot be read makes its directions
``cluster_unreadable``, an unreadable offset-syncs topic makes its flow ``offset_syncs_unreadable``);
this module only composes them. Both clusters are read at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from offset_pipeline.kafka_io.mirror_evidence import ClusterEvidence, read_cluster_evidence
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


class SyncPair(Protocol):
    topic: str
    partition: int


#: ``(cluster access, offset-syncs topic, timeout) -> (its pairs, why it could not be read or "")``
PairsReader = Callable[[ClusterAccess, str, float], tuple[Iterable[SyncPair], str]]


def flow_pairs(syncs_topic: str, pairs: Iterable[SyncPair], problem: str) -> FlowPairs:
    partitions: dict[str, set[int]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for pair in pairs:
        partitions[pair.topic].add(pair.partition)
        counts[pair.topic] += 1
    return FlowPairs(syncs_topic, {t: frozenset(p) for t, p in partitions.items()}, dict(counts), problem)


def check_mirrors(
    clusters: tuple[ClusterAccess, ClusterAccess], read_pairs: PairsReader, *, topics: list[str] | None = None,
    per_partition: int = 10, timeout_s: float = 10.0,
) -> list[MirrorVerdict]:
    """One verdict per topic and direction (the group's active -> standby), sorted by topic."""
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
    flows = _offset_syncs(evidence, by_name, names, read_pairs, timeout_s)

    verdicts = []
    for topic in sorted(set().union(*(e.topics for e in evidence.values())) | (wanted or set())):
        for active, standby in (names, names[::-1]):
            on_active = evidence[active]
            if not on_active.error and topic not in on_active.topic_names:
                continue  # no group reads it there
            verdicts.append(mirror_verdict(_switch_evidence(topic, active, standby, evidence, flows)))
    return verdicts


def _switch_evidence(topic: str, active: str, standby: str, evidence: dict[str, ClusterEvidence],
                     flows: dict[tuple[str, str], list[FlowPairs]]) -> SwitchEvidence:
    problems = [e.error for e in (evidence[active], evidence[standby]) if e.error]
    problems += [t.error for e in (evidence[active], evidence[standby]) if (t := e.topics.get(topic)) and t.error]
    if problems:
        return SwitchEvidence(topic, active, standby, unreadable_reason="; ".join(problems))
    on_standby = evidence[standby]
    renamed = tuple(n for n in sorted(on_standby.topic_names) if n == f"{active}.{topic}")
    syncs = flows.get((active, standby), [])
    readable = [f for f in syncs if not f.problem]
    return SwitchEvidence(
        topic, active, standby,
        ClusterTopic(True, origin_counts(evidence[active].topics[topic].origins, standby)),
        ClusterTopic(topic in on_standby.topic_names,
                     origin_counts(on_standby.topics[topic].origins, active) if topic in on_standby.topics else
                     origin_counts((), active), renamed),
        OffsetSyncEvidence(
            readable=len(readable) == len(syncs), problem="; ".join(f.problem for f in syncs if f.problem),
            syncs_topics=tuple(f.syncs_topic for f in syncs),
            pairs_for_topic=sum(f.pairs.get(topic, 0) for f in readable),
            partitions_with_pairs=len(set().union(*(f.partitions.get(topic, frozenset()) for f in readable))),
        ),
    )


def _offset_syncs(evidence: dict[str, ClusterEvidence], by_name: dict[str, ClusterAccess], names: tuple[str, str],
                  read_pairs: PairsReader, timeout_s: float) -> dict[tuple[str, str], list[FlowPairs]]:
    flows: dict[tuple[str, str], list[FlowPairs]] = defaultdict(list)
    for listed_on, cluster in evidence.items():
        for topic in sorted(cluster.topic_names):
            flow = offset_syncs_flow(listed_on, topic, names)
            if flow is not None:
                flows[flow].append(flow_pairs(topic, *read_pairs(by_name[listed_on], topic, timeout_s)))
    return flows
