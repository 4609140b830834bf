"""Failover trials over Apache Kafka's MirrorMaker 2 (test_failover_trials.py checks the trials
harness itself can fail): traffic running, groups stopped at random moments, the real sync assets, each group restarted on
its standby and its records counted by id), with MirrorMaker 2 and the project's Connect transform
as the mirror both ways instead of the dev harness's Python mirror.

A pair of clusters of its own (MirrorMaker 2's Connect groups and internal topics, and its
``kill -9``, stay off the session's pair) and one MirrorMaker 2 for the module (its start takes
seconds); the tests run in file order:

1. a round of trials: no record lost, every trial synced, and one-way topics resumed without a
   duplicate (the copies carry exact origin headers); every copy names its origin, none is there twice;
2. MirrorMaker 2 killed with ``kill -9`` while the round's groups run and copies arrive, then
   restarted (20-30 s down): no record lost, every one-way trial synced without a duplicate, and with
   exactly-once no source record copied twice. A two-way partition whose group stopped during the
   outage may stay untranslated (``no_anchor``, nothing committed: see
   :func:`assert_no_loss_after_a_mirror_outage`);
3. the same fault without exactly-once (a MirrorMaker 2 of its own, started after the module's is
   stopped): the restart writes some copies twice, and still no record is lost.

A :class:`Supervisor` restarts MirrorMaker 2 between sync cycles when one of its tasks died (seen
under load), as a deployment would; the restarts it made are printed.
"""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from devstack.failover_trials import (
    SYNCED_DECISIONS,
    FailoverTrials,
    dagster_sync_cycle,
    format_summary,
    plan_trials,
    summarize,
)
from devstack.mirrormaker2 import PROBE_TOPIC, MirrorMaker2, MirrorMaker2Config, MirrorMaker2Keeper
from devstack.records import read_partition
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from offset_pipeline.kafka_io.partition_records import CONSUMERS
from offset_pipeline.translation.headers import LOCAL, CopiedFrom, parse_origin
from offset_pipeline.translation.result import TranslationStatus

from tests.conftest import THROWAWAY_MIRROR_GRACE_S, KafkaPair, free_port, started_pair, wait_for
from tests.helpers import pairs
from tests.helpers.local_spark import stop_local_spark
from tests.helpers.pairs import resources

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

CLUSTERS = ("idc1", "idc2")
PEER = {"idc1": "idc2", "idc2": "idc1"}
PREFIX = "mm2ft."
#: MirrorMaker 2's topic regex (Java, matched against whole names): the trial topics only.
MM2_TOPICS = "mm2ft[.].*"


def trial_plan() -> tuple[TopicTraffic, ...]:
    """Both topic kinds, every timestamp pattern, a transactional topic with aborted transactions."""
    return (
        TopicTraffic(f"{PREFIX}two-way", 2, CLUSTERS, "increasing", rate_per_s=15.0),
        TopicTraffic(f"{PREFIX}one-way", 2, ("idc1",), "increasing", rate_per_s=15.0),
        TopicTraffic(f"{PREFIX}batches", 2, ("idc1",), "equal_batches", rate_per_s=20.0, batch_size=10),
        TopicTraffic(f"{PREFIX}late", 2, ("idc1",), "out_of_order", rate_per_s=15.0),
        TopicTraffic(f"{PREFIX}tx", 2, ("idc2",), "increasing", rate_per_s=10.0, batch_size=5, transactional=True,
                     abort_ratio=0.3),
    )


PLAN = trial_plan()
SHAPES = {t.name: "two_way" if t.two_way else f"one_way:{t.producers_on[0]}" for t in PLAN}


@pytest.fixture(scope="module")
def own_pair(kafka_jars, tmp_path_factory):
    with started_pair(kafka_jars, tmp_path_factory.mktemp("mm2-trials-clusters")) as pair:
        try:
            ensure_topics(PLAN + (TopicTraffic(PROBE_TOPIC, 1, CLUSTERS, "increasing"),), pairs.bootstraps(pair))
            for name in CLUSTERS:  # a just-created topic can be unknown to a new client for a moment
                wait_for(lambda: probe_topic_readable(pair.bootstrap(name)), timeout=60,
                         what=f"{PROBE_TOPIC} readable on {name}")
            yield pair
        finally:
            # The sync's pooled read consumers, in this process and in local Spark's Python workers,
            # point at these brokers: once they stop, they would reconnect (and log) for the rest
            # of the session. Spark starts again for the next test that needs it.
            CONSUMERS.close()
            stop_local_spark()


def probe_topic_readable(bootstrap: str) -> bool:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-trials-probe-wait", "log_level": 3})
    try:
        consumer.get_watermark_offsets(TopicPartition(PROBE_TOPIC, 0), timeout=5)
        return True
    except KafkaException:
        return False
    finally:
        consumer.close()


def mm2_for(pair: KafkaPair, work_dir: Path, *, exactly_once: bool) -> MirrorMaker2:
    return MirrorMaker2(MirrorMaker2Config((pair.endpoint("idc1"), pair.endpoint("idc2")), work_dir,
                                           topics=MM2_TOPICS, rest_port=free_port(), exactly_once=exactly_once))


@pytest.fixture(scope="module")
def mm2(own_pair, tmp_path_factory):
    """The module's MirrorMaker 2 (exactly-once) under its supervisor. Started from the main thread:
    the JVM's parent-death signal follows the starting thread."""
    mirror = mm2_for(own_pair, tmp_path_factory.mktemp("mm2"), exactly_once=True)
    took = mirror.start(timeout_s=180)
    print(f"\nMirrorMaker 2 (both flows, exactly-once) copied its probes {took:.1f}s after the JVM started")
    try:
        yield Supervisor(mirror)
    finally:
        mirror.stop()


@pytest.fixture(scope="module")
def traffic(own_pair, mm2):
    bootstraps = pairs.bootstraps(own_pair)
    stop = threading.Event()
    generator = TrafficGenerator(PLAN, bootstraps, seed=5)
    thread = threading.Thread(target=generator.run, args=(stop,), daemon=True, name="mm2-trials-traffic")
    thread.start()
    yield bootstraps
    stop.set()
    thread.join(timeout=60)
    generator.close()


class Supervisor:
    """Restarts MirrorMaker 2 when one of its tasks died, as a deployment's supervisor would (Connect
    leaves a failed task stopped). Seen here under load (2 shared cores): an exactly-once task's
    producer failed with ``InvalidTxnStateException`` after ``CONCURRENT_TRANSACTIONS`` retries and
    the flow stopped copying. A stopped flow costs the sync freshness, never records, but the trials
    wait for the mirror to copy what each group processed. ``check()`` runs in the thread that
    started the mirror (its JVM's parent-death signal follows that thread)."""

    def __init__(self, mirror: MirrorMaker2):
        self.mirror = mirror
        self.restarts = 0

    def check(self) -> None:
        if self.mirror.healthy():  # the JVM runs and no task failed since it (re)started
            return
        print(f"MirrorMaker 2 restarted: a task died or the JVM exited; log: {self.mirror.log_path}")
        self.mirror.stop(grace_s=10.0)
        self.mirror.start(timeout_s=180)
        self.restarts += 1


def run_round(bootstraps, chdb_dsn, work_dir, *, count, seed, prefix, stop_range_s, supervisor, before_cycle=None):
    """One round of ``count`` trials; before every sync cycle the supervisor's check, then
    ``before_cycle(n)`` (the n-th cycle, 1-based), in this thread."""
    trials = plan_trials(PLAN, CLUSTERS, count, seed=seed, prefix=prefix, stop_range_s=stop_range_s)
    include = "^" + trials[0].group_id.rsplit("-", 1)[0] + "-"
    cycle = dagster_sync_cycle(resources(bootstraps, chdb_dsn), group_include=include, topic_shapes=SHAPES,
                               console_log_level="WARNING")
    cycles = 0

    def sync_cycle():
        nonlocal cycles
        cycles += 1
        supervisor.check()
        if before_cycle is not None:
            before_cycle(cycles)
        return cycle()

    outcomes = FailoverTrials(bootstraps, sync_cycle, work_dir).run_round(trials)
    print(format_summary(summarize(outcomes)))
    return outcomes


def assert_no_loss_and_synced(outcomes, *, one_way_duplicates_allowed: bool) -> None:
    assert sum(o.processed for o in outcomes) > 50  # the groups really consumed under traffic
    for o in outcomes:
        label = (o.trial.group_id, o.trial.shape, o.trial.pattern, o.decisions, o.synced)
        assert o.lost == 0, (label, o.lost_ids)
        assert o.synced_all, label
        assert o.resumed_at_synced, label
        assert o.cycles_after_stop >= 1, label
        if o.trial.shape != "two_way" and not one_way_duplicates_allowed:
            assert o.duplicates == 0, label


def assert_no_loss_after_a_mirror_outage(outcomes, *, one_way_duplicates_allowed: bool) -> list:
    """After MirrorMaker 2 was down for a while (killed, then restarted): no trial lost a record, every
    group resumed exactly at its synced offset, every one-way trial synced. A two-way partition may
    stay untranslated, and only as ``no_anchor``: while one flow was down, the active side's log
    grew a stretch of its own records with no copy of the standby's among them; a group that
    stopped inside that stretch has no standby-origin anchor within the records read below its
    offset, so the sync commits nothing there: the partition is not ready to switch, and a group
    restarted anyway starts by its reset policy (``earliest`` in the trials: duplicates). Returns
    the unsynced trials."""
    assert sum(o.processed for o in outcomes) > 50
    unsynced = []
    for o in outcomes:
        label = (o.trial.group_id, o.trial.shape, o.trial.pattern, o.decisions, o.synced)
        assert o.lost == 0, (label, o.lost_ids)
        assert o.resumed_at_synced, label
        assert o.cycles_after_stop >= 1, label
        if o.trial.shape != "two_way":
            assert o.synced_all, label
            if not one_way_duplicates_allowed:
                assert o.duplicates == 0, label
        elif not o.synced_all:
            unsynced.append(o)
            for partition, decision in o.decisions.items():
                if decision.decision not in SYNCED_DECISIONS:
                    assert decision.translation_status == TranslationStatus.NO_ANCHOR.value, (label, partition)
                    assert o.synced[partition] is None, (label, partition)
    for o in unsynced:
        print(f"two-way trial {o.trial.group_id} unsynced after the outage: {o.duplicates} duplicates; "
              + "; ".join(f"[{p}] {d}" for p, d in sorted(o.decisions.items())))
    return unsynced


def copies_by_origin(pair: KafkaPair) -> dict[str, collections.Counter]:
    """Per cluster: how many copies of each source record ((topic, partition, upstream offset)) it
    holds (read_committed), from every trial topic; a record that is neither local nor a copy of the
    peer's fails the caller."""
    counts: dict[str, collections.Counter] = {}
    for cluster in CLUSTERS:
        seen = collections.Counter()
        for topic in PLAN:
            for partition in range(topic.partitions):
                for record in read_partition(pair.bootstrap(cluster), topic.name, partition, timeout_s=60):
                    found = parse_origin(list(record.headers), read_from=cluster, peer=PEER[cluster])
                    if found == LOCAL:
                        continue
                    assert isinstance(found, CopiedFrom) and found.cluster == PEER[cluster], (cluster, record, found)
                    seen[(topic.name, partition, found.offset)] += 1
        counts[cluster] = seen
    return counts


def killer(supervisor: Supervisor, at_cycle: int, log: dict):
    """A ``before_cycle`` that kills MirrorMaker 2 (``kill -9``) before cycle ``at_cycle``, the first
    cycle after the groups were seen running (their stop timers just started), and restarts it."""

    def before_cycle(n: int) -> None:
        if n != at_cycle:
            return
        assert supervisor.mirror.kill()
        log["restart_s"] = supervisor.mirror.start(timeout_s=180)

    return before_cycle


def test_a_round_of_failovers_over_mirrormaker2_loses_nothing(own_pair, mm2, traffic, chdb_dsn, tmp_path):
    outcomes = run_round(traffic, chdb_dsn, tmp_path, count=10, seed=11, prefix="mm2ft", stop_range_s=(2.0, 8.0),
                         supervisor=mm2)

    assert len(outcomes) == 10
    assert {o.trial.shape for o in outcomes} == {"two_way", "one_way_from_active", "one_way_from_standby"}
    assert any(o.trial.topic.transactional for o in outcomes)
    assert_no_loss_and_synced(outcomes, one_way_duplicates_allowed=False)
    assert mm2.mirror.running()
    # MirrorMaker 2 made the copies the trials read: each names its exact origin, one copy per record.
    for cluster, seen in copies_by_origin(own_pair).items():
        assert seen, f"no copy on {cluster}"
        assert max(seen.values()) == 1, (cluster, [k for k, n in seen.items() if n > 1][:5])


def test_mirrormaker2_killed_and_restarted_mid_round_loses_nothing_and_copies_nothing_twice(
        own_pair, mm2, traffic, chdb_dsn, tmp_path):
    log: dict = {}
    outcomes = run_round(traffic, chdb_dsn, tmp_path, count=10, seed=12, prefix="mm2kill", stop_range_s=(6.0, 12.0),
                         supervisor=mm2, before_cycle=killer(mm2, at_cycle=2, log=log))
    print(f"MirrorMaker 2 (exactly-once) killed before cycle 2, back {log.get('restart_s', float('nan')):.1f}s later")

    assert "restart_s" in log and mm2.mirror.running()
    assert_no_loss_after_a_mirror_outage(outcomes, one_way_duplicates_allowed=False)
    for cluster, seen in copies_by_origin(own_pair).items():
        repeated = {k: n for k, n in seen.items() if n > 1}
        assert not repeated, f"{len(repeated)} records copied to {cluster} more than once, e.g. {sorted(repeated)[:5]}"


class KeptMirror:
    """The supervisor of :func:`run_round` for a MirrorMaker 2 under a :class:`MirrorMaker2Keeper`,
    which restarts it by itself at any moment (a task failed after a restart under load, and a check
    between cycles came too late for the trials' wait for copies): nothing to do between cycles."""

    def __init__(self, keeper: MirrorMaker2Keeper):
        self.keeper = keeper

    def check(self) -> None:
        return None


def keeper_killer(keeper: MirrorMaker2Keeper, at_cycle: int, log: dict):
    """A ``before_cycle`` that kills MirrorMaker 2's JVM (``kill -9``) before cycle ``at_cycle`` and
    waits until its keeper has started another that copies."""

    def before_cycle(n: int) -> None:
        if n != at_cycle:
            return
        began, restarts = time.monotonic(), keeper.restarts
        assert keeper.mirror.kill()
        wait_for(lambda: keeper.restarts > restarts and keeper.mirror.healthy(), timeout=240,
                 what="the keeper to restart MirrorMaker 2")
        log["restart_s"] = time.monotonic() - began

    return before_cycle


def test_without_exactly_once_copies_written_twice_after_a_restart_lose_nothing(
        own_pair, mm2, traffic, chdb_dsn, tmp_path):
    """Runs last: the module's MirrorMaker 2 stops, one without exactly-once takes over its flows."""
    before = copies_by_origin(own_pair)
    mm2.mirror.stop()
    keeper = MirrorMaker2Keeper(mm2_for(own_pair, tmp_path / "mm2", exactly_once=False))
    keeper.start()
    try:
        log: dict = {}
        outcomes = run_round(traffic, chdb_dsn, tmp_path / "trials", count=10, seed=13, prefix="mm2alo",
                             stop_range_s=(6.0, 12.0), supervisor=KeptMirror(keeper),
                             before_cycle=keeper_killer(keeper, at_cycle=2, log=log))
        assert "restart_s" in log and keeper.mirror.running()
        after = copies_by_origin(own_pair)
    finally:
        keeper.stop(grace_s=THROWAWAY_MIRROR_GRACE_S)
    repeated_since = {
        cluster: sum(1 for k, n in after[cluster].items() if n > 1 and n > before[cluster].get(k, 0))
        for cluster in CLUSTERS
    }
    print(f"MirrorMaker 2 (at-least-once) killed before cycle 2, back {log['restart_s']:.1f}s later; "
          f"source records copied twice since: {repeated_since}; keeper restarts: {keeper.restarts}")

    # The fault did what it is for: the restart copied again what was copied since the last flush
    # of the source offsets (traffic runs on every topic all along, flushes are a second apart).
    assert sum(repeated_since.values()) > 0
    # Copies written twice sit after the first copy: a duplicate to read again, never a loss.
    assert_no_loss_after_a_mirror_outage(outcomes, one_way_duplicates_allowed=True)
