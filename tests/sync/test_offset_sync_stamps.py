"""OffsetSyncStamps (sync/offset_sync_stamps.py): a pair keeps the active log end read after the
first read that saw it; unstamped without such an end; forgotten once compacted away."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.sync.offset_sync_stamps import OffsetSyncStamps
from offset_pipeline.translation import SyncPair

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
