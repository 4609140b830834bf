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

from devstack.consumers import record_id
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

    def records(cluster: str, partition: int, start: int, until) -> list[tuple[int, str | None]]:
        """(offset, id) of the partition's records from ``start`` until ``until(records)`` holds."""
        consumer = Consumer({"bootstrap.servers": bootstraps[cluster], "group.id": f"{trial.group_id}-look",
                             "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
        found: list[tuple[int, str | None]] = []
        try:
            consumer.assign([TopicPartition(trial.topic.name, partition, start)])
            deadline = time.monotonic() + 120
            while not until(found):
                assert time.monotonic() < deadline, f"{trial.topic.name}[{partition}] on {cluster}: {found[-3:]}"
                found += [(m.offset(), record_id(m.value())) for m in consumer.consume(500, timeout=0.5)
                          if not m.error()]
        finally:
            consumer.close()
        return found

    def reckless_cycle():
        """Commits on the standby just past the copy of the third record the group has not processed
        on the active cluster: a loss however far the mirror lags (waiting for that copy)."""
        committed = Consumer({"bootstrap.servers": bootstraps[trial.active], "group.id": trial.group_id,
                              "enable.auto.commit": False, "log_level": 3})
        try:
            parts = committed.committed([TopicPartition(trial.topic.name, p) for p in range(trial.topic.partitions)],
                                        timeout=30)
        finally:
            committed.close()
        commits = []
        for tp in parts:
            unread = records(trial.active, tp.partition, max(tp.offset, 0), lambda found: len(found) >= 3)
            target = unread[2][1]
            copies = records(trial.standby, tp.partition, 0, lambda found: any(i == target for _, i in found))
            commits.append(TopicPartition(tp.topic, tp.partition, next(o for o, i in copies if i == target) + 1))
        consumer = Consumer({"bootstrap.servers": bootstraps[trial.standby], "group.id": trial.group_id,
                             "enable.auto.commit": False, "log_level": 3})
        try:
            consumer.commit(offsets=commits, asynchronous=False)
        finally:
            consumer.close()
        return {(trial.group_id, trial.topic.name, p): CycleDecision("commit") for p in range(trial.topic.partitions)}

    def slow_reckless_cycle():
        time.sleep(3.0)  # let the group stop first, then jump past it
        return reckless_cycle()

    (outcome,) = FailoverTrials(bootstraps, slow_reckless_cycle, tmp_path, max_cycles_after_stop=1).run_round(trials)
    assert outcome.lost > 0
    assert outcome.lost_ids
