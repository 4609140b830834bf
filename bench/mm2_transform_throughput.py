"""MirrorMaker 2's copy rate with the project's origin-header transform against without it, same run
(target: with >= 95 % of without, records/s).

    .venv/bin/python bench/mm2_transform_throughput.py [--records 300000] [--rounds 3] [--partitions 4]

Two scratch clusters; per round a fresh topic on the first cluster is filled with ``--records``
records first, then one MirrorMaker 2 (dedicated mode, one flow, exactly-once, the dev harness's
``devstack/mirrormaker2.py``) starts and copies the backlog. The rate is the records over the
seconds from the first copy seen on the target to the last (start-up excluded), read from the
target's log ends every 0.1 s. Rounds alternate with and without the transform (with: the
``Filter``+``HasHeaderKey`` drop and the ``OriginHeaders`` transform on the flow; without: the same
MirrorMaker 2 without those two), so a drift of the machine's speed spreads over both. Prints one line per round and
the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from _clusters import ScratchClusters, free_port

from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "log_level": 3})
    payload = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=payload, headers=[("trace", str(i).encode())])
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0, "the backlog was not produced"


def copied(consumer: Consumer, topic: str, partitions: int) -> int:
    """Records on the target so far; 0 while the topic MirrorMaker 2 creates is not known in full."""
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    except KafkaException:
        return 0


def one_round(clusters: ScratchClusters, with_transform: bool, records: int, partitions: int, size: int,
              work: Path) -> tuple[float, float]:
    """(seconds from the first copy to the last, MirrorMaker 2's start-up seconds)."""
    source, target = "idc1", "idc2"
    topic = f"tp.{uuid.uuid4().hex[:8]}"
    admin = clusters.admin(source)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)
    fill(clusters.bootstraps[source], topic, records, size)
    # Aliases of the round's own: MirrorMaker 2 keeps its connector configs, offsets and status in
    # topics named after them, and a JVM started with the other variant's config would first run
    # its tasks with the previous round's config found there.
    run = topic.split(".")[1]
    config = MirrorMaker2Config(
        (MirrorEndpoint(f"src-{run}", clusters.bootstraps[source]), MirrorEndpoint(f"dst-{run}", clusters.bootstraps[target])),
        work / f"mm2-{topic}", topics=topic.replace(".", "\\."), rest_port=free_port(),
        origin_headers=with_transform, one_way=True, heap="1g",
    )
    consumer = Consumer({"bootstrap.servers": clusters.bootstraps[target], "group.id": "bench-watermarks",
                         "log_level": 3})
    mm2 = MirrorMaker2(config)
    try:
        startup = mm2.start(timeout_s=180)
        first = last = None
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            n = copied(consumer, topic, partitions)
            now = time.monotonic()
            if n and first is None:
                first = now
            if n >= records:
                last = now
                break
            time.sleep(0.1)
        if last is None or first is None:
            raise RuntimeError(f"MirrorMaker 2 copied {n} of {records} records in time; log {mm2.log_path}")
        if last - first < 1.0:
            raise RuntimeError(f"{records} records were copied within {last - first:.2f} s: too few to time, "
                               "raise --records")
        return last - first, startup
    finally:
        mm2.stop()
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per variant (alternated)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=200, help="value bytes per record")
    args = parser.parse_args(argv)
    rates: dict[str, list[float]] = {"with transform": [], "without": []}
    with ScratchClusters() as clusters, tempfile.TemporaryDirectory(prefix="mm2-throughput-") as work:
        for round_no in range(args.rounds):
            for with_transform in (round_no % 2 == 0, round_no % 2 != 0):
                seconds, startup = one_round(clusters, with_transform, args.records, args.partitions, args.size,
                                             Path(work))
                name = "with transform" if with_transform else "without"
                rates[name].append(args.records / seconds)
                print(f"round {round_no + 1} {name:15s} {args.records} records in {seconds:6.2f} s = "
                      f"{args.records / seconds:9.0f} records/s (start-up {startup:.1f} s)", flush=True)
    with_rate, without_rate = (statistics.median(rates[k]) for k in ("with transform", "without"))
    print(f"median records/s: with transform {with_rate:.0f}, without {without_rate:.0f}: "
          f"{100 * with_rate / without_rate:.1f} % (target >= 95 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
