"""The sync commits a standby offset behind a plain MirrorMaker 2 (no transform, no origin headers),
on real brokers, with nothing lost.

The cycle's steps, each the product's own function, in the snapshot's read order: MirrorMaker 2's
offset-syncs topic read (kafka_io/offset_syncs.py), then the active log end (the pairs' stamps,
sync/offset_sync_stamps.py); in a later cycle the group's committed offset, the log ranges, the
partition's facts with the pairs (kafka_io/partition_records.py), the translation, the safe bound,
the commit plan (sync/commit_rules.py) and the group commit (kafka_io/group_commits.py). Then the
loss is counted on the two logs as NO-LOSS defines it: every record of the standby below the
committed offset must copy an active record below ``c`` (the keys are unique).

The Spark task's own code (``spark_translation.translate_partition_rows``, plain Python) is run on a
work row that carries the stamped pairs and gives the same result. Not exercised here: the Dagster
assets, the snapshot's child processes and the work step, which do not read or carry the pairs yet.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bench.mm2.mirrormaker import MirrorMaker2
from devstack.records import read_partition
from offset_pipeline.kafka_io.cluster_client import ClusterClient
from offset_pipeline.kafka_io.group_commits import commit_group_offsets
from offset_pipeline.kafka_io.offset_syncs import read_offset_syncs
from offset_pipeline.kafka_io.partition_records import GroupPartitionInput, PartitionLogs, read_translation_facts
from offset_pipeline.sync.commit_rules import CommitDecision, StandbyGroupState, plan_standby_commits
from offset_pipeline.sync.offset_sync_stamps import OffsetSyncStamps, offset_syncs_column
from offset_pipeline.sync.spark_translation import translate_partition_rows
from offset_pipeline.translation import (
    Strategy,
    TopicShape,
    TranslationStatus,
    check_no_loss,
    decision_log_line,
    offset_syncs_topic,
    safe_standby_bound,
    translate_partition,
)
from tests.conftest import free_port, wait_for
from tests.helpers.groups import commit_as_group

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]

ACTIVE, STANDBY = "idc1", "idc2"


def produce(bootstrap: str, topic: str, keys: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    try:
        for i in keys:
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
        assert producer.flush(30) == 0
    finally:
        producer.flush(5)


def log_range(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offset-sync-commit-ranges", "log_level": 3})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        consumer.close()


def test_the_sync_commits_behind_plain_mirror_maker_2(kafka_pair, tmp_path):
    # Not a t.* name: the session's Python mirrors copy those, and only MirrorMaker 2 may copy this one.
    topic = kafka_pair.create_topic(f"plain-mm2-commit.{uuid.uuid4().hex[:8]}", on=(ACTIVE,))
    source, target = kafka_pair.bootstrap(ACTIVE), kafka_pair.bootstrap(STANDBY)
    clusters = {name: ClusterClient(name, {"bootstrap.servers": kafka_pair.bootstrap(name)},
                                    {"bootstrap.servers": kafka_pair.bootstrap(name)}) for name in (ACTIVE, STANDBY)}
    conf = {name: {"bootstrap.servers": kafka_pair.bootstrap(name)} for name in (ACTIVE, STANDBY)}
    group = f"{topic}.group"
    produce(source, topic, range(20))
    mirror = MirrorMaker2(f"commit{free_port()}", source, target, topics=topic, groups="none-at-all",
                          work_dir=tmp_path / "mm2", settings={"offset.lag.max": "4"})
    syncs_topic = offset_syncs_topic(*mirror.aliases)
    stamps = OffsetSyncStamps()
    tp = (topic, 0)
    with mirror:
        def copied(n: int):
            try:
                return len(read_partition(target, topic, 0, timeout_s=10)) >= n
            except KafkaException:  # MirrorMaker 2 has not created the topic on the target yet
                return False

        def pairs_read():
            read = read_offset_syncs(conf[ACTIVE], ACTIVE, syncs_topic, timeout_s=10)
            return read if read.unreadable is None and tp in read.pairs else None

        wait_for(lambda: copied(20), timeout=180, what="MirrorMaker 2 copying the first 20 records")
        # cycle 1: the pairs, then the active log end read after them
        first = wait_for(pairs_read, timeout=60, what="MirrorMaker 2's first pairs")
        stamps.observe(first.pairs, {tp: log_range(source, topic)[1]})

        produce(source, topic, range(20, 40))
        wait_for(lambda: copied(40), timeout=120, what="MirrorMaker 2 copying 20 more")
        commit_as_group(source, group, topic, 30)  # the group read 30 records on the active cluster

        # cycle 2, in the snapshot's order: committed offset, log ranges; then the pairs and the facts
        c = 30
        (a_start, a_end), (s_start, s_end) = log_range(source, topic), log_range(target, topic)
        second = read_offset_syncs(conf[ACTIVE], ACTIVE, syncs_topic, timeout_s=10)
        stamps.observe(second.pairs, {tp: log_range(source, topic)[1]})
        [facts] = read_translation_facts(
            ACTIVE, STANDBY, conf[ACTIVE], conf[STANDBY], topic, 0,
            PartitionLogs(a_start, a_end, s_start, s_end), [GroupPartitionInput(group, c)],
            shape=TopicShape.one_way(ACTIVE), mirror_writes_headers=False, timeout_s=30,
            offset_syncs=stamps.facts(topic, 0),
        )
    result = translate_partition(facts)
    bound = safe_standby_bound(facts)
    assert result.strategy is Strategy.OFFSET_SYNC, decision_log_line(result)
    check_no_loss(facts, result)
    assert bound is not None and 0 < result.standby_offset <= bound, (bound, decision_log_line(result))
    # the confirmed pair's d + 1, refined forward by record identity onto the copy of the group's next record
    copy_of_next = next(r.offset for r in read_partition(target, topic, 0) if r.key == f"k{c}".encode())
    assert (result.status, result.standby_offset) == (TranslationStatus.OFFSET_SYNC_EXACT, copy_of_next), \
        decision_log_line(result)

    # The Spark task's code path (plain Python): a work row carrying the stamped pairs gives the same
    work_row = {
        "group_id": group, "topic": topic, "partition": 0, "active": ACTIVE, "standby": STANDBY, "committed": c,
        "standby_committed": None, "active_log_start": a_start, "active_log_end": a_end,
        "standby_log_start": s_start, "standby_log_end": s_end, "anchor_active_offset": None,
        "anchor_standby_offset": None, "shape": TopicShape.one_way(ACTIVE).value, "standby_timestamp_type": "CreateTime",
        "shape_source": "configured", "ff_active_offset": None, "ff_standby_offset": None,
        "offset_syncs": offset_syncs_column(stamps.facts(topic, 0)),
    }
    [row] = translate_partition_rows([work_row], conf, snapshot_id="s", cycle_time_ms=0, timeout_s=30,
                                     mirror_writes_headers=False)
    assert (row["strategy"], row["status"], row["standby_offset"], row["safe_bound"]) == (
        "offset_sync", result.status.value, result.standby_offset, bound), row["decision"]

    [plan] = plan_standby_commits(
        [result], StandbyGroupState(group, STANDBY, member_count=0), active_member_count=0,
        facts_by_partition={tp: facts}, safe_bounds={tp: bound},
    )
    assert plan.decision is CommitDecision.COMMIT, plan
    write = commit_group_offsets(clusters[STANDBY], group, {tp: plan.new_offset}, timeout_s=30)
    assert write.applied == {tp: plan.new_offset} and write.committed_after[tp] == plan.new_offset

    # NO-LOSS on the two real logs: every standby record below t copies an active record below c
    processed = {r.key for r in read_partition(source, topic, 0) if r.offset < c}
    below_t = [r for r in read_partition(target, topic, 0) if r.offset < plan.new_offset]
    lost = [r.key for r in below_t if r.key not in processed]
    assert lost == [] and below_t, (plan.new_offset, lost)
    print(f"\ncommitted {STANDBY}:{plan.new_offset} for c={c} ({result.status.value}; bound {bound}); "
          f"{len(below_t)} standby records below it, 0 lost")
