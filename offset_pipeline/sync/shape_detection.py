"""Which topics to sample for shape detection this cycle, and the shapes the evidence gives.

Pure (no Kafka, ClickHouse or Dagster). A topic without a configured shape is detected from the
origin headers of its newest records on both clusters (``translation/shape.py:decide_shape``:
conservative, one-way only with enough evidence and no record produced on the other side),
summed over a horizon of cycles. Sampling is bounded per cycle, never-sampled and least recently
sampled topics first, one partition per topic per cycle (rotating with the cycle), so the cost of
a cycle does not grow with the number of unconfigured topics.

Invariants (tests/sync/test_shape_detection.py):

* a configured topic is never sampled and never gets a detected shape;
* at most ``limit`` topics are sampled per cycle, and a topic never sampled comes before any
  sampled one;
* a record produced on a cluster (no origin header, or one the mirror never writes) anywhere in
  the horizon's evidence makes that cluster a producing side: never a one-way verdict the other way.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

from offset_pipeline.translation.shape import DEFAULT_MIN_EVIDENCE, HeaderObservation, TopicShape, decide_shape


def topics_to_sample(unconfigured: Iterable[str], last_sampled: Mapping[str, int], limit: int) -> list[str]:
    """At most ``limit`` topics: never sampled first (by name), then the least recently sampled."""
    if limit < 0:
        raise ValueError("limit must be >= 0")
    return sorted(set(unconfigured), key=lambda t: (t in last_sampled, last_sampled.get(t, 0), t))[:limit]


def partition_to_sample(partitions: Iterable[int], cycle_id: str) -> int:
    """One of ``partitions``, chosen by the cycle id: successive cycles visit different partitions."""
    ordered = sorted(set(partitions))
    if not ordered:
        raise ValueError("no partition to sample")
    return ordered[zlib.crc32(cycle_id.encode()) % len(ordered)]


def detect_shapes(
    topics: Iterable[str],
    clusters: tuple[str, str],
    observations: Mapping[tuple[str, str], HeaderObservation],
    *,
    min_evidence: int = DEFAULT_MIN_EVIDENCE,
) -> dict[str, TopicShape]:
    """topic -> detected shape (``unknown`` with the reason when the evidence does not decide)."""
    first, second = clusters
    return {
        topic: decide_shape(
            observations.get((topic, first), HeaderObservation(first)),
            observations.get((topic, second), HeaderObservation(second)),
            min_evidence=min_evidence,
        )
        for topic in sorted(set(topics))
    }
