"""Consumer groups against real brokers: they commit what they processed, on their active cluster only."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
import uuid
from collections import Counter
from types import SimpleNamespace

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from devstack.consumers import (
    ConsumerGroupSpec,
    GroupRunner,
    default_groups,
    processed_file_name,
)
from devstack.traffic import TopicTraffic, TrafficGenerator, default_plan, ensure_topics
from tests.conftest import stopped_by_sigterm, wait_for
from tests.helpers.pairs import bootstraps

pytestmark = pytest.mark.kafka

OTHER = {"idc1": "idc2", "idc2": "idc1"}
# Records per stream: 4 transactions of 10 on the transactional topic, so each of its streams
# aborts at least one (the generator keeps aborts within one of k * abort_ratio = 1).
N = 40


def partitions_of(plan, topics):
    counts = {t.name: t.partitions for t in plan}
    return [TopicPartition(topic, p) for topic in topics for p in range(counts[topic])]


def committed_offsets(pair, cluster, group, partitions):
    """The group's committed offsets on ``cluster``; partitions without a commit are left out."""
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(tp.topic, tp.partition) for tp in partitions])
    admin = pair.admin(cluster)  # keep the handle alive until the future resolves
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def next_offsets(lines):
    """(topic, partition) -> the offset after the last record processed there."""
    out = {}
    for line in lines:
        key = (line["topic"], line["partition"])
        out[key] = max(out.get(key, 0), line["offset"] + 1)
    return out


def caught_up(pair, cluster, group, partitions, lines):
    """The group committed exactly the offset after the last record it processed, everywhere."""
    committed = committed_offsets(pair, cluster, group, partitions)
    return committed == next_offsets(lines) and committed


def processed_lines(path, strict=True):
    if not path.exists():
        return []
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            if strict:
                raise  # a half-written last line is only acceptable while the runner writes
    return lines


@pytest.fixture(scope="module")
def traffic(kafka_pair, session_mirrors):
    prefix = f"t.groups.{uuid.uuid4().hex[:6]}."
    plan = default_plan(prefix)
    ensure_topics(plan, bootstraps(kafka_pair))
    with TrafficGenerator(plan, bootstraps(kafka_pair), seed=21) as generator:
        records = generator.emit(N)
    return SimpleNamespace(plan=plan, records=records, prefix=prefix)


def expected_ids(records, topics):
    return {r.id for r in records if r.topic in topics and r.committed}


def test_default_groups_match_the_default_plan():
    groups = default_groups("p.")
    topics = {t.name: t for t in default_plan("p.")}
    assert {g.active_cluster for g in groups} == {"idc1", "idc2"}
    assert all(g.group_id.startswith("p.") and set(g.topics) <= set(topics) for g in groups)
    assert {t for g in groups for t in g.topics} == set(topics), "every topic has a reader"
    two_way = [g for g in groups if any(topics[t].two_way for t in g.topics)]
    assert {g.active_cluster for g in two_way} == {"idc1", "idc2"}
    assert any(topics[t].transactional for g in groups for t in g.topics)
    assert any(topics[t].rate_per_s <= 1 / 60 for g in groups for t in g.topics)
    assert len({g.group_id for g in groups}) == len(groups)


def test_every_group_commits_exactly_what_it_processed_on_its_active_cluster_only(
    kafka_pair, traffic, tmp_path
):
    specs = [dataclasses.replace(g, commit_interval_s=0.5) for g in default_groups(traffic.prefix)]
    runners = [
        GroupRunner(spec, kafka_pair.bootstrap(spec.active_cluster), tmp_path / processed_file_name(spec.group_id))
        for spec in specs
    ]
    stop = threading.Event()
    threads = [threading.Thread(target=r.run, args=(stop,), daemon=True) for r in runners]
    for thread in threads:
        thread.start()
    try:
        for runner in runners:
            spec = runner.spec
            expected = expected_ids(traffic.records, spec.topics)
            partitions = partitions_of(traffic.plan, spec.topics)
            # Copies from the other side arrive through the mirror: wait for all of them.
            wait_for(lambda: {l["id"] for l in processed_lines(runner.processed_path, strict=False)} >= expected,
                     timeout=120, what=f"{spec.group_id} processing every record")
            wait_for(lambda: caught_up(kafka_pair, spec.active_cluster, spec.group_id, partitions,
                                       processed_lines(runner.processed_path, strict=False)),
                     timeout=60, what=f"{spec.group_id} committing after the last record of every partition")
        # Real members of their groups, on their active clusters.
        for runner in runners:
            admin = kafka_pair.admin(runner.spec.active_cluster)
            described = admin.describe_consumer_groups([runner.spec.group_id])[runner.spec.group_id].result(30)
            assigned = {(tp.topic, tp.partition) for m in described.members for tp in m.assignment.topic_partitions}
            assert len(described.members) == 1
            assert assigned == {(tp.topic, tp.partition) for tp in partitions_of(traffic.plan, runner.spec.topics)}
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads)

    for runner in runners:
        spec = runner.spec
        partitions = partitions_of(traffic.plan, spec.topics)
        lines = processed_lines(runner.processed_path)
        committed = caught_up(kafka_pair, spec.active_cluster, spec.group_id, partitions, lines)
        assert committed, f"{spec.group_id}: commits moved away from the last processed records after stop"
        ids = [line["id"] for line in lines]
        assert [i for i, n in Counter(ids).items() if n > 1] == [], f"{spec.group_id} processed records twice"
        assert set(ids) == expected_ids(traffic.records, spec.topics), spec.group_id
        assert runner.processed == len(lines) and runner.commits > 0
        for line in lines:
            assert line["cluster"] == spec.active_cluster and line["group"] == spec.group_id
            assert line["offset"] < committed[(line["topic"], line["partition"])]
        # Nothing of this group on the other cluster.
        other = OTHER[spec.active_cluster]
        assert committed_offsets(kafka_pair, other, spec.group_id, partitions) == {}
        other_admin = kafka_pair.admin(other)
        listed = other_admin.list_consumer_groups().result(30).valid
        assert spec.group_id not in {g.group_id for g in listed}

    # The transactional topic: the committed offset is right after the last committed record, so
    # it may point at a marker; never past a record not processed (librdkafka's position() can run
    # ahead of the records handed out when markers are fetched: librdkafka#3400).
    ledger = next(r for r in runners if any(t.endswith("ledger.tx") for t in r.spec.topics))
    tx = [r for r in traffic.records if r.topic in ledger.spec.topics]
    assert any(r.aborted for r in tx)
    committed = committed_offsets(kafka_pair, "idc1", ledger.spec.group_id, partitions_of(traffic.plan, ledger.spec.topics))
    last_record = {}
    for r in tx:
        if r.committed:
            last_record[(r.topic, r.partition)] = max(last_record.get((r.topic, r.partition), -1), r.offset)
    assert committed == {tp: last + 1 for tp, last in last_record.items()}, (committed, last_record)


def test_commits_every_n_records_and_on_clean_stop(kafka_pair, session_mirrors, topic_name, tmp_path):
    plan = (TopicTraffic(topic_name, 1, ("idc1",)),)
    ensure_topics(plan, bootstraps(kafka_pair))
    with TrafficGenerator(plan, bootstraps(kafka_pair), seed=1) as generator:
        generator.emit(23)
    spec = ConsumerGroupSpec(f"{topic_name}.g", "idc1", (topic_name,), commit_every_records=5, commit_interval_s=3600)
    runner = GroupRunner(spec, kafka_pair.bootstrap("idc1"), tmp_path / "g.jsonl")
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    thread.start()
    tp = [TopicPartition(topic_name, 0)]
    try:
        wait_for(lambda: runner.processed == 23, what="23 records processed")
        # Count-based commits at 5, 10, 15, 20; the hour-long interval never fires.
        wait_for(lambda: committed_offsets(kafka_pair, "idc1", spec.group_id, tp) == {(topic_name, 0): 20},
                 what="the commit after the 20th record")
        time.sleep(1)  # a commit of 23 now would be a bug; give it the chance to show up
        assert committed_offsets(kafka_pair, "idc1", spec.group_id, tp) == {(topic_name, 0): 20}
    finally:
        stop.set()
        thread.join(timeout=60)
    assert committed_offsets(kafka_pair, "idc1", spec.group_id, tp) == {(topic_name, 0): 23}
    assert runner.commits == 5
    assert [line["offset"] for line in processed_lines(runner.processed_path)] == list(range(23))


def test_cli_runs_the_default_groups_and_commits_on_sigterm(kafka_pair, traffic, tmp_path):
    with TrafficGenerator(traffic.plan, bootstraps(kafka_pair), seed=22) as generator:
        fresh = generator.emit(3)
    processed_dir = tmp_path / "processed"
    cmd = [
        sys.executable, "-m", "devstack.consumers",
        "--bootstrap", f"idc1={kafka_pair.bootstrap('idc1')}", "--bootstrap", f"idc2={kafka_pair.bootstrap('idc2')}",
        "--prefix", traffic.prefix, "--processed-dir", str(processed_dir),
    ]
    groups = default_groups(traffic.prefix)
    log_path = tmp_path / "consumers.log"
    with stopped_by_sigterm(cmd, log_path):
        for spec in groups:
            path = processed_dir / processed_file_name(spec.group_id)
            want = expected_ids(fresh, spec.topics)
            wait_for(lambda: {l["id"] for l in processed_lines(path, strict=False)} >= want,
                     timeout=120, what=f"{spec.group_id} (CLI) processing the fresh records")
    assert "consumers stopped" in log_path.read_text()
    for spec in groups:
        lines = processed_lines(processed_dir / processed_file_name(spec.group_id))
        ids = [line["id"] for line in lines]
        assert len(ids) == len(set(ids)), f"{spec.group_id} processed records twice"
        committed = committed_offsets(kafka_pair, spec.active_cluster, spec.group_id,
                                      partitions_of(traffic.plan, spec.topics))
        # Committed on the way out: everything processed is covered by the committed offsets.
        assert all(line["offset"] < committed[(line["topic"], line["partition"])] for line in lines), spec.group_id
