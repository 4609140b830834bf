"""The data mirrors against real brokers: headers, timestamps, order, loops, transactions, restarts.

The copy tests run against both mirrors of the dev harness: the session's MirrorMaker 2 with the
project's transform (the stack's default) and the Python mirror (``devstack/mirror.py``). Restarts
and partition-count mismatches are the Python mirror's own (MirrorMaker 2's kill and restart is in
test_mirrormaker2.py and test_failover_trials_mm2.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer

from devstack.mirror import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER, DataMirror, MirrorConfig
from devstack.records import read_partition
from tests.conftest import PYTHON_MIRRORED_PREFIX, Transactions, wait_for

pytestmark = pytest.mark.kafka

OTHER = {"idc1": "idc2", "idc2": "idc1"}


def produce(bootstrap, topic, records, partition=0):
    """records: iterable of dicts with value (dict), optional key, timestamp, headers."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for rec in records:
        kwargs = {k: rec[k] for k in ("key", "timestamp", "headers") if k in rec}
        producer.produce(topic, value=json.dumps(rec["value"]).encode(), partition=rec.get("partition", partition), **kwargs)
    assert producer.flush(30) == 0


def values(records):
    return [json.loads(r.value) for r in records]


@pytest.fixture(params=["mirrormaker2", "python"])
def topic_name(request, topic_name, python_topic_name):
    """A topic copied by one of the harness's mirrors (the test runs once per mirror)."""
    if request.param == "python":
        request.getfixturevalue("python_mirrors")
        return python_topic_name
    request.getfixturevalue("session_mirrors")
    return topic_name


def count_is(pair, cluster, topic, partition, n):
    return lambda: len(read_partition(pair.bootstrap(cluster), topic, partition)) >= n


def test_copy_keeps_key_value_timestamp_headers_and_adds_origin(kafka_pair, topic_name):
    kafka_pair.create_topic(topic_name, partitions=3)
    # A day-old CreateTime: the copy must keep it, not restamp it. (Older than the 7-day retention
    # would let the broker delete the records under the test.)
    base_ts = int(time.time() * 1000) - 86_400_000
    sent = [
        {
            "value": {"id": f"r{i}"},
            "key": f"k{i}".encode(),
            "timestamp": base_ts + (i % 3) * 1000,
            "headers": [("trace", f"t{i}".encode())],
            "partition": i % 3,
        }
        for i in range(30)
    ]
    produce(kafka_pair.bootstrap("idc1"), topic_name, sent)
    for partition in range(3):
        wait_for(count_is(kafka_pair, "idc2", topic_name, partition, 10), what=f"copies of partition {partition}")
        sources = read_partition(kafka_pair.bootstrap("idc1"), topic_name, partition)
        copies = read_partition(kafka_pair.bootstrap("idc2"), topic_name, partition)
        assert len(copies) == len(sources) == 10
        for src, copy in zip(sources, copies):
            assert copy.key == src.key and copy.value == src.value
            assert copy.timestamp == src.timestamp
            assert copy.header("trace") == src.header("trace")
            assert copy.header(ORIGIN_CLUSTER_HEADER) == b"idc1"
            assert copy.header(ORIGIN_OFFSET_HEADER) == str(src.offset).encode()
            assert src.header(ORIGIN_CLUSTER_HEADER) is None  # the original is untouched


def test_two_way_topic_keeps_per_origin_order_interleaves_differently_and_never_loops(
    kafka_pair, topic_name
):
    kafka_pair.create_topic(topic_name, partitions=2)
    n = 200

    def burst(cluster):
        produce(
            kafka_pair.bootstrap(cluster),
            topic_name,
            [{"value": {"id": f"{cluster}-{i}", "seq": i}, "partition": i % 2} for i in range(n)],
        )

    threads = [threading.Thread(target=burst, args=(c,)) for c in ("idc1", "idc2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for cluster in ("idc1", "idc2"):
        for partition in range(2):
            wait_for(count_is(kafka_pair, cluster, topic_name, partition, n), what=f"{cluster}[{partition}] full")
    time.sleep(3)  # give a looping record every chance to show up before counting

    orders = {}
    for cluster in ("idc1", "idc2"):
        for partition in range(2):
            records = read_partition(kafka_pair.bootstrap(cluster), topic_name, partition)
            ids = [v["id"] for v in values(records)]
            # Exactly every record once: nothing lost, nothing looped back as a second copy.
            assert Counter(ids) == Counter(
                [f"{o}-{i}" for o in ("idc1", "idc2") for i in range(n) if i % 2 == partition]
            )
            for origin in ("idc1", "idc2"):
                seqs = [v["seq"] for v in values(records) if v["id"].startswith(origin)]
                assert seqs == sorted(seqs), f"{origin} order broken on {cluster}[{partition}]"
            for rec in records:
                origin = rec.header(ORIGIN_CLUSTER_HEADER)
                if json.loads(rec.value)["id"].startswith(cluster):
                    assert origin is None  # local record, no origin header
                else:
                    assert origin == OTHER[cluster].encode()
                    assert [k for k, _ in rec.headers].count(ORIGIN_CLUSTER_HEADER) == 1
            orders[(cluster, partition)] = ids
    # X-crossing: both clusters hold the same records in a different order. Asserted for the Python
    # mirror, which copies while the bursts run. MirrorMaker 2 picks a new topic up seconds after it
    # is created (topic refresh, then a task restart), by when one burst may be over and already
    # copied before the other thread's starts (seen in a full run): its order then depends on thread
    # timing, and what holds regardless (every record once, per-origin order) is asserted above.
    if topic_name.startswith(PYTHON_MIRRORED_PREFIX):
        assert orders[("idc1", 0)] != orders[("idc2", 0)] or orders[("idc1", 1)] != orders[("idc2", 1)]


def test_aborted_transactions_are_not_mirrored(kafka_pair, topic_name):
    kafka_pair.create_topic(topic_name, partitions=1)
    transactions = Transactions(kafka_pair.bootstrap("idc1"), topic_name)
    for batch, commit in (("a", True), ("b", False), ("c", True), ("d", False)):
        def send(producer, batch=batch):
            for i in range(5):
                producer.produce(topic_name, value=json.dumps({"id": f"{batch}{i}"}).encode(), partition=0)

        transactions.run(send, commit=commit)
    expected = [f"{b}{i}" for b in "ac" for i in range(5)]
    wait_for(count_is(kafka_pair, "idc2", topic_name, 0, 10), what="committed copies")
    time.sleep(2)
    copies = read_partition(kafka_pair.bootstrap("idc2"), topic_name, 0)
    assert [v["id"] for v in values(copies)] == expected
    # The source has gaps (aborted records, markers) and the Offset headers show them.
    assert [int(r.header(ORIGIN_OFFSET_HEADER)) for r in copies] == [
        r.offset for r in read_partition(kafka_pair.bootstrap("idc1"), topic_name, 0)
    ]
    assert int(copies[5].header(ORIGIN_OFFSET_HEADER)) > int(copies[4].header(ORIGIN_OFFSET_HEADER)) + 1


def test_mirror_creates_a_topic_missing_on_the_target(kafka_pair, topic_name):
    kafka_pair.create_topic(topic_name, partitions=4, on=("idc1",))
    produce(kafka_pair.bootstrap("idc1"), topic_name, [{"value": {"id": "x"}, "partition": 3}])
    wait_for(count_is(kafka_pair, "idc2", topic_name, 3, 1), what="copy in the created topic")
    target = kafka_pair.admin("idc2").list_topics(topic_name, timeout=10).topics[topic_name]
    assert len(target.partitions) == 4



def test_partition_count_mismatch_is_reported_and_not_mirrored(kafka_pair):
    # Outside the session mirrors' topics: they would race to create it with equal counts.
    mismatched = f"mm.{uuid.uuid4().hex[:8]}"
    kafka_pair.create_topic(mismatched, partitions=2, on=("idc1",))
    kafka_pair.create_topic(mismatched, partitions=3, on=("idc2",))
    produce(kafka_pair.bootstrap("idc1"), mismatched, [{"value": {"id": "y"}, "partition": 1}])
    mirror = DataMirror(
        MirrorConfig(
            kafka_pair.endpoint("idc1"), kafka_pair.endpoint("idc2"),
            topic_pattern=f"^{mismatched}$", instance="mismatch-test",
        )
    )
    try:
        for _ in range(5):
            mirror.step()
    finally:
        mirror.close()
    assert mirror.stats.mismatched_topics == [mismatched]
    assert mirror.stats.copied == 0
    assert read_partition(kafka_pair.bootstrap("idc2"), mismatched, 1) == []


def _start_mirror_process(kafka_pair, source, target, pattern, log_file):
    cmd = [
        sys.executable, "-m", "devstack.mirror",
        "--source", f"{source}={kafka_pair.bootstrap(source)}",
        "--target", f"{target}={kafka_pair.bootstrap(target)}",
        "--topics", pattern, "--batch-size", "50",
        "--instance", "restart-test",  # its own transactional id: never fences the session mirror
    ]
    return subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)


def test_mirror_killed_and_restarted_neither_loses_nor_repeats_nor_reorders(kafka_pair, tmp_path):
    topic = f"r.restart.{os.getpid()}.{int(time.time())}"
    kafka_pair.create_topic(topic, partitions=2)
    pattern = "^r[.]restart[.]"
    total = 3000
    stop_producing = threading.Event()

    def steady_traffic():
        producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "enable.idempotence": True, "log_level": 3})
        for i in range(total):
            producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=i % 2)
            if i % 50 == 0:
                producer.flush(10)
                time.sleep(0.05)
            if stop_producing.is_set():
                break
        producer.flush(30)

    producer_thread = threading.Thread(target=steady_traffic)
    producer_thread.start()
    with open(tmp_path / "mirror.log", "wb") as log_file:
        proc = None
        for _ in range(2):  # up to two hard kills mid-stream, then a run to the end
            proc = _start_mirror_process(kafka_pair, "idc1", "idc2", pattern, log_file)
            wait_for(lambda: len(read_partition(kafka_pair.bootstrap("idc2"), topic, 0)) > 0, what="first copies")
            time.sleep(1.5)
            if not producer_thread.is_alive():
                break  # a slow machine: this one runs to the end (never two mirrors at once)
            os.killpg(proc.pid, signal.SIGKILL)  # no clean shutdown: a crash
            proc.wait()
            proc = None
        if proc is None:
            proc = _start_mirror_process(kafka_pair, "idc1", "idc2", pattern, log_file)
        producer_thread.join()
        for partition in range(2):
            wait_for(count_is(kafka_pair, "idc2", topic, partition, total // 2), timeout=90, what="all copies")
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)

    for partition in range(2):
        sources = read_partition(kafka_pair.bootstrap("idc1"), topic, partition)
        copies = read_partition(kafka_pair.bootstrap("idc2"), topic, partition)
        assert [r.value for r in copies] == [r.value for r in sources]  # same records, same order, once
        assert [int(r.header(ORIGIN_OFFSET_HEADER)) for r in copies] == [r.offset for r in sources]
