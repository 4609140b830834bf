"""Failover trials on the real clusters: mirror and traffic running, groups stopped at random
moments, the real sync assets, the groups restarted on their standby, records counted by id."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from devstack.failover_trials import (
    CycleDecision,
    FailoverTrials,
    dagster_sync_cycle,
    format_summary,
    plan_trials,
    summarize,
)
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from tests.conftest import MIRRORED_PREFIX
from tests.helpers.pairs import resources

pytestmark = pytest.mark.kafka

CLUSTERS = ("idc1", "idc2")


def trial_plan(suffix: str) -> tuple[TopicTraffic, ...]:
    p = f"{MIRRORED_PREFIX}ft{suffix}."
    return (
        TopicTraffic(f"{p}two-way", 2, CLUSTERS, "increasing", rate_per_s=15.0),
        TopicTraffic(f"{p}one-way", 2, ("idc1",), "increasing", rate_per_s=15.0),
        TopicTraffic(f"{p}batches", 2, ("idc1",), "equal_batches", rate_per_s=20.0, batch_size=10),
        TopicTraffic(f"{p}late", 2, ("idc1",), "out_of_order", rate_per_s=15.0),
        TopicTraffic(f"{p}tx", 2, ("idc2",), "increasing", rate_per_s=10.0, batch_size=5, transactional=True,
                     abort_ratio=0.3),
    )


def shapes_of(plan) -> dict[str, str]:
    return {t.name: "two_way" if t.two_way else f"one_way:{t.producers_on[0]}" for t in plan}


@pytest.fixture
def traffic(kafka_pair, session_mirrors):
    plan = trial_plan(uuid.uuid4().hex[:6])
    bootstraps = {name: kafka_pair.bootstrap(name) for name in CLUSTERS}
    ensure_topics(plan, bootstraps)
    stop = threading.Event()
    generator = TrafficGenerator(plan, bootstraps, seed=7)
    thread = threading.Thread(target=generator.run, args=(stop,), daemon=True)
    thread.start()
    yield plan, bootstraps
    stop.set()
    thread.join(timeout=60)
    generator.close()


def test_a_round_of_failovers_loses_nothing(traffic, chdb_dsn, tmp_path):
    plan, bootstraps = traffic
    trials = plan_trials(plan, CLUSTERS, 10, seed=11, prefix="ft", stop_range_s=(2.0, 8.0))
    include = "^" + trials[0].group_id.rsplit("-", 1)[0] + "-"
    harness = FailoverTrials(
        bootstraps,
        dagster_sync_cycle(resources(bootstraps, chdb_dsn), group_include=include, topic_shapes=shapes_of(plan)),
        tmp_path,
    )
    outcomes = harness.run_round(trials)
    print(format_summary(summarize(outcomes)))

    assert len(outcomes) == 10
    assert sum(o.processed for o in outcomes) > 100  # the groups really consumed under traffic
    for o in outcomes:
        label = (o.trial.group_id, o.trial.shape, o.trial.pattern, o.decisions, o.synced)
        assert o.lost == 0, (label, o.lost_ids)
        assert o.synced_all, label
        assert o.resumed_at_synced, label
        assert o.cycles_after_stop >= 1, label
        if o.trial.shape != "two_way":
            # one-way: copies carry headers (exact), and the timestamp search refines onto the copy
            # whatever the timestamps do (equal batches, late records, transactions)
            assert o.duplicates == 0, label


def test_the_trials_count_a_loss_when_the_sync_commits_too_far(traffic, tmp_path):
    """The harness itself can fail: a 'sync' that sets the standby to its log end loses every
    record the group had not processed."""
    plan, bootstraps = traffic
    trials = plan_trials(plan[1:2], CLUSTERS, 1, seed=3, prefix="ftbad", stop_range_s=(1.0, 1.5))
    (trial,) = trials

    def reckless_cycle():
        consumer = Consumer({"bootstrap.servers": bootstraps[trial.standby], "group.id": trial.group_id,
                             "enable.auto.commit": False, "log_level": 3})
        try:
            parts = [TopicPartition(trial.topic.name, p) for p in range(trial.topic.partitions)]
            ends = [consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in parts]
            # the end plus the records still arriving: well past what the group processed
            consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, end) for tp, end in zip(parts, ends)],
                            asynchronous=False)
        finally:
            consumer.close()
        return {(trial.group_id, trial.topic.name, p): CycleDecision("commit") for p in range(trial.topic.partitions)}

    def slow_reckless_cycle():
        time.sleep(3.0)  # let the group stop first, then jump past it
        return reckless_cycle()

    (outcome,) = FailoverTrials(bootstraps, slow_reckless_cycle, tmp_path, max_cycles_after_stop=1).run_round(trials)
    assert outcome.lost > 0
    assert outcome.lost_ids
