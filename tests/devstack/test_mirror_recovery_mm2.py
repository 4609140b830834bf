"""MirrorMaker 2 (with the project's Connect transform, exactly-once) survives its clusters: a broker
killed (``kill -9``) and restarted on the same port and data costs the copy time, never records, and
never a record copied twice for a ``read_committed`` reader.

The mirror the stack runs by default is the one under these faults (the harness's Python mirror had
them in a module of its own until it stopped being the default). One flow, idc1 -> idc2, on a pair
of clusters of the module's own (the session's brokers are shared) and one MirrorMaker 2 for the
module. Traffic is produced on the source all along. The
tests run in file order:

1. the target broker killed twice: once briefly, once for longer than MirrorMaker 2's transaction
   timeout and its Connect worker's session timeout (both 10 s here), so its open transaction is
   aborted and its worker's group membership expires while the broker is away;
2. the source broker killed once, briefly.

Afterwards each target partition, read ``read_committed``, must hold every source record exactly
once, in the source's order, each copy's ``IDC`` header naming idc1 and its ``Offset`` header the
record's exact offset there: a lost, repeated or reordered copy, or a wrong header, fails the test.

MirrorMaker 2 runs under its keeper (``MirrorMaker2Keeper``), which restarts it when one of its tasks
failed and stays stopped (Connect leaves a failed task stopped until someone restarts it) or its JVM
exited, as a deployment's supervisor would. The restarts it made are printed with the figures; a
restart is what a fault cost, never a pass: the copy must still be exact.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config, MirrorMaker2Keeper
from devstack.records import read_partition
from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER

from tests.conftest import THROWAWAY_MIRROR_GRACE_S, KafkaPair, free_port, started_pair, wait_for
from tests.helpers.traffic import SteadyTraffic

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

PARTITIONS = 2
TARGET_KILLED, SOURCE_KILLED = "mm2rec.target-kill", "mm2rec.source-kill"
#: MirrorMaker 2's topic regex (Java, whole names): this module's topics only.
MM2_TOPICS = "mm2rec[.].*"
# How long a killed broker stays down: the length of the fault, not a wait for readiness. The long
# one outlasts MirrorMaker 2's transaction timeout (10 s, devstack/mirrormaker2.py) and its Connect
# worker's session timeout (10 s, Connect's default).
SHORT_OUTAGE_S = 4.0
LONG_OUTAGE_S = 15.0
#: Copies to see arrive before a kill and after a restart (the traffic makes ~100 a second).
FLOWING = 150


@pytest.fixture(scope="module")
def own_pair(kafka_jars, tmp_path_factory):
    with started_pair(kafka_jars, tmp_path_factory.mktemp("mm2-recovery-clusters")) as pair:
        for topic in (TARGET_KILLED, SOURCE_KILLED):
            pair.create_topic(topic, partitions=PARTITIONS)
        yield pair


@pytest.fixture(scope="module")
def mm2(own_pair, tmp_path_factory):
    """The module's MirrorMaker 2, idc1 -> idc2 only, exactly-once, under its keeper (restarted when
    its JVM exits or a task failed, as a deployment's supervisor would)."""
    keeper = MirrorMaker2Keeper(MirrorMaker2(MirrorMaker2Config(
        (own_pair.endpoint("idc1"), own_pair.endpoint("idc2")), Path(tmp_path_factory.mktemp("mm2")),
        topics=MM2_TOPICS, rest_port=free_port(), exactly_once=True, one_way=True)))
    took = keeper.start()
    print(f"\nMirrorMaker 2 (idc1 -> idc2, exactly-once) copied its probe {took:.1f}s after the JVM started")
    try:
        yield keeper
    finally:
        keeper.stop(grace_s=THROWAWAY_MIRROR_GRACE_S)


class CopyCount:
    """Committed copies on the target so far, read on from where the last count stopped (the log
    grows by thousands of records: reading it whole at every poll would cost the brokers' cores)."""

    def __init__(self, pair: KafkaPair, topic: str):
        self.bootstrap, self.topic = pair.bootstrap("idc2"), topic
        self.next_offset = {p: 0 for p in range(PARTITIONS)}
        self.count = 0

    def __call__(self) -> int:
        for partition in range(PARTITIONS):
            try:
                found = read_partition(self.bootstrap, self.topic, partition, start=self.next_offset[partition],
                                       timeout_s=5)
            except Exception:  # noqa: BLE001 - a broker coming back, a transaction still open: next poll
                continue
            if found:
                self.count += len(found)
                self.next_offset[partition] = found[-1].offset + 1
        return self.count


def assert_exact_copy(pair: KafkaPair, topic: str) -> int:
    """Each idc2 partition (read_committed) holds idc1's records once each, in idc1's order, each
    with the origin headers of its source record. Returns the number of records compared."""
    compared = 0
    for partition in range(PARTITIONS):
        sources = read_partition(pair.bootstrap("idc1"), topic, partition, timeout_s=60)
        mirrored = read_partition(pair.bootstrap("idc2"), topic, partition, timeout_s=60)
        source_ids = [json.loads(r.value)["id"] for r in sources]
        copy_ids = [json.loads(r.value)["id"] for r in mirrored]
        missing = sorted(set(source_ids) - set(copy_ids))
        repeated = len(copy_ids) - len(set(copy_ids))
        assert not missing and not repeated, \
            f"[{partition}] {len(missing)} lost (first {missing[:5]}), {repeated} copied more than once"
        assert copy_ids == source_ids, f"[{partition}] copies are out of order"
        assert [(r.header(ORIGIN_CLUSTER_HEADER), r.header(ORIGIN_OFFSET_HEADER)) for r in mirrored] == \
            [(b"idc1", str(r.offset).encode()) for r in sources], f"[{partition}] a copy names another origin"
        compared += len(sources)
    return compared


def run_faults(pair: KafkaPair, keeper: MirrorMaker2Keeper, victim: str, outages: list[float], topic: str) -> dict:
    copies = CopyCount(pair, topic)

    def flowing(at_least: int):
        return copies() >= at_least

    restarts_before = keeper.restarts
    resumed_after: list[float] = []
    with SteadyTraffic(pair.bootstrap("idc1"), topic, per_second=100.0, partitions=PARTITIONS) as traffic:
        for kill, outage_s in enumerate(outages):
            before = copies()
            wait_for(lambda: flowing(before + FLOWING), timeout=180,
                     what=f"copies flowing before kill {kill + 1} of {victim}")
            assert pair.cluster(victim).kill(), f"no {victim} broker to kill"
            time.sleep(outage_s)
            pair.cluster(victim).start(timeout=180)
            back, at_restart = time.monotonic(), copies()
            wait_for(lambda: flowing(at_restart + FLOWING), timeout=240,
                     what=f"copies flowing after kill {kill + 1} of {victim}")
            resumed_after.append(time.monotonic() - back)
        traffic.stop()
        assert not traffic.failed, traffic.failed[:3]
        sent = len(traffic.acked)
        wait_for(lambda: flowing(sent), timeout=240, what=f"all {sent} records copied")
    time.sleep(2)  # a copy written twice would have time to show up before the count
    compared = assert_exact_copy(pair, topic)
    assert compared == sent, f"{compared} records on idc1, {sent} acknowledged"
    summary = {
        "victim": victim, "outages_s": outages, "records": sent,
        "copies_flowing_again_after_restart_s": [round(s, 1) for s in resumed_after],
        "mm2_restarts_by_its_keeper": keeper.restarts - restarts_before,
    }
    print(f"\nMirrorMaker 2 recovery ({victim} killed): {json.dumps(summary)}")
    return summary


def test_target_broker_killed_twice_once_past_every_timeout_mm2_copies_everything_once_in_order(own_pair, mm2):
    run_faults(own_pair, mm2, "idc2", [SHORT_OUTAGE_S, LONG_OUTAGE_S], TARGET_KILLED)
    assert mm2.mirror.running()


def test_source_broker_killed_mm2_copies_everything_once_in_order(own_pair, mm2):
    run_faults(own_pair, mm2, "idc1", [SHORT_OUTAGE_S], SOURCE_KILLED)
    assert mm2.mirror.running()
