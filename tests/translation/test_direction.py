"""Which cluster a group is active on: members first, then the group's own offset movement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.translation import (
    DirectionBasis,
    GroupSideFacts,
    TranslationStatus,
    decide_direction,
)

TP = ("orders", 0)


def side(cluster, members=0, now=None, before=None, synced=None, available=True):
    return GroupSideFacts(cluster, available, members, now or {}, before, synced or {})


@pytest.mark.parametrize(
    ("first", "second", "previous", "active", "basis"),
    [
        (side("idc1", 3), side("idc2"), None, "idc1", DirectionBasis.MEMBERS),
        (side("idc1"), side("idc2", 1), "idc1", "idc2", DirectionBasis.MEMBERS),
        (side("idc1", 2), side("idc2", 1), None, None, DirectionBasis.SPLIT_BRAIN),
        (side("idc1", now={TP: 12}, before={TP: 10}), side("idc2"), None, "idc1", DirectionBasis.OFFSET_MOVEMENT),
        (side("idc1", now={TP: 8}, before={TP: 10}), side("idc2"), None, "idc1", DirectionBasis.OFFSET_MOVEMENT),
        (side("idc1", now={TP: 12}, before={}), side("idc2"), None, "idc1", DirectionBasis.OFFSET_MOVEMENT),
        (
            side("idc1", now={TP: 12}, before={TP: 10}),
            side("idc2", now={TP: 6}, before={TP: 5}),
            "idc1", None, DirectionBasis.SPLIT_BRAIN,
        ),
        # the sync's own commits on the standby are not movement
        (
            side("idc1", now={TP: 12}, before={TP: 10}),
            side("idc2", now={TP: 6}, before={TP: 5}, synced={TP: 6}),
            None, "idc1", DirectionBasis.OFFSET_MOVEMENT,
        ),
        (side("idc1", now={TP: 10}, before={TP: 10}), side("idc2"), "idc2", "idc2", DirectionBasis.PREVIOUS),
        (side("idc1"), side("idc2"), "idc1", "idc1", DirectionBasis.PREVIOUS),
        (side("idc1"), side("idc2"), None, None, DirectionBasis.UNDETERMINED),
        (side("idc1"), side("idc2"), "idc7", None, DirectionBasis.UNDETERMINED),
        (side("idc1", now={TP: 12}), side("idc2"), None, None, DirectionBasis.UNDETERMINED),  # no previous snapshot
        (side("idc1", 3), side("idc2", available=False), "idc1", None, DirectionBasis.CLUSTER_UNAVAILABLE),
        (side("idc1", available=False), side("idc2", available=False), None, None, DirectionBasis.CLUSTER_UNAVAILABLE),
    ],
)
def test_direction_table(first, second, previous, active, basis):
    decision = decide_direction("group", first, second, previous)
    assert decision.active == active
    assert decision.basis is basis
    assert decision.reason
    if active is not None:
        assert decision.decided and decision.status is None
        assert decision.standby == ({"idc1", "idc2"} - {active}).pop()
    else:
        assert not decision.decided


def test_members_win_over_movement_elsewhere_and_say_so():
    decision = decide_direction("g", side("idc1", now={TP: 12}, before={TP: 10}), side("idc2", 2))
    assert decision.active == "idc2"
    assert "moved on idc1" in decision.reason


@pytest.mark.parametrize(
    ("basis", "status"),
    [
        (DirectionBasis.SPLIT_BRAIN, TranslationStatus.SPLIT_BRAIN),
        (DirectionBasis.UNDETERMINED, TranslationStatus.DIRECTION_UNDETERMINED),
        (DirectionBasis.CLUSTER_UNAVAILABLE, TranslationStatus.CLUSTER_UNAVAILABLE),
    ],
)
def test_undecided_groups_get_untranslated_results(basis, status):
    cases = {
        DirectionBasis.SPLIT_BRAIN: (side("idc1", 1), side("idc2", 1)),
        DirectionBasis.UNDETERMINED: (side("idc1"), side("idc2")),
        DirectionBasis.CLUSTER_UNAVAILABLE: (side("idc1"), side("idc2", available=False)),
    }
    decision = decide_direction("grüppe \"x\"", *cases[basis])
    result = decision.result_for("orders", 3)
    assert result.status is status
    assert result.standby_offset is None
    assert (result.group_id, result.topic, result.partition) == ("grüppe \"x\"", "orders", 3)


def test_decided_groups_have_no_untranslated_result():
    with pytest.raises(ValueError):
        decide_direction("g", side("idc1", 1), side("idc2")).result_for("t", 0)


_offsets = st.dictionaries(st.sampled_from([("t", 0), ("t", 1)]), st.integers(0, 5), max_size=2)


@settings(max_examples=300, database=None)
@given(
    st.integers(0, 2), st.integers(0, 2), _offsets, _offsets, st.one_of(st.none(), _offsets),
    st.one_of(st.none(), _offsets), st.sampled_from([None, "idc1", "idc2"]),
)
def test_never_an_active_cluster_with_a_standby_that_has_members(m1, m2, now1, now2, before1, before2, previous):
    decision = decide_direction("g", side("idc1", m1, now1, before1), side("idc2", m2, now2, before2), previous)
    if decision.decided:
        standby_members = m2 if decision.standby == "idc2" else m1
        assert standby_members == 0
    if m1 and m2:
        assert decision.basis is DirectionBasis.SPLIT_BRAIN
