"""The sync commits behind a plain MirrorMaker 2 (no transform, no origin headers) through its real
assets, on real brokers: the offset-syncs topic is read by the snapshot step, its pairs stamped and
carried into the work rows, translated (strategy ``offset_sync``), guarded and committed.

One dedicated MirrorMaker 2 (bench/mm2/mirrormaker.py, ``IdentityReplicationPolicy``, idc1 -> idc2,
``offset.lag.max=4``) serves the module; each test mirrors topics of its own. Its aliases are not
the cluster names, so the flow's offset-syncs topic is named by ``OFFSET_PIPELINE_OFFSET_SYNCS``
(``idc1->idc2=idc1:<topic>``), as a deployment whose MirrorMaker 2 aliases differ would.
``OFFSET_PIPELINE_MIRROR_WRITES_HEADERS=0``: nothing on the standby is trusted as an origin header.

Loss is counted on the two logs by record identity (docs/concepts/no-loss.md): every record of idc2 below the
committed standby offset must be a copy of a record of idc1 below ``c`` (values are unique).

* the continuous run (``offset_continuous_sync``) commits ``t`` for a group that moved past the
  stamps of pairs it read in earlier cycles of the same run, and its checkpoints store the stamps;
* the interval cycle (the four assets, a new reader each run, restored from ``offset_sync_pairs``)
  commits on the cycle after the one that stamped the pairs; in the same cycles a group on a
  topic of the other direction, whose offset-syncs topic does not exist, gets
  ``offset_syncs_unreadable`` and nothing committed, and the snapshot names the unreadable topic.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import KafkaException, Producer

from bench.mm2.mirrormaker import MirrorMaker2
from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.assets.metrics import offset_sync_metrics
from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations
from offset_pipeline.kafka_io.offset_syncs import read_offset_syncs
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.translation import offset_syncs_topic
from tests.conftest import THROWAWAY_MIRROR_GRACE_S, free_port, wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.records import read_values, records_in
from tests.helpers.run_logs import request_stop

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

ACTIVE, STANDBY = "idc1", "idc2"
PREFIX = "mm2sync."  # not the session mirrors' prefix: only MirrorMaker 2 copies these topics
MISSING_SYNCS = "mm2-offset-syncs.nobody.internal"  # the other direction's topic: never created


@pytest.fixture(scope="module")
def mirror_maker(kafka_pair, tmp_path_factory):
    mirror = MirrorMaker2(f"wiring{free_port()}", kafka_pair.bootstrap(ACTIVE), kafka_pair.bootstrap(STANDBY),
                          topics=re.escape(PREFIX) + ".*", groups="none-at-all",
                          work_dir=tmp_path_factory.mktemp("mm2"),
                          settings={"offset.lag.max": "4", "refresh.topics.interval.seconds": "1"})
    mirror.start()
    try:
        yield mirror
    finally:
        mirror.stop(timeout_s=THROWAWAY_MIRROR_GRACE_S)


@pytest.fixture
def plain_env(monkeypatch, mirror_maker):
    """The code location's environment for a plain MirrorMaker 2 idc1 -> idc2."""
    syncs = offset_syncs_topic(*mirror_maker.aliases)
    monkeypatch.setenv("OFFSET_PIPELINE_MIRROR_WRITES_HEADERS", "0")
    monkeypatch.setenv("OFFSET_PIPELINE_OFFSET_SYNCS", f"idc1->idc2=idc1:{syncs},idc2->idc1=idc2:{MISSING_SYNCS}")
    return syncs


def resources(kafka_pair, chdb_dsn) -> dict:
    return {
        "idc1": KafkaClusterResource(cluster_name=ACTIVE, bootstrap_servers=kafka_pair.bootstrap(ACTIVE)),
        "idc2": KafkaClusterResource(cluster_name=STANDBY, bootstrap_servers=kafka_pair.bootstrap(STANDBY)),
        "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        "spark": SparkResource(),
    }


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for i in values:
        producer.produce(topic, value=f"{topic}-{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def wait_copied(kafka_pair, topic: str, n: int) -> None:
    def copied() -> bool:
        try:
            return records_in(kafka_pair.bootstrap(STANDBY), topic, 0) >= n
        except KafkaException:  # MirrorMaker 2 has not created the topic on idc2 yet
            return False
    wait_for(copied, timeout=240, what=f"MirrorMaker 2 copying {n} records of {topic}")


def wait_pairs(kafka_pair, syncs: str, topic: str, upstream_at_least: int) -> None:
    conf = {"bootstrap.servers": kafka_pair.bootstrap(ACTIVE)}

    def paired() -> bool:
        read = read_offset_syncs(conf, ACTIVE, syncs, timeout_s=10)
        return any(u >= upstream_at_least for u, _ in read.pairs.get((topic, 0), ()))
    wait_for(paired, timeout=120, what=f"MirrorMaker 2's pairs of {topic} up to {upstream_at_least}")


def lost_below(kafka_pair, topic: str, c: int, t: int, end: int) -> list[bytes]:
    """idc2's records below ``t`` that copy no idc1 record below ``c`` (NO-LOSS)."""
    processed = {v for o, v in read_values(kafka_pair.bootstrap(ACTIVE), topic, 0, end).items() if o < c}
    standby = read_values(kafka_pair.bootstrap(STANDBY), topic, 0, end)
    assert len([o for o in standby if o < t]) == t  # every record below t was read
    return [v for o, v in standby.items() if o < t and v not in processed]


def copy_of(kafka_pair, topic: str, c: int, end: int) -> int:
    idc1 = read_values(kafka_pair.bootstrap(ACTIVE), topic, 0, end)
    return next(o for o, v in read_values(kafka_pair.bootstrap(STANDBY), topic, 0, end).items() if v == idc1[c])


def rows(client, sql: str, **parameters) -> list[tuple]:
    return client.query(sql, parameters=parameters).result_rows


def test_a_continuous_run_commits_behind_plain_mirror_maker_2(kafka_pair, chdb_dsn, plain_env):
    topic = kafka_pair.create_topic(f"{PREFIX}continuous.{uuid.uuid4().hex[:6]}", on=(ACTIVE,))
    produce(kafka_pair.bootstrap(ACTIVE), topic, range(40))
    wait_copied(kafka_pair, topic, 40)
    wait_pairs(kafka_pair, plain_env, topic, 30)
    group = f"mm2 continuous {uuid.uuid4().hex[:6]} ü"
    member = Member(kafka_pair.bootstrap(ACTIVE), group, topic)
    outcome: dict = {}
    run_for_s = 90  # at most: the test ends the run once it has seen the commit
    instance = dg.DagsterInstance.ephemeral()

    def materialize() -> None:
        outcome["result"] = dg.materialize([offset_continuous_sync], resources=resources(kafka_pair, chdb_dsn),
                                           run_config={"ops": {"offset_continuous_sync": {"config": {
                                               "run_for_s": run_for_s, "checkpoint_s": 5,
                                               "snapshot": {"group_include": f"^{re.escape(group)}$"},
                                               "translation": {"topic_shapes": {topic: "one_way:idc1"}},
                                           }}}}, instance=instance, raise_on_error=False)

    end = 40
    try:
        member.commit(topic, {0: 30})
        runner = threading.Thread(target=materialize)
        runner.start()
        # The run reads the pairs and stamps them with idc1's end read after them: nothing below a
        # group short of that end is proven. The group keeps up with the topic (c = the end, step by
        # step); once it has passed the stamp of pairs the run read in an earlier cycle, they prove
        # it. When the run's first cycle comes is up to the machine: the steps go on until then.
        deadline = time.monotonic() + run_for_s - 10
        while not committed(kafka_pair.bootstrap(STANDBY), group, topic) and time.monotonic() < deadline:
            produce(kafka_pair.bootstrap(ACTIVE), topic, range(end, end + 10))
            end += 10
            wait_copied(kafka_pair, topic, end)
            member.commit(topic, {0: end})
            time.sleep(3)
        c = end  # the group's last commit: the run syncs it (a commit of an earlier c is followed by this one)
        want = copy_of(kafka_pair, topic, c - 1, end) + 1  # right past the copy of the last processed record
        wait_for(lambda: committed(kafka_pair.bootstrap(STANDBY), group, topic) == {0: want} or not runner.is_alive(),
                 timeout=30, what="the continuous run's commit by offset syncs")
        assert committed(kafka_pair.bootstrap(STANDBY), group, topic) == {0: want}
        if runner.is_alive():
            request_stop(instance)  # seen: the run ends at its next checkpoint, its last one written
        runner.join(run_for_s + 180)
        assert not runner.is_alive()
    finally:
        member.close()
    assert outcome["result"].success
    [materialization] = outcome["result"].asset_materializations_for_node("offset_continuous_sync")
    assert materialization.metadata["stopped_by"].value in ("stop requested (run canceling)", "rollover")
    assert lost_below(kafka_pair, topic, c, want, end) == []
    client = resources(kafka_pair, chdb_dsn)["clickhouse"].get_client()
    strategies = rows(client, "SELECT strategy, status, committed, standby_offset FROM offset_translations "
                              "WHERE group_id = {g:String} ORDER BY cycle_time DESC LIMIT 1", g=group)
    assert strategies[0][:2] == ("offset_sync", "offset_sync_exact"), strategies
    assert strategies[0][2:] == (c, want)
    # the checkpoints stored the run's pairs and stamps: the next run (after the rollover) goes on from them
    [(stamped,)] = rows(client, "SELECT countIf(active_end_after IS NOT NULL) FROM offset_sync_pairs "
                                "WHERE topic = {t:String}", t=topic)
    assert stamped >= 1
    print(f"\ncontinuous: committed {STANDBY}:{want} for c={c} (offset_sync_exact), 0 of {want} records lost")


def test_the_interval_cycle_commits_once_the_pairs_are_stamped_and_names_an_unreadable_topic(
        kafka_pair, chdb_dsn, plain_env):
    topic = kafka_pair.create_topic(f"{PREFIX}interval.{uuid.uuid4().hex[:6]}", on=(ACTIVE,))
    # the other direction: produced on idc2, its offset-syncs topic (MISSING_SYNCS) does not exist
    other = kafka_pair.create_topic(f"other.{uuid.uuid4().hex[:6]}", on=(ACTIVE, STANDBY))
    produce(kafka_pair.bootstrap(ACTIVE), topic, range(40))
    produce(kafka_pair.bootstrap(STANDBY), other, range(10))
    wait_copied(kafka_pair, topic, 40)
    wait_pairs(kafka_pair, plain_env, topic, 30)
    group, other_group = f"mm2 interval {uuid.uuid4().hex[:6]}", f"mm2 other {uuid.uuid4().hex[:6]}"
    member = Member(kafka_pair.bootstrap(ACTIVE), group, topic)
    other_member = Member(kafka_pair.bootstrap(STANDBY), other_group, other)
    res = resources(kafka_pair, chdb_dsn)
    config = {"ops": {
        "offset_snapshot": {"config": {"group_include": f"^({re.escape(group)}|{re.escape(other_group)})$"}},
        "offset_translations": {"config": {"topic_shapes": {topic: "one_way:idc1", other: "one_way:idc2"}}},
    }}

    def cycle():
        result = dg.materialize([offset_snapshot, offset_translations, offset_standby_commits, offset_sync_metrics],
                                resources=res, run_config=config)
        assert result.success
        return result

    try:
        member.commit(topic, {0: 30})
        other_member.commit(other, {0: 5})
        first = cycle()  # the pairs read and stamped with idc1's end 40: c = 30 is below it
        assert committed(kafka_pair.bootstrap(STANDBY), group, topic) == {}
        produce(kafka_pair.bootstrap(ACTIVE), topic, range(40, 60))
        wait_copied(kafka_pair, topic, 60)
        member.commit(topic, {0: 50})
        second = cycle()  # a new reader, restored from offset_sync_pairs: the stamp 40 is at or below c = 50
    finally:
        member.close()
        other_member.close()
    want = copy_of(kafka_pair, topic, 50, 60)
    assert committed(kafka_pair.bootstrap(STANDBY), group, topic) == {0: want}
    assert lost_below(kafka_pair, topic, 50, want, 60) == []
    assert committed(kafka_pair.bootstrap(ACTIVE), other_group, other) == {}  # nothing for the other direction

    client = res["clickhouse"].get_client()
    by_run = {r[0]: r[1:] for r in rows(
        client, "SELECT snapshot_id, strategy, status, standby_offset, safe_bound FROM offset_translations "
                "WHERE group_id = {g:String}", g=group)}
    # cycle 1: the pairs are unconfirmed, and what the timestamp search found nothing proves (no
    # origin headers): no safe bound, nothing committed (checked above)
    assert by_run[first.run_id][0] != "offset_sync" and by_run[first.run_id][3] is None, by_run
    assert by_run[second.run_id][:3] == ("offset_sync", "offset_sync_exact", want), by_run
    assert by_run[second.run_id][3] >= want  # the guard's bound: the proof of the pairs
    [(status, reason)] = rows(client, "SELECT status, reason FROM offset_translations WHERE group_id = {g:String} "
                                      "AND snapshot_id = {s:String}", g=other_group, s=second.run_id)
    assert status == "offset_syncs_unreadable" and MISSING_SYNCS in reason, reason
    stored = rows(client, "SELECT count(), countIf(active_end_after IS NOT NULL) FROM offset_sync_pairs "
                          "WHERE topic = {t:String}", t=topic)
    assert stored[0][1] >= 1, stored
    snapshot_meta = {k: v.value for k, v in
                     second.asset_materializations_for_node("offset_snapshot")[0].metadata.items()}
    assert MISSING_SYNCS in snapshot_meta["offset_syncs_unreadable"]
    assert snapshot_meta["offset_syncs_restored"] == "yes"
    print(f"\ninterval: cycle 1 {by_run[first.run_id][1]} unproven (not committed), cycle 2 committed {STANDBY}:{want} for c=50 "
          f"(offset_sync_exact), 0 lost; the other direction offset_syncs_unreadable, not committed")
