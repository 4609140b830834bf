"""``bench.compare_mm2 --families``: a run of some topic families only (fewer MirrorMaker 2 JVMs and
syncs on a small machine), and targets judged only where their figures are in the run."""

from __future__ import annotations

import argparse

import pytest

from bench.compare_mm2 import (
    FAMILIES,
    Row,
    chosen_families,
    family_of,
    groups_of,
    plan,
    positive_seconds,
    targets,
    trial_moments,
)


def test_the_families_are_taken_in_their_order_and_unknown_ones_refused():
    assert chosen_families("headers, tuned") == ("tuned", "headers")
    assert chosen_families(",".join(FAMILIES)) == FAMILIES
    for bad in ("", "tuned,mm3", " , "):
        with pytest.raises(argparse.ArgumentTypeError, match="families must be some of"):
            chosen_families(bad)


def test_the_plan_has_only_the_chosen_families_topics_and_their_groups():
    traffic = plan(10.0, ("tuned", "headers"))
    assert {family_of(t.name) for t in traffic} == {"tuned", "headers"} and len(traffic) == 6
    groups = groups_of(traffic)
    # MirrorMaker 2's own groups on the plain family only; ours on both
    assert {g.rsplit(".", 1)[1] for g, t in groups.items() if family_of(t) == "tuned"} == {"g0", "g1", "p0", "p1"}
    assert {g.rsplit(".", 1)[1] for g, t in groups.items() if family_of(t) == "headers"} == {"p0", "p1"}


def test_the_duplicates_target_is_judged_against_tuned_mm2_only_when_it_ran():
    ours = Row("offset_pipeline", "MM2+transform, one-way", trials=10, duplicated=[1, 1])
    lines = targets([ours])
    assert lines[0].startswith("MET    ") and "0 lost" in lines[0]
    assert lines[1].startswith("NOT JUDGED") and "--families" in lines[1]
    tuned = Row("MirrorMaker 2", "checkpoints, tuned (lag 0, 1 s)", trials=10, duplicated=[20, 20])
    assert targets([tuned, ours])[-1].startswith("MET    ")  # 1.0 <= 2.0
    assert targets([tuned, Row("offset_pipeline", "x", duplicated=[3])])[-1].startswith("NOT MET")


def test_trial_moments_weigh_every_phase_of_a_once_a_second_cycle_alike():
    # A cost paid during 0.2 s of every second (between a group's commit and the standby's): moments
    # a whole second apart see it always or never, by the phase they start at; 0.1 s apart, a fifth.
    def share_in_window(moments, opens_at):
        return sum(1 for m in moments if (m - opens_at) % 1.0 < 0.2 - 1e-9) / len(moments)

    for opens_at in (0.05, 0.43, 0.97):
        assert share_in_window(trial_moments(100.0, 160.0, 0.1), opens_at) == pytest.approx(0.2, abs=0.02)
    whole_seconds = [share_in_window(trial_moments(100.0, 160.0, 1.0), a) for a in (0.95, 0.43)]
    assert whole_seconds == [1.0, 0.0]
    assert len(trial_moments(100.0, 160.0, 0.1)) == 600
    with pytest.raises(ValueError, match="> 0"):
        trial_moments(0.0, 1.0, 0.0)
    with pytest.raises(argparse.ArgumentTypeError, match="> 0"):
        positive_seconds("-1")
