"""Which two-way group-partitions have ever carried a standby-origin record, and how often the
cycles translated those (the issue's target: >= 99% of cycles, loss-free).

"Carried": below the group's committed offset ``c`` on its active cluster there is a copy of a
record produced on the standby (its origin header names the standby). Only then does a loss-free
header anchor exist at all (DESIGN.md §4.1, Lemma 1); a partition whose processed records were all
produced on the active side has nothing to anchor on yet, whatever the strategy.

Read once after the cycles (the benchmark's logs are quiescent): one consumer per cluster assigned
to every two-way partition from its log start, reading to the end-of-partition events.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, TopicPartition

from offset_pipeline.translation.facts import RecordFact
from offset_pipeline.translation.headers import CopiedFrom


def standby_origin_offsets(bootstrap: str, cluster: str, peer: str, partitions: list[tuple[str, int]],
                           timeout_s: float = 300.0) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> offsets on ``cluster`` of copies of records produced on ``peer``."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"offset-pipeline-carried-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
        "auto.offset.reset": "earliest", "log_level": 3,
    })
    out: dict[tuple[str, int], list[int]] = defaultdict(list)
    pending = set(partitions)
    try:
        consumer.assign([TopicPartition(t, p, -2) for t, p in partitions])  # -2: OFFSET_BEGINNING
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} partitions of {cluster} not read to their end")
            for msg in consumer.consume(1000, timeout=1.0):
                key = (msg.topic(), msg.partition())
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(key)
                        continue
                    raise RuntimeError(f"{cluster} {key}: {msg.error()}")
                fact = RecordFact.from_headers(msg.offset(), msg.timestamp()[1], msg.headers() or [],
                                               read_from=cluster, peer=peer)
                if isinstance(fact.origin, CopiedFrom) and fact.origin.cluster == peer:
                    out[key].append(msg.offset())
    finally:
        consumer.close()
    return out


def carried_group_partitions(bootstraps: dict[str, str], shapes: dict[str, str], active_of: dict[str, str],
                             committed: dict[tuple[str, str, int], int]) -> set[tuple[str, str, int]]:
    """(group, topic, partition) of two-way topics where a standby-origin copy lies below ``c``."""
    clusters = sorted(bootstraps)
    rows = [(g, t, p, c) for (g, t, p), c in committed.items() if shapes.get(t) == "two_way"]
    copies = {}
    for cluster in clusters:
        peer = next(n for n in clusters if n != cluster)
        tps = sorted({(t, p) for g, t, p, _ in rows if active_of[g] == cluster})
        copies[cluster] = standby_origin_offsets(bootstraps[cluster], cluster, peer, tps) if tps else {}
    return {(g, t, p) for g, t, p, c in rows if any(o < c for o in copies[active_of[g]].get((t, p), ()))}


def carried_translated(client, snapshot_id: str, carried: set[tuple[str, str, int]]) -> tuple[int, int]:
    """(translated, total) over the carried group-partitions in one cycle's offset_translations."""
    from offset_pipeline.translation import TranslationStatus

    rows = client.query(
        "SELECT group_id, topic, partition, status FROM offset_translations WHERE snapshot_id = {s:String}",
        parameters={"s": snapshot_id},
    ).result_rows
    statuses = {(g, t, int(p)): status for g, t, p, status in rows}
    translated = sum(1 for key in carried if key in statuses and TranslationStatus(statuses[key]).translated)
    return translated, len(carried)
