"""The data mirror survives its clusters: a broker killed (``kill -9``) and restarted on the same
port and data, again and again, costs the mirror time, never records.

Runs on a pair of clusters of its own (killing the session's brokers would break the other tests),
with traffic produced on the source all along. After the faults, each target partition must hold
every source record exactly once, in order: a lost, repeated or reordered record fails the test.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from devstack.mirror import ORIGIN_OFFSET_HEADER, DataMirror, MirrorConfig
from devstack.records import read_partition

from tests.conftest import KafkaPair, started_pair, wait_for
from tests.helpers.traffic import SteadyTraffic

pytestmark = pytest.mark.kafka

PARTITIONS = 2
# How long a killed broker stays down: the length of the fault, not a wait for readiness. The long
# one outlasts every timeout of the mirror's calls and of its transactions, set here below their
# defaults (30 s, 60 s) so the test takes seconds, not minutes, longer than the outage.
SHORT_OUTAGE_S = 4.0
CALL_TIMEOUT_S, TRANSACTION_TIMEOUT_S = 10.0, 20.0
LONG_OUTAGE_S = TRANSACTION_TIMEOUT_S + 10.0


@pytest.fixture(scope="module")
def own_pair(kafka_jars, tmp_path_factory):
    with started_pair(kafka_jars, tmp_path_factory.mktemp("recovery")) as pair:
        yield pair


class MirrorThread:
    """A mirror running in a thread; remembers how it ended if it did."""

    def __init__(self, config: MirrorConfig):
        self.stop = threading.Event()
        self.mirror = DataMirror(config, self.stop)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mirror", daemon=True)

    def _run(self):
        try:
            self.mirror.run(self.stop)
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc

    def alive(self) -> bool:
        return self._thread.is_alive() and self.error is None

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self._thread.join(timeout=120)


def copies(pair: KafkaPair, topic: str) -> int:
    """Committed copies on the target so far; 0 while the target cannot be read."""
    try:
        return sum(len(read_partition(pair.bootstrap("idc2"), topic, p, timeout_s=10)) for p in range(PARTITIONS))
    except Exception:  # noqa: BLE001 - a broker coming back, a transaction still open
        return 0


def assert_exact_copy(pair: KafkaPair, topic: str, source: str, target: str):
    """Each target partition holds the source partition's records once each, in the same order."""
    for partition in range(PARTITIONS):
        sources = read_partition(pair.bootstrap(source), topic, partition, timeout_s=60)
        mirrored = read_partition(pair.bootstrap(target), topic, partition, timeout_s=60)
        source_ids = [json.loads(r.value)["id"] for r in sources]
        copy_ids = [json.loads(r.value)["id"] for r in mirrored]
        missing = sorted(set(source_ids) - set(copy_ids))
        repeated = len(copy_ids) - len(set(copy_ids))
        assert not missing and not repeated, f"[{partition}] {len(missing)} lost (first {missing[:5]}), {repeated} repeated"
        assert copy_ids == source_ids, f"[{partition}] copies are out of order"
        assert [int(r.header(ORIGIN_OFFSET_HEADER)) for r in mirrored] == [r.offset for r in sources]


def run_faults(pair: KafkaPair, victim: str, outages: list[float], topic: str, instance: str, caplog) -> dict:
    pair.create_topic(topic, partitions=PARTITIONS)
    config = MirrorConfig(
        pair.endpoint("idc1"), pair.endpoint("idc2"),
        topic_pattern=f"^{topic.replace('.', '[.]')}$", instance=instance, metadata_refresh_s=1.0,
        call_timeout_s=CALL_TIMEOUT_S, transaction_timeout_s=TRANSACTION_TIMEOUT_S,
    )
    caplog.set_level(logging.WARNING, logger="offset_pipeline.mirror")
    resumed_after: list[float] = []
    source_traffic = SteadyTraffic(pair.bootstrap("idc1"), topic, per_second=200.0, partitions=PARTITIONS)
    with source_traffic as traffic, MirrorThread(config) as mirror:
        for kill, outage_s in enumerate(outages):
            before = copies(pair, topic)
            wait_for(lambda: copies(pair, topic) > before + 200, timeout=180, what=f"copies flowing before kill {kill + 1}")
            assert pair.cluster(victim).kill(), f"no {victim} broker to kill"
            time.sleep(outage_s)
            pair.cluster(victim).start(timeout=180)
            back = time.monotonic()
            at_restart = copies(pair, topic)
            wait_for(lambda: copies(pair, topic) > at_restart + 200, timeout=240, what=f"copies flowing after kill {kill + 1}")
            resumed_after.append(time.monotonic() - back)
            assert mirror.alive(), f"the mirror died: {mirror.error!r}"
        traffic.stop()
        assert not traffic.failed, traffic.failed[:3]
        sent = len(traffic.acked)
        wait_for(lambda: copies(pair, topic) >= sent, timeout=240, what=f"all {sent} records copied")
        time.sleep(2)  # a repeated copy would have time to show up before counting
        assert mirror.alive(), f"the mirror died: {mirror.error!r}"
        stats = mirror.mirror.stats
    assert_exact_copy(pair, topic, "idc1", "idc2")
    recovery_lines = [r.getMessage() for r in caplog.records if " recovered " in r.getMessage()]
    summary = {
        "victim": victim, "outages_s": outages, "records": sent, "recoveries": stats.recoveries,
        "new_producers": stats.new_producers, "aborted": stats.aborted_transactions,
        "recovery_seconds": [round(s, 1) for s in stats.recovery_seconds],
        "copies_flowing_again_after_restart_s": [round(s, 1) for s in resumed_after],
    }
    print(f"\nmirror recovery ({victim} killed): {json.dumps(summary)}")
    for line in recovery_lines:
        print("  " + line)
    return summary


def test_target_broker_killed_twice_once_for_long_mirror_copies_everything_once_in_order(own_pair, caplog):
    # repeated short kills are the source test's; here one short, then one past every timeout
    outages = [SHORT_OUTAGE_S, LONG_OUTAGE_S]
    run_faults(own_pair, "idc2", outages, topic="rec.target-kill", instance="recovery-target", caplog=caplog)


def test_source_broker_killed_mirror_copies_everything_once_in_order(own_pair, caplog):
    outages = [SHORT_OUTAGE_S, SHORT_OUTAGE_S]
    run_faults(own_pair, "idc1", outages, topic="rec.source-kill", instance="recovery-source", caplog=caplog)
