"""How long ClickHouse keeps what the pipeline writes: the settings, and the TTL of every table.

Settings (environment, read when the code location loads and again whenever a table is ensured):

* ``OFFSET_PIPELINE_AUDIT_HORIZON_DAYS`` (default 35): how far back a failover audit may look: an
  audit of any UTC day at most this many days before today finds every snapshot and translation
  of that day.
* ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` (default 35): how many whole UTC days after its own day a
  history row is kept (snapshots, translations, commits, fast-forwards, shape observations,
  audits, raw monitoring rows, superseded anchors). Must be at least the audit horizon: a shorter
  TTL would delete the rows an audit within the horizon reads, so it is refused with an error.
* ``OFFSET_PIPELINE_METRICS_ROLLUP_TTL_DAYS`` (default 400): the per-minute monitoring rollup the
  dashboards read; at least the history TTL.

Invariants:

* Every MergeTree table the project creates has a TTL (``tests/storage/test_retention.py`` reads
  ``system.tables``), except :data:`UNEXPIRED_STATE_TABLES`: tables of one row per key (the
  replacing merges bound them), whose rows are current state and must never expire.
* A row of UTC day ``D`` with ``N`` days of retention expires at ``D + N + 1`` (00:00 UTC): it is
  there for the whole of day ``D + N``, so ``N >= horizon`` covers every audit of the horizon.
* State tables never lose the current state of a key, however old: their TTL rolls expired rows
  up per key into one row carrying the newest values (``GROUP BY ... SET col = anyLast...``: a
  part's rows are sorted by key, then time, so the last one is the newest) instead of deleting
  them; the readers' ``argMax`` over time still picks the newest row across parts.
* :func:`ensure_ttl` alters a table only when its TTL differs from the wanted one (compared in
  ClickHouse's own formatting), so calling it every cycle costs two small queries; the one
  ``MODIFY TTL`` of an upgrade or a settings change is an asynchronous mutation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from offset_pipeline.settings import positive_number

AUDIT_HORIZON_ENV = "OFFSET_PIPELINE_AUDIT_HORIZON_DAYS"
HISTORY_TTL_ENV = "OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS"
ROLLUP_TTL_ENV = "OFFSET_PIPELINE_METRICS_ROLLUP_TTL_DAYS"

#: Tables of one row per key, kept by replacing merges rather than a TTL (storage/translations.py
#: says why a drop of an anchor may not expire either).
UNEXPIRED_STATE_TABLES = frozenset({"offset_anchors_current"})

DEFAULT_AUDIT_HORIZON_DAYS = 35
DEFAULT_HISTORY_TTL_DAYS = 35
DEFAULT_ROLLUP_TTL_DAYS = 400


@dataclass(frozen=True)
class ClickHouseRetention:
    audit_horizon_days: int = DEFAULT_AUDIT_HORIZON_DAYS
    history_days: int = DEFAULT_HISTORY_TTL_DAYS
    rollup_days: int = DEFAULT_ROLLUP_TTL_DAYS


def _days(env: Mapping[str, str], name: str, default: int) -> int:
    return positive_number(env, name, default, unit="days", whole=True)


def clickhouse_retention(env: Mapping[str, str] | None = None) -> ClickHouseRetention:
    """The retention settings, validated: a TTL shorter than the audit horizon raises ValueError."""
    env = os.environ if env is None else env
    retention = ClickHouseRetention(
        audit_horizon_days=_days(env, AUDIT_HORIZON_ENV, DEFAULT_AUDIT_HORIZON_DAYS),
        history_days=_days(env, HISTORY_TTL_ENV, DEFAULT_HISTORY_TTL_DAYS),
        rollup_days=_days(env, ROLLUP_TTL_ENV, DEFAULT_ROLLUP_TTL_DAYS),
    )
    if retention.history_days < retention.audit_horizon_days:
        raise ValueError(
            f"{HISTORY_TTL_ENV}={retention.history_days} is shorter than the audit horizon "
            f"{AUDIT_HORIZON_ENV}={retention.audit_horizon_days}: audits of the last "
            f"{retention.audit_horizon_days} days need the snapshots and translations of those days. "
            f"Raise {HISTORY_TTL_ENV} or lower {AUDIT_HORIZON_ENV}."
        )
    if retention.rollup_days < retention.history_days:
        raise ValueError(
            f"{ROLLUP_TTL_ENV}={retention.rollup_days} is shorter than {HISTORY_TTL_ENV}="
            f"{retention.history_days}: the rollup summarizes the raw rows and must outlive them."
        )
    return retention


def expiry(time_column: str, days: int) -> str:
    """The TTL expression keeping a row for ``days`` whole UTC days after its own day."""
    return f"toDate({time_column}) + toIntervalDay({days + 1})"


def delete_ttl(time_column: str, days: int) -> str:
    """A plain TTL: rows older than the retention are deleted."""
    return expiry(time_column, days)


def rollup_ttl(time_column: str, days: int, key: list[str], newest: list[str],
               where_kept: str | None = None) -> str:
    """A TTL keeping the current state per ``key`` (a prefix of the sorting key, followed there by
    ``time_column``): expired rows of a key are rolled up into one row with the newest value of
    each column of ``newest`` (NULLs included) and the newest time. ``where_kept``: rows not
    matching it are deleted when expired, before the roll-up (state rows are the matching ones)."""
    expires = expiry(time_column, days)
    rules = []
    if where_kept:
        rules.append(f"{expires} WHERE NOT ({where_kept})")
    sets = [f"{c} = anyLastRespectNulls({c})" for c in newest] + [f"{time_column} = max({time_column})"]
    rules.append(f"{expires} GROUP BY {', '.join(key)} SET {', '.join(sets)}")
    return ", ".join(rules)


def _formatted_ttl(client, ttl: str) -> str:
    """``ttl`` as ClickHouse formats it in ``system.tables.engine_full``."""
    text = client.query(
        "SELECT formatQuerySingleLine({q:String})",
        parameters={"q": f"CREATE TABLE t (x Int8) ENGINE = MergeTree ORDER BY x TTL {ttl}"},
    ).result_rows[0][0]
    return ttl_clause(text)


def ttl_clause(engine_or_create: str) -> str:
    """The TTL clause of an engine description or CREATE statement ('' when none)."""
    start = engine_or_create.find(" TTL ")
    if start < 0:
        return ""
    end = engine_or_create.find(" SETTINGS ", start)
    return engine_or_create[start + 5: end if end >= 0 else None].strip()


def current_ttl(client, table: str) -> str:
    """The table's TTL clause as ClickHouse shows it ('' when it has none or does not exist)."""
    rows = client.query(
        "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        parameters={"t": table},
    ).result_rows
    return ttl_clause(rows[0][0]) if rows else ""


def ensure_ttl(client, table: str, ttl: str) -> bool:
    """Give ``table`` the TTL ``ttl`` unless it has it already. True when it was altered."""
    if _formatted_ttl(client, ttl) == current_ttl(client, table):
        return False
    client.command(f"ALTER TABLE {table} MODIFY TTL {ttl}")
    return True
