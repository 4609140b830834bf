"""The commit step's asset checks, evaluated as pure functions: commit rows in, an outcome out.

* ``no_loss`` (ERROR): every partition this cycle wrote to the standby (decision ``commit`` or
  ``rewind_after_reset`` whose write landed: applied, or the re-read shows a changed offset) has a
  re-read committed offset at or below its safe bound. A written partition with no bound, or whose
  offset could not be re-read, fails too: NO-LOSS is then not shown. Writes that did not land are
  counted, not failed (the partition kept its old offset).
* ``sync_freshness`` (WARN): every group of the cycle had, within ``max_age_s``, a cycle in which
  every one of its partitions ended synced (``commit``/``rewind_after_reset`` applied, or
  ``unchanged``). A group that never synced fails.

Only the severity enum comes from Dagster; :meth:`CheckOutcome.to_result` builds the
``AssetCheckResult``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from offset_pipeline.storage.commits import SYNCED_WRITES, CommitRow

NO_LOSS_CHECK = "no_loss"
FRESHNESS_CHECK = "sync_freshness"
WITHIN_BOUND_CHECK = "within_safe_bound"
MAX_LISTED = 50  # offenders listed in metadata (all are counted)


@dataclass(frozen=True)
class CheckOutcome:
    check_name: str
    passed: bool
    severity: dg.AssetCheckSeverity
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_result(self) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(
            check_name=self.check_name, passed=self.passed, severity=self.severity,
            description=self.description, metadata=self.metadata,
        )


def _landed(row: CommitRow) -> bool:
    return row.applied or (row.committed_after is not None and row.committed_after != row.previous_offset)


def evaluate_no_loss(rows: Iterable[CommitRow]) -> CheckOutcome:
    checked, offenders, not_landed = 0, [], 0
    for row in rows:
        if row.decision not in SYNCED_WRITES:
            continue
        if not _landed(row):
            not_landed += 1
            continue
        checked += 1
        if row.committed_after is None:
            why = "not re-read after the write"
        elif row.safe_bound is None:
            why = "no safe bound was proven"
        elif row.committed_after > row.safe_bound:
            why = f"committed {row.committed_after} is above the safe bound {row.safe_bound}"
        else:
            continue
        offenders.append({
            "group_id": row.group_id, "topic": row.topic, "partition": row.partition, "standby": row.standby,
            "committed_after": row.committed_after, "safe_bound": row.safe_bound, "why": why,
        })
    passed = not offenders
    description = (
        f"{checked} written partition(s), each at or below its safe bound"
        if passed else f"{len(offenders)} of {checked} written partition(s) not shown loss-free"
    )
    return CheckOutcome(
        NO_LOSS_CHECK, passed, dg.AssetCheckSeverity.ERROR, description,
        {
            "written_partitions": checked,
            "offenders": len(offenders),
            "writes_not_landed": not_landed,
            "offending_partitions": dg.MetadataValue.json(offenders[:MAX_LISTED]),
        },
    )


def bound_offenders(rows: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Translation rows whose standby offset is above the safe bound their own facts prove: a
    translation that contradicts its proof (a bug). Rows without a bound are not offenders here: the
    commit step refuses them one by one (``refused_no_loss_check``)."""
    return [
        {"group_id": r["group_id"], "topic": r["topic"], "partition": int(r["partition"]),
         "standby_offset": r["standby_offset"], "safe_bound": r["safe_bound"], "status": r["status"]}
        for r in rows
        if r.get("standby_offset") is not None and r.get("safe_bound") is not None
        and r["standby_offset"] > r["safe_bound"]
    ]


def evaluate_within_safe_bound(rows: list[Mapping[str, Any]]) -> CheckOutcome:
    """``within_safe_bound`` (ERROR, blocking: the commits do not run when it fails)."""
    offenders = bound_offenders(rows)
    translated = sum(1 for r in rows if r.get("standby_offset") is not None)
    unbounded = sum(1 for r in rows if r.get("standby_offset") is not None and r.get("safe_bound") is None)
    return CheckOutcome(
        WITHIN_BOUND_CHECK, not offenders, dg.AssetCheckSeverity.ERROR,
        (f"{translated} translated offset(s), none above its proven safe bound" if not offenders else
         f"{len(offenders)} translated offset(s) above their own safe bound: no commit this cycle"),
        {"translated": translated, "offenders": len(offenders), "without_bound": unbounded,
         "offending_partitions": dg.MetadataValue.json(offenders[:MAX_LISTED])},
    )


def evaluate_sync_freshness(
    group_ids: Iterable[str], newest_synced_s: Mapping[str, float], now_s: float, max_age_s: float
) -> CheckOutcome:
    """``newest_synced_s``: group -> epoch seconds of its newest fully synced cycle (absent: never)."""
    groups = sorted(set(group_ids))
    stale = []
    ages: dict[str, float] = {}
    for group_id in groups:
        synced = newest_synced_s.get(group_id)
        if synced is None:
            stale.append({"group_id": group_id, "age_s": None, "why": "never synced"})
            continue
        age = max(0.0, now_s - synced)
        ages[group_id] = age
        if age > max_age_s:
            stale.append({"group_id": group_id, "age_s": round(age, 1), "why": f"last synced {age:.0f}s ago"})
    passed = not stale
    description = (
        f"{len(groups)} group(s) synced within {max_age_s:g}s"
        if passed else f"{len(stale)} of {len(groups)} group(s) not synced within {max_age_s:g}s"
    )
    return CheckOutcome(
        FRESHNESS_CHECK, passed, dg.AssetCheckSeverity.WARN, description,
        {
            "groups": len(groups),
            "stale_groups": len(stale),
            "max_sync_age_s": float(max_age_s),
            "oldest_sync_age_s": round(max(ages.values()), 1) if ages else None,
            "stale": dg.MetadataValue.json(stale[:MAX_LISTED]),
        },
    )
