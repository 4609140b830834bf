"""Readiness rules: one case per reason a partition is not ready, the costs, the group verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.readiness.rules import (
    NotReady,
    PartitionFacts,
    group_readiness,
    partition_readiness,
)

NOW = 10_000.0
G = 'g "q" ü'

READY = PartitionFacts(
    group_id=G, topic="t", partition=0, active="idc1", standby="idc2", status="header_exact",
    translated_committed=100, standby_offset=95, anchor_active_offset=None, commit_decision="commit",
    commit_synced=True, standby_committed=95, active_committed=100, synced_at_s=NOW - 1,
)


@pytest.mark.parametrize("name, change, reason", [
    ("ready", {}, None),
    ("a cluster not read", {"read_error": "idc2: timed out"}, NotReady.CLUSTER_UNAVAILABLE),
    ("cluster unavailable status", {"status": "cluster_unavailable"}, NotReady.CLUSTER_UNAVAILABLE),
    ("split brain", {"status": "split_brain", "active": "", "standby": ""}, NotReady.SPLIT_BRAIN),
    ("direction undetermined", {"status": "direction_undetermined"}, NotReady.DIRECTION_UNDETERMINED),
    ("mirror lag", {"status": "not_yet_mirrored"}, NotReady.MIRROR_LAG),
    ("no anchor yet", {"status": "no_anchor"}, NotReady.NO_ANCHOR),
    ("offset sync exact", {"status": "offset_sync_exact"}, None),
    ("offset sync anchor", {"status": "offset_sync_anchor"}, None),
    ("no offset sync yet", {"status": "no_offset_sync"}, NotReady.NO_ANCHOR),
    ("offset sync unconfirmed", {"status": "offset_sync_unconfirmed"}, NotReady.NO_ANCHOR),
    ("offset syncs unreadable", {"status": "offset_syncs_unreadable"}, NotReady.NOT_TRANSLATED),
    ("another untranslated status", {"status": "committed_below_log_start"}, NotReady.NOT_TRANSLATED),
    ("an unknown status", {"status": "from_a_newer_version"}, NotReady.NOT_TRANSLATED),
    ("the group runs on the standby", {"commit_decision": "refused_members", "commit_synced": False},
     NotReady.ALREADY_ON_STANDBY),
    ("no standby offset", {"standby_committed": None}, NotReady.NO_STANDBY_OFFSET),
    ("commit failed", {"commit_decision": "failed", "commit_synced": False}, NotReady.COMMIT_NOT_SYNCED),
    ("dry run", {"commit_decision": "dry_run", "commit_synced": False}, NotReady.COMMIT_NOT_SYNCED),
    ("never synced", {"synced_at_s": None}, NotReady.STALE_SYNC),
    ("stale sync", {"synced_at_s": NOW - 301}, NotReady.STALE_SYNC),
])
def test_partition_reasons(name, change, reason):
    verdict = partition_readiness(replace(READY, **change), NOW, max_age_s=300)
    assert (verdict.ready, verdict.reason) == (reason is None, reason), name
    assert (reason is None) == (verdict.detail == "t[0]: ready")


def test_costs_exact_moved_anchor_and_unknown():
    assert partition_readiness(READY, NOW, 300).expected_duplicates == 0
    moved = partition_readiness(replace(READY, active_committed=104), NOW, 300)
    assert (moved.expected_duplicates, moved.duplicates_at_most) == (4, 4)  # the records processed since
    anchor = partition_readiness(replace(READY, status="header_anchor", anchor_active_offset=90), NOW, 300)
    assert (anchor.expected_duplicates, anchor.duplicates_at_most) == (None, 9)  # records 91..99 at most
    search = partition_readiness(replace(READY, status="timestamp_search"), NOW, 300)
    assert search.ready and (search.expected_duplicates, search.duplicates_at_most) == (None, None)
    by_pair = partition_readiness(replace(READY, status="offset_sync_exact"), NOW, 300)
    assert by_pair.ready and by_pair.expected_duplicates == 0  # refined onto the copy of the next record
    pair_only = partition_readiness(replace(READY, status="offset_sync_anchor"), NOW, 300)
    assert pair_only.ready and pair_only.expected_duplicates is None


def test_the_readiness_sets_are_the_translations():
    from offset_pipeline.translation import TranslationStatus
    for status in TranslationStatus:
        verdict = partition_readiness(replace(READY, status=status.value), NOW, 300)
        assert verdict.ready == status.translated, status
        assert (verdict.expected_duplicates == 0) == status.exact, status


@pytest.mark.parametrize("name, change, figures", [
    ("exact", {}, (0, 0)),
    ("exact, moved since", {"active_committed": 104}, (4, 4)),
    ("anchor right below the committed offset: at most 0 is exactly 0",
     {"status": "header_anchor", "anchor_active_offset": 99}, (0, 0)),
    ("kept anchor right below", {"status": "kept_anchor", "anchor_active_offset": 99}, (0, 0)),
    ("anchor right below, moved since: a bound only", {"status": "header_anchor", "anchor_active_offset": 99,
                                                       "active_committed": 102}, (None, 2)),
    ("anchor further down", {"status": "header_anchor", "anchor_active_offset": 97}, (None, 2)),
    ("timestamp search", {"status": "timestamp_search"}, (None, None)),
])
def test_expected_duplicates_and_their_bound(name, change, figures):
    verdict = partition_readiness(replace(READY, **change), NOW, 300)
    assert (verdict.expected_duplicates, verdict.duplicates_at_most) == figures, name


def test_a_group_is_ready_only_when_every_partition_is_and_counts_its_reasons():
    parts = [READY, replace(READY, partition=1), replace(READY, partition=2, active_committed=103)]
    [ready] = group_readiness(parts, NOW, 300)
    assert (ready.ready, ready.partitions, ready.expected_duplicates, ready.reasons) == (True, 3, 3, {})
    assert ready.seconds_since_sync == pytest.approx(1.0)
    assert ready.verdict == "ready"

    parts += [replace(READY, partition=3, status="no_anchor"), replace(READY, partition=4, standby_committed=None),
              replace(READY, partition=5, status="no_anchor")]
    [not_ready] = group_readiness(parts, NOW, 300)
    assert not not_ready.ready
    assert not_ready.reasons == {"no_standby_offset": 1, "no_anchor": 2}
    assert not_ready.first_problem.startswith("t[3]: translation status no_anchor")
    assert not_ready.verdict == "not ready: no_standby_offset (1), no_anchor (2)"


def test_groups_and_directions_are_apart():
    other = replace(READY, group_id="other", active="idc2", standby="idc1", status="no_anchor")
    verdicts = group_readiness([other, READY], NOW, 300)
    assert [(v.group_id, v.active, v.ready) for v in verdicts] == [(G, "idc1", True), ("other", "idc2", False)]


statuses = st.sampled_from(["header_exact", "header_anchor", "timestamp_search", "no_anchor", "not_yet_mirrored",
                            "split_brain", "cluster_unavailable", "caught_up"])
decisions = st.sampled_from(["commit", "unchanged", "failed", "refused_members", "dry_run", None])


@given(st.lists(st.tuples(statuses, decisions, st.booleans(), st.one_of(st.none(), st.integers(0, 200)),
                          st.one_of(st.none(), st.floats(0, 1000)), st.text(max_size=3)), min_size=1, max_size=6))
def test_property_safe_only_when_nothing_could_be_lost(rows):
    facts = [replace(READY, partition=i, status=status, commit_decision=decision, commit_synced=synced,
                     standby_committed=standby, synced_at_s=None if age is None else NOW - age, read_error=error)
             for i, (status, decision, synced, standby, age, error) in enumerate(rows)]
    [verdict] = group_readiness(facts, NOW, max_age_s=300)
    loss_free = all(
        not f.read_error and f.status in ("header_exact", "header_anchor", "timestamp_search", "caught_up")
        and f.standby_committed is not None and f.commit_synced and f.commit_decision != "refused_members"
        and f.synced_at_s is not None and NOW - f.synced_at_s <= 300
        for f in facts
    )
    assert verdict.ready == loss_free
    # a known figure is its own bound
    assert verdict.expected_duplicates is None or verdict.expected_duplicates == verdict.duplicates_at_most
    assert sum(verdict.reasons.values()) == sum(0 if partition_readiness(f, NOW, 300).ready else 1 for f in facts)
