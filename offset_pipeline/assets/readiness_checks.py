"""Readiness to switch, as the sync assets show it: the ``switch_readiness`` check and metadata of
``offset_continuous_sync`` (every run's end) and ``offset_sync_metrics`` (every interval cycle), and
the interval cycle's facts turned into the rules' input (``readiness/rules.py``). Both show the
verdicts in force only (``readiness/current.py``: each group's newest cycle, one per direction), as
``offset-pipeline readiness`` and Grafana's readiness panel do."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg

from offset_pipeline.readiness import report
from offset_pipeline.readiness.current import in_force
from offset_pipeline.readiness.rules import PartitionFacts, group_readiness
from offset_pipeline.storage.readiness import ReadinessRow

READINESS_CHECK = "switch_readiness"
READINESS_CHECK_DESCRIPTION = ("Every group could be switched to its standby now without loss (WARN: names the groups "
                               "that cannot, and why; offset_group_readiness and `offset-pipeline readiness` have them all).")
LISTED = 50


def cycle_readiness(snapshot_id: str, cycle_time_ms: int, metric_rows: Iterable, fact_rows: Iterable[tuple],
                    translation_rows: Iterable[Mapping] | None, max_age_s: float) -> list[ReadinessRow]:
    """An interval cycle's readiness rows, from its metric rows (``monitoring/metric_rules.MetricRow``:
    f, g, synced, last sync), its facts rows (the commit decisions) and, when carried, its translation
    rows (the anchors used)."""
    decisions = {(g, t, int(p)): decision for g, t, p, _a, _s, _c, _o, _st, _str, decision, *_ in fact_rows}
    translated = {(r["group_id"], r["topic"], int(r["partition"])): r for r in translation_rows or []}
    facts = []
    for m in metric_rows:
        key = (m.group_id, m.topic, int(m.partition))
        t = translated.get(key, {})
        facts.append(PartitionFacts(
            m.group_id, m.topic, int(m.partition), m.active, m.standby, m.status, m.f, t.get("standby_offset"),
            t.get("anchor_active_offset"), decisions.get(key), m.synced, m.g, m.f,
            None if m.last_synced_ms is None else m.last_synced_ms / 1000,
        ))
    return [report.readiness_row(g, snapshot_id, cycle_time_ms)
            for g in group_readiness(facts, cycle_time_ms / 1000, max_age_s)]


def readiness_metadata(rows: list[ReadinessRow]) -> dict:
    rows = in_force(rows)
    return {
        "groups_ready": sum(1 for r in rows if r.ready),
        "groups_not_ready": sum(1 for r in rows if not r.ready),
        "readiness": dg.MetadataValue.md(report.markdown(rows, limit=LISTED)),
    }


def readiness_check(rows: list[ReadinessRow]) -> dg.AssetCheckResult:
    rows = in_force(rows)
    not_ready = [r for r in rows if not r.ready]
    return dg.AssetCheckResult(
        check_name=READINESS_CHECK, passed=bool(rows) and not not_ready, severity=dg.AssetCheckSeverity.WARN,
        description=(f"all {len(rows)} groups safe to switch" if rows and not not_ready else
                     "no group read" if not rows else
                     f"{len(not_ready)} of {len(rows)} groups not safe to switch: "
                     + "; ".join(f"{r.group_id} ({report.why_not(r)[:120]})" for r in not_ready[:5])),
        metadata={"groups": len(rows), "groups_not_ready": len(not_ready),
                  "not_ready": dg.MetadataValue.json([{"group": r.group_id, "active": r.active, "standby": r.standby,
                                                       "reasons": r.reasons} for r in not_ready[:LISTED]])},
    )
