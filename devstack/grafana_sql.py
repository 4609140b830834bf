"""Expand a panel's SQL as Grafana and the grafana-clickhouse-datasource plugin would, so tests and
benchmarks run the very queries of ``grafana/dashboards`` against ClickHouse.

Covers what the dashboards use: ``$__timeFilter(col)``, ``$__timeInterval(col)``, ``$__fromTime``,
``$__toTime`` and ``${name:singlequote}`` variables (a list of values; Grafana's ``singlequote``
format quotes each value and escapes single quotes with a backslash).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

_VARIABLE = re.compile(r"\$\{(\w+):singlequote\}")
_TIME_FILTER = re.compile(r"\$__timeFilter\(([^)]+)\)")
_TIME_INTERVAL = re.compile(r"\$__timeInterval\(([^)]+)\)")


def singlequote(values: Sequence[str]) -> str:
    return ",".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in values)


def expand(sql: str, *, time_from: datetime, time_to: datetime, interval_s: int,
           variables: Mapping[str, Sequence[str]]) -> str:
    start, end = int(time_from.timestamp()), int(time_to.timestamp())

    def variable(match: re.Match) -> str:
        name = match.group(1)
        if name not in variables:
            raise KeyError(f"no value for dashboard variable {name!r}")
        values = list(variables[name])
        return singlequote(values) if values else "NULL"  # an empty selection matches nothing

    out = _VARIABLE.sub(variable, sql)
    out = _TIME_FILTER.sub(
        lambda m: f"{m.group(1).strip()} >= toDateTime({start}) AND {m.group(1).strip()} <= toDateTime({end})", out
    )
    out = _TIME_INTERVAL.sub(
        lambda m: f"toStartOfInterval(toDateTime({m.group(1).strip()}), INTERVAL {interval_s} second)", out
    )
    out = out.replace("$__fromTime", f"toDateTime({start})").replace("$__toTime", f"toDateTime({end})")
    if "$__" in out or "${" in out:
        raise ValueError(f"unexpanded macro or variable left in: {out[:200]}")
    return out
