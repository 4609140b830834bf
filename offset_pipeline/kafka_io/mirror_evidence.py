"""What one cluster's recent records say about where they came from: the mirror check's reads.

For every topic the caller picks from the cluster's listing, the newest ``per_partition``
committed records of up to ``max_partitions`` partitions are read and their origin headers parsed
(``translation/headers.py``). Plain data out; a cluster that cannot be listed comes back with its
error text instead of topics, and a topic whose records cannot be read with its own error, so one
refused topic never hides the others. Every call is bounded by ``timeout_s``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from offset_pipeline.kafka_io.header_sample import read_origins, sample_consumer
from offset_pipeline.translation.headers import Origin


@dataclass(frozen=True)
class TopicOrigins:
    topic: str
    partitions: int
    origins: tuple[Origin, ...] = ()  # of the records read, newest per partition
    error: str = ""  # why the records could not be read


@dataclass(frozen=True)
class ClusterEvidence:
    cluster: str
    topic_names: frozenset[str] = frozenset()  # every topic the cluster lists
    topics: dict[str, TopicOrigins] = field(default_factory=dict)  # the ones read
    error: str = ""  # why the cluster could not be listed


def read_cluster_evidence(
    admin_config: dict[str, Any], client_config: dict[str, Any], cluster: str, peer: str,
    sample: Callable[[str], bool], *, per_partition: int = 10, max_partitions: int = 4, timeout_s: float = 10.0,
) -> ClusterEvidence:
    """Origins of the newest records of the topics ``sample`` picks on ``cluster`` (module
    docstring); the names of every topic listed come back too (renamed copies, offset-syncs topics)."""
    admin = AdminClient({**admin_config, "log_level": 3})
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        return ClusterEvidence(cluster, error=f"listing the topics of {cluster} failed: {exc}")
    names = frozenset(metadata.topics)
    consumer: Consumer = sample_consumer({**client_config, "log_level": 3})
    try:
        read = {}
        for topic in sorted(t for t in names if sample(t)):
            meta = metadata.topics[topic]
            if meta.error is not None:
                read[topic] = TopicOrigins(topic, 0, error=f"{meta.error.str()}")
                continue
            read[topic] = _topic_origins(consumer, cluster, peer, topic, sorted(meta.partitions), per_partition,
                                         max_partitions, timeout_s)
        return ClusterEvidence(cluster, names, read)
    finally:
        consumer.close()


def _topic_origins(consumer: Consumer, cluster: str, peer: str, topic: str, partitions: list[int],
                   per_partition: int, max_partitions: int, timeout_s: float) -> TopicOrigins:
    origins: list[Origin] = []
    try:
        for partition in partitions[:max_partitions]:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
            origins += read_origins(consumer, cluster, peer, topic, partition, low, high, per_partition, timeout_s)
    except (KafkaException, TimeoutError) as exc:
        return TopicOrigins(topic, len(partitions), tuple(origins), error=str(exc))
    return TopicOrigins(topic, len(partitions), tuple(origins))
