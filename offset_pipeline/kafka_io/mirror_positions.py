"""How far a data mirror has read its source partitions: its committed positions.

Input for the stale-partition rule (``fast_forward/stale_candidates.py``: both mirrors caught up). A mirror keeps
its source positions as consumer-group offsets (the devstack mirror on the *target* cluster, in the
same transactions as its copies: ``devstack/mirror.py``); which group and which cluster is
configuration. Read with a consumer's ``committed()`` under that group id, which never joins the
group nor commits (the admin API's offset listing can crash on a fresh broker answering
NOT_COORDINATOR: librdkafka#5040). ``read_committed`` waits for pending transactional offsets.

A position is a fact about the past (the copies below it exist), not a sign of life: it reads the same
from a stopped mirror, which is all the stale rule needs (``stale_candidates`` works the
stopped-mirror cases through).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def read_mirror_positions(
    conf: Mapping[str, Any], group_id: str, partitions: Iterable[tuple[str, int]], timeout_s: float = 15.0
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the mirror's committed position, for the partitions it has one."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    consumer = Consumer({
        **conf,
        "group.id": group_id,
        "client.id": f"offset-pipeline-mirror-positions-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    try:
        result = consumer.committed([TopicPartition(t, p) for t, p in wanted], timeout=timeout_s)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in result if tp.error is None and tp.offset >= 0}
