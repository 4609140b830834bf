"""stale_candidates (pure): the stale-partition sensor's decisions, table-driven and property-based."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.fast_forward.stale_candidates import LogEnds, PartitionHistory, Rejection, classify, skip_reason

NOW = 10_000_000
WINDOW_S = 600


def history(**kw) -> PartitionHistory:
    values = dict(
        group_id='g "q" ü', topic="low", partition=0, active="idc1", standby="idc2", committed=50,
        standby_committed=40, points=tuple(LogEnds(NOW - s * 1000, 50, 45) for s in (900, 600, 300, 0)),
        active_mirror_position=50, standby_mirror_position=45,
    )
    values.update(kw)
    return PartitionHistory(**values)


CASES = [
    ("quiet, no lag, mirrors caught up", {}, None),
    ("a trailing commit marker: lag 1", {"committed": 49}, None),
    ("lag 2", {"committed": 48}, Rejection.GROUP_LAG),
    ("no committed offset", {"committed": None}, Rejection.NO_COMMIT),
    ("standby already at its end", {"standby_committed": 45}, Rejection.AT_STANDBY_END),
    ("a record 5 minutes ago", {"points": (LogEnds(NOW - 900_000, 49, 44), LogEnds(NOW - 300_000, 50, 45),
                                           LogEnds(NOW, 50, 45))}, Rejection.RECEIVING_DATA),
    ("the standby grew 5 minutes ago", {"points": (LogEnds(NOW - 900_000, 50, 44), LogEnds(NOW - 300_000, 50, 45),
                                                   LogEnds(NOW, 50, 45))}, Rejection.RECEIVING_DATA),
    ("stable, but snapshots cover 5 minutes", {"points": (LogEnds(NOW - 300_000, 50, 45), LogEnds(NOW, 50, 45))},
     Rejection.SHORT_HISTORY),
    ("the standby->active mirror behind a quiet end: stopped", {"standby_mirror_position": 43},
     Rejection.MIRROR_STOPPED),
    ("the active->standby mirror behind a quiet end: stopped", {"active_mirror_position": 48},
     Rejection.MIRROR_STOPPED),
    ("a mirror one short: its last transaction's marker", {"standby_mirror_position": 44}, None),
    ("a mirror position unknown", {"standby_mirror_position": None}, Rejection.MIRROR_UNKNOWN),
    ("one snapshot only: it shows no quiet (a live read may)", {"points": (LogEnds(NOW - 100_000, 50, 45),)},
     Rejection.SHORT_HISTORY),
    ("quiet until 10 minutes ago, no snapshot since", {"points": tuple(LogEnds(NOW - s * 1000, 50, 45)
                                                                       for s in (1500, 1200, 900, 700))},
     Rejection.SNAPSHOT_TOO_OLD),
]


@pytest.mark.parametrize("name, overrides, expected", CASES, ids=[c[0] for c in CASES])
def test_classify(name, overrides, expected):
    verdict = classify(history(**overrides), NOW, window_s=WINDOW_S)
    assert verdict.rejection is expected, verdict.detail
    assert verdict.detail


# A stopped mirror: the B->A mirror (idc2->idc1: the group is active on idc1) stopped. History: the ends at
# 15, 10 and 5 minutes ago and now; the mirror's positions as read now.
STOPPED = [
    ("stopped, and idc2 still receiving records (its end moved 5 minutes ago)",
     {"points": (LogEnds(NOW - 900_000, 50, 43), LogEnds(NOW - 600_000, 50, 44), LogEnds(NOW - 300_000, 50, 45),
                 LogEnds(NOW, 50, 45)), "standby_mirror_position": 43}, Rejection.RECEIVING_DATA),
    ("stopped before copying idc2's last two records, nothing new since", {"standby_mirror_position": 43},
     Rejection.MIRROR_STOPPED),
    ("stopped long ago: nothing of idc2 was ever copied", {"standby_mirror_position": 0}, Rejection.MIRROR_STOPPED),
    ("stopped, caught up, both quiet: everything of idc2 is on idc1, a fast-forward is NO-LOSS", {}, None),
    ("stopped one short of idc2's end: its last transaction's marker", {"standby_mirror_position": 44}, None),
    ("stopped, its positions group gone (offsets expired)", {"standby_mirror_position": None},
     Rejection.MIRROR_UNKNOWN),
    ("the idc1->idc2 mirror stopped behind", {"active_mirror_position": 47}, Rejection.MIRROR_STOPPED),
    ("a group lag is said first", {"standby_mirror_position": 43, "committed": 45}, Rejection.GROUP_LAG),
]


@pytest.mark.parametrize("name, overrides, expected", STOPPED, ids=[c[0] for c in STOPPED])
def test_a_stopped_reverse_mirror(name, overrides, expected):
    verdict = classify(history(**overrides), NOW, window_s=WINDOW_S)
    assert verdict.rejection is expected, verdict.detail
    if expected is Rejection.MIRROR_STOPPED:
        direction = "idc1->idc2" if "active_mirror_position" in overrides else "idc2->idc1"
        assert verdict.detail.startswith(f"the {direction} mirror is at ") and "not moved for 900s" in verdict.detail
        assert "not copying" in verdict.detail
        assert not verdict.quiet_by(NOW + 10**9, WINDOW_S)  # no live re-read on ticks between snapshots


def test_run_key_follows_the_log_ends_only():
    v = classify(history(), NOW, window_s=WINDOW_S)
    assert v.run_key() == classify(history(standby_committed=30), NOW + 5000, window_s=WINDOW_S).run_key()
    moved = history(points=tuple(dataclasses.replace(p, standby_end=46) for p in history().points),
                    standby_mirror_position=46)
    assert classify(moved, NOW, window_s=WINDOW_S).run_key() != v.run_key()
    assert v.run_key().startswith("fast-forward-") and len(v.run_key()) < 64


def test_skip_reason_counts_the_rejections():
    verdicts = [classify(history(**o), NOW, window_s=WINDOW_S) for _, o, e in CASES if e is not None]
    text = skip_reason(verdicts)
    assert text.startswith(f"no stale partition among {len(verdicts)}: ")
    assert "2 receiving_data" in text and "2 mirror_stopped" in text and "1 group_has_lag" in text
    assert skip_reason([]) == "no group-partition in the snapshot history"


ends = st.integers(0, 100)


@given(st.lists(st.tuples(st.integers(0, 1200), ends, ends), min_size=1, max_size=6), st.integers(0, 100),
       st.one_of(st.none(), ends), ends, ends)
def test_a_candidate_meets_every_condition(raw, c, g, pos_a, pos_b):
    points = tuple(LogEnds(NOW - s * 1000, a, b) for s, a, b in raw)
    h = history(points=points, committed=c, standby_committed=g, active_mirror_position=pos_a,
                standby_mirror_position=pos_b)
    verdict = classify(h, NOW, window_s=WINDOW_S)
    if verdict.candidate:
        newest = max(points, key=lambda p: p.time_ms)
        window = [p for p in points if p.time_ms >= newest.time_ms - WINDOW_S * 1000]
        assert all((p.active_end, p.standby_end) == (newest.active_end, newest.standby_end) for p in window)
        assert min(p.time_ms for p in points) <= newest.time_ms - WINDOW_S * 1000
        assert 0 <= newest.active_end - c <= 1
        assert g is None or g < newest.standby_end
        assert pos_a >= newest.active_end - 1 and pos_b >= newest.standby_end - 1
    if verdict.rejection is Rejection.MIRROR_STOPPED:  # only ever after the whole window, a position behind
        newest = max(points, key=lambda p: p.time_ms)
        assert verdict.stable_for_s >= WINDOW_S
        assert pos_a < newest.active_end - 1 or pos_b < newest.standby_end - 1
    assert verdict.rejection is not Rejection.MIRROR_BEHIND


def test_quiet_by_says_when_a_live_read_can_decide():
    # quiet since the first of two snapshots 5 minutes apart: the window (10 min) is not covered by
    # snapshots, but it is by now if the log ends have not moved since
    h = history(points=(LogEnds(NOW - 700_000, 50, 45), LogEnds(NOW - 400_000, 50, 45)))
    v = classify(h, NOW, window_s=WINDOW_S)
    assert v.rejection is Rejection.SHORT_HISTORY and v.stable_since_ms == NOW - 700_000
    assert v.quiet_by(NOW, WINDOW_S) and not v.quiet_by(NOW - 200_000, WINDOW_S)
    extended = classify(dataclasses.replace(h, points=h.points + (LogEnds(NOW, 50, 45),)), NOW, window_s=WINDOW_S)
    assert extended.candidate and extended.stable_for_s == 700
    moved = classify(dataclasses.replace(h, points=h.points + (LogEnds(NOW, 51, 45),)), NOW, window_s=WINDOW_S)
    assert moved.rejection is Rejection.RECEIVING_DATA
    # lag, no commit, at the standby end: nothing a live read of the log ends could change
    for overrides in ({"committed": 40}, {"committed": None}, {"standby_committed": 45}):
        assert not classify(history(**overrides), NOW, window_s=WINDOW_S).quiet_by(NOW + 10**9, WINDOW_S)
