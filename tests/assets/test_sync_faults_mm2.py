"""The sync behind MirrorMaker 2 through its clusters' faults: real brokers, MirrorMaker 2 with the
project's Connect transform (both flows, exactly-once), and the sync in its default mode, the
continuous run (asset ``offset_continuous_sync``, chdb; its few partitions translated in a child
process, no Spark job).

A pair of clusters of the module's own (the brokers are killed and stopped) and one MirrorMaker 2 for
the module; the tests run in file order, each with groups of its own, live on idc1 (their active
cluster) and committing there what they processed:

1. both brokers killed with ``kill -9`` in turn (the standby first, then the active) and restarted on
   their port and data while records are produced on both sides; once MirrorMaker 2 has copied
   them, a continuous run commits standby offsets for a one-way group and a two-way group, and each
   group, restarted on the standby where the sync left it, reads every record it had not processed:
   none lost (records compared by value, each value unique). The one-way group stopped among the
   records of the faults. The two-way group stopped in a steady stretch after them: while a flow is
   down, the active side's two-way log grows records of its own only, and a group stopped more than
   the translation's backward window (50 records) into such a stretch has no copy of a standby
   record below its offset to anchor on, so the sync rightly commits nothing for it (``no_anchor``;
   the failover trials over MirrorMaker 2 show that case);
2. the standby cluster stopped (records produced on idc1 meanwhile, the groups gone on into them)
   while a continuous run syncs: its cycles name every partition of both groups
   ``cluster_unavailable`` and apply no commit; once the cluster is back and MirrorMaker 2 has copied
   what idc1 produced meanwhile, the same run commits both groups, and the failover loses nothing.

A one-way group is synced at most at the copy of its next record, never past it. Mostly exactly
there (no duplicate), but not always after the kills: the active side holds no copy to anchor on,
so the sync finds the copy of the group's next record by a timestamp search on the standby, refined
by record identity; a copy keeps its source record's timestamp while the marker of MirrorMaker 2's
transaction carries the broker's clock, and Kafka's timestamp lookup counts markers too. While MirrorMaker 2 catches up after a fault
those markers are seconds later than the copies around them, so the standby's timestamp lookup
lands on a marker hundreds of records below the copy; the forward refinement (200 records) can end
before reaching it and the sync commits there: safe, with the records in between read again. A
two-way group resumes at the standby's records after its anchor: a few records read again
(duplicates), never one missed.

MirrorMaker 2 runs under its keeper (``MirrorMaker2Keeper``), which restarts it when one of its tasks
failed (Connect leaves a failed task stopped) or its JVM exited, as a deployment's supervisor would;
its restarts are printed.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config, MirrorMaker2Keeper
from devstack.records import StoredRecord, read_partition
from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.kafka_io.partition_records import CONSUMERS
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER

from tests.conftest import THROWAWAY_BROKER_GRACE_S, THROWAWAY_MIRROR_GRACE_S, KafkaPair, free_port, started_pair, wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.run_logs import CLUSTER_UNAVAILABLE, logged, request_stop
from tests.helpers.sync_cycles import checks

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

CLUSTERS = ("idc1", "idc2")
PEER = {"idc1": "idc2", "idc2": "idc1"}
PARTITIONS = 2
ONE_WAY, TWO_WAY = "mm2sync.one-way", "mm2sync.two-way"
SHAPES = {ONE_WAY: "one_way:idc1", TWO_WAY: "two_way"}
#: What each cluster produces: the one-way topic on idc1 only, the two-way topic on both.
STREAMS = (("idc1", ONE_WAY), ("idc1", TWO_WAY), ("idc2", TWO_WAY))
MM2_TOPICS = "mm2sync[.].*"
KILL_OUTAGE_S = 4.0
#: Records per stream produced after the broker kills, and on idc1 while idc2 is stopped: both
#: fewer than the translation's backward window (50 records), so a two-way group stopped among
#: them finds a copy of the standby's records below its offset.
STEADY_RECORDS, OUTAGE_RECORDS = 40, 40
#: The continuous runs' longest lengths (each ends as soon as its groups are synced): the first
#: syncs the groups once after the kills; the second spans cycles without idc2
#: (``DOWN_WHILE_RUNNING_S``), its return and MirrorMaker 2's catching up.
KILLS_RUN_S, DOWN_RUN_S, DOWN_WHILE_RUNNING_S = 90.0, 120.0, 3.0
ASSET = "offset_continuous_sync"


@pytest.fixture(scope="module")
def own_pair(kafka_jars, tmp_path_factory):
    with started_pair(kafka_jars, tmp_path_factory.mktemp("mm2-sync-faults-clusters")) as pair:
        try:
            for topic in (ONE_WAY, TWO_WAY):
                pair.create_topic(topic, partitions=PARTITIONS)
            yield pair
        finally:
            # The sync's pooled read consumers point at these brokers: stopped, they would reconnect
            # (and log) for the rest of the session.
            CONSUMERS.close()


@pytest.fixture(scope="module")
def mm2(own_pair, tmp_path_factory):
    """The module's MirrorMaker 2, both flows, exactly-once, under its keeper (restarted when its JVM
    exits or a task failed, as a deployment's supervisor would)."""
    keeper = MirrorMaker2Keeper(MirrorMaker2(MirrorMaker2Config(
        (own_pair.endpoint("idc1"), own_pair.endpoint("idc2")), Path(tmp_path_factory.mktemp("mm2")),
        topics=MM2_TOPICS, rest_port=free_port(), exactly_once=True)))
    took = keeper.start()
    print(f"\nMirrorMaker 2 (both flows, exactly-once) copied its probes {took:.1f}s after the JVM started")
    try:
        yield keeper
    finally:
        keeper.stop(grace_s=THROWAWAY_MIRROR_GRACE_S)


class Traffic:
    """Records with unique values (``<cluster>-<topic>-<i>``) on each of ``STREAMS``, round-robin over
    the partitions, a burst every ``pause_s``, until stopped; one idempotent producer per cluster.
    ``only`` limits it to some clusters (one is down)."""

    def __init__(self, pair: KafkaPair, label: str, only=CLUSTERS, pause_s: float = 0.1, burst: int = 4):
        self.streams = [(cluster, topic) for cluster, topic in STREAMS if cluster in only]
        self.label, self.pause_s, self.burst = label, pause_s, burst
        self.acked: dict[tuple[str, str], int] = collections.Counter()
        self.failed: list[str] = []
        self._producers = {cluster: Producer({"bootstrap.servers": pair.bootstrap(cluster), "enable.idempotence": True,
                                              "log_level": 0}) for cluster in only}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mm2-sync-traffic-{label}", daemon=True)

    def _delivered(self, stream):
        def delivered(err, msg):
            if err is None:
                self.acked[stream] += 1
            else:
                self.failed.append(str(err))
        return delivered

    def _run(self):
        i = 0
        while not self._stop.is_set():
            for _ in range(self.burst):
                for cluster, topic in self.streams:
                    self._producers[cluster].produce(
                        topic, value=f"{cluster}-{topic}-{self.label}-{i}".encode(), partition=i % PARTITIONS,
                        on_delivery=self._delivered((cluster, topic)))
                i += 1
            for producer in self._producers.values():
                producer.poll(0)
            self._stop.wait(self.pause_s)

    def __enter__(self):
        self._thread.start()
        return self

    def stop(self) -> dict[tuple[str, str], int]:
        """Stops and delivers everything; returns the records acknowledged per stream."""
        self._stop.set()
        self._thread.join(timeout=30)
        for cluster, producer in self._producers.items():
            assert producer.flush(120) == 0, f"the producer on {cluster} could not deliver everything"
        assert not self.failed, self.failed[:3]
        return dict(self.acked)

    def __exit__(self, *exc):
        if not self._stop.is_set():
            self.stop()


class CopiesSeen:
    """Per (cluster, topic): the committed copies of the peer's records read so far, read on from
    where the last count stopped; a cluster that cannot be read keeps its count until the next call."""

    def __init__(self, pair: KafkaPair):
        self.pair = pair
        self.next_offset: dict[tuple[str, str, int], int] = collections.defaultdict(int)
        self.copies: dict[tuple[str, str], int] = collections.Counter()

    def caught_up(self, produced: dict[tuple[str, str], int]) -> bool:
        """Every record of ``produced`` ((source, topic) -> count, counted from the module's start) is
        copied to the source's peer."""
        for (source, topic), count in produced.items():
            target = PEER[source]
            if self.copies[(target, topic)] >= count:
                continue
            for partition in range(PARTITIONS):
                key = (target, topic, partition)
                try:
                    found = read_partition(self.pair.bootstrap(target), topic, partition, start=self.next_offset[key],
                                           timeout_s=5)
                except Exception:  # noqa: BLE001 - a broker coming back, a transaction still open: next call
                    continue
                if found:
                    self.copies[(target, topic)] += sum(1 for r in found if r.header(ORIGIN_CLUSTER_HEADER) is not None)
                    self.next_offset[key] = found[-1].offset + 1
            if self.copies[(target, topic)] < count:
                return False
        return True


def wait_copied(seen: CopiesSeen, produced: dict, what: str, timeout: float = 180) -> None:
    wait_for(lambda: seen.caught_up(produced), timeout=timeout, what=what)


def resources(pair: KafkaPair, chdb_dsn: str) -> dict:
    return {
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=pair.bootstrap("idc1")),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=pair.bootstrap("idc2")),
        "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        "spark": SparkResource(),
    }


class ContinuousRun:
    """The project's default sync mode, the continuous run (asset ``offset_continuous_sync``, back-to-
    back cycles, a few partitions translated in a child process: no Spark job), for ``groups``, in a
    thread for ``run_for_s``."""

    def __init__(self, res: dict, groups: list[str], run_for_s: float):
        self.res = res
        include = "^(" + "|".join(groups) + ")$"  # the groups' names are plain: letters, digits, dashes
        self.config = {"ops": {ASSET: {"config": {
            "run_for_s": run_for_s, "checkpoint_s": 5,
            "snapshot": {"group_include": include, "kafka_timeout_s": 3.0},
            "translation": {"topic_shapes": SHAPES},
        }}}, "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        self.run_for_s = run_for_s
        self.instance = dg.DagsterInstance.ephemeral()  # its event log says when a cycle met a fault
        self.outcome: dict = {}
        self.thread = threading.Thread(target=self._run, name="mm2-sync-continuous", daemon=True)

    def _run(self):
        self.outcome["result"] = dg.materialize([offset_continuous_sync], resources=self.res, run_config=self.config,
                                                instance=self.instance, raise_on_error=False)

    def __enter__(self):
        self.thread.start()
        return self

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        """End the run at its next checkpoint (the test has seen what it waited for)."""
        if self.thread.is_alive():
            request_stop(self.instance)

    def result(self) -> dg.ExecuteInProcessResult:
        self.thread.join(self.run_for_s + 180)
        assert not self.thread.is_alive(), "the continuous run did not end"
        result = self.outcome["result"]
        assert result.success, "a fault of a cluster must not fail the run"
        return result

    def __exit__(self, *exc):
        self.thread.join(self.run_for_s + 180)


def metadata(result) -> dict:
    [materialization] = result.asset_materializations_for_node(ASSET)
    return {k: v.value for k, v in materialization.metadata.items()}


def commit_rows(res: dict, groups: list[str], where: str, count: str = "count()") -> int:
    """``count`` of the commit rows of ``groups`` matching ``where`` (fixed texts of this module)."""
    return res["clickhouse"].get_client().query(
        f"SELECT {count} FROM offset_commits WHERE group_id IN {{g:Array(String)}} AND {where}",
        parameters={"g": groups}).result_rows[0][0]


class Group:
    """A consumer group of the test: live on idc1 (its active cluster), it processed each
    partition's records below the offset it committed there."""

    def __init__(self, pair: KafkaPair, name: str, topic: str):
        self.pair, self.name, self.topic = pair, name, topic
        self.member = Member(pair.bootstrap("idc1"), name, topic)
        self.processed: set[bytes] = set()
        self.committed_at: dict[int, int] = {}

    def process_up_to(self, *, share: float | None = None, keep_last: int | None = None) -> None:
        """Commit, per partition, the offset after the record ``share`` of the way into its
        (committed) log on idc1, or the one ``keep_last`` records before its end: every record
        below it counts as processed."""
        for partition in range(PARTITIONS):
            log = read_partition(self.pair.bootstrap("idc1"), self.topic, partition, timeout_s=60)
            assert len(log) > 20, f"{self.topic}[{partition}] on idc1 holds {len(log)} records"
            last = log[int(len(log) * share)] if share is not None else log[len(log) - 1 - keep_last]
            self.committed_at[partition] = last.offset + 1
            self.processed.update(r.value for r in log if r.offset <= last.offset)
        self.member.commit(self.topic, self.committed_at)

    def close(self) -> None:
        if not self.member.stop.is_set():
            self.member.close()


def resume_on_standby(pair: KafkaPair, group: str, topic: str, timeout_s: float = 60) -> dict[int, list[StoredRecord]]:
    """The group restarted on idc2 (subscribed: it starts where its committed offsets say), read to
    each partition's end; the records it read, per partition."""
    consumer = Consumer({"bootstrap.servers": pair.bootstrap("idc2"), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed", "log_level": 3})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)}
        consumer.subscribe([topic])
        read: dict[int, list[StoredRecord]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout_s
        while True:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                read[msg.partition()].append(StoredRecord(
                    msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(),
                    tuple(msg.headers() or ())))
            assignment = consumer.assignment()
            if len(assignment) == PARTITIONS and all(
                    tp.offset >= ends[tp.partition] for tp in consumer.position(assignment)):
                return read
            assert time.monotonic() < deadline, f"{group} did not read {topic} to its end on idc2 in {timeout_s}s"
    finally:
        consumer.close()


def next_copies(pair: KafkaPair, group: Group) -> dict[int, int]:
    """Per partition, the offset on idc2 of the copy of the one-way group's next record (or of the
    first record after it that was copied): where an exact sync resumes the group."""
    found = {}
    for partition in range(PARTITIONS):
        standby = read_partition(pair.bootstrap("idc2"), group.topic, partition, timeout_s=60)
        found[partition] = next(r.offset for r in standby
                                if int(r.header(ORIGIN_OFFSET_HEADER)) >= group.committed_at[partition])
    return found


def fail_over(pair: KafkaPair, group: Group) -> dict:
    """Stop the group on idc1, restart it on idc2 where the sync left it, and count: ``lost``, the
    records of idc2 below the synced offset the group never processed; ``missed``, the group's
    unprocessed records of idc1 it did not read on idc2 either; ``duplicates``, records it read again.
    One-way: the synced offset is at most the copy of the group's next record."""
    group.close()
    synced = committed(pair.bootstrap("idc2"), group.name, group.topic)
    assert set(synced) == set(range(PARTITIONS)), f"{group.name}: synced on idc2 {synced}"
    exact = next_copies(pair, group) if group.topic == ONE_WAY else None
    if exact is not None:  # never past the copy of the group's next record (NO-LOSS); below it: duplicates
        assert all(synced[p] <= exact[p] for p in range(PARTITIONS)), f"{group.name}: synced {synced} past {exact}"
    read = resume_on_standby(pair, group.name, group.topic)
    lost, missed, duplicates = [], [], 0
    for partition in range(PARTITIONS):
        standby = read_partition(pair.bootstrap("idc2"), group.topic, partition, timeout_s=60)
        active = read_partition(pair.bootstrap("idc1"), group.topic, partition, timeout_s=60)
        resumed = [r.value for r in read[partition]]
        assert [r.value for r in standby if r.offset >= synced[partition]] == resumed, \
            f"{group.name}[{partition}]: the restarted group did not read from its synced offset {synced[partition]}"
        lost += [r.value for r in standby if r.offset < synced[partition] and r.value not in group.processed]
        read_again = set(resumed)
        missed += [r.value for r in active if r.value not in group.processed and r.value not in read_again]
        duplicates += sum(1 for value in resumed if value in group.processed)
    outcome = {"group": group.name, "synced": synced, "exact": exact, "lost": len(lost), "missed": len(missed),
               "duplicates": duplicates, "read_on_standby": sum(len(v) for v in read.values())}
    print(f"failover of {group.name}: {outcome}")
    assert not lost, f"{group.name}: {len(lost)} records lost, e.g. {lost[:5]}"
    assert not missed, f"{group.name}: {len(missed)} records never read, e.g. {missed[:5]}"
    return outcome


def unique_groups(kind: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"mm2sync-{kind}-one-way-{tag}", f"mm2sync-{kind}-two-way-{tag}"


#: Records acknowledged per stream since the module started (the copies are counted the same way).
PRODUCED: dict[tuple[str, str], int] = collections.Counter()


def wait_synced(pair: KafkaPair, run: ContinuousRun, one_way: Group, two_way: Group, what: str) -> None:
    """Until the run has committed both groups on every partition on idc2."""
    now: dict = {}

    def synced() -> bool:
        assert run.alive(), f"the run ended before {what} (now {now})"
        now.update({g.name: committed(pair.bootstrap("idc2"), g.name, g.topic) for g in (one_way, two_way)})
        return all(set(offsets) == set(range(PARTITIONS)) for offsets in now.values())

    wait_for(synced, timeout=run.run_for_s + 30, what=f"{what} (now {now})")


def test_after_both_brokers_killed_and_restarted_the_sync_commits_both_groups_and_a_failover_loses_nothing(
        own_pair, mm2, chdb_dsn):
    seen = CopiesSeen(own_pair)
    with Traffic(own_pair, "kills") as traffic:
        for victim in ("idc2", "idc1"):  # the standby, then the active cluster
            before = dict(traffic.acked)
            wait_for(lambda: all(traffic.acked[s] >= before.get(s, 0) + 40 for s in STREAMS), timeout=60,
                     what=f"records produced before {victim} is killed")
            wait_copied(seen, dict(traffic.acked), what=f"copies flowing before {victim} is killed")
            assert own_pair.cluster(victim).kill(), f"no {victim} broker to kill"
            time.sleep(KILL_OUTAGE_S)
            own_pair.cluster(victim).start(timeout=180)
            wait_copied(seen, dict(traffic.acked), what=f"MirrorMaker 2 copying again after {victim}'s restart")
        # A steady stretch after the faults, both sides' records interleaved on each cluster again:
        # the two-way group stops in it (see the module docstring for why not inside an outage).
        after = dict(traffic.acked)
        wait_for(lambda: all(traffic.acked[s] >= after[s] + STEADY_RECORDS for s in STREAMS), timeout=60,
                 what="records produced after the faults")
        PRODUCED.update(traffic.stop())
    wait_copied(seen, PRODUCED, what="every record copied")

    res = resources(own_pair, chdb_dsn)
    one_way, two_way = (Group(own_pair, name, topic) for name, topic in zip(unique_groups("kills"), (ONE_WAY, TWO_WAY)))
    try:
        one_way.process_up_to(share=0.6)  # among the records produced around the kills
        two_way.process_up_to(keep_last=STEADY_RECORDS // (2 * PARTITIONS))
        with ContinuousRun(res, [one_way.name, two_way.name], run_for_s=KILLS_RUN_S) as run:
            wait_synced(own_pair, run, one_way, two_way, "both groups synced after the broker kills")
            run.stop()
        result = run.result()
        outcomes = [fail_over(own_pair, group) for group in (one_way, two_way)]
    finally:
        one_way.close()
        two_way.close()
    checks_of = checks(result)
    assert checks_of["no_loss"].passed and checks_of["clusters_readable"].passed
    print(f"MirrorMaker 2 restarts by its keeper: {mm2.restarts}; records per stream: {dict(PRODUCED)}; "
          f"duplicates per group: {[o['duplicates'] for o in outcomes]}")  # fail_over asserted 0 lost, 0 missed


def test_standby_cluster_down_gives_cluster_unavailable_and_no_commit_then_the_sync_commits_with_nothing_lost(
        own_pair, mm2, chdb_dsn):
    seen = CopiesSeen(own_pair)
    res = resources(own_pair, chdb_dsn)
    one_way, two_way = (Group(own_pair, name, topic) for name, topic in zip(unique_groups("down"), (ONE_WAY, TWO_WAY)))
    groups = [one_way, two_way]
    names = [g.name for g in groups]
    try:
        own_pair.cluster("idc2").stop(timeout=THROWAWAY_BROKER_GRACE_S)
        try:
            with Traffic(own_pair, "down", only=("idc1",)) as traffic:  # records only idc1 has while idc2 is away
                wait_for(lambda: all(traffic.acked[s] >= OUTAGE_RECORDS for s in traffic.streams), timeout=60,
                         what="records produced on idc1 while idc2 is down")
                PRODUCED.update(traffic.stop())
            for group in groups:  # the groups went on on idc1, into what idc2 has not got
                group.process_up_to(keep_last=OUTAGE_RECORDS // (2 * PARTITIONS))
            with ContinuousRun(res, names, run_for_s=DOWN_RUN_S) as run:
                # a cycle without idc2, however long this machine takes for one, then a few more
                wait_for(lambda: logged(run.instance, CLUSTER_UNAVAILABLE) or not run.alive(),
                         timeout=60, what="a cycle of the run without idc2")
                time.sleep(DOWN_WHILE_RUNNING_S)
                assert run.alive()
                own_pair.cluster("idc2").start(timeout=180)
                wait_copied(seen, PRODUCED, what="MirrorMaker 2 copying what idc1 produced while idc2 was down")
                wait_synced(own_pair, run, one_way, two_way, "both groups synced after idc2's return")
                run.stop()
        finally:
            own_pair.cluster("idc2").start(timeout=180)
        result = run.result()
        outcomes = [fail_over(own_pair, group) for group in groups]
    finally:
        for group in groups:
            group.close()

    readable = checks(result)["clusters_readable"]
    assert not readable.passed and readable.severity == dg.AssetCheckSeverity.WARN
    assert "idc2 did not answer in" in readable.description
    assert readable.metadata["cycles_unavailable_idc2"].value >= 1
    assert checks(result)["no_loss"].passed
    meta = metadata(result)
    assert meta["status_cluster_unavailable"] >= len(groups) * PARTITIONS, meta  # every group-partition, named
    # named, and nothing written while idc2 was away: every row of those cycles says so, none applied
    unavailable_rows = commit_rows(res, names, "translation_status = 'cluster_unavailable'")
    assert commit_rows(res, names, "translation_status = 'cluster_unavailable'",
                       count="count(DISTINCT group_id, topic, partition)") == len(groups) * PARTITIONS
    assert commit_rows(res, names, "translation_status = 'cluster_unavailable' AND applied") == 0
    print(f"cluster down: {unavailable_rows} cluster_unavailable rows; MirrorMaker 2 restarts by its keeper: "
          f"{mm2.restarts}; duplicates per group: {[o['duplicates'] for o in outcomes]}")
