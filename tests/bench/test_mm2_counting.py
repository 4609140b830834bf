"""The MirrorMaker 2 comparison's counting (bench/mm2/counting.py): table-driven and property-based."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.mm2.counting import (
    CommitSeries,
    FailoverCost,
    active_position,
    commit_delays,
    failover_cost,
    staleness_s,
)

# Standby offsets 0..5 copy active offsets 0..5; offset 6 is no copy (a foreign record).
COPIES = np.array([0, 1, 2, 3, 4, 5, -1])


@pytest.mark.parametrize("c, g, end, expected", [
    (4, 4, 7, FailoverCost(0, 0)),   # exactly at the copy of c
    (4, 1, 7, FailoverCost(0, 3)),   # behind: 1, 2, 3 read again
    (4, 6, 7, FailoverCost(2, 0)),   # ahead: 4, 5 never processed
    (4, 7, 7, FailoverCost(3, 0)),   # past the foreign record too
    (4, 1, 3, FailoverCost(0, 2)),   # the standby then held offsets 0..2 only
    (0, 0, 7, FailoverCost(0, 0)),
    (6, 0, 0, FailoverCost(0, 0)),   # nothing copied yet
])
def test_failover_cost(c, g, end, expected):
    assert failover_cost(COPIES, c, g, end) == expected


def test_active_position():
    assert active_position(COPIES, 3, 7) == 3
    assert active_position(COPIES, 6, 7) == 6      # a foreign record: after the last copy
    assert active_position(COPIES, 4, 4) == 4      # at the end then: after the last copy
    assert active_position(COPIES, 0, 0) == 0


def test_staleness():
    series = CommitSeries([0.0, 1.0, 2.0, 3.0], [0, 2, 4, 4])
    assert staleness_s(series, 3.5, 4) == 0.0    # the standby restarts at the group's own position
    assert staleness_s(series, 3.5, 2) == 1.5    # the group went past 2 at t=2.0
    assert staleness_s(series, 3.5, 0) == 2.5
    assert staleness_s(series, 0.5, 0) == 0.0    # not past it yet at 0.5
    assert series.at(1.5) == 2 and series.at(-1) is None


def test_commit_delays():
    group = CommitSeries([1.0, 2.0, 3.0, 4.0, 5.0], [10, 20, 20, 30, 40])
    # standby: 10 at 1.2, 15 at 2.1 (short of 20), 20 at 2.3, 35 at 4.05 (covers 30), nothing for 40
    times, positions = [1.2, 2.1, 2.3, 4.05], [10, 15, 20, 35]
    delays = commit_delays(group, times, positions, 0.0, 10.0)
    assert delays[:3] == pytest.approx([0.2, 0.3, 0.05])  # the repeat of 20 at 3.0 is no move
    assert delays[3] is None  # 40 never reached the standby
    # only commits inside the window count; a standby offset appended before the commit never covers it
    assert commit_delays(group, times, positions, 1.5, 4.5) == pytest.approx([0.3, 0.05])
    assert commit_delays(CommitSeries([1.0], [10]), [0.5], [10], 0.0, 10.0) == [None]


@given(n=st.integers(1, 60), data=st.data())
def test_moving_g_trades_duplicates_for_losses(n, data):
    copies = np.arange(n)
    c = data.draw(st.integers(0, n))
    g = data.draw(st.integers(0, n))
    cost = failover_cost(copies, c, g, n)
    assert cost.lost == max(0, g - c) and cost.duplicated == max(0, c - g)
    assert failover_cost(copies, c, c, n) == FailoverCost(0, 0)
