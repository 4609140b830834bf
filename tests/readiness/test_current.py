"""The verdicts in force (readiness/current.py): one per group and direction, from the group's newest
cycle; a direction only older cycles wrote is gone. Table-driven cases, then the invariants as
properties."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.readiness.current import in_force

A, B = "dc-a", "dc-b"  # cluster names are data: any two do
TO_B, TO_A, UNDECIDED = (A, B), (B, A), ("", "")


@dataclass(frozen=True)
class Verdict:
    group_id: str
    active: str
    standby: str
    checked_at_ms: int
    label: str = ""  # which written row it is, for the cases


def v(group: str, direction: tuple[str, str], at: int, label: str = "") -> Verdict:
    return Verdict(group, *direction, at, label)


@pytest.mark.parametrize("name, written, expected", [
    ("nothing written", [], []),
    ("one cycle, one direction", [v("g", TO_B, 1, "now")], ["now"]),
    ("the newest cycle of a direction wins", [v("g", TO_B, 1, "old"), v("g", TO_B, 3, "now"), v("g", TO_B, 2, "mid")],
     ["now"]),
    ("after an outage: the undecided verdict of the outage is gone",
     [v("g", TO_B, 1, "before"), v("g", UNDECIDED, 2, "outage"), v("g", TO_B, 3, "after")], ["after"]),
    ("during an outage: the direction before it is no longer in force",
     [v("g", TO_B, 1, "before"), v("g", UNDECIDED, 2, "outage")], ["outage"]),
    ("a group that moved shows its new direction only",
     [v("g", TO_B, 1, "old"), v("g", TO_A, 2, "moved")], ["moved"]),
    ("a group that moved back: the newest cycle decides, not which direction is older",
     [v("g", TO_B, 1, "first"), v("g", TO_A, 2, "moved"), v("g", TO_B, 3, "back")], ["back"]),
    ("a cycle that wrote two directions of a group keeps both",
     [v("g", UNDECIDED, 1, "old"), v("g", TO_B, 2, "b"), v("g", UNDECIDED, 2, "u")], ["u", "b"]),
    ("a replayed row of the same cycle counts once (the first given)",
     [v("g", TO_B, 2, "first"), v("g", TO_B, 2, "replayed")], ["first"]),
    ("groups apart: each its own newest cycle",
     [v("g", TO_B, 5, "g now"), v("h", TO_A, 1, "h only"), v("g", UNDECIDED, 4, "g outage"),
      v("h", UNDECIDED, 0, "h outage")], ["g now", "h only"]),
    ("odd group ids are plain keys",
     [v("g'; --|ü", TO_B, 1, "odd old"), v("g'; --|ü", UNDECIDED, 2, "odd now"), v("g", TO_B, 1, "g")],
     ["g", "odd now"]),
])
def test_in_force(name, written, expected):
    assert [r.label for r in in_force(written)] == expected, name


groups = st.sampled_from(["g", "h", "g'q"])
directions = st.sampled_from([TO_B, TO_A, UNDECIDED])
verdicts = st.lists(st.builds(lambda g, d, at: v(g, d, at), groups, directions, st.integers(0, 6)), max_size=25)


@given(verdicts)
def test_one_verdict_per_group_and_direction_all_of_the_groups_newest_cycle(written):
    kept = in_force(written)
    keys = [(r.group_id, r.active, r.standby) for r in kept]
    assert len(keys) == len(set(keys))
    assert keys == sorted(keys)
    newest = {}
    for r in written:
        newest[r.group_id] = max(newest.get(r.group_id, r.checked_at_ms), r.checked_at_ms)
    assert all(r.checked_at_ms == newest[r.group_id] for r in kept)
    assert {r.group_id for r in kept} == set(newest)
    assert all(r in written for r in kept)
    # every direction the newest cycle wrote is kept, and no other
    assert set(keys) == {(r.group_id, r.active, r.standby) for r in written if r.checked_at_ms == newest[r.group_id]}


@given(verdicts)
def test_the_verdicts_in_force_are_in_force_again_and_order_does_not_matter(written):
    kept = in_force(written)
    assert in_force(kept) == kept
    assert [(r.group_id, r.active, r.standby, r.checked_at_ms) for r in in_force(list(reversed(written)))] == \
        [(r.group_id, r.active, r.standby, r.checked_at_ms) for r in kept]
