"""The daily failover audit's steps below Dagster: the days of a partition window, each day's moments,
the Spark step's rows, the rows written per day, and the totals the asset reports.

:func:`days_of_window` turns a partition window (one day; a range of days in a single-run backfill)
into UTC days; :func:`moments_of_day` reads a day's moments from ``offset_snapshots`` and
``offset_translations`` (``storage/audits.py``) with each topic's shape; :func:`audit_results` is the
Spark job (``audit/spark_audit.py``) collected as plain rows; :func:`write_days` replaces each day's
rows in ``offset_failover_audits``; :class:`AuditTotals` counts the results for metadata and checks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from offset_pipeline.audit.failover_cost import Shape
from offset_pipeline.audit.spark_audit import RESULT_COLUMNS, audit_moments_df, moments_dataframe
from offset_pipeline.storage import audits, snapshots, translations


def days_of_window(start: datetime, end: datetime) -> list[date]:
    """The UTC days from the one ``start`` falls on to the last that begins before ``end``."""
    days = []
    day = start.astimezone(timezone.utc).date()
    while datetime(day.year, day.month, day.day, tzinfo=timezone.utc) < end:
        days.append(day)
        day += timedelta(days=1)
    return days


def ensure_audit_tables(client) -> None:
    """The tables the audit reads (snapshots, translations) and writes (audits)."""
    for module in (snapshots, audits):
        module.ensure_table(client)
    translations.ensure_tables(client)


def _shape(shapes: dict[str, str], topic: str, active: str) -> str:
    text = shapes.get(topic, "")
    if text == "two_way":
        return Shape.TWO_WAY.value
    if text.startswith("one_way:"):
        return (Shape.ONE_WAY_FROM_ACTIVE if text.split(":", 1)[1] == active else Shape.ONE_WAY_FROM_STANDBY).value
    return Shape.UNKNOWN.value


def moments_of_day(client, day: date, shapes: dict[str, str]) -> list[dict]:
    lo = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    rows = audits.snapshot_moments(client, lo, lo + timedelta(days=1))
    out = []
    for sid, ms, group, topic, partition, active, standby, c, t, a_end, b_end, strategy in rows:
        if a_end is None or b_end is None:
            continue  # the topic was missing on one side then: nothing to fail over to
        out.append({
            "window_date": day.isoformat(), "snapshot_id": sid, "snapshot_time": int(ms), "group_id": group,
            "topic": topic, "partition": int(partition), "active": active, "standby": standby, "committed": c,
            "standby_committed": t, "active_end_at": int(a_end), "standby_end_at": int(b_end),
            "strategy": strategy or "none", "shape": _shape(shapes, topic, active),
        })
    return out


def audit_results(session, moments: list[dict], confs: dict[str, dict], *, exactly_once_mirror: bool,
                  timeout_s: float) -> list[dict[str, Any]]:
    """The Spark job: every moment's cost, collected as plain rows of ``RESULT_COLUMNS``."""
    out = audit_moments_df(session, moments_dataframe(session, moments), confs,
                           exactly_once_mirror=exactly_once_mirror, timeout_s=timeout_s)
    return [{c: row[c] for c in RESULT_COLUMNS} for row in (r.asDict() for r in out.collect())]


def write_days(client, days: list[date], results: list[dict], audited_at_ms: int) -> int:
    """Each day's results replace that day's rows (a day without results is emptied); rows written."""
    written = 0
    for d in days:
        written += audits.replace_window(client, d, [r for r in results if r["window_date"] == d.isoformat()],
                                         audited_at_ms)
    return written


@dataclass(frozen=True)
class AuditTotals:
    """The results counted; the sums are computed when asked for, in the order the asset asks."""

    results: list[dict]
    statuses: Counter  # status -> moments
    strategies: Counter  # the cycle's strategy -> moments
    audited: list[dict]  # moments with status "audited"
    losing: list[dict]  # audited moments that would have lost a record
    duplicated: list  # records duplicated, per audited moment

    @property
    def group_partitions(self) -> int:
        return len({(r["group_id"], r["topic"], r["partition"]) for r in self.results})

    @property
    def records_lost(self):
        return sum(r["lost"] for r in self.audited)

    @property
    def duplicated_mean(self) -> float:
        return round(sum(self.duplicated) / len(self.duplicated), 3) if self.duplicated else 0.0

    @property
    def records_read(self):
        return sum(r["records_read"] for r in self.results)


def audit_totals(results: list[dict]) -> AuditTotals:
    statuses = Counter(r["status"] for r in results)
    strategies = Counter(r["strategy"] for r in results)
    audited = [r for r in results if r["status"] == "audited"]
    losing = [r for r in audited if r["lost"]]
    return AuditTotals(results, statuses, strategies, audited, losing, [r["duplicated"] for r in audited])
