"""The shape-detection part of the translation step: sample, store, decide (I/O around the pure
``sync/shape_detection.py``).

Each cycle, for topics of the snapshot without a configured shape: sample the newest records of one
partition per topic on both clusters (bounded per cycle), append the origin counts to
``topic_shape_observations``, and decide every unconfigured topic's shape from the evidence of the
horizon. A sampling error is that topic's problem only: it is reported, the topic keeps the
evidence it had, and an unknown shape means header anchors only (always safe).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from offset_pipeline.kafka_io.header_sample import sample_consumer, sample_origins
from offset_pipeline.sync.shape_detection import detect_shapes, partition_to_sample, topics_to_sample
from offset_pipeline.storage import shape_observations
from offset_pipeline.storage.shape_observations import ShapeObservationRow
from offset_pipeline.translation.shape import ShapeKind, TopicShape


@dataclass(frozen=True)
class ShapeSettings:
    topics_per_cycle: int = 20
    records_per_sample: int = 50
    horizon_s: float = 24 * 3600.0
    min_evidence: int = 20
    timeout_s: float = 10.0


@dataclass
class ShapeStep:
    shapes: dict[str, TopicShape] = field(default_factory=dict)  # every unconfigured topic: detected or unknown
    sampled: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def detected(self) -> dict[str, str]:
        """topic -> shape string, for the topics the evidence decided."""
        return {t: s.value for t, s in self.shapes.items() if s.kind is not ShapeKind.UNKNOWN}


def sample_and_detect(
    client, snapshot_id: str, now_ms: int, snapshot_rows: Iterable[tuple], configured: Mapping[str, str],
    clusters: tuple[str, str], confs: Mapping[str, Mapping[str, Any]], settings: ShapeSettings = ShapeSettings(),
) -> ShapeStep:
    """``snapshot_rows`` in ``sync/work.SNAPSHOT_COLUMNS`` order."""
    ranges: dict[tuple[str, int, str], tuple[int, int]] = {}
    for cluster, _g, _m, topic, partition, _c, present, log_start, log_end, *_ in snapshot_rows:
        if present and log_start is not None and log_end is not None:
            ranges[(topic, int(partition), cluster)] = (int(log_start), int(log_end))
    on_both: dict[str, set[int]] = {}
    for topic, partition, _cluster in ranges:
        if topic not in configured and all((topic, partition, c) in ranges for c in clusters):
            on_both.setdefault(topic, set()).add(partition)
    unconfigured = sorted({t for t, _, _ in ranges} - set(configured))
    step = ShapeStep()
    if not unconfigured:
        return step
    shape_observations.ensure_table(client)

    chosen = topics_to_sample(on_both, shape_observations.last_sampled(client, sorted(on_both)),
                              settings.topics_per_cycle)
    rows: list[ShapeObservationRow] = []
    consumers = {}
    try:
        for topic in chosen:
            partition = partition_to_sample(on_both[topic], snapshot_id)
            try:
                found = []
                for cluster in clusters:
                    if cluster not in consumers:
                        consumers[cluster] = sample_consumer(confs[cluster])
                    peer = clusters[1] if cluster == clusters[0] else clusters[0]
                    start, end = ranges[(topic, partition, cluster)]
                    found.append(sample_origins(consumers[cluster], cluster, peer, topic, partition, start, end,
                                                settings.records_per_sample, settings.timeout_s))
            except (KafkaException, TimeoutError) as exc:
                step.errors.append(f"{topic}[{partition}]: {type(exc).__name__}: {exc}")
                continue
            rows += [ShapeObservationRow(snapshot_id, now_ms, topic, partition, obs) for obs in found]
            step.sampled.append(topic)
    finally:
        for consumer in consumers.values():
            consumer.close()
    shape_observations.insert_rows(client, rows)
    evidence = shape_observations.observations_since(client, unconfigured, now_ms - int(settings.horizon_s * 1000))
    step.shapes = detect_shapes(unconfigured, clusters, evidence, min_evidence=settings.min_evidence)
    return step
