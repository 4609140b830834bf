"""MirrorMaker 2's offset syncs in the cycle (sync/offset_sync_step.py): the thinning keeps every
proof, the reader stamps only with ends read after the pairs, reads incrementally, starts over on a
recreated topic, names an unreadable one; the interval mode's store round-trips the reader (chdb).

The reads here are OffsetSyncsRead values as kafka_io returns them (the read itself is tested on
real brokers in tests/kafka_io/test_offset_syncs.py and, wired, in tests/assets/test_offset_sync_assets.py)."""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from offset_pipeline.kafka_io.group_offsets import PartitionRange
from offset_pipeline.kafka_io.offset_syncs import OffsetSyncsRead
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.sync.offset_sync_step import (
    OffsetSyncsReader,
    bounded_pairs,
    restored_reader,
    store_new_pairs,
    thinned_pairs,
)
from offset_pipeline.translation import OffsetSyncFacts, SyncPair, TopicShape, TranslationStatus
from offset_pipeline.translation.facts import PartitionFacts
from offset_pipeline.translation.offset_sync_anchor import offset_sync_proof

FLOW = OffsetSyncsTopic("idc1", "idc2", "idc1", "mm2-offset-syncs.idc2.internal")
TP = ("t", 0)


def reader() -> OffsetSyncsReader:
    return OffsetSyncsReader([FLOW], {"idc1": dict, "idc2": dict})


def feed(r: OffsetSyncsReader, read: OffsetSyncsRead, end: int | None, asked: list | None = None) -> None:
    """One cycle: the read (as the cluster's child returns it), then the log ranges read after it."""
    def call(function, conf, cluster, topic, start_offset, timeout_s, max_records):
        if asked is not None:
            asked.append(start_offset)
        return read
    r.read_one(("idc1", "idc2"), call, 5.0)
    ranges = {"idc1": [PartitionRange("idc1", "t", 0, 0, end, end)]} if end is not None else {}
    r.observe(ranges)


def pairs_read(pairs, next_offset: int) -> OffsetSyncsRead:
    return OffsetSyncsRead("idc1", FLOW.topic, pairs={TP: tuple(pairs)}, end_offset=next_offset,
                           next_offset=next_offset)


def test_a_pair_is_stamped_with_the_end_read_after_it_and_keeps_its_first_stamp():
    r, asked = reader(), []
    feed(r, pairs_read([(3, 2), (9, 8)], 2), end=12, asked=asked)
    feed(r, pairs_read([(15, 14)], 3), end=20, asked=asked)
    assert asked == [0, 2]  # incremental: each read starts where the last one stopped
    facts = r.facts()[("t", 0, "idc1", "idc2")]
    # (3, 2) was thinned away: (9, 8) of the same read and stamp proves more
    assert facts.pairs == (SyncPair(9, 8, 12), SyncPair(15, 14, 20))
    assert r.direction_facts() == {("idc1", "idc2"): OffsetSyncFacts(())}


def test_pairs_of_a_partition_without_an_end_stay_unstamped_until_one_is_read():
    r = reader()
    feed(r, pairs_read([(9, 8)], 1), end=None)  # the source cluster's ranges were not read
    assert r.facts()[("t", 0, "idc1", "idc2")].pairs == (SyncPair(9, 8, None),)
    feed(r, pairs_read([], 1), end=30)
    assert r.facts()[("t", 0, "idc1", "idc2")].pairs == (SyncPair(9, 8, 30),)  # 30 was read after it


def test_an_unreadable_topic_is_named_and_keeps_the_pairs():
    r = reader()
    feed(r, pairs_read([(9, 8)], 1), end=12)
    feed(r, OffsetSyncsRead("idc1", FLOW.topic, unreadable="idc1: mm2-offset-syncs.idc2.internal does not exist"), 20)
    facts = r.facts()[("t", 0, "idc1", "idc2")]
    assert facts.pairs == (SyncPair(9, 8, 12),) and "does not exist" in facts.unreadable
    assert "does not exist" in r.direction_facts()[("idc1", "idc2")].unreadable
    assert list(r.unreadable()) == [("idc1", "idc2")]


def test_a_read_whose_call_fails_is_unreadable_not_an_exception():
    r = reader()

    def dying(*args, **kwargs):
        raise TimeoutError("the Kafka client process for idc1 did not answer within 40s")
    r.read_one(("idc1", "idc2"), dying, 5.0)
    r.observe({})
    assert "did not answer" in r.unreadable()[("idc1", "idc2")]


def test_a_recreated_topic_starts_over_without_pairs_or_stamps():
    r, asked = reader(), []
    feed(r, pairs_read([(9, 8)], 5), end=12, asked=asked)
    feed(r, pairs_read([], 2), end=20, asked=asked)  # its end went below where the next read starts
    assert r.facts() == {} and "starts over" in r.unreadable()[("idc1", "idc2")]
    feed(r, pairs_read([(1, 1)], 2), end=20, asked=asked)
    assert asked == [0, 5, 0]
    assert r.facts()[("t", 0, "idc1", "idc2")].pairs == (SyncPair(1, 1, 20),)


@pytest.mark.parametrize("previous, new, kept", [
    (None, [], []),
    (None, [(1, 1), (2, 2), (3, 3)], [(3, 3)]),
    ((0, 5), [(1, 6), (2, 2), (3, 3)], [(1, 6), (2, 2), (3, 3)]),  # the step back, both sides
    ((0, 9), [(1, 2), (2, 3)], [(1, 2), (2, 3)]),  # a step back from the pair kept before
    (None, [(1, 1), (2, 9), (3, 2), (4, 3), (5, 4)], [(2, 9), (3, 2), (5, 4)]),
])
def test_thinned_pairs(previous, new, kept):
    assert thinned_pairs(previous, new) == kept


def _facts(pairs: tuple[SyncPair, ...], c: int, standby_end: int) -> PartitionFacts:
    return PartitionFacts(
        group_id="g", topic="t", partition=0, active="idc1", standby="idc2", committed=c,
        standby_committed=None, active_log_start=0, active_log_end=max(c, 1) + 50, standby_log_start=0,
        standby_log_end=standby_end, shape=TopicShape.one_way("idc1"), offset_syncs=OffsetSyncFacts(pairs),
    )


@given(st.lists(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=6), max_size=5),
       st.integers(0, 80))
def test_thinning_proves_what_the_whole_reads_prove(batches, c):
    """Per read, every pair stamped alike (the end read after it, above every u it names): the rule's
    proof for any c from the thinned pairs equals the proof from all of them."""
    everything, thinned, end = [], [], 0
    for i, batch in enumerate(batches):
        end += 10 + i
        batch = [(u % end, d) for u, d in batch]
        kept = thinned_pairs((thinned[-1].upstream, thinned[-1].downstream) if thinned else None, batch)
        everything += [SyncPair(u, d, end) for u, d in batch]
        thinned += [SyncPair(u, d, end) for u, d in kept]
    whole = offset_sync_proof(_facts(tuple(everything), c, 61))
    thin = offset_sync_proof(_facts(tuple(thinned), c, 61))
    if isinstance(whole, tuple):
        assert isinstance(thin, tuple) and (thin[0] == whole[0] or thin[0] in (
            TranslationStatus.NO_OFFSET_SYNC, TranslationStatus.OFFSET_SYNC_UNCONFIRMED)), (whole, thin)
    else:
        assert not isinstance(thin, tuple) and thin.t == whole.t, (whole, thin)


def test_the_store_round_trips_the_reader(chdb_dsn):
    from offset_pipeline.resources import ClickHouseResource
    from offset_pipeline.storage import offset_sync_pairs

    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    offset_sync_pairs.ensure_table(client)
    first = reader()
    feed(first, pairs_read([(9, 8)], 1), end=None)
    assert store_new_pairs(client, first, int(time.time() * 1000) - 1) == 1  # the pair, not stamped yet
    second, why = restored_reader([FLOW], {"idc1": dict}, client)
    assert why is None
    asked = []
    feed(second, pairs_read([(15, 14)], 2), end=20, asked=asked)
    assert asked == [1]  # the restored reader goes on where the first stopped
    assert store_new_pairs(client, second, int(time.time() * 1000)) == 2  # the first stamp of (9, 8), and (15, 14)
    third, _ = restored_reader([FLOW], {"idc1": dict}, client)
    assert dataclasses.asdict(third.facts()[("t", 0, "idc1", "idc2")]) == dataclasses.asdict(
        second.facts()[("t", 0, "idc1", "idc2")])
    feed(third, pairs_read([], 2), end=30)  # nothing new: the stamps stay the first ones
    assert third.facts()[("t", 0, "idc1", "idc2")].pairs == (SyncPair(9, 8, 20), SyncPair(15, 14, 20))
    nothing, why = restored_reader([FLOW], {"idc1": dict}, None)
    assert "ClickHouse" in why and nothing.facts() == {}


def test_what_is_not_stored_yet_accumulates_until_taken():
    r = reader()
    feed(r, pairs_read([(9, 8)], 1), end=None)
    feed(r, pairs_read([(15, 14)], 2), end=20)
    [(topic, rows, next_offset)] = r.take_unstored()  # a continuous run's checkpoint, two cycles later
    assert (topic, next_offset) == (FLOW, 2)
    assert rows == [("t", 0, 9, 8, None), ("t", 0, 9, 8, 20), ("t", 0, 15, 14, 20)]
    assert r.take_unstored() == []  # taken: stored once
    feed(r, pairs_read([], 2), end=30)
    assert r.take_unstored() == []  # nothing new, the read did not move on


@pytest.mark.parametrize("pairs, cap, kept", [
    ([(1, 1), (2, 2)], 4, [(1, 1), (2, 2)]),
    ([(i, i) for i in range(8)], 6, [(1, 1), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]),
    ([(0, 50), (1, 60), (2, 3), (3, 4), (4, 5)], 4, [(1, 60), (2, 3), (3, 4), (4, 5)]),  # the step kept visible
    # the pair right after the step is never halved away (it alone shows the step): the older
    # pair goes instead (found by hypothesis: (0, 1) was taken for a current pair)
    ([(0, 1), (0, 0), (1, 1), (1, 2)], 3, [(0, 0), (1, 1), (1, 2)]),
    ([(0, 90), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)], 5, [(0, 90), (1, 2), (4, 5), (5, 6), (6, 7)]),
])
def test_bounded_pairs(pairs, cap, kept):
    assert bounded_pairs(pairs, cap) == kept


@given(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=40), st.integers(3, 12),
       st.integers(0, 120))
@example(raw=[(0, 1), (0, 0), (1, 1), (1, 2)], cap=3, c=1)
def test_bounding_never_proves_more_and_stays_bounded(raw, cap, c):
    """Each pair its own stamp (u + 1: read right after it was written): what the bounded pairs
    prove is never more than what all of them prove (dropping a pair only proves less)."""
    pairs = list(dict.fromkeys(raw))
    bounded = bounded_pairs(pairs, cap)
    assert len(bounded) <= max(cap, 2) + 1 and all(p in pairs for p in bounded)
    whole = offset_sync_proof(_facts(tuple(SyncPair(u, d, u + 1) for u, d in pairs), c, 100))
    thin = offset_sync_proof(_facts(tuple(SyncPair(u, d, u + 1) for u, d in bounded), c, 100))
    if not isinstance(thin, tuple):
        assert not isinstance(whole, tuple) and thin.t <= whole.t, (whole, thin)


def test_an_update_touches_only_the_partitions_given():
    from offset_pipeline.sync.offset_sync_stamps import OffsetSyncStamps

    stamps = OffsetSyncStamps()
    stamps.update({("t", 0): ((1, 1),), ("t", 1): ((5, 4),)}, {("t", 0): 10})
    stamps.update({("t", 1): ((5, 4), (7, 6))}, {("t", 1): 20, ("t", 0): 30})
    assert stamps.facts("t", 0).pairs == (SyncPair(1, 1, 10),)  # not given: kept as it was
    assert stamps.facts("t", 1).pairs == (SyncPair(5, 4, 20), SyncPair(7, 6, 20))
    stamps.update({("t", 1): ((7, 6),)}, {("t", 1): 40})
    assert stamps.facts("t", 1).pairs == (SyncPair(7, 6, 20),)  # (5, 4) gone with its stamp; 7's first kept
