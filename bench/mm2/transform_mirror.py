"""MirrorMaker 2 with the project's transform (``devstack.mirrormaker2.MirrorMaker2``: both flows in one
JVM, ``OriginHeaders`` dropping copies and marking the rest, exactly-once) over some of a benchmark's
topics, for the MirrorMaker 2 comparison (``bench/compare_mm2.py``).

Started from the calling thread, which must live as long as the mirror: the JVM's parent-death
signal follows the thread that started it. Its probe topic is created first and awaited in both
clusters' metadata (a probe read of a topic created a moment before failed with "Unknown
partition" on brokers just started).
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import PROBE_TOPIC, MirrorMaker2, MirrorMaker2Config
from devstack.traffic import TopicTraffic, ensure_topics


def _await_probe_topic(bootstraps: dict[str, str], timeout_s: float = 60.0) -> None:
    for bootstrap in bootstraps.values():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offset-pipeline-bench-probe-wait",
                             "log_level": 3})
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    consumer.get_watermark_offsets(TopicPartition(PROBE_TOPIC, 0), timeout=10)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            consumer.close()


def start_transform_mirror(bootstraps: dict[str, str], topics: str, work_dir: Path, rest_port: int,
                           timeout_s: float = 240.0) -> MirrorMaker2:
    """MirrorMaker 2 with the transform both ways between ``idc1`` and ``idc2`` over ``topics`` (a
    Java regex, no comma), aliases = the cluster names; returns once both flows copy."""
    ensure_topics((TopicTraffic(PROBE_TOPIC, 1, tuple(bootstraps), "increasing"),), bootstraps)
    _await_probe_topic(bootstraps)
    mirror = MirrorMaker2(MirrorMaker2Config(
        (MirrorEndpoint("idc1", bootstraps["idc1"]), MirrorEndpoint("idc2", bootstraps["idc2"])), work_dir,
        topics=topics, rest_port=rest_port, exactly_once=True,
    ))
    mirror.start(timeout_s=timeout_s)
    return mirror
