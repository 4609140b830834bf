"""MirrorMaker 2 with the project's transform as the mirror of two clusters (devstack/mirrormaker2.py),
on a pair of clusters of its own (its kill -9 and its Connect groups must not touch the session's).

One MirrorMaker 2 serves the module (a start takes seconds): the tests run in file order, the
crash test restarts it and the last test stops it for a run of its own (the command line).

Invariants checked on real brokers:
* every copy's headers parse (``parse_origin``) to ``CopiedFrom(<source>, <its exact offset there>)``
  and it holds the key and value of that record; every local record parses as local;
* same-named topics copied both ways never loop: a cluster holds its own records and one copy of
  each of the other's, nothing more (no copy of a copy);
* a ``kill -9`` while copying, then a restart: no record lost, none copied twice (read_committed);
* a taken REST port is an error naming it and the log; the JVM dies with the process that started it;
* the named topics only: another MirrorMaker 2's heartbeats topic is not copied.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from devstack.errors import DevStackError
from devstack.liveness import pid_alive
from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config, MirrorMaker2Keeper
from devstack.records import read_partition
from offset_pipeline.translation.headers import LOCAL, CopiedFrom, parse_origin

from tests.conftest import KafkaPair, free_port, started_pair, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

PARTITIONS = 2
TOPICS_REGEX = r"mm2-test\..*"
ONE_WAY, TWO_WAY, CRASH = "mm2-test.one-way", "mm2-test.two-way", "mm2-test.crash"
PEER = {"idc1": "idc2", "idc2": "idc1"}


#: a heartbeats topic of another MirrorMaker 2 on these clusters: the harness's copies none of them
OTHERS_HEARTBEATS = "elsewhere.heartbeats"


@pytest.fixture(scope="module")
def own_pair(kafka_jars, tmp_path_factory):
    with started_pair(kafka_jars, tmp_path_factory.mktemp("mm2-clusters")) as pair:
        for topic in (ONE_WAY, TWO_WAY, CRASH):
            pair.create_topic(topic, partitions=PARTITIONS)
        pair.create_topic(OTHERS_HEARTBEATS, on=("idc1",), partitions=1)
        produce(pair.bootstrap("idc1"), OTHERS_HEARTBEATS, [b"beat"])
        yield pair


def mm2_config(pair: KafkaPair, work_dir, rest_port=None) -> MirrorMaker2Config:
    return MirrorMaker2Config((pair.endpoint("idc1"), pair.endpoint("idc2")), work_dir, topics=TOPICS_REGEX,
                              rest_port=rest_port or free_port())


@pytest.fixture(scope="module")
def mm2(own_pair, tmp_path_factory):
    """The module's MirrorMaker 2 under its keeper, as a deployment runs it: Kafka Connect can leave
    an exactly-once task stopped for good (docs/operating/mirrormaker2.md), and the keeper restarts
    the JVM then; the crash test kills the JVM and the keeper starts it again."""
    keeper = MirrorMaker2Keeper(MirrorMaker2(mm2_config(own_pair, tmp_path_factory.mktemp("mm2"))))
    took = keeper.start()
    print(f"\nMirrorMaker 2 (both flows, exactly-once) copied its probes {took:.1f}s after the JVM started")
    try:
        yield keeper
    finally:
        keeper.stop()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> dict[bytes, tuple[int, int]]:
    """Each value (also its key) to partition ``i % PARTITIONS``; value -> (partition, offset)."""
    placed: dict[bytes, tuple[int, int]] = {}
    failed: list[str] = []

    def delivered(err, msg):
        if err is None:
            placed[msg.value()] = (msg.partition(), msg.offset())
        else:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for i, value in enumerate(values):
        producer.produce(topic, key=value, value=value, partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0 and not failed, failed
    return placed


def records(pair: KafkaPair, cluster: str, topic: str, isolation: str = "read_committed"):
    return [record for partition in range(PARTITIONS)
            for record in read_partition(pair.bootstrap(cluster), topic, partition, isolation=isolation)]


def origin(record, cluster: str):
    return parse_origin(list(record.headers), read_from=cluster, peer=PEER[cluster])


def test_copies_both_ways_name_their_exact_origin_and_never_loop(own_pair, mm2):
    produced = {  # (cluster, topic) -> value -> (partition, offset)
        ("idc1", ONE_WAY): produce(own_pair.bootstrap("idc1"), ONE_WAY, [b"idc1-one-%d" % i for i in range(30)]),
        ("idc1", TWO_WAY): produce(own_pair.bootstrap("idc1"), TWO_WAY, [b"idc1-two-%d" % i for i in range(30)]),
        ("idc2", TWO_WAY): produce(own_pair.bootstrap("idc2"), TWO_WAY, [b"idc2-two-%d" % i for i in range(30)]),
    }
    # Once each side's records are copied, one more record per partition on each side: a flow
    # copies a partition in order, so when these last ones have arrived, anything a flow would
    # have copied back (the copies that came before them in the same partition) has arrived too.
    # 120 s: a task Kafka Connect stopped costs a restart of the JVM by the keeper first
    wait_for(lambda: len(records(own_pair, "idc2", ONE_WAY)) == 30, timeout=120, what="idc1's one-way records on idc2")
    for cluster in ("idc1", "idc2"):
        wait_for(lambda: len(records(own_pair, cluster, TWO_WAY)) == 60, timeout=60, what=f"both sides' records on {cluster}")
    # copying, so past its first listing of topics: another MirrorMaker 2's heartbeats stay where they are
    listed = AdminClient({"bootstrap.servers": own_pair.bootstrap("idc2"), "log_level": 3}).list_topics(timeout=30).topics
    assert not [t for t in listed if OTHERS_HEARTBEATS in t], sorted(listed)
    for cluster in ("idc1", "idc2"):
        for topic in (ONE_WAY, TWO_WAY):
            produced.setdefault((cluster, topic), {}).update(
                produce(own_pair.bootstrap(cluster), topic, [b"%s-last-%s-%d" % (cluster.encode(), topic.encode(), p)
                                                             for p in range(PARTITIONS)]))
    for cluster in ("idc1", "idc2"):
        for topic in (ONE_WAY, TWO_WAY):
            expected = len(produced[(cluster, topic)]) + len(produced[(PEER[cluster], topic)])
            wait_for(lambda: len(records(own_pair, cluster, topic)) >= expected, timeout=60,
                     what=f"{expected} records of {topic} on {cluster}")

    for cluster in ("idc1", "idc2"):
        for topic in (ONE_WAY, TWO_WAY):
            local, peer = produced[(cluster, topic)], produced[(PEER[cluster], topic)]
            by_position = {where: value for value, where in peer.items()}
            copies = collections.Counter()
            seen = records(own_pair, cluster, topic)
            for record in seen:
                found = origin(record, cluster)
                if record.value in local:
                    assert found == LOCAL, (cluster, topic, record)
                    assert local[record.value] == (record.partition, record.offset)
                    continue
                # anything else is a copy of exactly the record its headers name
                assert isinstance(found, CopiedFrom), (cluster, topic, record, found)
                assert found.cluster == PEER[cluster]
                assert by_position.get((record.partition, found.offset)) == record.value == record.key, (cluster, record)
                copies[record.value] += 1
            assert copies == collections.Counter(peer.keys()), f"{topic} on {cluster}: every peer record copied once"
            assert len(seen) == len(local) + len(peer), f"{topic} on {cluster}: no copy of a copy"


def test_a_taken_rest_port_is_an_error_naming_it_and_the_log(own_pair, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        mirror = MirrorMaker2(mm2_config(own_pair, tmp_path / "mm2", rest_port=port))
        with pytest.raises(DevStackError) as error:
            mirror.start()
    assert f"127.0.0.1:{port}" in str(error.value) and str(mirror.log_path) in str(error.value)
    assert not mirror.running()


class Traffic:
    """Records ``idc1-crash-<i>`` produced on ``idc1`` in a thread, ``count`` in all, in small bursts."""

    def __init__(self, bootstrap: str, count: int):
        self.count = count
        self.placed: dict[bytes, tuple[int, int]] = {}
        self.failed: list[str] = []
        self._bootstrap = bootstrap
        self._thread = threading.Thread(target=self._run, name="mm2-crash-traffic", daemon=True)

    def _delivered(self, err, msg):
        if err is None:
            self.placed[msg.value()] = (msg.partition(), msg.offset())
        else:
            self.failed.append(str(err))

    def _run(self):
        producer = Producer({"bootstrap.servers": self._bootstrap, "enable.idempotence": True, "log_level": 3,
                             "linger.ms": 5})
        for i in range(self.count):
            value = b"idc1-crash-%d" % i
            producer.produce(CRASH, key=value, value=value, partition=i % PARTITIONS, on_delivery=self._delivered)
            if i % 50 == 49:
                producer.flush(30)
                threading.Event().wait(0.02)  # about 2,000 records a second: the copying spans the kill
        producer.flush(30)

    def start(self):
        self._thread.start()

    def join(self):
        self._thread.join(timeout=120)
        assert not self._thread.is_alive() and not self.failed and len(self.placed) == self.count, self.failed[:3]


def test_kill_9_while_copying_then_restart_loses_nothing_and_copies_nothing_twice(own_pair, mm2):
    traffic = Traffic(own_pair.bootstrap("idc1"), count=20_000)
    traffic.start()
    # Killed once copies are arriving and the source is still being written to.
    wait_for(lambda: len(records(own_pair, "idc2", CRASH)) >= 2_000, timeout=60, what="copies arriving on idc2")
    restarts = mm2.restarts
    assert mm2.mirror.kill()
    copied_before_restart = len(records(own_pair, "idc2", CRASH, isolation="read_uncommitted"))
    # the keeper finds the JVM gone and starts it again, as a deployment's supervisor would
    wait_for(lambda: mm2.restarts > restarts, timeout=300, what="the keeper's restart of the killed JVM")
    restart_s = mm2.mirror.ready_after_s
    traffic.join()
    wait_for(lambda: len(records(own_pair, "idc2", CRASH)) >= traffic.count, timeout=120, what="every record copied")

    committed = records(own_pair, "idc2", CRASH)
    upstream = [(record.partition, origin(record, "idc2")) for record in committed]
    assert all(isinstance(found, CopiedFrom) and found.cluster == "idc1" for _, found in upstream)
    copies_of = collections.Counter((partition, found.offset) for partition, found in upstream)
    missing = set(traffic.placed.values()) - set(copies_of)
    repeated = {where: n for where, n in copies_of.items() if n > 1}
    uncommitted = len(records(own_pair, "idc2", CRASH, isolation="read_uncommitted"))
    print(f"\nkill -9 after {copied_before_restart} copies: restart took {restart_s:.1f}s; {traffic.count} records, "
          f"{len(committed)} committed copies, {len(repeated)} copied twice, {len(missing)} missing; "
          f"{uncommitted - len(committed)} records of aborted transactions (read_uncommitted only)")
    assert not missing, f"{len(missing)} records never copied, e.g. {sorted(missing)[:5]}"
    assert not repeated, f"{len(repeated)} records copied more than once, e.g. {sorted(repeated.items())[:5]}"
    for partition in range(PARTITIONS):  # in order, partition to partition
        offsets = [found.offset for p, found in upstream if p == partition]
        assert offsets == sorted(offsets)
    for record, (_, found) in zip(committed, upstream):
        assert traffic.placed[record.value] == (record.partition, found.offset)


def test_the_jvm_dies_with_the_process_that_started_it(own_pair, mm2, tmp_path):
    """The command line (``python -m devstack.mirrormaker2``) killed with ``kill -9``: its JVM goes too.
    Runs last: the module's MirrorMaker 2 is stopped first (both would share one Connect group)."""
    mm2.stop()
    log = tmp_path / "cli.out"
    cmd = [sys.executable, "-m", "devstack.mirrormaker2", "--cluster", f"idc1={own_pair.bootstrap('idc1')}",
           "--cluster", f"idc2={own_pair.bootstrap('idc2')}", "--work-dir", str(tmp_path / "mm2"),
           "--topics", TOPICS_REGEX, "--rest-port", str(free_port())]
    with open(log, "wb") as out:
        cli = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    jvm = None
    try:
        ready = wait_for(lambda: "copies both ways" in log.read_text() or cli.poll() is not None, timeout=150,
                         what="the command's MirrorMaker 2 to copy both ways")
        assert ready and cli.poll() is None, log.read_text()
        jvm = int(log.read_text().split("JVM pid ")[1].split(")")[0])
        assert pid_alive(jvm)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait(timeout=10)
        wait_for(lambda: not pid_alive(jvm), timeout=30, what=f"JVM pid {jvm} to die with its parent")
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()
        if jvm is not None and pid_alive(jvm):
            os.kill(jvm, signal.SIGKILL)
