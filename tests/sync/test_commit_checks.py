"""The commit step's asset checks as pure functions (table-driven), the offset_commits table, and the
dry-run setting."""

from __future__ import annotations

import dataclasses
import time

import dagster as dg
import pytest

from offset_pipeline.sync.commit_checks import evaluate_no_loss, evaluate_sync_freshness
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.settings import dry_run_default
from offset_pipeline.storage import commits, snapshots
from offset_pipeline.storage.commits import CommitRow
from offset_pipeline.storage.snapshots import SnapshotRow

G = 'pay "ments" 결제 x'


def row(decision="commit", *, applied=True, previous=5, new=7, bound=7, after=7, group=G, partition=0,
        snapshot="s", cycle_ms=1_000, error=None) -> CommitRow:
    return CommitRow(
        snapshot_id=snapshot, cycle_time_ms=cycle_ms, group_id=group, topic="t", partition=partition,
        active="idc1", standby="idc2", previous_offset=previous, new_offset=new, safe_bound=bound,
        decision=decision, reason="test", translation_status="header_anchor", strategy="header_anchor",
        dry_run=decision == "dry_run", applied=applied, error=error, committed_after=after,
    )


# -- no_loss ---------------------------------------------------------------------------------------

NO_LOSS_CASES = [
    # (name, rows, passed, offenders)
    ("written at its bound", [row()], True, 0),
    ("written below its bound", [row(new=6, after=6)], True, 0),
    ("re-read above the bound", [row(after=8)], False, 1),
    ("written without a bound", [row(bound=None)], False, 1),
    ("applied but not re-read", [row(after=None)], False, 1),
    ("rewind after reset, checked too", [row("rewind_after_reset", previous=9, new=3, bound=4, after=5)], False, 1),
    ("a write that did not land is not this cycle's offset",
     [row(applied=False, after=5, bound=4, error="UNKNOWN_MEMBER_ID")], True, 0),
    ("a write reported failed that landed anyway is checked", [row(applied=False, after=9, error="timeout")], False, 1),
    ("refused and dry-run rows are not writes",
     [row("refused_no_loss_check", applied=False, after=5, bound=4), row("dry_run", applied=False, after=None)],
     True, 0),
    ("unchanged above a lower bound is not a write", [row("unchanged", applied=False, after=9, bound=4)], True, 0),
    ("one offender among good rows", [row(partition=0), row(partition=1, after=9), row(partition=2)], False, 1),
    ("nothing written", [], True, 0),
]


@pytest.mark.parametrize("name, rows, passed, offenders", NO_LOSS_CASES, ids=[c[0] for c in NO_LOSS_CASES])
def test_no_loss_evaluation(name, rows, passed, offenders):
    outcome = evaluate_no_loss(rows)
    assert outcome.passed is passed
    assert outcome.severity is dg.AssetCheckSeverity.ERROR
    assert outcome.metadata["offenders"] == offenders
    listed = outcome.metadata["offending_partitions"].value
    assert len(listed) == offenders
    result = outcome.to_result()
    assert (result.check_name, result.passed, result.severity) == ("no_loss", passed, dg.AssetCheckSeverity.ERROR)


def test_no_loss_names_the_offender():
    outcome = evaluate_no_loss([row(partition=3, after=9, bound=7)])
    assert not outcome.passed
    [offender] = outcome.metadata["offending_partitions"].value
    assert offender == {"group_id": G, "topic": "t", "partition": 3, "standby": "idc2", "committed_after": 9,
                        "safe_bound": 7, "why": "committed 9 is above the safe bound 7"}
    assert "1 of 1" in outcome.description


# -- sync_freshness --------------------------------------------------------------------------------

FRESHNESS_CASES = [
    # (name, groups, newest synced (epoch s), now, max age, passed, stale)
    ("synced this cycle", ["a"], {"a": 1000.0}, 1000.0, 300, True, []),
    ("synced within the window", ["a", "b"], {"a": 800.0, "b": 990.0}, 1000.0, 300, True, []),
    ("older than the window", ["a", "b"], {"a": 600.0, "b": 990.0}, 1000.0, 300, False, ["a"]),
    ("never synced", ["a"], {}, 1000.0, 300, False, ["a"]),
    ("exactly at the limit passes", ["a"], {"a": 700.0}, 1000.0, 300, True, []),
    ("no groups", [], {}, 1000.0, 300, True, []),
]


@pytest.mark.parametrize("name, groups, synced, now, max_age, passed, stale", FRESHNESS_CASES,
                         ids=[c[0] for c in FRESHNESS_CASES])
def test_sync_freshness_evaluation(name, groups, synced, now, max_age, passed, stale):
    outcome = evaluate_sync_freshness(groups, synced, now, max_age)
    assert outcome.passed is passed
    assert outcome.severity is dg.AssetCheckSeverity.WARN
    assert [s["group_id"] for s in outcome.metadata["stale"].value] == stale
    assert outcome.metadata["stale_groups"] == len(stale)


def test_sync_freshness_lists_ages():
    outcome = evaluate_sync_freshness(["a", "b"], {"a": 100.0}, 1000.0, 300)
    assert outcome.metadata["stale"].value == [
        {"group_id": "a", "age_s": 900.0, "why": "last synced 900s ago"},
        {"group_id": "b", "age_s": None, "why": "never synced"},
    ]
    assert outcome.metadata["oldest_sync_age_s"] == 900.0


# -- the offset_commits table ----------------------------------------------------------------------


def test_newest_synced_cycle_needs_every_partition_synced(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    commits.ensure_table(client)
    commits.ensure_table(client)  # idempotent
    other = "other 'g'"
    # recent cycle times: rows older than the table's TTL (storage/retention.py) are expired
    t0 = int(time.time()) * 1000
    commits.insert_rows(client, [
        # s1 at t0 + 1 s: both partitions synced (one written, one unchanged)
        row(snapshot="s1", cycle_ms=t0 + 1_000, partition=0),
        row("unchanged", snapshot="s1", cycle_ms=t0 + 1_000, partition=1, applied=False),
        # s2 at t0 + 2 s: one write did not land
        row(snapshot="s2", cycle_ms=t0 + 2_000, partition=0, applied=False, error="x"),
        row("unchanged", snapshot="s2", cycle_ms=t0 + 2_000, partition=1, applied=False),
        # the other group only ever dry-ran or was refused
        row("dry_run", group=other, snapshot="s1", cycle_ms=t0 + 1_000, applied=False),
        row("refused_rewind", group=other, snapshot="s2", cycle_ms=t0 + 2_000, applied=False),
    ])
    assert commits.newest_synced_cycle_times(client, [G, other, "absent"]) == {G: t0 / 1000 + 1.0}
    stored = client.query(
        "SELECT decision, applied, error, committed_after FROM offset_commits WHERE group_id = {g:String} "
        "ORDER BY cycle_time, partition", parameters={"g": G},
    ).result_rows
    assert stored == [("commit", True, None, 7), ("unchanged", False, None, 7), ("commit", False, "x", 7),
                      ("unchanged", False, None, 7)]


def test_previous_committed_offsets_are_the_groups_own_previous_snapshot(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    snapshots.ensure_table(client)

    t0 = int(time.time()) * 1000  # recent: rows older than the table's TTL may be expired at any merge

    def snap(sid, ms, cluster, group, offset):
        return SnapshotRow(sid, t0 + ms, cluster, group, "STABLE", 1, "t", 0, offset, True, 0, 20, 20)

    late = "late 'joiner'"
    snapshots.insert_rows(client, [
        snap("a", 1000, "idc1", G, 10), snap("b", 2000, "idc1", G, 12), snap("b", 2000, "idc2", G, 3),
        snap("a", 1000, "idc1", late, 4),  # not in b: its previous snapshot for c is a
        snap("c", 3000, "idc1", G, 8), snap("c", 3000, "idc1", late, 2),
    ])
    assert snapshots.previous_committed_offsets(client, "c", [G, late]) == {
        ("idc1", G): {("t", 0): 12}, ("idc2", G): {("t", 0): 3}, ("idc1", late): {("t", 0): 4},
    }
    assert snapshots.previous_committed_offsets(client, "a", [G]) == {}
    assert snapshots.previous_committed_offsets(client, "missing", [G]) == {}
    assert snapshots.previous_committed_offsets(client, "c", []) == {}


# -- OFFSET_PIPELINE_DRY_RUN -----------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (None, False), ("", False), ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("on", True),
    ("0", False), ("false", False), ("No", False), ("off", False), (" true ", True),
])
def test_dry_run_default(value, expected):
    env = {} if value is None else {"OFFSET_PIPELINE_DRY_RUN": value}
    assert dry_run_default(env) is expected


@pytest.mark.parametrize("value", ["maybe", "2", "tru"])
def test_dry_run_default_rejects_typos(value):
    with pytest.raises(ValueError, match="OFFSET_PIPELINE_DRY_RUN"):
        dry_run_default({"OFFSET_PIPELINE_DRY_RUN": value})


def test_commit_rows_know_when_a_partition_is_synced():
    assert row().synced
    assert row("rewind_after_reset").synced
    assert row("unchanged", applied=False).synced
    assert not row(applied=False).synced
    for decision in ("dry_run", "refused_rewind", "refused_members", "split_brain", "skipped_untranslated",
                     "refused_no_loss_check", "failed"):
        assert not dataclasses.replace(row(), decision=decision).synced, decision


def test_within_safe_bound_fails_only_for_a_translation_above_its_own_bound():
    from offset_pipeline.sync.commit_checks import evaluate_within_safe_bound

    def row(p, offset, bound):
        return {"group_id": "g", "topic": "t", "partition": p, "standby_offset": offset, "safe_bound": bound,
                "status": "header_exact"}

    ok = evaluate_within_safe_bound([row(0, 5, 5), row(1, 3, 9), row(2, None, None), row(3, 4, None)])
    assert ok.passed and ok.metadata["translated"] == 3 and ok.metadata["without_bound"] == 1
    bad = evaluate_within_safe_bound([row(0, 5, 5), row(1, 10, 9)])
    assert not bad.passed and bad.severity.value == "ERROR" and bad.metadata["offenders"] == 1
    assert bad.metadata["offending_partitions"].data == [
        {"group_id": "g", "topic": "t", "partition": 1, "standby_offset": 10, "safe_bound": 9, "status": "header_exact"}]
