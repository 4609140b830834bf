"""Strategy 2: timestamp search plus header refinement, for one-way topics from the producing side.

The active cluster idc1 produces (records a*); idc2 holds copies (a*'). ``ts`` maps record names to
CreateTime timestamps (default: increasing with the offset).
"""

from __future__ import annotations

import dataclasses

import pytest

from offset_pipeline.translation import (
    CopiedFrom,
    PartitionFacts,
    RecordFact,
    Strategy,
    TimestampFacts,
    TopicShape,
    TranslationStatus,
    translate_by_timestamp,
    translate_partition,
)
from offset_pipeline.translation.safe_bound import safe_standby_bound
from devstack.two_cluster_model import TwoClusterModel, count_duplicates, count_loss, without_identities

A, B = "idc1", "idc2"
ONE_WAY = TopicShape.one_way(A)


def run(active_log, standby_log, c, *, refine=32, shape=ONE_WAY, identities=True, identical_pairs=False,
        **model_kwargs):
    model = TwoClusterModel.from_notation(active_log, standby_log, **model_kwargs)
    model.identical_pairs = identical_pairs
    facts = model.partition_facts(c, refine_window=refine, shape=shape, with_caught_up=False)
    if not identities:
        facts = without_identities(facts)
    result = translate_partition(facts)
    if result.translated:
        assert count_loss(model, c, result.standby_offset) == 0, result
    return model, result


LOG_A = ["a0", "a1", "a2", "a3"]
LOG_B = ["a0'", "a1'", "a2'", "a3'"]


@pytest.mark.parametrize("c", [0, 1, 2, 3])
def test_increasing_timestamps_land_on_the_copy(c):
    model, result = run(LOG_A, LOG_B, c)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, c)
    assert result.strategy is Strategy.TIMESTAMP_SEARCH
    assert result.expected_duplicates == 0 == count_duplicates(model, c, c)
    assert not result.timestamp_inversion


def test_caught_up_variant_gives_the_copy_plus_one():
    model, result = run(LOG_A, LOG_B, 4)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, 4)
    assert "last processed record" in result.reason


def test_offsets_differ_between_clusters():
    # Markers on both sides: offsets are not dense and differ, the copy is found by its header.
    log_a = ["a0", "_", "a1", "_", "_", "a2", "a3"]
    log_b = ["_", "a0'", "a1'", "_", "a2'", "_", "a3'"]
    for c, expected in [(0, 1), (1, 2), (2, 2), (3, 4), (5, 4), (6, 6), (7, 7)]:
        model, result = run(log_a, log_b, c)
        assert result.standby_offset == expected, (c, result)
        assert count_duplicates(model, c, result.standby_offset) == 0


def test_equal_timestamps_are_refined_by_headers():
    same = {name: 5000 for name in ("a0", "a1", "a2", "a3")}
    model, result = run(LOG_A, LOG_B, 2, timestamps=same)
    assert model.logs[B].offsets_for_times(5000) == 0  # the raw search gives the first of the batch
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, 2)
    assert count_duplicates(model, 2, 2) == 0


def test_equal_timestamps_without_headers_or_identities_give_duplicates_not_loss():
    same = {name: 5000 for name in ("a0", "a1", "a2", "a3")}
    model, result = run(LOG_A, LOG_B, 2, timestamps=same, mirror_headers=False, identities=False)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 0)
    assert count_duplicates(model, 2, 0) == 2  # the article's batch-job duplicates


# -- a mirror without headers: refinement by record identity ---------------------------------------

SAME_TS = {name: 5000 for name in ("a0", "a1", "a2", "a3")}


@pytest.mark.parametrize("c", [0, 1, 2, 3, 4])
def test_equal_timestamps_without_headers_are_refined_by_identity(c):
    model, result = run(LOG_A, LOG_B, c, timestamps=SAME_TS, mirror_headers=False)
    assert model.logs[B].offsets_for_times(5000) == 0
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, c)
    assert result.expected_duplicates == 0 == count_duplicates(model, c, c)
    assert "same identity" in result.reason


def test_timestamp_inversion_without_headers_is_refined_by_identity():
    ts = {"a0": 3000, "a1": 1000, "a2": 2000, "a3": 4000}
    model, result = run(LOG_A, LOG_B, 2, timestamps=ts, mirror_headers=False)
    assert result.timestamp_inversion
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, 2)
    assert count_duplicates(model, 2, 2) == 0


def test_byte_identical_records_land_on_the_first_copy_inexact():
    """a2 and a3 have one content and one timestamp (a producer's retry): the first record with a3's
    identity is a2's copy. One duplicate, nothing lost, and not called exact."""
    model, result = run(LOG_A, LOG_B, 3, timestamps=SAME_TS, mirror_headers=False, identical_pairs=True)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 2)
    assert count_duplicates(model, 3, 2) == 1
    assert "first of 2 records" in result.reason


def test_redelivered_copy_without_headers_is_not_exact():
    """An at-least-once mirror copied a0, a1 twice: a1 has two copies, the first one is taken."""
    _, result = run(LOG_A, ["a0'", "a1'", "a0'", "a1'", "a2'"], 1, mirror_headers=False)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 1)


def test_identity_window_cut_by_its_bound_is_not_exact():
    _, result = run(LOG_A, LOG_B, 1, timestamps=SAME_TS, mirror_headers=False, refine=2)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 1)
    assert "cut by its bound" in result.reason
    _, result = run(LOG_A, LOG_B, 3, timestamps=SAME_TS, mirror_headers=False, refine=2)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 0)
    assert "no record with the same identity" in result.reason


def test_copy_not_mirrored_yet_without_headers_keeps_the_search_result():
    model, result = run(LOG_A, ["a0'", "a1'"], 2, timestamps=SAME_TS, mirror_headers=False)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 0)
    assert count_loss(model, 2, 0) == 0


def test_refinement_window_bounds_the_scan():
    same = {name: 5000 for name in ("a0", "a1", "a2", "a3")}
    model, result = run(LOG_A, LOG_B, 3, timestamps=same, refine=2)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 2)


def test_timestamp_inversion_is_flagged_and_refined_away():
    # a0 has a larger timestamp than a2: the search for ts(a2) lands on a0'.
    ts = {"a0": 3000, "a1": 1000, "a2": 2000, "a3": 4000}
    model, result = run(LOG_A, LOG_B, 2, timestamps=ts)
    assert model.logs[B].offsets_for_times(2000) == 0
    assert result.timestamp_inversion
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, 2)


def test_timestamp_inversion_without_headers_or_identities_keeps_the_safe_search_result():
    ts = {"a0": 3000, "a1": 1000, "a2": 2000, "a3": 4000}
    model, result = run(LOG_A, LOG_B, 2, timestamps=ts, mirror_headers=False, identities=False)
    assert result.timestamp_inversion
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 0)
    assert count_duplicates(model, 2, 0) == 2


def test_marker_with_a_late_timestamp_before_the_copy():
    # A transactional mirror's marker is stamped by the broker, later than the copies after it.
    log_b = ["a0'", "_", "a1'", "a2'", "a3'"]
    model, result = run(LOG_A, log_b, 2, timestamps={"_idc21": 9999})
    assert model.logs[B].offsets_for_times(1020) == 1
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_EXACT, 3)


def test_answer_on_a_late_marker_with_nothing_real_after_it_uses_the_last_record():
    # The copy of a3 is not mirrored yet; the marker closing the mirror's last transaction is
    # stamped after ts(a3), so offsets_for_times answers with it and no real record follows.
    log_b = ["a0'", "a1'", "_"]
    model, result = run(LOG_A, log_b, 3, timestamps={"_idc22": 9999})
    assert model.logs[B].offsets_for_times(1030) == 2
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 2)
    facts = model.partition_facts(3, refine_window=32, shape=ONE_WAY, with_caught_up=False)
    assert facts.timestamp.standby_last is not None and facts.timestamp.standby_records == ()
    assert safe_standby_bound(facts) == 2  # proven by the copies read, so the commit guard lets it through


def test_copy_not_mirrored_yet_uses_the_standby_tail():
    model, result = run(LOG_A, ["a0'", "a1'"], 3)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 2)
    assert count_duplicates(model, 3, 2) == 0


def test_nothing_mirrored_yet():
    _, result = run(LOG_A, [], 1)
    assert result.status is TranslationStatus.NOT_YET_MIRRORED


def test_copy_deleted_by_standby_retention_is_not_skipped_over():
    # B deleted a0', a1'. The search for ts(a1) = 5000 lands on a3' (ts 6000) past a2' (ts 1000):
    # t = 3 would lose a2'. Refinement sees a copy of a later record first and refuses.
    ts = {"a0": 500, "a1": 5000, "a2": 1000, "a3": 6000}
    model, result = run(LOG_A, LOG_B, 1, timestamps=ts, standby_log_start=2)
    assert count_loss(model, 1, 3) == 1
    assert result.status is TranslationStatus.STANDBY_RECORDS_DELETED


def test_copy_missing_on_standby():
    ts = {"a0": 500, "a1": 5000, "a2": 1000, "a3": 6000}
    _, result = run(LOG_A, ["a0'", "a2'", "a3'"], 1, timestamps=ts)
    assert result.status is TranslationStatus.COPY_MISSING_ON_STANDBY


def test_copy_missing_after_progress_keeps_the_last_safe_offset():
    same = {name: 5000 for name in ("a0", "a1", "a2", "a3")}
    _, result = run(LOG_A, ["a0'", "a1'", "a3'"], 2, timestamps=same)
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 2)


def test_log_append_time_on_standby():
    model, result = run(LOG_A, LOG_B, 2, log_append_time=[B])
    assert result.status is TranslationStatus.LOG_APPEND_TIME_ON_STANDBY
    assert result.standby_offset is None


def test_only_for_one_way_topics_from_the_producing_side():
    model = TwoClusterModel.from_notation(LOG_A, LOG_B)
    for shape in (TopicShape.two_way(), TopicShape.unknown(), TopicShape.one_way(B)):
        result = translate_by_timestamp(model.partition_facts(2, shape=shape))
        assert result.status is TranslationStatus.NOT_APPLICABLE


def test_the_article_50_50_case_is_refused():
    # Two-way topic wrongly configured one-way: idc2 has its own records. The window mixes copies
    # and local records, so the search is refused rather than skipping b0 (the article's loss case).
    log_a = ["a0", "a1", "a2", "b0'", "b1'"]
    log_b = ["a0'", "b0", "b1", "a1'", "a2'"]
    model, result = run(log_a, log_b, 2)
    assert result.status is TranslationStatus.SHAPE_CONFLICT
    # with the true shape, only headers are used: nothing safe yet
    _, honest = run(log_a, log_b, 2, shape=TopicShape.two_way())
    assert honest.status is TranslationStatus.NO_ANCHOR


def fact_set(searched_offset, search_offset, standby_records=(), standby_last=None, *, c=2):
    return PartitionFacts(
        group_id="g", topic="t", partition=0, active=A, standby=B, committed=c, active_log_start=0,
        active_log_end=10, standby_log_start=0, standby_log_end=10, shape=ONE_WAY,
        record_at_or_after=RecordFact(2, 2000), records_below=(RecordFact(1, 1000),),
        timestamp=TimestampFacts(searched_offset, search_offset, tuple(standby_records), standby_last),
    )


def test_search_of_another_record_is_inconsistent():
    result = translate_by_timestamp(fact_set(1, 1))
    assert result.status is TranslationStatus.INCONSISTENT_FACTS


def test_no_timestamp_large_enough_but_the_copy_is_there_is_inconsistent():
    result = translate_by_timestamp(fact_set(2, None, standby_last=RecordFact(5, 10, CopiedFrom(A, 2))))
    assert result.status is TranslationStatus.INCONSISTENT_FACTS


def test_search_result_without_a_window_is_used_unrefined():
    result = translate_by_timestamp(fact_set(2, 4))
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 4)


def test_window_records_past_the_standby_end_are_ignored():
    records = [RecordFact(3, 2000, CopiedFrom(A, 1)), RecordFact(10, 2000, CopiedFrom(A, 2))]
    result = translate_by_timestamp(fact_set(2, 3, records))
    assert (result.status, result.standby_offset) == (TranslationStatus.TIMESTAMP_SEARCH, 4)


def test_a_standby_local_record_first_in_the_window_is_a_shape_conflict():
    # The same 50:50 case with a one-record window: b1 alone at the search result. t = 2 would
    # lose b0, so a header-writing mirror's missing header is taken as proof of a local record.
    log_a = ["a0", "a1", "a2", "b0'", "b1'"]
    log_b = ["a0'", "b0", "b1", "a1'", "a2'"]
    model, result = run(log_a, log_b, 2, refine=1)
    assert count_loss(model, 2, 2) == 1
    assert result.status is TranslationStatus.SHAPE_CONFLICT


def test_standby_tail_without_a_header_is_a_shape_conflict():
    _, result = run(LOG_A, ["a0'", "b0"], 3)
    assert result.status is TranslationStatus.SHAPE_CONFLICT


def test_header_less_mirror_does_not_trust_standby_headers():
    # Without a header-writing mirror a copy that is not there yet cannot be proven absent.
    _, result = run(LOG_A, ["a0'", "a1'"], 3, mirror_headers=False)
    assert result.status is TranslationStatus.NOT_YET_MIRRORED


def test_copy_deleted_and_nothing_later_by_timestamp():
    # B deleted a0', a1'; the search for ts(a1) = 5000 finds nothing, and B's last record a2' copies a
    # later record: the copy of a1 is gone, and t = 3 (past the tail) would skip the unprocessed a2'.
    ts = {"a0": 500, "a1": 5000, "a2": 1000}
    model, result = run(["a0", "a1", "a2"], ["a0'", "a1'", "a2'"], 1, timestamps=ts, standby_log_start=2)
    assert count_loss(model, 1, 3) == 1
    assert result.status is TranslationStatus.STANDBY_RECORDS_DELETED


def test_redelivered_copy_after_the_first_copy_was_deleted():
    # An at-least-once mirror copied a1, a2 twice; retention deleted a0' and the first a1'. The
    # search for ts(a1) lands on the second a1' -- but the unprocessed a2' (offset 2) is before it.
    ts = {"a0": 500, "a1": 5000, "a2": 1000, "a3": 6000}
    model, result = run(LOG_A, ["a0'", "a1'", "a2'", "a1'", "a2'", "a3'"], 1, timestamps=ts, standby_log_start=2)
    assert model.logs[B].offsets_for_times(5000) == 3
    assert count_loss(model, 1, 3) == 1
    assert result.status is TranslationStatus.STANDBY_RECORDS_DELETED
    assert "first retained record" in result.reason


def test_search_landing_on_a_marker_after_a_deleted_copy():
    # Exactly-once mirror: a1' deleted by retention, then a2' (small ts) and a marker stamped late.
    # The search lands on the marker with nothing to refine: t = 3 would skip the unprocessed a2'.
    ts = {"a0": 500, "a1": 5000, "a2": 1000, "_idc23": 9999}
    model, result = run(["a0", "a1", "a2"], ["a0'", "a1'", "a2'", "_"], 1, timestamps=ts, standby_log_start=2)
    assert model.logs[B].offsets_for_times(5000) == 3
    assert count_loss(model, 1, 3) == 1
    assert result.status is TranslationStatus.STANDBY_RECORDS_DELETED


def test_standby_first_record_is_needed_once_the_standby_deleted_records():
    facts = fact_set(2, 3, [RecordFact(3, 2000, CopiedFrom(A, 2))])
    missing = dataclasses.replace(facts, standby_log_start=1)
    assert translate_by_timestamp(missing).status is TranslationStatus.INCONSISTENT_FACTS  # not read
    empty = dataclasses.replace(missing, timestamp=dataclasses.replace(missing.timestamp, standby_records=()))
    assert translate_by_timestamp(empty).status is TranslationStatus.STANDBY_RECORDS_DELETED  # nothing left
    given = dataclasses.replace(
        missing, timestamp=dataclasses.replace(missing.timestamp, standby_first=RecordFact(1, 900, CopiedFrom(A, 0)))
    )
    assert (translate_by_timestamp(given).status, translate_by_timestamp(given).standby_offset) == (
        TranslationStatus.TIMESTAMP_EXACT, 3)
