"""The traffic generator against real brokers: determinism, timestamp shapes, transactions, both sides."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from types import SimpleNamespace

import pytest

from devstack.mirror import ORIGIN_CLUSTER_HEADER
from devstack.records import read_partition
from devstack.traffic import (
    TopicLayoutError,
    TopicTraffic,
    TrafficGenerator,
    default_plan,
    ensure_topics,
)

from tests.conftest import stopped_by_sigterm, wait_for
from tests.helpers.pairs import bootstraps

pytestmark = pytest.mark.kafka

SEED = 7
N = 40  # records per stream


def topic_of(plan, suffix):
    (topic,) = [t for t in plan if t.name.endswith(suffix)]
    return topic


def by_stream(records):
    streams = defaultdict(list)
    for rec in records:
        streams[(rec.topic, rec.origin)].append(rec)
    return streams


def values(stored):
    return [json.loads(r.value) for r in stored]


@pytest.fixture(scope="module")
def traffic(kafka_pair, session_mirrors):
    """The default plan under a unique ``t.`` prefix (mirrored), N records per stream, seed 7."""
    prefix = f"t.traffic.{uuid.uuid4().hex[:6]}."
    plan = default_plan(prefix)
    ensure_topics(plan, bootstraps(kafka_pair))
    with TrafficGenerator(plan, bootstraps(kafka_pair), seed=SEED) as generator:
        records = generator.emit(N)
    return SimpleNamespace(plan=plan, records=records, prefix=prefix)


def test_default_plan_covers_every_shape():
    plan = default_plan("x.")
    assert all(t.name.startswith("x.") for t in plan)
    assert all(t.partitions >= 2 for t in plan)
    assert any(t.producers_on == ("idc1", "idc2") for t in plan)
    assert any(t.producers_on == ("idc2",) for t in plan)
    one_way_idc1 = {t.timestamps for t in plan if t.producers_on == ("idc1",)}
    assert one_way_idc1 >= {"increasing", "equal_batches", "out_of_order"}
    assert any(t.rate_per_s <= 1 / 60 for t in plan)
    assert any(t.transactional and 0 < t.abort_ratio < 1 for t in plan)
    assert [t.name for t in default_plan()] == [t.name[2:] for t in plan]
    with pytest.raises(ValueError):
        TopicTraffic("bad", 2, timestamps="sideways")


# -- determinism --------------------------------------------------------------------------------
def _signature(records):
    """What the seed decides: ids, keys, partitions, batches, transactions and their outcome."""
    return [
        (r.topic, r.origin, r.seq, r.id, r.key, r.partition, r.batch, r.txn, r.committed, r.late_ms)
        for r in records
    ]


def _timestamp_pattern(records):
    """Per stream, in production order: which records share a timestamp, and which go backwards."""
    pattern = {}
    for stream, recs in sorted(by_stream(records).items()):
        first_of = {}
        groups = [first_of.setdefault(r.timestamp, r.seq) for r in recs]
        decreases = [i for i in range(1, len(recs)) if recs[i].timestamp < recs[i - 1].timestamp]
        pattern[stream] = (groups, decreases)
    return pattern


def test_same_seed_same_records_and_timestamp_pattern_other_seed_differs(kafka_pair):
    prefix = f"u.det.{uuid.uuid4().hex[:6]}."  # not mirrored: only the producing side matters here
    plan = (
        TopicTraffic(f"{prefix}two", 3, ("idc1", "idc2"), "increasing"),
        TopicTraffic(f"{prefix}batches", 2, ("idc1",), "equal_batches", batch_size=5),
        TopicTraffic(f"{prefix}late", 3, ("idc2",), "out_of_order"),
        TopicTraffic(f"{prefix}tx", 2, ("idc1",), "increasing", batch_size=4, transactional=True, abort_ratio=0.5),
    )
    ensure_topics(plan, bootstraps(kafka_pair))
    runs = []
    for seed in (11, 11, 12):
        with TrafficGenerator(plan, bootstraps(kafka_pair), seed=seed) as generator:
            # Two calls, the first ending mid-batch: batches and transactions continue across calls.
            runs.append(generator.emit(7) + generator.emit(17))
    first, same, other = runs

    assert _signature(first) == _signature(same)
    assert _timestamp_pattern(first) == _timestamp_pattern(same)

    # The pattern is really there, and as the plan says.
    groups, _ = _timestamp_pattern(first)[(f"{prefix}batches", "idc1")]
    assert Counter(groups) == Counter({start: 5 for start in range(0, 20, 5)} | {20: 4})
    _, decreases = _timestamp_pattern(first)[(f"{prefix}late", "idc2")]
    assert decreases and all(first_rec.late_ms > 0 for first_rec in [
        r for r in by_stream(first)[(f"{prefix}late", "idc2")] if r.seq in decreases
    ])
    for stream, recs in by_stream(first).items():
        if stream[0].endswith("batches"):
            stamps = [r.timestamp for r in recs]
            assert stamps == sorted(stamps), f"{stream}: batches must not go back in time"
            continue
        clock = [r.timestamp + r.late_ms for r in recs]
        assert all(b > a for a, b in zip(clock, clock[1:])), f"{stream}: stream clock not strictly increasing"
    tx = [r for r in first if r.txn is not None]
    assert {r.committed for r in tx} == {True, False}
    for txn in {r.txn for r in tx}:
        assert len({r.committed for r in tx if r.txn == txn}) == 1, "a transaction both committed and aborted"

    # Another seed: other ids, keys, partitions, lateness, aborts.
    assert len(other) == len(first)
    assert [r.id for r in other] != [r.id for r in first]
    assert [(r.partition, r.key) for r in other] != [(r.partition, r.key) for r in first]
    assert [r.late_ms for r in other] != [r.late_ms for r in first]
    assert _timestamp_pattern(other) != _timestamp_pattern(first)


# -- what reaches the brokers -------------------------------------------------------------------
def test_every_record_is_on_its_origin_cluster_at_its_acknowledged_offset(kafka_pair, traffic):
    streams = by_stream(traffic.records)
    assert len(streams) == sum(len(t.producers_on) for t in traffic.plan)
    assert all(len(recs) == N for recs in streams.values())
    ids = [r.id for r in traffic.records]
    assert len(set(ids)) == len(ids), "ids must be unique across all streams"
    assert all(r.id == f"{SEED}:{r.topic}:{r.origin}:{r.seq}" for r in traffic.records)

    for topic in traffic.plan:
        for origin in topic.producers_on:
            mine = streams[(topic.name, origin)]
            assert len({r.partition for r in mine}) > 1, f"{topic.name}: every record in one partition"
            for partition in range(topic.partitions):
                stored = {
                    r.offset: r
                    for r in read_partition(kafka_pair.bootstrap(origin), topic.name, partition,
                                            isolation="read_uncommitted")
                }
                for rec in (r for r in mine if r.partition == partition):
                    found = stored[rec.offset]
                    value = json.loads(found.value)
                    assert (value["id"], value["origin"], value["topic"], value["seq"]) == (
                        rec.id, origin, topic.name, rec.seq)
                    assert found.key == rec.key.encode() and rec.key.startswith(f"p{partition}-")
                    assert found.timestamp == rec.timestamp  # CreateTime as sent
                    assert found.header(ORIGIN_CLUSTER_HEADER) is None  # an original, not a copy


def _local(stored):
    return [r for r in stored if r.header(ORIGIN_CLUSTER_HEADER) is None]


def test_timestamp_shapes_on_the_broker(kafka_pair, traffic):
    bs = kafka_pair.bootstrap("idc1")

    batches = topic_of(traffic.plan, "payments.batch")
    equal_runs = 0
    batch_ts = {}
    for partition in range(batches.partitions):
        stored = read_partition(bs, batches.name, partition)
        for rec, value in zip(stored, values(stored)):
            assert batch_ts.setdefault(value["batch"], rec.timestamp) == rec.timestamp, "one timestamp per batch"
        equal_runs += sum(1 for a, b in zip(stored, stored[1:]) if a.timestamp == b.timestamp)
    assert equal_runs > 0, "no run of equal timestamps in any partition"
    assert len(batch_ts) == N // batches.batch_size
    ordered = [batch_ts[b] for b in sorted(batch_ts)]
    assert ordered == sorted(set(ordered)), "batches must get distinct, increasing timestamps"

    late = topic_of(traffic.plan, "clicks.late")
    decreases = 0
    for partition in range(late.partitions):
        stored = read_partition(bs, late.name, partition)
        for prev, (rec, value) in zip(stored, list(zip(stored, values(stored)))[1:]):
            if rec.timestamp < prev.timestamp:
                decreases += 1
                assert value["late_ms"] > 0, "only late records may go backwards"
    assert decreases > 0, "an out_of_order topic without a single earlier timestamp"

    increasing = [(t, origin) for t in traffic.plan if t.timestamps == "increasing" for origin in t.producers_on]
    assert {t.name.removeprefix(traffic.prefix) for t, _ in increasing} >= {"orders", "shipments", "inventory"}
    for topic, origin in increasing:
        for partition in range(topic.partitions):
            stored = _local(read_partition(kafka_pair.bootstrap(origin), topic.name, partition))
            stamps = [r.timestamp for r in stored]
            assert all(b > a for a, b in zip(stamps, stamps[1:])), f"{topic.name}[{partition}] on {origin}"


def test_transactional_stream_leaves_gaps_and_hides_aborted_records(kafka_pair, traffic):
    topic = topic_of(traffic.plan, "ledger.tx")
    mine = [r for r in traffic.records if r.topic == topic.name]
    committed = {r.id for r in mine if r.committed}
    aborted = {r.id for r in mine if r.aborted}
    assert committed and aborted
    assert len({r.txn for r in mine if r.aborted}) < len({r.txn for r in mine})
    gaps = 0
    for partition in range(topic.partitions):
        visible = read_partition(kafka_pair.bootstrap("idc1"), topic.name, partition)
        everything = read_partition(kafka_pair.bootstrap("idc1"), topic.name, partition, isolation="read_uncommitted")
        visible_ids = [v["id"] for v in values(visible)]
        expected = [r.id for r in sorted(mine, key=lambda r: r.offset) if r.partition == partition and r.committed]
        assert visible_ids == expected
        assert not aborted & set(visible_ids)
        # Aborted records are in the log, only hidden from read_committed readers.
        assert {v["id"] for v in values(everything)} == {r.id for r in mine if r.partition == partition}
        offsets = [r.offset for r in visible]
        gaps += sum(1 for a, b in zip(offsets, offsets[1:]) if b > a + 1)
    assert gaps > 0, "transaction markers and aborted records must leave offset gaps"


def test_two_way_topic_is_written_on_both_clusters(kafka_pair, traffic):
    (topic,) = [t for t in traffic.plan if t.two_way]
    ids = {origin: {r.id for r in traffic.records if r.topic == topic.name and r.origin == origin}
           for origin in ("idc1", "idc2")}
    assert all(len(v) == N for v in ids.values())
    for origin in ("idc1", "idc2"):
        local = {
            v["id"]
            for partition in range(topic.partitions)
            for v in values(_local(read_partition(kafka_pair.bootstrap(origin), topic.name, partition)))
        }
        assert local == ids[origin], f"{origin} must hold its own producers' records"

    def everything_on(cluster):
        found = [v["id"] for p in range(topic.partitions)
                 for v in values(read_partition(kafka_pair.bootstrap(cluster), topic.name, p))]
        return len(found) >= 2 * N and found

    for cluster in ("idc1", "idc2"):  # and the mirror completes both sides
        found = wait_for(lambda: everything_on(cluster), what=f"both origins on {cluster}")
        assert Counter(found) == Counter(ids["idc1"] | ids["idc2"])


def test_ensure_topics_is_idempotent_and_rejects_other_partition_counts(kafka_pair):
    name = f"u.layout.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(name, partitions=3, on=("idc1",))  # as if the mirror had made it on one side
    plan = (TopicTraffic(name, 3), TopicTraffic(name + ".b", 2, ("idc2",)))
    ensure_topics(plan, bootstraps(kafka_pair))
    ensure_topics(plan, bootstraps(kafka_pair))
    for cluster in ("idc1", "idc2"):
        topics = kafka_pair.admin(cluster).list_topics(timeout=10).topics
        assert len(topics[name].partitions) == 3 and len(topics[name + ".b"].partitions) == 2
    with pytest.raises(TopicLayoutError, match=re.escape(name)):
        ensure_topics((TopicTraffic(name, 4),), bootstraps(kafka_pair))


# -- the long-running process -------------------------------------------------------------------
def test_run_paces_each_stream_and_stops_when_told(kafka_pair):
    prefix = f"u.pace.{uuid.uuid4().hex[:6]}."
    plan = (
        TopicTraffic(f"{prefix}steady", 2, ("idc1", "idc2"), rate_per_s=5.0),
        TopicTraffic(f"{prefix}batches", 2, ("idc1",), "equal_batches", rate_per_s=10.0, batch_size=5),
        TopicTraffic(f"{prefix}tx", 2, ("idc2",), rate_per_s=10.0, batch_size=5, transactional=True, abort_ratio=0.5),
        TopicTraffic(f"{prefix}rare", 2, ("idc1",), rate_per_s=1 / 600),
    )
    ensure_topics(plan, bootstraps(kafka_pair))
    stop = threading.Event()
    generator = TrafficGenerator(plan, bootstraps(kafka_pair), seed=3, rate_scale=2.0)
    thread = threading.Thread(target=generator.run, args=(stop,))
    started = time.monotonic()
    thread.start()
    wait_for(lambda: generator.totals().acked >= 40, timeout=60, what="paced traffic")
    stop.set()
    thread.join(timeout=60)
    elapsed = time.monotonic() - started
    assert not thread.is_alive()
    generator.close()
    stats = {s.label: s.stats for s in generator.streams}
    for topic in plan:
        for origin in topic.producers_on:
            s = stats[f"{topic.name}@{origin}"]
            unit = topic.batch_size
            # Never ahead of the rate (one unit goes out at the start), and whole batches only.
            assert 0 < s.acked <= topic.rate_per_s * 2.0 * elapsed + unit, (topic.name, s, elapsed)
            assert s.acked % unit == 0 and s.failed == 0
    assert stats[f"{prefix}rare@idc1"].acked == 1
    assert stats[f"{prefix}tx@idc2"].committed + stats[f"{prefix}tx@idc2"].aborted == stats[f"{prefix}tx@idc2"].acked
    counted = sum(
        len(read_partition(kafka_pair.bootstrap(origin), t.name, p, isolation="read_uncommitted"))
        for t in plan for origin in t.producers_on for p in range(t.partitions)
    )
    assert counted == generator.totals().acked


def test_cli_runs_the_default_plan_and_stops_cleanly_on_sigterm(kafka_pair, tmp_path):
    prefix = f"u.cli.{uuid.uuid4().hex[:6]}."
    produced = tmp_path / "produced.jsonl"
    cmd = [
        sys.executable, "-m", "devstack.traffic",
        "--bootstrap", f"idc1={kafka_pair.bootstrap('idc1')}", "--bootstrap", f"idc2={kafka_pair.bootstrap('idc2')}",
        "--seed", "5", "--rate-scale", "3", "--prefix", prefix, "--report-every", "1",
        "--produced-log", str(produced),
    ]
    log_path = tmp_path / "traffic.log"
    with stopped_by_sigterm(cmd, log_path):
        wait_for(lambda: produced.exists() and len(produced.read_text().splitlines()) >= 50,
                 timeout=60, what="the CLI producing")
    output = log_path.read_text()
    assert "traffic stopped" in output
    assert re.search(r"traffic seed=5 scale=3 up \d+s: \d+ acked", output), output
    lines = [json.loads(line) for line in produced.read_text().splitlines()]
    assert len({line["id"] for line in lines}) == len(lines)
    # Every topic of the plan exists on both clusters, and both clusters received records.
    for cluster in ("idc1", "idc2"):
        topics = kafka_pair.admin(cluster).list_topics(timeout=10).topics
        assert all(len(topics[t.name].partitions) == t.partitions for t in default_plan(prefix))
    assert {line["origin"] for line in lines} == {"idc1", "idc2"}
