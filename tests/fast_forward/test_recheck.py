"""fast_forward/recheck.py (pure): the fast-forward job's live re-check, table-driven and property-based."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.fast_forward.recheck import LivePartition, RequestedPartition, recheck
from offset_pipeline.fast_forward.stale_candidates import Rejection
from offset_pipeline.translation import caught_up_problem, safe_standby_bound, translate_caught_up

NOW = 5_000_000
WINDOW = 600.0
REQUESTED = RequestedPartition("low", 0, active_end=50, standby_end=45, stable_since_ms=NOW - 700_000)


def live(**kw) -> LivePartition:
    values = dict(topic="low", partition=0, committed=50, active_log_start=0, active_log_end=50, standby_log_start=0,
                  standby_log_end=45, standby_mirror_position=45, active_mirror_position=50)
    values.update(kw)
    values.setdefault("active_log_end_after", values["active_log_end"])
    values.setdefault("standby_log_end_after", values["standby_log_end"])
    return LivePartition(**values)


CASES = [
    ("quiet, caught up", {}, {}, None),
    ("a record arrived on the active since the sensor looked", {"active_log_end": 51}, {}, Rejection.RECEIVING_DATA),
    ("a record arrived on the standby", {"standby_log_end": 46, "standby_mirror_position": 46}, {},
     Rejection.RECEIVING_DATA),
    ("a record arrived while the job read (a mirror copy, say)", {"active_log_end_after": 51}, {},
     Rejection.RECEIVING_DATA),
    ("the ends not read again", {"standby_log_end_after": None}, {}, Rejection.RECEIVING_DATA),
    ("quiet for less than the window", {}, {"stable_since_ms": NOW - 100_000}, Rejection.RECEIVING_DATA),
    ("no committed offset", {"committed": None}, {}, Rejection.NO_COMMIT),
    ("the group has lag", {"committed": 48}, {}, Rejection.GROUP_LAG),
    ("one short, the gap not proven markers-only", {"committed": 49}, {}, Rejection.GROUP_LAG),
    ("one short, only a marker there", {"committed": 49, "no_record_from_committed": True}, {}, None),
    ("the standby->active mirror behind: stopped", {"standby_mirror_position": 40}, {}, Rejection.MIRROR_STOPPED),
    ("the active->standby mirror behind: stopped", {"active_mirror_position": 49}, {}, Rejection.MIRROR_STOPPED),
    ("a mirror one short, only its marker there",
     {"standby_mirror_position": 44, "no_record_from_standby_mirror_position": True}, {}, None),
    ("a mirror without a position", {"active_mirror_position": None}, {}, Rejection.MIRROR_UNKNOWN),
    ("the standby already at its end: left to the commit rules", {}, {}, None),
]


@pytest.mark.parametrize("name, live_kw, request_kw, expected", CASES, ids=[c[0] for c in CASES])
def test_recheck(name, live_kw, request_kw, expected):
    requested = dataclasses.replace(REQUESTED, **request_kw)
    check = recheck("g 'ü'", "idc1", "idc2", requested, live(**live_kw), NOW, window_s=WINDOW)
    assert check.rejection is expected, check.detail
    assert check.detail
    if expected is None:
        result = translate_caught_up(check.facts)
        assert result.standby_offset == check.facts.standby_log_end == safe_standby_bound(check.facts)
    else:
        assert check.facts is None


# A stopped mirror: the standby->active mirror (idc2->idc1) stopped; the job's live reads.
STOPPED = [
    ("stopped, idc2 got a record since the sensor looked", {"standby_log_end": 46, "standby_log_end_after": 46}, {},
     Rejection.RECEIVING_DATA),
    ("stopped before copying idc2's last records, nothing new since", {"standby_mirror_position": 43}, {},
     Rejection.MIRROR_STOPPED),
    ("stopped one short, and that offset holds a record", {"standby_mirror_position": 44}, {},
     Rejection.MIRROR_STOPPED),
    ("stopped, caught up, both quiet: NO-LOSS, fast-forwarded", {}, {}, None),
    ("stopped, its positions unreadable", {"standby_mirror_position": None}, {}, Rejection.MIRROR_UNKNOWN),
]


@pytest.mark.parametrize("name, live_kw, request_kw, expected", STOPPED, ids=[c[0] for c in STOPPED])
def test_recheck_with_a_stopped_reverse_mirror(name, live_kw, request_kw, expected):
    check = recheck("g", "idc1", "idc2", dataclasses.replace(REQUESTED, **request_kw), live(**live_kw), NOW,
                    window_s=WINDOW)
    assert check.rejection is expected, check.detail
    if expected is Rejection.MIRROR_STOPPED:
        assert check.detail.startswith("the idc2->idc1 mirror is at 4") and "not moved for 700s" in check.detail
    if expected is None:
        assert translate_caught_up(check.facts).standby_offset == 45


offsets = st.integers(0, 60)


@given(offsets, offsets, offsets, st.one_of(st.none(), offsets), st.one_of(st.none(), offsets), offsets, offsets,
       st.booleans(), st.booleans(), st.booleans(), st.integers(0, 1_200_000), st.one_of(st.none(), offsets),
       st.one_of(st.none(), offsets))
def test_a_passing_recheck_always_satisfies_the_caught_up_rule(c, a_end, b_end, to_active, to_standby, seen_a,
                                                               seen_b, gap_c, gap_b, gap_a, quiet_ms, a_after, b_after):
    requested = RequestedPartition("t", 0, seen_a, seen_b, NOW - quiet_ms)
    state = LivePartition("t", 0, c, 0, a_end, 0, b_end, to_active, to_standby, gap_c, gap_b, gap_a, a_after, b_after)
    check = recheck("g", "idc1", "idc2", requested, state, NOW, window_s=WINDOW)
    if check.passed:
        assert (a_end, b_end) == (seen_a, seen_b) == (a_after, b_after) and quiet_ms >= WINDOW * 1000
        assert caught_up_problem(check.facts) is None
        assert c == a_end or gap_c
        assert to_active is not None and (to_active >= b_end or gap_b)
        assert to_standby is not None and (to_standby >= a_end or gap_a)
    if check.rejection is Rejection.MIRROR_STOPPED:  # after the quiet only, and a position really behind
        assert quiet_ms >= WINDOW * 1000
        assert (to_active is not None and to_active < b_end and not gap_b) or (
            to_standby is not None and to_standby < a_end and not gap_a)
    assert check.rejection is not Rejection.MIRROR_BEHIND
