"""The soak's pure rules (bench/soak/rules.py): the independent no-loss verdict by record identity,
runs inside/outside fault windows, recovery counting, fits and the fault schedule."""

from __future__ import annotations

import pytest

from bench.soak.rules import (
    Cycle, Rec, RunSeen, Window, bytes_growth, cycles_to_recover, fault_schedule, linear_fit, no_loss_verdict,
    instance_peak_slope, rec_from_headers, rss_slope_pct_per_hour, run_counts,
)

A, S = "idc1", "idc2"


def copy_of_active(offset, x):
    return Rec(offset, A, x)


def original(offset):
    return Rec(offset, None, None)


@pytest.mark.parametrize("case, t, c, standby, direct, last_copy, unsafe_offsets", [
    ("copies of active records below c are safe", 3, 10, [copy_of_active(0, 7), copy_of_active(1, 8),
                                                          copy_of_active(2, 9)], (), None, []),
    ("a copy of the active record at c is unsafe (not processed)", 3, 9,
     [copy_of_active(0, 7), copy_of_active(1, 8), copy_of_active(2, 9)], (), None, [2]),
    ("records at or above t are not judged", 2, 9,
     [copy_of_active(0, 7), copy_of_active(1, 8), copy_of_active(2, 9)], (), None, []),
    ("a standby original whose copy is below c, seen directly", 2, 10, [original(0), original(1)], {0, 1}, None, []),
    ("a standby original at or below the newest copy below c (mirror order)", 2, 10,
     [original(0), original(1)], (), 1, []),
    ("a standby original beyond the newest copy below c is unsafe", 2, 10, [original(0), original(1)], (), 0, [1]),
    ("a standby original with no copy below c at all is unsafe", 1, 10, [original(0)], (), None, [0]),
    ("two-way: mixed, all safe", 4, 10, [original(0), copy_of_active(1, 5), original(2), copy_of_active(3, 6)],
     (), 2, []),
    ("two-way: the last original not yet mirrored", 4, 10,
     [original(0), copy_of_active(1, 5), original(2), copy_of_active(3, 6)], (), 0, [2]),
    ("IDC=standby is an original too", 1, 10, [Rec(0, S, 0)], (), None, [0]),
])
def test_no_loss_verdict(case, t, c, standby, direct, last_copy, unsafe_offsets):
    verdict = no_loss_verdict(A, S, t, c, standby, direct, last_copy)
    assert [o for o, _ in verdict.unsafe] == unsafe_offsets, case
    assert verdict.safe == (not unsafe_offsets)


def test_a_record_of_a_third_cluster_is_counted_unidentified_not_judged():
    verdict = no_loss_verdict(A, S, 5, 10, [Rec(0, "idc3", 1), copy_of_active(1, 2)])
    assert verdict.unidentified == 1 and verdict.checked == 1 and verdict.safe


def test_origin_headers_are_parsed_from_raw_headers():
    assert rec_from_headers(4, [("IDC", b"idc1"), ("Offset", b"17"), ("x", None)]) == Rec(4, "idc1", 17)
    assert rec_from_headers(4, None) == Rec(4, None, None)
    assert rec_from_headers(4, [("IDC", b"idc1"), ("Offset", b"junk")]) == Rec(4, "idc1", None)
    # a copy without a usable Offset header is unsafe, never silently passed
    assert not no_loss_verdict(A, S, 5, 10, [Rec(4, "idc1", None)]).safe


def test_runs_are_split_by_fault_windows():
    windows = [Window("cluster_down", 100, 200)]
    runs = [RunSeen("a", "j", "SUCCESS", 10, 40), RunSeen("b", "j", "FAILURE", 90, 110),
            RunSeen("c", "j", "FAILURE", 300, 330), RunSeen("d", "j", "SUCCESS", 150, 160),
            RunSeen("e", "j", "STARTED", 400, None)]
    counts = run_counts(runs, windows)
    assert counts["outside"] == {"ok": 1, "failed": 1, "other": 1}
    assert counts["inside"] == {"ok": 1, "failed": 1, "other": 0}
    assert counts["failed_outside_runs"] == ["c"]
    assert run_counts(runs, windows, grace_s=150)["failed_outside_runs"] == []


def _cycles(*synced_sets, period=30.0):
    return [Cycle(i * period, i * period + 10, None if s is None else frozenset(s)) for i, s in enumerate(synced_sets)]


@pytest.mark.parametrize("case, sets, window, expected", [
    ("first cycle after the window has everything back", [{1, 2, 3}, {1, 2, 3}, set(), {1, 2, 3}],
     Window("f", 45, 85), (1, 3)),
    ("two cycles", [{1, 2, 3}, {1, 2, 3}, set(), {1, 2}, {1, 2, 3}], Window("f", 45, 85), (2, 3)),
    ("a cycle without monitoring rows (ClickHouse down) does not count as recovered",
     [{1, 2}, None, None, None, {1, 2}], Window("f", 15, 85), (2, 2)),
    ("never within the cycles seen", [{1, 2}, {1}, {1}, {1}], Window("f", 15, 35), (None, 2)),
    ("more synced than the baseline is fine", [{1}, {1}, {1, 2}], Window("f", 45, 55), (1, 1)),
    ("a cycle in flight at the window's end is not counted", [{1}, {1}, {1}, {1}], Window("f", 15, 65), (1, 1)),
    ("no cycle before the fault: no baseline", [set(), {1}], Window("f", 0, 5), (None, 0)),
])
def test_cycles_to_recover(case, sets, window, expected):
    assert cycles_to_recover(window, _cycles(*sets)) == expected, case


def test_cycles_to_recover_counts_from_the_window_end_not_before():
    cycles = _cycles({1}, {1}, {1}, {1}, {1})  # cycles start at 0, 30, 60, 90, 120
    assert cycles_to_recover(Window("f", 35, 95), cycles) == (1, 1)  # the cycle at 120 is the first after


def test_linear_fit_and_rss_slope_per_pid_segment():
    assert linear_fit([(0, 1), (1, 3), (2, 5)]) == pytest.approx((2.0, 1.0))
    assert linear_fit([(0, 1), (0, 2), (0, 3)]) is None
    mb = 2**20
    # pid 1 grows 10 % an hour (of its mean) after warm-up; pid 2 (a restart) starts low: not mixed in
    flat = [(t, 1, 100 * mb) for t in range(0, 600, 60)]
    growing = [(600 + t, 1, 100 * mb * (1 + 0.1 * t / 3600)) for t in range(0, 7200, 60)]
    restarted = [(9000 + t, 2, 10 * mb + t * mb) for t in range(0, 600, 60)]
    result = rss_slope_pct_per_hour(flat + growing + restarted, warmup_s=600, min_span_s=600)
    assert result["pid"] == 1 and result["segments"] == 2
    assert result["slope_pct_per_h"] == pytest.approx(100 * 0.1 / 1.1, rel=0.05)


def test_bytes_growth_projects_30_days_linearly():
    samples = [(t, 1000 + t) for t in range(0, 7200, 60)]
    g = bytes_growth(samples, warmup_s=600, start=0)
    assert g["bytes_per_h"] == pytest.approx(3600)
    assert g["projected_bytes"] == pytest.approx(samples[-1][1] + 3600 * 24 * 30)
    assert g["bounded_bytes"] == g["projected_bytes"]  # nothing bounds it


@pytest.mark.parametrize("bounds, expected", [
    ({"retention_days": 1.0}, 3600 * 24),  # one day of growth kept
    ({"retention_days": 60.0}, 8200 + 3600 * 24 * 30),  # a retention longer than 30 days bounds nothing
    ({"cap_bytes": 50_000}, 50_000),  # rotation
    ({"retention_days": 1.0, "cap_bytes": 50_000}, 50_000),
    ({"cap_bytes": 10}, 8200),  # never below what is there now
])
def test_bytes_growth_with_retention_keeps_at_most_the_retained_growth(bounds, expected):
    samples = [(t, 1000 + t) for t in range(0, 7260, 60)]
    g = bytes_growth(samples, warmup_s=600, start=0, **bounds)
    assert g["last_bytes"] == 8200
    assert g["bounded_bytes"] == pytest.approx(expected)


def test_fault_schedule_leaves_warmup_gaps_and_tail():
    schedule = fault_schedule(["broker_kill", "mirror_stop"], 3600, 600, 300)
    assert [name for _, name in schedule] == ["broker_kill", "mirror_stop"]
    assert schedule[0][0] == 600
    # the gap after each fault is equal: (3600 - 600 - 300 - 330) / 2 = 1185
    assert schedule[1][0] == pytest.approx(600 + 30 + 1185)
    with pytest.raises(ValueError):
        fault_schedule(["mirror_stop"], 600, 300, 100)
    assert fault_schedule([], 100, 50, 50) == []


def _instances(peak_mb, minutes=120, life_s=90, every_s=60):
    """A code server replaced every ``every_s``, each living ``life_s`` (so two overlap), sampled
    every 10 s, rising to ``peak_mb(t)`` over its life."""
    mb = 2**20
    out = []
    for k, born in enumerate(range(0, minutes * 60, every_s)):
        for age in range(0, life_s, 10):
            out.append((born + age, 1000 + k, peak_mb(born) * mb * (0.4 + 0.6 * age / (life_s - 10))))
    return sorted(out)


def test_replaced_instances_are_judged_by_their_peaks_not_their_overlapping_sum():
    flat = instance_peak_slope(_instances(lambda t: 500), warmup_s=600, start=0)
    assert flat["peak_slope_pct_per_h"] == pytest.approx(0, abs=0.01)
    assert flat["mean_peak_mb"] == pytest.approx(500) and flat["most_alive_at_once"] == 2
    assert flat["mean_life_s"] == pytest.approx(80) and flat["instances"] == 120
    # each new instance needs 10 % of 500 MB more per hour: a leak that survives replacement
    growing = instance_peak_slope(_instances(lambda t: 500 * (1 + 0.1 * t / 3600)), warmup_s=600, start=0)
    mean = growing["mean_peak_mb"]
    assert growing["peak_slope_pct_per_h"] == pytest.approx(100 * 50 / mean, rel=0.02)
    # the sum of the overlapping lives, fitted as one process, says nothing useful of either
    assert instance_peak_slope([], warmup_s=600, start=0)["peak_slope_pct_per_h"] is None
