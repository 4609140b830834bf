"""read_translation_facts against real brokers: the reads feed translate_partition, and every
translated offset is checked for NO-LOSS against the real data of both clusters."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition

from devstack.records import StoredRecord, read_partition
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.kafka_io.partition_records import (
    CONSUMERS,
    GroupPartitionInput,
    PartitionLogs,
    ReadStats,
    PartitionReader,
    read_translation_facts,
)
from offset_pipeline.translation.facts import OffsetSyncFacts, RecordFact, SyncPair
from offset_pipeline.translation.headers import origin_headers
from offset_pipeline.translation.result import TranslationStatus
from offset_pipeline.translation.shape import TopicShape
from offset_pipeline.translation.safe_bound import safe_standby_bound
from offset_pipeline.translation.translate import check_no_loss, translate_partition
from tests.conftest import wait_for
from tests.helpers.fact_reads import conf, produce_one_way

pytestmark = pytest.mark.kafka

HEADER_STATUSES = {TranslationStatus.HEADER_EXACT, TranslationStatus.HEADER_ANCHOR}


def produce(bootstrap, topic, values, timestamp=None):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3})
    for value in values:
        kwargs = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, value=json.dumps({"id": value}).encode(), partition=0, **kwargs)
    assert producer.flush(30) == 0


def ident(record: StoredRecord) -> str:
    return json.loads(record.value)["id"]


def snapshot_logs(pair, topic, partition=0) -> PartitionLogs:
    (a,) = read_partition_ranges(pair.admin("idc1"), "idc1", [(topic, partition)])
    (s,) = read_partition_ranges(pair.admin("idc2"), "idc2", [(topic, partition)])
    assert a.log_end == a.last_stable and s.log_end == s.last_stable  # quiescent
    return PartitionLogs(a.log_start, a.log_end, s.log_start, s.log_end)


def mirrored(pair, topic, n):
    def both_full():
        return all(len(read_partition(pair.bootstrap(c), topic, 0)) == n for c in ("idc1", "idc2"))

    wait_for(both_full, timeout=90, what=f"{topic}: {n} records on both clusters")
    time.sleep(1)  # a record copied twice (a loop or a redelivery) would show up now
    records = {c: read_partition(pair.bootstrap(c), topic, 0) for c in ("idc1", "idc2")}
    for c, recs in records.items():
        assert len(recs) == n and len({ident(r) for r in recs}) == n, c
    return records["idc1"], records["idc2"]


def as_fact(record: StoredRecord, read_from: str, peer: str) -> RecordFact:
    return RecordFact.from_headers(record.offset, record.timestamp, record.headers, read_from=read_from, peer=peer)


def check_reads_and_no_loss(facts_list, active_records, standby_records, window):
    """The reading contract against the real log, then NO-LOSS and duplicates for every result."""
    active_pos = {ident(r): r.offset for r in active_records}
    expected = [as_fact(r, "idc1", "idc2") for r in active_records]
    results = []
    for facts in facts_list:
        c = facts.committed
        at = [r for r in expected if r.offset >= c]
        below = [r for r in expected if r.offset < c]
        assert facts.record_at_or_after == (at[0] if at else None), c
        # The backward window is in offsets: every real record in [c - window, c).
        assert sorted(facts.records_below, key=lambda r: r.offset) == [r for r in below if r.offset >= c - window], c

        result = translate_partition(facts)
        check_no_loss(facts, result)
        duplicates = None
        if result.translated:
            t = result.standby_offset
            lost = [r for r in standby_records if r.offset < t and active_pos[ident(r)] >= c]
            assert not lost, f"c={c} t={t} ({result.status.value}: {result.reason}) loses {[ident(r) for r in lost]}"
            duplicates = sum(1 for r in standby_records if r.offset >= t and active_pos[ident(r)] < c)
        results.append((c, result, duplicates))
    return results


def test_two_way_topic_translations_never_lose(kafka_pair, session_mirrors, topic_name):
    kafka_pair.create_topic(topic_name)
    n = 0
    for burst in range(6):
        for cluster in ("idc1", "idc2"):
            produce(kafka_pair.bootstrap(cluster), topic_name, [f"{cluster}-{burst}-{i}" for i in range(5)])
            n += 5
            time.sleep(0.3 * (burst % 3))  # let the mirrors interleave differently on each side
    idc1, idc2 = mirrored(kafka_pair, topic_name, n)
    logs = snapshot_logs(kafka_pair, topic_name)
    assert logs.active_log_end > n  # the mirror's transaction markers leave gaps

    window = 6
    groups = [GroupPartitionInput(f"g{c}", c) for c in range(logs.active_log_start, logs.active_log_end + 1)]
    facts = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic_name, 0, logs, groups,
        shape=TopicShape.two_way(), window=window,
    )
    assert [f.group_id for f in facts] == [g.group_id for g in groups]
    results = check_reads_and_no_loss(facts, idc1, idc2, window)
    statuses = [r.status for _, r, _ in results]
    assert sum(s in HEADER_STATUSES for s in statuses) >= len(results) // 2, statuses
    assert TranslationStatus.HEADER_EXACT in statuses and TranslationStatus.HEADER_ANCHOR in statuses
    assert all(r.strategy is None or r.strategy.value == "header_anchor" for _, r, _ in results)
    # The group that read everything is translated from the last processed record.
    assert facts[-1].record_at_or_after is None and results[-1][1].translated


def test_one_way_topic_timestamp_search_is_exact_and_never_loses(kafka_pair, session_mirrors, topic_name):
    kafka_pair.create_topic(topic_name)
    n = produce_one_way(kafka_pair, topic_name)
    idc1, idc2 = mirrored(kafka_pair, topic_name, n)
    logs = snapshot_logs(kafka_pair, topic_name)

    window = 5
    groups = [GroupPartitionInput(f"g{c}", c) for c in range(logs.active_log_start, logs.active_log_end + 1)]
    stats = ReadStats()
    facts = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic_name, 0, logs, groups,
        shape=TopicShape.one_way("idc1"), window=window, stats=stats,
    )
    results = check_reads_and_no_loss(facts, idc1, idc2, window)
    assert all(f.timestamp is not None for f in facts)
    assert all(f.timestamp.standby_first == as_fact(idc2[0], "idc2", "idc1") for f in facts)
    bad = [(c, r.status.value, r.reason) for c, r, _ in results if r.status is not TranslationStatus.TIMESTAMP_EXACT]
    assert not bad, bad
    assert all(d == 0 for _, _, d in results)
    assert any(r.timestamp_inversion for _, r, _ in results)  # batch 7 went back in time
    assert stats.active_consumers == 1 and stats.standby_consumers == 1
    assert stats.offsets_for_times_calls == len(set(stats.searched_timestamps)) == 9  # one per batch timestamp


def test_many_groups_read_the_partition_once_and_match_per_group_reads(kafka_pair, session_mirrors, topic_name):
    kafka_pair.create_topic(topic_name)
    n = produce_one_way(kafka_pair, topic_name)
    _, copies = mirrored(kafka_pair, topic_name, n)
    logs = snapshot_logs(kafka_pair, topic_name)
    span = logs.active_log_end - logs.active_log_start
    groups = [
        GroupPartitionInput(f"group-{i}", logs.active_log_start + span * i // 19, standby_committed=i)
        for i in range(20)
    ]
    groups.append(GroupPartitionInput("no-commit", None))
    args = ("idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic_name, 0, logs)
    options = dict(shape=TopicShape.one_way("idc1"), window=4, refine_window=7)

    stats = ReadStats()
    together = read_translation_facts(*args, groups, stats=stats, **options)
    assert stats.active_consumers == 1 and stats.standby_consumers == 1
    assert stats.active_records <= n  # one contiguous pass, no record read twice
    alone = [read_translation_facts(*args, [g], **options)[0] for g in groups]
    assert together == alone
    results = [translate_partition(f) for f in together]
    # A refine window of 7 cannot reach the copy of the batch stamped back in time: not always exact.
    assert all(r.translated for r in results[:-1]), [r.reason for r in results]
    # The records are stamped an hour back, the mirror's commit markers now: when the mirror split
    # the copies over several transactions, offsets_for_times answers with the first marker (its
    # timestamp is the newest), below the refine window's reach for most groups.
    exact = sum(r.status is TranslationStatus.TIMESTAMP_EXACT for r in results)
    marker_inside = any(b.offset - a.offset > 1 for a, b in zip(copies, copies[1:]))
    assert exact >= (1 if marker_inside else 15), ([c.offset for c in copies], [r.reason for r in results])
    for f, r in zip(together, results):
        check_no_loss(f, r)
    assert results[-1].status is TranslationStatus.NO_COMMITTED_OFFSET


def test_the_offset_syncs_forward_read_reaches_a_group_far_past_its_pair(kafka_pair):
    """MirrorMaker 2's defaults leave the newest confirmed pair hundreds of records behind a group.
    The forward read from the pair goes past the small refine window to the copy of the group's
    next record, so the pair proves it exactly. The same records on both sides, as a mirror without
    headers leaves them (not a "t." topic: the session mirrors leave it alone)."""
    topic = f"x.far-pair.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(topic)
    values = [f"r{i}" for i in range(600)]
    for cluster in ("idc1", "idc2"):
        produce(kafka_pair.bootstrap(cluster), topic, values, timestamp=1_700_000_000_000)
        wait_for(lambda c=cluster: len(read_partition(kafka_pair.bootstrap(c), topic, 0)) == 600, what=f"{cluster} records")
    logs = snapshot_logs(kafka_pair, topic)
    syncs = OffsetSyncFacts((SyncPair(0, 0, 1),))
    args = ("idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic, 0, logs)
    options = dict(shape=TopicShape.one_way("idc1"), window=4, refine_window=7, mirror_writes_headers=False,
                   offset_syncs=syncs)
    stats = ReadStats()
    [facts] = read_translation_facts(*args, [GroupPartitionInput("far", 550)], stats=stats, **options)
    assert facts.offset_syncs.forward_from == 1 and len(facts.offset_syncs.forward_records) >= 550
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.OFFSET_SYNC_EXACT, 550), result.reason
    check_no_loss(facts, result)
    assert safe_standby_bound(facts) >= 550
    # the pairs proved the group: its timestamp search was not read, it would change no answer
    assert facts.timestamp is None and stats.offsets_for_times_calls == 0 and stats.searches_skipped == 1

    # a group the pairs prove nothing for (c = 0: the pair's stamp 1 is above it) needs the search,
    # and the partition's one pass reads it for both
    stats = ReadStats()
    far, early = read_translation_facts(*args, [GroupPartitionInput("far", 550), GroupPartitionInput("early", 0)],
                                        stats=stats, **options)
    assert far.timestamp is not None and early.timestamp is not None and stats.offsets_for_times_calls >= 1
    for f in (far, early):
        r = translate_partition(f)
        assert r.translated, r.reason
        check_no_loss(f, r)
    assert translate_partition(far).standby_offset == 550


def test_edges_missing_topic_empty_partition_and_committed_outside_the_log(kafka_pair, session_mirrors, topic_name):
    # Not a "t." topic: the session mirrors leave it alone, so it exists on idc1 only.
    lonely = f"x.lonely.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(lonely, on=("idc1",))
    produce(kafka_pair.bootstrap("idc1"), lonely, [f"r{i}" for i in range(10)])
    wait_for(lambda: len(read_partition(kafka_pair.bootstrap("idc1"), lonely, 0)) == 10, what="lonely records")
    admin = kafka_pair.admin("idc1")
    for future in admin.delete_records([TopicPartition(lonely, 0, 4)]).values():
        future.result(timeout=30)
    (a,) = read_partition_ranges(admin, "idc1", [(lonely, 0)])
    assert (a.log_start, a.log_end) == (4, 10)
    logs = PartitionLogs(a.log_start, a.log_end, None, None)
    groups = [GroupPartitionInput("below", 2), GroupPartitionInput("at-start", 4), GroupPartitionInput("beyond", 11)]
    facts = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), lonely, 0, logs, groups,
        shape=TopicShape.one_way("idc1"),
    )
    assert all(not f.standby_topic_exists for f in facts)
    assert facts[0].record_at_or_after is None and facts[1].record_at_or_after.offset == 4
    assert facts[1].records_below == ()  # nothing below the log start
    assert {translate_partition(f).status for f in facts} == {TranslationStatus.TOPIC_MISSING_ON_STANDBY}

    # The same partition as if it existed on the standby (empty there): c outside the log is refused.
    logs = PartitionLogs(a.log_start, a.log_end, 0, 0)
    statuses = [
        translate_partition(f).status
        for f in read_translation_facts(
            "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), lonely, 0, logs, groups,
            shape=TopicShape.two_way(),
        )
    ]
    assert statuses[0] is TranslationStatus.COMMITTED_BELOW_LOG_START
    assert statuses[2] is TranslationStatus.COMMITTED_BEYOND_LOG_END

    # A partition the standby does not have: a partition count mismatch.
    wide = f"x.wide.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(wide, partitions=2, on=("idc1",))
    kafka_pair.create_topic(wide, partitions=1, on=("idc2",))
    (facts,) = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), wide, 1,
        PartitionLogs(0, 0, None, None), [GroupPartitionInput("g", 0)], shape=TopicShape.two_way(),
    )
    assert facts.standby_topic_exists and (facts.active_partition_count, facts.standby_partition_count) == (2, 1)
    assert translate_partition(facts).status is TranslationStatus.PARTITION_COUNT_MISMATCH

    # An empty, mirrored partition: nothing to read, nothing to anchor; no crash, no consumer needed.
    kafka_pair.create_topic(topic_name)
    stats = ReadStats()
    (facts,) = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic_name, 0,
        PartitionLogs(0, 0, 0, 0), [GroupPartitionInput("g", 0)], shape=TopicShape.one_way("idc1"), stats=stats,
    )
    assert facts.record_at_or_after is None and facts.records_below == ()
    assert stats.active_consumers == 0
    assert not translate_partition(facts).translated


def test_pooled_consumers_give_the_same_facts_and_are_reused_across_partitions(kafka_pair, session_mirrors, topic_name):
    partitions = 3
    kafka_pair.create_topic(topic_name, partitions=partitions)
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    base = int(time.time() * 1000) - 3_600_000
    for p in range(partitions):
        for i in range(30):  # pairs of records share a timestamp: the refine reads have work to do
            producer.produce(topic_name, value=json.dumps({"id": f"p{p}-{i}"}).encode(), partition=p,
                             timestamp=base + p * 100 + i // 2)
    assert producer.flush(30) == 0
    for p in range(partitions):
        wait_for(lambda p=p: all(len(read_partition(kafka_pair.bootstrap(c), topic_name, p)) == 30
                                 for c in ("idc1", "idc2")), timeout=90, what=f"{topic_name}[{p}] mirrored")

    def facts_of(p, stats):
        logs = snapshot_logs(kafka_pair, topic_name, p)
        groups = [GroupPartitionInput(f"g{c}", c) for c in range(logs.active_log_start, logs.active_log_end + 1, 4)]
        return read_translation_facts(
            "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic_name, p, logs, groups,
            shape=TopicShape.one_way("idc1"), window=3, refine_window=4, stats=stats,
        )

    fresh = {}
    for p in range(partitions):
        CONSUMERS.close()  # nothing idle: this call makes its own consumers
        stats = ReadStats()
        fresh[p] = facts_of(p, stats)
        assert (stats.consumers_created, stats.consumers_reused) == (2, 0)
    assert all(f.timestamp is not None for facts in fresh.values() for f in facts)

    # Partition after partition (and back to the first) with the same two consumers.
    created_before = CONSUMERS.stats.created
    for p in [*range(partitions), 0]:
        stats = ReadStats()
        assert facts_of(p, stats) == fresh[p], p
        assert (stats.active_consumers, stats.standby_consumers) == (1, 1)
        assert stats.consumers_reused == 2 or (p == 0 and stats.consumers_created == 2 and CONSUMERS.idle_count() == 2)
        # (Whether a read also asked for the last stable offset is not asserted: it does when a fetch
        # takes longer than record_pass.STALL_S, as on a loaded machine; a cost, not a fact.)
    assert CONSUMERS.stats.created - created_before <= 2
    assert CONSUMERS.idle_count() == 2


def test_reads_stop_at_the_last_stable_offset_of_an_open_transaction(kafka_pair):
    topic = f"x.open-tx.{uuid.uuid4().hex[:6]}"  # not mirrored: the open transaction stays open
    kafka_pair.create_topic(topic)
    produce(kafka_pair.bootstrap("idc1"), topic, [f"r{i}" for i in range(10)])
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "transactional.id": f"open-{topic}",
                         "log_level": 3})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=json.dumps({"id": f"open-{i}"}).encode(), partition=0)
    assert producer.flush(30) == 0  # written but neither committed nor aborted
    try:
        (a,) = read_partition_ranges(kafka_pair.admin("idc1"), "idc1", [(topic, 0)])
        assert (a.last_stable, a.log_end) == (10, 15)
        logs = PartitionLogs(a.log_start, a.log_end, 0, 0)
        groups = [GroupPartitionInput("mid", 6), GroupPartitionInput("caught-up", 10)]
        stats = ReadStats()
        started = time.monotonic()
        facts = read_translation_facts(
            "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic, 0, logs, groups,
            shape=TopicShape.two_way(), window=3, timeout_s=20, stats=stats,
        )
        assert time.monotonic() - started < 15  # stopped at the last stable offset, not at the 20 s deadline
        queries_before = stats.stable_offset_queries  # 0 unless a fetch took longer than STALL_S
        assert [f.record_at_or_after.offset if f.record_at_or_after else None for f in facts] == [6, None]
        assert [[r.offset for r in f.records_below] for f in facts] == [[3, 4, 5], [7, 8, 9]]

        # A read starting above the last stable offset sees nothing and asks the broker where it is.
        with CONSUMERS.lease(conf(kafka_pair, "idc1")) as lease:
            reader = PartitionReader(lease.consumer, topic, 0, read_from="idc1", peer="idc2", end=15,
                             deadline=time.monotonic() + 20, stats=stats)
            assert reader.read(12) == ([], 12)
            assert stats.stable_offset_queries >= queries_before + 1 and reader.end == 10
            records, upto = reader.read(8)
            assert [r.offset for r in records] == [8, 9] and upto == 10
    finally:
        producer.abort_transaction(30)


def test_a_search_answered_by_a_late_marker_is_backed_by_the_standby_last_record(kafka_pair):
    # Not a "t." topic: no session mirror; the test writes the copies itself, as the mirror does:
    # headers IDC/Offset, in a transaction whose commit marker the broker stamps now, an hour after
    # the records. The copy of the searched record (a12) is not on idc2 yet, so offsets_for_times
    # answers with the marker and no real record follows it.
    topic = f"x.late-marker.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(topic)
    base = int(time.time() * 1000) - 3_600_000
    active = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for i in range(15):
        active.produce(topic, value=f"a{i}".encode(), partition=0, timestamp=base + 1000 * i)
    assert active.flush(30) == 0
    copier = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc2"), "transactional.id": f"tx-{uuid.uuid4().hex}",
                       "log_level": 3})
    copier.init_transactions(30)
    copier.begin_transaction()
    for i in range(10):
        copier.produce(topic, value=f"a{i}".encode(), partition=0, timestamp=base + 1000 * i,
                       headers=list(origin_headers("idc1", i)))
    copier.commit_transaction(30)
    logs = snapshot_logs(kafka_pair, topic)
    assert (logs.active_log_end, logs.standby_log_end) == (15, 11)  # 10 copies and the marker

    (facts,) = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic, 0, logs,
        [GroupPartitionInput("g", 12)], shape=TopicShape.one_way("idc1"),
    )
    tf = facts.timestamp
    assert (tf.search_offset, tf.standby_records) == (10, ())  # the marker, nothing real after it
    assert tf.standby_last is not None and tf.standby_last.offset == 9
    result = translate_partition(facts)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 10)
    assert safe_standby_bound(facts) == 10  # proven: the commit guard lets it through


def test_a_header_less_mirror_is_refined_by_record_identity(kafka_pair):
    # Not a "t." topic: the test copies the records itself, as MirrorMaker 2 does: same key, value,
    # CreateTime and headers, no origin headers. Batches of three records share one timestamp and
    # a record comes 5 s late, so the raw search lands before the copy; a record carries a header of
    # its own. Every c must translate exactly onto the copy of the record at c.
    topic = f"x.header-less.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(topic)
    base = int(time.time() * 1000) - 3_600_000
    stamps = [base + 1000 * (i // 3) for i in range(12)]
    stamps[7] = base - 5000  # late
    headers = {4: [("trace", b"x")]}
    active = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    standby = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc2"), "log_level": 3})
    for producer in (active, standby):
        for i, ts in enumerate(stamps):
            producer.produce(topic, key=b"k", value=f"a{i}".encode(), partition=0, timestamp=ts,
                             headers=headers.get(i))
        assert producer.flush(30) == 0
    logs = snapshot_logs(kafka_pair, topic)
    assert (logs.active_log_end, logs.standby_log_end) == (12, 12)

    groups = [GroupPartitionInput(f"g{c}", c) for c in range(13)]
    facts = read_translation_facts(
        "idc1", "idc2", conf(kafka_pair, "idc1"), conf(kafka_pair, "idc2"), topic, 0, logs, groups,
        shape=TopicShape.one_way("idc1"), mirror_writes_headers=False,
    )
    raw_searches_before_the_copy = 0
    for c, f in enumerate(facts):
        assert f.timestamp is not None and f.timestamp.standby_records_complete
        raw_searches_before_the_copy += f.timestamp.search_offset < min(c, 11)
        result = translate_partition(f)
        assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, c), result.reason
        assert safe_standby_bound(f) is None  # the timestamp argument is not proven by records (safe_bound.py)
    assert raw_searches_before_the_copy >= 6  # the batches and the late record: identity did the work
    # the identities are the content's: the copy of a4 (with its own header) matches, no other does
    (f4,) = [f for f in facts if f.committed == 4]
    assert [r.offset for r in f4.timestamp.standby_records if r.identity == f4.record_at_or_after.identity] == [4]
