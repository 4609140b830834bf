"""The stale-partition fast-forward behind Apache Kafka's MirrorMaker 2 (devstack/mirrormaker2.py: both
flows in one JVM, the origin-header transform, copies dropped before they loop, exactly-once), on a
pair of clusters of its own. MirrorMaker 2 keeps no consumer group: its positions are Kafka Connect
source offsets in ``mm2-offsets.<source>.internal`` on each flow's target, configured here as
``OFFSET_PIPELINE_MIRROR_POSITIONS`` would (``connect-offsets:TOPIC``).

Checked on real brokers, in file order (the last test stops the mirror):
* the offsets topic as Connect 4.2 writes it: a stored offset is the last copied record's (one-way
  partitions: stored + 1 = the source's log end); partitions holding only the target's copies have no
  stored offset (Connect records none for a dropped record), and the positions the pipeline reads --
  carried over those copies -- equal the source log ends once everything is copied, both flows;
* an offsets topic that does not exist is a named reason, and the resource raises it named;
* a quiet low-traffic partition is fast-forwarded behind MirrorMaker 2 and a failover afterwards
  loses and repeats nothing;
* with MirrorMaker 2 stopped and a record it never copied, the partition is left alone
  (``mirror_stopped``) by the sensor and by the job.
"""

from __future__ import annotations

import re
import time
import uuid

import dagster as dg
import pytest

from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config
from offset_pipeline.kafka_io.connect_offsets import read_connect_offsets
from offset_pipeline.resources import KafkaClusterResource
from offset_pipeline.resources.mirrors import MirrorPositionGroup, MirrorPositionsUnreadable, MirrorsResource
from tests.conftest import free_port, started_pair, wait_for
from tests.helpers.fast_forward import WINDOW_S, StaleStack, fail_over, run_until_requested, skip_message
from tests.helpers.groups import Member
from tests.helpers.one_partition import committed, produce, read_values
from tests.helpers.records import log_end

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

TOPICS_REGEX = r"ffmm2\..*"
ONE_WAY, TWO_WAY = "ffmm2.one-way", "ffmm2.two-way"
PEER = {"idc1": "idc2", "idc2": "idc1"}


def offsets_topic(source: str) -> str:
    return f"mm2-offsets.{source}.internal"  # MirrorMaker 2's dedicated mode, on the flow's target


def mm2_mirrors(**changes) -> MirrorsResource:
    return MirrorsResource(position_groups=[
        MirrorPositionGroup(source=s, target=t, stored_on=t, offsets_topic=changes.get(s, offsets_topic(s)))
        for s, t in (("idc1", "idc2"), ("idc2", "idc1"))
    ])


@pytest.fixture(scope="module")
def own_pair(kafka_jars, tmp_path_factory):
    with started_pair(kafka_jars, tmp_path_factory.mktemp("ff-mm2-clusters")) as pair:
        try:
            yield pair
        finally:
            from offset_pipeline.kafka_io.partition_records import CONSUMERS

            CONSUMERS.close()  # pooled read consumers would keep calling the stopped brokers


@pytest.fixture(scope="module")
def mm2(own_pair, tmp_path_factory):
    own_pair.create_topic(ONE_WAY, partitions=2)
    own_pair.create_topic(TWO_WAY, partitions=2)
    mirror = MirrorMaker2(MirrorMaker2Config((own_pair.endpoint("idc1"), own_pair.endpoint("idc2")),
                                             tmp_path_factory.mktemp("ff-mm2"), topics=TOPICS_REGEX,
                                             rest_port=free_port()))
    mirror.start()
    try:
        yield mirror
    finally:
        mirror.stop()


def clusters_of(pair) -> dict[str, KafkaClusterResource]:
    return {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=pair.bootstrap(name))
            for name in ("idc1", "idc2")}


def count(pair, cluster: str, topic: str, partition: int) -> int:
    return len(read_values(pair.bootstrap(cluster), topic, 0, log_end(pair.bootstrap(cluster), topic, partition),
                           partition))


def test_positions_read_back_equal_the_source_log_ends_once_copied(own_pair, mm2):
    idc1, idc2 = own_pair.bootstrap("idc1"), own_pair.bootstrap("idc2")
    for p in (0, 1):
        produce(idc1, ONE_WAY, [f"one-{p}-{i}" for i in range(5 + p)], partition=p)
        produce(idc1, TWO_WAY, [f"a-{p}-{i}" for i in range(4)], partition=p)
        produce(idc2, TWO_WAY, [f"b-{p}-{i}" for i in range(3)], partition=p)
    for p in (0, 1):
        wait_for(lambda: count(own_pair, "idc2", ONE_WAY, p) == 5 + p, timeout=90, what=f"{ONE_WAY}[{p}] on idc2")
        for cluster in ("idc1", "idc2"):
            wait_for(lambda: count(own_pair, cluster, TWO_WAY, p) == 7, timeout=90, what=f"{TWO_WAY}[{p}] on {cluster}")
    wanted = [(t, p) for t in (ONE_WAY, TWO_WAY) for p in (0, 1)]
    ends = {cluster: {(t, p): log_end(own_pair.bootstrap(cluster), t, p) for t, p in wanted} for cluster in PEER}

    # As stored: the last copied record's offset + 1. idc1's one-way partitions hold only its own
    # records (no transaction markers): that is their log end. idc2's one-way partitions hold only
    # copies, which its flow drops: Connect stores no offset for them.
    def stored(source: str):
        conf = {"bootstrap.servers": own_pair.bootstrap(PEER[source]), "log_level": 3}
        return read_connect_offsets(conf, PEER[source], offsets_topic(source), source, timeout_s=30)

    wait_for(lambda: all(stored("idc1").positions.get((ONE_WAY, p)) == ends["idc1"][(ONE_WAY, p)] for p in (0, 1)),
             timeout=60, what="idc1->idc2's stored offsets of the one-way topic at idc1's log ends")
    from_idc2 = stored("idc2")
    assert from_idc2.unreadable is None and from_idc2.records_read > 0
    assert not any((ONE_WAY, p) in from_idc2.positions for p in (0, 1)), from_idc2.positions
    assert all(0 < from_idc2.positions[(TWO_WAY, p)] <= ends["idc2"][(TWO_WAY, p)] for p in (0, 1))

    # As the pipeline reads them: carried over the peer's copies, at every source log end, both flows.
    mirrors, clusters = mm2_mirrors(), clusters_of(own_pair)

    def read_back(source: str):
        return mirrors.positions(clusters, source, PEER[source], wanted)

    for source in ("idc1", "idc2"):
        wait_for(lambda: read_back(source) == ends[source], timeout=60,
                 what=f"the {source}->{PEER[source]} positions at {source}'s log ends")

    # A topic that is not there: a named reason from the reader, raised named by the resource.
    missing = read_connect_offsets({"bootstrap.servers": idc2, "log_level": 3}, "idc2", "mm2-offsets.nowhere.internal",
                                   "idc1", timeout_s=10)
    assert missing.unreadable == "idc2: mm2-offsets.nowhere.internal does not exist" and not missing.positions
    with pytest.raises(MirrorPositionsUnreadable, match="mm2-offsets.nowhere.internal does not exist"):
        mm2_mirrors(idc1="mm2-offsets.nowhere.internal").positions(clusters, "idc1", "idc2", wanted)


def test_a_quiet_low_traffic_partition_is_fast_forwarded_behind_mirrormaker2(own_pair, mm2, chdb_dsn):
    idc1, idc2 = own_pair.bootstrap("idc1"), own_pair.bootstrap("idc2")
    topic = f"ffmm2.quiet.{uuid.uuid4().hex[:6]}"
    own_pair.create_topic(topic, partitions=1)
    group = f"low 'traffic' mm2 ü {uuid.uuid4().hex[:6]}"
    produce(idc1, topic, [f"q{i}" for i in range(3)])  # all on the active side: no header anchor
    wait_for(lambda: count(own_pair, "idc2", topic, 0) == 3, timeout=90, what=f"{topic} copied to idc2")
    member = Member(idc1, group, topic)
    c = log_end(idc1, topic)
    member.commit(topic, {0: c})  # the group processed everything
    stack = StaleStack(own_pair, chdb_dsn, [group], [topic], mm2_mirrors(), window_s=20.0)
    try:
        stack.cycle()
        assert committed(idc2, group, topic) is None  # nothing the cycle could sync
        [request], _ = run_until_requested(stack, 120)
        config = request.run_config["ops"]["offset_fast_forwards"]["config"]
        assert (config["group_id"], config["active"], config["standby"]) == (group, "idc1", "idc2")
        run = stack.fast_forward(request.run_config)
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        t = log_end(idc2, topic)
        assert (row["outcome"], row["decision"], row["new_offset"], row["applied"]) == (
            "fast_forwarded", "commit", t, True)
        assert committed(idc2, group, topic) == t
    finally:
        member.close()
    # Failover: nothing below t unprocessed, and the group reads only what comes after.
    lost, read_again = fail_over(own_pair, group, topic, c, ["after-failover"])
    assert lost == [] and len(read_values(idc2, topic, 0, t)) == 3
    assert read_again == ["after-failover"]  # 0 duplicates, and the new record is not lost


def test_a_record_mirrormaker2_never_copied_leaves_the_partition_alone(own_pair, mm2, chdb_dsn):
    idc1, idc2 = own_pair.bootstrap("idc1"), own_pair.bootstrap("idc2")
    topic = f"ffmm2.stopped.{uuid.uuid4().hex[:6]}"
    own_pair.create_topic(topic, partitions=1)
    group = f"behind-mm2-{uuid.uuid4().hex[:6]}"
    produce(idc1, topic, ["m0", "m1"])
    wait_for(lambda: count(own_pair, "idc2", topic, 0) == 2, timeout=90, what=f"{topic} copied to idc2")
    mirrors, clusters = mm2_mirrors(), clusters_of(own_pair)
    wait_for(lambda: mirrors.positions(clusters, "idc1", "idc2", [(topic, 0)]).get((topic, 0)) == 2, timeout=60,
             what="the idc1->idc2 position at 2")
    mm2.stop()  # MirrorMaker 2 stops ...
    produce(idc1, topic, ["m2", "m3"])  # ... and these never reach idc2
    member = Member(idc1, group, topic)
    try:
        member.commit(topic, {0: log_end(idc1, topic)})
        stack = StaleStack(own_pair, chdb_dsn, [group], [topic], mirrors)
        expected = (rf"'{group}' {re.escape(topic)}\[0\]: mirror_stopped \(the idc1->idc2 mirror is at 2, 2 behind "
                    r"idc1's log end 4, which has not moved for \d+s")
        reasons: list[str] = []
        deadline = time.monotonic() + 120
        while not (reasons and re.search(expected, reasons[-1])):
            assert time.monotonic() < deadline, f"no mirror_stopped rejection; skip reasons: {reasons[-3:]}"
            stack.cycle()
            result = stack.tick()
            assert not (isinstance(result, dg.SensorResult) and result.run_requests), "MirrorMaker 2 is stopped"
            reasons.append(skip_message(result))
        ask = {"group_id": group, "active": "idc1", "standby": "idc2", "window_s": WINDOW_S, "partitions": [{
            "topic": topic, "partition": 0, "active_end": log_end(idc1, topic), "standby_end": log_end(idc2, topic),
            "stable_since_ms": int(time.time() * 1000) - 60_000}]}
        run = stack.fast_forward({"ops": {"offset_fast_forwards": {"config": ask}}})
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        assert (row["outcome"], row["rejection"], row["applied"]) == ("left_alone", "mirror_stopped", False), row
        assert "idc1->idc2 mirror is at 2" in row["reason"]
        assert committed(idc2, group, topic) is None
    finally:
        member.close()
