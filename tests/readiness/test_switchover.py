"""``offset-pipeline switchover`` on the real session clusters and mirrors: the refusal while the
group runs on its source, a one-way group moved exactly, a two-way group moved with nothing lost.
Every outcome is checked against the records themselves (values read with plain consumers)."""

from __future__ import annotations

import json
import uuid

import pytest

from offset_pipeline.cli import main
from offset_pipeline.cli.switchover import REFUSED, switchover
from offset_pipeline.resources import KafkaClusterResource
from tests.helpers.groups import Member, committed
from tests.helpers.records import read_values
from tests.helpers.sync_cycles import Cycles
from tests.helpers.topics import PARTITIONS

pytestmark = pytest.mark.kafka


def clusters(kafka_pair) -> dict[str, KafkaClusterResource]:
    return {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=kafka_pair.bootstrap(name))
            for name in ("idc1", "idc2")}


def synced_then_stopped(kafka_pair, chdb_dsn, topic, first: dict, last: dict, shape: str) -> str:
    """A group on idc1 commits ``first``, one sync cycle writes its standby offsets, the group commits
    ``last`` and stops (no sync since: the standby is behind)."""
    group = f'switch {uuid.uuid4().hex[:8]} "q" ü'
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    try:
        member.commit(topic, first)
        cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
        cycles.run(extra_ops_config={"offset_translations": {"config": {"topic_shapes": {topic: shape}}}})
        assert set(cycles.standby_committed()) == set(range(PARTITIONS))
        member.commit(topic, last)
    finally:
        member.close()
    return group


def values(kafka_pair, cluster, topic, p, end):
    return read_values(kafka_pair.bootstrap(cluster), topic, p, end)


def test_refused_while_the_group_runs_on_its_source(kafka_pair, one_way_topic, monkeypatch, capsys):
    topic, _ = one_way_topic
    group = f"live {uuid.uuid4().hex[:8]}"
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    try:
        member.commit(topic, {0: 3, 1: 3})
        monkeypatch.setenv("OFFSET_PIPELINE_IDC1_BOOTSTRAP", kafka_pair.bootstrap("idc1"))
        monkeypatch.setenv("OFFSET_PIPELINE_IDC2_BOOTSTRAP", kafka_pair.bootstrap("idc2"))
        assert main(["switchover", "--group", group, "--to", "idc2", "--json"]) == REFUSED
    finally:
        member.close()
    report = json.loads(capsys.readouterr().out)
    assert report["outcome"] == "refused" and "still has 1 member(s) on idc1" in report["detail"]
    assert committed(kafka_pair.bootstrap("idc2"), group, topic) == {}  # nothing written


def test_refused_without_a_standby_offset(kafka_pair, one_way_topic):
    topic, _ = one_way_topic
    group = f"never synced {uuid.uuid4().hex[:8]}"
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    member.commit(topic, {0: 3, 1: 3})
    member.close()
    report, code = switchover(group, "idc2", clusters=clusters(kafka_pair), drain_timeout_s=5)
    assert code == REFUSED and "let the sync run first" in report.detail


def test_a_stopped_one_way_group_moves_exactly(kafka_pair, chdb_dsn, one_way_topic):
    topic, n = one_way_topic
    b2 = kafka_pair.bootstrap("idc2")
    group = synced_then_stopped(kafka_pair, chdb_dsn, topic, {0: 10, 1: 20}, {0: 31, 1: 45}, "one_way:idc1")
    before = committed(b2, group, topic)
    report, code = switchover(group, "idc2", clusters=clusters(kafka_pair), drain_timeout_s=60, window=100)
    assert code == 0, report
    assert report.outcome == "switched" and (report.lost, report.duplicates) == (0, 0)
    after = committed(b2, group, topic)
    for p, c in {0: 31, 1: 45}.items():
        idc1, idc2 = values(kafka_pair, "idc1", topic, p, n), values(kafka_pair, "idc2", topic, p, n)
        copy_of_c = next(o for o, v in idc2.items() if v == idc1[c])
        assert after[p] == copy_of_c  # exact: resumes at the copy of the next record
        row = next(r for r in report.partitions if r.partition == p)
        # records, not offsets: MirrorMaker 2's exactly-once copies put transaction markers between them
        copies_read_again = sum(1 for o in idc2 if before[p] <= o < after[p])
        assert row.standby_before == before[p] and row.duplicates_at_standby == copies_read_again > 0


def test_a_stopped_two_way_group_moves_with_nothing_lost(kafka_pair, chdb_dsn, mirrored_topic):
    topic, n = mirrored_topic
    b2 = kafka_pair.bootstrap("idc2")
    # the sync needs a standby-origin anchor below c: the fixture's copies of idc2's records lie in
    # the later half of idc1's log
    last = {0: n - 4, 1: n - 2}
    group = synced_then_stopped(kafka_pair, chdb_dsn, topic, {0: n - 14, 1: n - 10}, last, "two_way")
    report, code = switchover(group, "idc2", clusters=clusters(kafka_pair), drain_timeout_s=60, window=200)
    assert code == 0, report
    after = committed(b2, group, topic)
    for p, c in last.items():
        idc1, idc2 = values(kafka_pair, "idc1", topic, p, n), values(kafka_pair, "idc2", topic, p, n)
        # every record below c, by offset: MirrorMaker 2's exactly-once copies of idc2's records put
        # transaction markers in idc1's log too, offsets without a record
        processed = {v for o, v in idc1.items() if o < c}
        t = after[p]
        assert all(v in processed for o, v in idc2.items() if o < t), (p, t)  # NO-LOSS, by the records themselves
        duplicates = sum(1 for o, v in idc2.items() if o >= t and v in processed)
        row = next(r for r in report.partitions if r.partition == p)
        assert row.verified_duplicates == duplicates and row.verified_lost == 0
        # the first record at t was not processed (or t is the log end): no record skipped past
        assert idc2.get(t) not in processed
