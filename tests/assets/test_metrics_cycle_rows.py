"""The monitoring step takes its cycle's log ends and facts from the rows the earlier steps carried
(monitoring/metrics_step.py ``carried_cycle_rows``): they equal, types included, what its ClickHouse
fallback (``storage/cycle_rows.cycle_log_ends``, ``cycle_facts``) reads once the same rows are inserted."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from types import SimpleNamespace

from offset_pipeline.monitoring.metrics_step import (
    NO_BOUND,
    RUN_START_MARGIN_S,
    carried_cycle_rows,
    run_rows_since,
)
from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.sync.spark_translation import result_row
from offset_pipeline.storage import commits, cycle_rows, snapshots, translations
from offset_pipeline.storage.commits import CommitRow
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.translation.result import Anchor, Strategy, TranslationResult, TranslationStatus

NOW_MS = int(time.time()) * 1000
SID = "run-1"


def snapshot_rows(sid: str, ms: int, log_end: int) -> list[SnapshotRow]:
    def row(cluster, group, topic, partition, present, end):
        return SnapshotRow(sid, ms, cluster, group, "Stable", 1, topic, partition, 5, present, 0 if present else None,
                           end, end, "CreateTime" if present else "", "")

    return [
        row("idc1", "g", "t", 0, True, log_end), row("idc2", "g", "t", 0, True, log_end - 4),
        row("idc1", "g", "t", 1, True, log_end + 1), row("idc2", "g", "t", 1, True, None),  # range unknown
        # a second group on the same partitions: the same log ends (DISTINCT)
        row("idc1", "h", "t", 0, True, log_end), row("idc2", "h", "t", 0, True, log_end - 4),
        row("idc1", "g", "gone", 0, True, 7), row("idc2", "g", "gone", 0, False, None),  # missing on idc2
    ]


def translation(sid: str, ms: int, group: str, partition: int, status: TranslationStatus, *, topic="t",
                active="idc1", standby="idc2", offset=None, inversion=False) -> dict:
    result = TranslationResult(
        group, topic, partition, Strategy.HEADER_ANCHOR if offset is not None else None, offset, status, "why",
        anchor_to_keep=Anchor(active, standby, 3, 2) if offset is not None and active else None,
        timestamp_inversion=inversion, active=active or None, standby=standby or None, committed=10 + partition,
    )
    return result_row(result, sid, ms)


def commit(sid: str, ms: int, group: str, partition: int, decision: str, applied: bool, after: int | None,
           topic="t") -> CommitRow:
    return CommitRow(sid, ms, group, topic, partition, "idc1", "idc2", 1, after, None, decision, "", "header_anchor",
                     "header_anchor", False, applied, None, after)


def cycle(sid: str, ms: int, log_end: int):
    """One cycle's carried rows: translated and committed, not committed, undecided, a missing
    topic without a commit row, and one partition twice (both in translations and in commits)."""
    translated = [
        translation(sid, ms, "g", 0, TranslationStatus.HEADER_EXACT, offset=8, inversion=True),
        translation(sid, ms, "g", 1, TranslationStatus.NO_ANCHOR),
        translation(sid, ms, "g", 0, TranslationStatus.TOPIC_MISSING_ON_STANDBY, topic="gone"),
        translation(sid, ms, "h", 0, TranslationStatus.SPLIT_BRAIN, active="", standby=""),
        translation(sid, ms, "twice", 0, TranslationStatus.KEPT_ANCHOR, offset=4),
        translation(sid, ms, "twice", 0, TranslationStatus.KEPT_ANCHOR, offset=4),
    ]
    committed = [
        commit(sid, ms + 1000, "g", 0, "commit", True, 8),
        commit(sid, ms + 1000, "g", 1, "skipped", False, None),
        commit(sid, ms + 1000, "h", 0, "split_brain", False, None),
        commit(sid, ms + 1000, "twice", 0, "failed", False, 3),
        commit(sid, ms + 1000, "twice", 0, "failed", False, 3),
    ]
    return snapshot_rows(sid, ms, log_end), translated, committed


def typed(rows):
    """Rows with each value's type beside it: True and 1 are not the same value here."""
    return sorted([tuple((type(v).__name__, v) for v in row) for row in rows], key=repr)


def test_carried_rows_give_the_facts_and_log_ends_the_queries_read(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    snapshots.ensure_table(client)
    translations.ensure_tables(client)
    commits.ensure_table(client)
    carried = cycle(SID, NOW_MS, 20)
    for sid, ms in (("run-0", NOW_MS - 30_000), (SID, NOW_MS), ("run-2", NOW_MS + 30_000)):  # neighbours, same keys
        snaps, translated, committed = carried if sid == SID else cycle(sid, ms, 99)
        snapshots.insert_rows(client, snaps)
        translations.insert_translations(client, translated)
        commits.insert_rows(client, committed)

    log_end, facts = carried_cycle_rows(*carried)
    since = datetime.fromtimestamp(NOW_MS / 1000 - RUN_START_MARGIN_S, tz=timezone.utc)
    for run_since in (since, NO_BOUND):
        queried_ends = cycle_rows.cycle_log_ends(client, SID, run_since)
        assert typed((c, t, p, e) for (c, t, p), e in log_end.items()) == \
            typed((c, t, p, e) for (c, t, p), e in queried_ends.items())
        queried = cycle_rows.cycle_facts(client, SID, run_since)
        assert typed(facts) == typed(queried)

    assert log_end == {("idc1", "t", 0): 20, ("idc2", "t", 0): 16, ("idc1", "t", 1): 21, ("idc2", "t", 1): None,
                       ("idc1", "gone", 0): 7}
    by_key = {}
    for row in facts:
        by_key.setdefault(row[:5], []).append(row[5:])
    assert by_key[("g", "t", 0, "idc1", "idc2")] == [(10, 8, "header_exact", "header_anchor", "commit", True, 8, True)]
    # no commit row: NULLs (join_use_nulls), not the columns' defaults
    assert by_key[("g", "gone", 0, "idc1", "idc2")] == [(10, None, "topic_missing_on_standby", "none", None, None, None,
                                                        False)]
    assert by_key[("h", "t", 0, "", "")] == [(10, None, "split_brain", "none", "split_brain", False, None, False)]
    assert len(by_key[("twice", "t", 0, "idc1", "idc2")]) == 4  # each translation row with each commit row


def test_the_fallback_reads_from_the_runs_start_less_the_margin():
    def context(record=None, error=None):
        def get_run_record_by_id(run_id):
            assert run_id == SID
            if error:
                raise error
            return record

        return SimpleNamespace(run=SimpleNamespace(run_id=SID),
                               instance=SimpleNamespace(get_run_record_by_id=get_run_record_by_id))

    start = NOW_MS / 1000
    assert run_rows_since(context(SimpleNamespace(start_time=start))) == datetime.fromtimestamp(
        start - RUN_START_MARGIN_S, tz=timezone.utc)
    # unknown: no bound
    assert run_rows_since(context(SimpleNamespace(start_time=None))) == NO_BOUND
    assert run_rows_since(context(None)) == NO_BOUND
    assert run_rows_since(context(error=RuntimeError("instance storage down"))) == NO_BOUND
