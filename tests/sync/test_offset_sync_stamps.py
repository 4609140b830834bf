"""OffsetSyncStamps (sync/offset_sync_stamps.py): a pair keeps the active log end read after the
first read that saw it; unstamped without such an end; forgotten once compacted away."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import pytest

from offset_pipeline.sync.offset_sync_stamps import OffsetSyncStamps, offset_syncs_column, offset_syncs_from_column
from offset_pipeline.sync.spark_translation import partition_reads
from offset_pipeline.translation import OffsetSyncFacts, SyncPair

T = ("orders", 0)


def test_a_pair_keeps_the_end_read_after_its_first_read():
    stamps = OffsetSyncStamps()
    stamps.observe({T: ((0, 0), (5, 5))}, {T: 8})
    stamps.observe({T: ((0, 0), (5, 5), (9, 9))}, {T: 20})
    assert stamps.facts(*T).pairs == (SyncPair(0, 0, 8), SyncPair(5, 5, 8), SyncPair(9, 9, 20))


def test_without_an_end_read_after_it_a_pair_is_unstamped():
    stamps = OffsetSyncStamps()
    stamps.observe({T: ((0, 0),), ("other", 1): ((3, 4),)}, {("other", 1): 9})
    assert stamps.facts(*T).pairs == (SyncPair(0, 0, None),)
    assert stamps.facts("other", 1).pairs == (SyncPair(3, 4, 9),)
    stamps.observe({T: ((0, 0),)}, {T: 30})  # stamped by the first end read after it
    assert stamps.facts(*T).pairs == (SyncPair(0, 0, 30),)


def test_compacted_pairs_are_forgotten_and_an_unreadable_topic_is_named():
    stamps = OffsetSyncStamps()
    stamps.observe({T: ((0, 0), (5, 5))}, {T: 8})
    stamps.observe({T: ((5, 5),)}, {T: 12})
    assert stamps.facts(*T).pairs == (SyncPair(5, 5, 8),)
    stamps.observe({}, {}, unreadable="idc1: no answer")
    facts = stamps.facts(*T)
    assert facts.unreadable == "idc1: no answer"
    stamps.observe({T: ((5, 5), (0, 0))}, {T: 40})  # (0, 0) is back (re-sent): a new stamp
    assert stamps.facts(*T).pairs == (SyncPair(5, 5, 8), SyncPair(0, 0, 40))
    assert stamps.facts("nothing", 0).pairs == ()


@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=6),
                          st.integers(0, 100), st.booleans()), max_size=8))
def test_every_stamp_is_an_end_read_after_the_pair_was_first_seen_since(reads):
    """The stamp of each pair is the end of the first read, among the reads that kept seeing it
    without a gap, that came with an end."""
    stamps = OffsetSyncStamps()
    first_end: dict[tuple[int, int], int] = {}
    for pairs, end, with_end in reads:
        stamps.observe({T: tuple(pairs)}, {T: end} if with_end else {})
        first_end = {p: first_end.get(p, end if with_end else None) for p in pairs}
        first_end = {p: (e if e is not None else (end if with_end else None)) for p, e in first_end.items()}
        for pair in stamps.facts(*T).pairs:
            assert pair.active_end_after == first_end[(pair.upstream, pair.downstream)]


_pairs = st.lists(st.builds(SyncPair, st.integers(0, 2**62), st.integers(0, 2**62),
                            st.one_of(st.none(), st.integers(0, 2**62))), max_size=8)


@given(_pairs, st.one_of(st.none(), st.text(max_size=20)), st.one_of(st.none(), st.text(max_size=20)))
def test_the_work_row_column_round_trips(pairs, unreadable, remote_topic):
    facts = OffsetSyncFacts(tuple(pairs), unreadable=unreadable, remote_topic=remote_topic)
    assert offset_syncs_from_column(offset_syncs_column(facts)) == facts


def test_no_column_no_facts_and_a_foreign_text_is_refused():
    assert offset_syncs_column(None) is None
    assert offset_syncs_from_column(None) is None and offset_syncs_from_column("") is None
    with pytest.raises(ValueError):
        offset_syncs_from_column('["not", "ours"]')


def work_row(**extra):
    return {"group_id": "g", "topic": "orders", "partition": 0, "active": "idc1", "standby": "idc2",
            "committed": 5, "standby_committed": None, "active_log_start": 0, "active_log_end": 9,
            "standby_log_start": 0, "standby_log_end": 9, "anchor_active_offset": None, "anchor_standby_offset": None,
            "shape": "one_way:idc1", "standby_timestamp_type": "CreateTime", "shape_source": "configured",
            "ff_active_offset": None, "ff_standby_offset": None, **extra}


def test_the_task_hands_a_work_rows_pairs_to_the_partition_reads():
    facts = OffsetSyncFacts((SyncPair(1, 1, 3),))
    confs = {"idc1": {}, "idc2": {}}
    reads = partition_reads([work_row(offset_syncs=offset_syncs_column(facts))], confs, snapshot_id="s",
                            cycle_time_ms=0, mirror_writes_headers=False)
    assert reads.kwargs["offset_syncs"] == facts
    without = partition_reads([work_row()], confs, snapshot_id="s", cycle_time_ms=0)
    assert "offset_syncs" not in without.kwargs
