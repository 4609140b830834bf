"""monitoring/metric_rules.py: d, dd, sync age and the status of every group-partition per cycle."""

from __future__ import annotations

import dataclasses
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.monitoring.metric_rules import (
    BROKEN, IN_SYNC, LAGGING, MIRRORING, SPLIT_BRAIN, STALE, STATUS_ORDER, CycleFacts, metric_rows, worst,
)

NOW = 1_000_000


def fact(**kw) -> CycleFacts:
    values = dict(
        group_id='g "q" ü', topic="t", partition=0, active="idc1", standby="idc2", committed=100,
        standby_offset=60, status="header_anchor", strategy="header_anchor", decision="commit", applied=True,
        committed_after=60, active_log_end=120, standby_log_end=90,
    )
    values.update(kw)
    return CycleFacts(**values)


def one(f: CycleFacts, previous_d=None, last_synced=None, **kw):
    (row,) = metric_rows(NOW, [f], previous_d or {}, last_synced or {}, **kw)
    return row


STATUS_CASES = [
    # (name, fact overrides, last synced ms ago (None: never), expected status)
    ("synced to an inexact translation", {}, None, MIRRORING),
    ("synced to an exact one", {"status": "header_exact"}, None, IN_SYNC),
    ("exact and already there", {"status": "timestamp_exact", "decision": "unchanged", "applied": False}, None, IN_SYNC),
    ("exact but the write did not land", {"status": "header_exact", "applied": False}, 10_000, MIRRORING),
    ("dry run: nothing synced, synced recently", {"decision": "dry_run", "applied": False}, 30_000, MIRRORING),
    ("not synced for long", {"decision": "dry_run", "applied": False, "status": "no_anchor", "standby_offset": None},
     300_000, LAGGING),
    ("never synced", {"decision": "skipped", "applied": False, "status": "no_anchor", "standby_offset": None}, None, LAGGING),
    ("members on both", {"status": "split_brain", "decision": "split_brain", "applied": False}, None, SPLIT_BRAIN),
    ("a malformed header", {"status": "malformed_header", "standby_offset": None, "decision": "skipped"}, 1000, BROKEN),
    ("a refused commit", {"decision": "refused_no_loss_check", "applied": False}, 1000, BROKEN),
    ("an unknown status", {"status": "who_knows"}, None, BROKEN),
    ("at the active end, behind on the standby, inexact", {"committed": 120, "status": "no_anchor",
     "standby_offset": None, "decision": "skipped", "applied": False}, 1000, STALE),
    ("at the active end, exact to the standby end", {"committed": 120, "status": "caught_up", "standby_offset": 90,
     "committed_after": 90}, None, IN_SYNC),
]


@pytest.mark.parametrize("name, overrides, synced_ago, expected", STATUS_CASES, ids=[c[0] for c in STATUS_CASES])
def test_status(name, overrides, synced_ago, expected):
    f = fact(**overrides)
    last = {f.key: NOW - synced_ago} if synced_ago is not None else {}
    assert one(f, last_synced=last).sync_status == expected


def test_d_and_dd_and_sync_age():
    f = fact()
    first = one(f)
    assert (first.d, first.dd, first.sync_age_s, first.last_synced_ms) == (40, None, 0.0, NOW)
    assert (first.active_lag, first.standby_lag) == (20, 30)  # 120 - 100 on A, 90 - 60 on B
    later = one(dataclasses.replace(f, committed=130, decision="dry_run", applied=False), {f.key: 40}, {f.key: NOW - 45_000})
    assert (later.d, later.dd, later.synced, later.sync_age_s) == (70, 30, False, 45.0)
    # another direction of the same partition has its own history
    other = dataclasses.replace(f, active="idc2", standby="idc1")
    assert one(other, {f.key: 40}).dd is None
    assert one(fact(committed_after=None)).d is None


def test_worst_follows_the_order():
    assert worst([IN_SYNC, MIRRORING, LAGGING]) == LAGGING
    assert worst([IN_SYNC]) == IN_SYNC and worst([]) is None
    assert worst(STATUS_ORDER) == SPLIT_BRAIN


statuses = st.sampled_from(["header_exact", "header_anchor", "timestamp_exact", "timestamp_search", "caught_up",
                            "no_anchor", "split_brain", "malformed_header", "cluster_unavailable"])
decisions = st.sampled_from(["commit", "unchanged", "dry_run", "skipped", "failed", "split_brain",
                             "refused_no_loss_check", None])
offsets = st.one_of(st.none(), st.integers(0, 200))


@given(statuses, decisions, st.booleans(), offsets, offsets, offsets, st.one_of(st.none(), st.integers(0, 10**6)))
def test_in_sync_needs_an_exact_translation_written(status, decision, applied, c, t, g, ago):
    f = fact(status=status, decision=decision, applied=applied, committed=c, standby_offset=t, committed_after=g)
    row = one(f, last_synced={f.key: NOW - ago} if ago is not None else {})
    if row.sync_status == IN_SYNC:
        assert status in ("header_exact", "timestamp_exact", "caught_up") and g == t and t is not None
        assert decision in ("commit", "unchanged")
    if status in ("split_brain", "malformed_header", "cluster_unavailable") or decision in ("failed", "refused_no_loss_check"):
        assert row.sync_status in (SPLIT_BRAIN, BROKEN)
    assert (row.dd is None) and (row.d is None) == (c is None or g is None)



@given(statuses, decisions, st.booleans(), offsets, offsets, st.one_of(st.none(), st.integers(1, 10**6)))
def test_a_rows_last_sync_is_never_later_than_its_cycle(status, decision, applied, t, g, ago):
    # storage/metrics.py previous_state relies on it: no row older than its window holds a later sync
    f = fact(status=status, decision=decision, applied=applied, standby_offset=t, committed_after=g)
    row = one(f, last_synced={f.key: NOW - ago} if ago is not None else {})
    assert row.last_synced_ms is None or row.last_synced_ms <= row.cycle_time_ms

def test_window_sums_cover_the_trailing_ten_minutes_per_cluster():
    from datetime import datetime, timedelta, timezone

    from offset_pipeline.monitoring.convergence_plot import convergence_png, window_sums

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    points = [(t0 + timedelta(minutes=m), "idc1", 5 if m % 2 else -5) for m in range(30)]
    points += [(t0 + timedelta(minutes=m), "idc2", 3) for m in (0, 5, 12)]  # sync stopped: it grows, with gaps
    sums = window_sums(points)
    assert [r[2] for r in sums["idc1"]][9:] == [0] * 21  # alternating: ten minutes sum to 0
    assert [r[2] for r in sums["idc2"]] == [3, 6, 6]  # minute 12: minute 0 left the window, 5 did not
    png = convergence_png(points)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    from PIL import Image

    picture = Image.open(io.BytesIO(png))
    # 800 x 300 as drawn, with a palette: a third of the RGB picture's bytes in every cycle's metadata
    assert picture.size == (800, 300) and picture.mode == "P" and len(picture.getpalette()) <= 64 * 3
    assert convergence_png([])[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_stalled_mirror_is_not_mirroring():
    f = fact(status="header_exact")
    assert one(f).sync_status == IN_SYNC
    stalled = one(dataclasses.replace(f, mirror_stalled=True))
    assert stalled.sync_status == LAGGING and stalled.mirror_stalled


def test_the_status_table_keeps_the_worst_group_topics():
    from offset_pipeline.monitoring.metric_rules import worst_first

    def row(group, status, age):
        return {"group": group, "topic": "t", "status": status, "max_sync_age_s": age}

    table = [row("a", "InSync", 1), row("b", "Stale", 5), row("c", "Broken", None), row("d", "Stale", 50),
             row("e", "Lagging", 9), row("f", "InSync", 100), row("g", "Broken", 3), row("h", "SplitBrain", 0)]
    assert [r["group"] for r in worst_first(table, 5)] == ["h", "c", "g", "d", "b"]
    assert [r["group"] for r in worst_first(table, 100)] == ["h", "c", "g", "d", "b", "e", "f", "a"]
    assert worst_first([], 5) == []
