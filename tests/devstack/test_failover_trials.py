"""The failover trials harness (devstack/failover_trials.py) can fail: on the real clusters, with the
session's mirror and traffic running, a "sync" that commits past what a group processed is counted
as a loss. The rounds of trials behind MirrorMaker 2, with the real sync assets, are in
test_failover_trials_mm2.py."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from devstack.failover_trials import CycleDecision, FailoverTrials, plan_trials
from devstack.traffic import TopicTraffic, TrafficGenerator, ensure_topics
from tests.conftest import MIRRORED_PREFIX

pytestmark = pytest.mark.kafka

CLUSTERS = ("idc1", "idc2")


def trial_plan(suffix: str) -> tuple[TopicTraffic, ...]:
    return (TopicTraffic(f"{MIRRORED_PREFIX}ft{suffix}.one-way", 2, ("idc1",), "increasing", rate_per_s=15.0),)


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


def test_the_trials_count_a_loss_when_the_sync_commits_too_far(traffic, tmp_path):
    """The harness itself can fail: a 'sync' that sets the standby to its log end loses every
    record the group had not processed."""
    plan, bootstraps = traffic
    trials = plan_trials(plan, CLUSTERS, 1, seed=3, prefix="ftbad", stop_range_s=(1.0, 1.5))
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
