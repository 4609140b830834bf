"""Readiness rows as a person reads them: a markdown table (the Dagster UI), a text table (the CLI)
and JSON. Only the verdicts in force are shown (``readiness/current.py``: each group's newest cycle,
one row per direction); groups that are not ready come first.

Figures are plain numbers, each in a column that says what it is: ``expected duplicates`` is exact
(``unknown`` when some partition's is not known), ``duplicates at most`` its upper bound (the same
number when exact; ``unknown`` when a partition has no bound, an unrefined timestamp search)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict

from offset_pipeline.readiness.current import in_force
from offset_pipeline.readiness.rules import GroupReadiness
from offset_pipeline.storage.readiness import ReadinessRow

HEADER = ["group", "direction", "safe to switch", "expected duplicates", "duplicates at most", "seconds since sync",
          "why not"]
UNKNOWN = "unknown"


def readiness_row(g: GroupReadiness, snapshot_id: str, time_ms: int) -> ReadinessRow:
    """A group's verdict as its ``offset_group_readiness`` row (the cycle or checkpoint that read it)."""
    return ReadinessRow(snapshot_id, time_ms, g.group_id, g.active, g.standby, g.partitions, g.ready,
                        g.expected_duplicates, g.duplicates_at_most,
                        None if g.seconds_since_sync is None else round(g.seconds_since_sync, 3), g.reasons,
                        g.first_problem)


def ordered(rows: Iterable[ReadinessRow]) -> list[ReadinessRow]:
    """The verdicts in force among ``rows``, groups not ready first."""
    return sorted(in_force(rows), key=lambda r: (r.ready, r.group_id, r.active, r.standby))


def figure(value: int | None) -> str:
    return UNKNOWN if value is None else str(value)


def why_not(row: ReadinessRow) -> str:
    if row.ready:
        return "-"
    reasons = ", ".join(f"{reason} ({n})" for reason, n in row.reasons.items())
    return f"{reasons}; first: {row.first_problem}" if row.first_problem else reasons


def cells(row: ReadinessRow) -> list[str]:
    since = "never" if row.seconds_since_sync is None else f"{row.seconds_since_sync:.1f}"
    return [row.group_id, f"{row.active} -> {row.standby}" if row.active else "undecided",
            "yes" if row.ready else "NO", figure(row.expected_duplicates), figure(row.duplicates_at_most), since,
            why_not(row)]


def markdown(rows: Iterable[ReadinessRow], limit: int = 50) -> str:
    rows = ordered(rows)
    if not rows:
        return "(no groups)"
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row)) + " |")
    if len(rows) > limit:
        lines.append(f"\n{len(rows) - limit} more groups (all in offset_group_readiness)")
    return "\n".join(lines)


def text(rows: Iterable[ReadinessRow]) -> str:
    table = [HEADER] + [cells(r) for r in ordered(rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in table)


def as_json(rows: Iterable[ReadinessRow]) -> str:
    return json.dumps([{**asdict(r), "safe_to_switch": r.ready} for r in ordered(rows)], indent=2, ensure_ascii=False)
