"""Monitoring tables (docs/operating/monitoring.md), owned by the project and created idempotently.

* ``offset_sync_metrics``: one row per group-partition and cycle (``monitoring/metric_rules.py``;
  ``active``/``standby`` empty when the group's direction was not decided, e.g. a split brain),
  kept ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS`` days (TTL, ``storage/retention.py``).
* ``offset_sync_metrics_1m``: a per-minute rollup per (active, standby, group, topic), filled by the
  materialized view ``ROLLUP_VIEW`` on every insert into the raw table and kept
  ``OFFSET_PIPELINE_METRICS_ROLLUP_TTL_DAYS`` days (default 400): the dashboards read 30 days
  from here, not from the raw rows. Sums and counts are ``SimpleAggregateFunction`` columns, so partially merged parts still add up in a ``GROUP BY``
  with ``sum``/``max``.

:func:`ensure_tables` also migrates tables of older versions (columns added, the view replaced).

Inserts use clickhouse-connect's column binding; queries are parameterized (group ids may hold
any character).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from datetime import datetime

from offset_pipeline.storage.recent import recent
from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl
from offset_pipeline.storage.row_inserts import insert_dataclass_rows
from offset_pipeline.storage.upkeep import ensure_upkeep

TABLE = "offset_sync_metrics"
ROLLUP = "offset_sync_metrics_1m"
# The view's name carries the version of its query: a new query gets a new view, and ensure_tables
# drops the older ones (a view's query cannot be altered in place).
ROLLUP_VIEW_PREFIX = "offset_sync_metrics_1m_mv"
ROLLUP_VIEW = f"{ROLLUP_VIEW_PREFIX}_v3"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    cycle_time      DateTime64(3, 'UTC'),
    group_id        String,
    topic           String,
    partition       UInt32,
    active          LowCardinality(String),
    standby         LowCardinality(String),
    f               Nullable(Int64),
    g               Nullable(Int64),
    d               Nullable(Int64),
    dd              Nullable(Int64),
    synced          Bool,
    last_synced     Nullable(DateTime64(3, 'UTC')),
    sync_age_s      Nullable(Float64),
    translated      Bool,
    exact           Bool,
    header_hit      Bool,
    status          LowCardinality(String),
    strategy        LowCardinality(String),
    sync_status     LowCardinality(String),
    timestamp_inversion Bool,
    active_lag      Nullable(Int64),
    standby_lag     Nullable(Int64),
    mirror_stalled  Bool
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(cycle_time)
ORDER BY (group_id, topic, partition, active, cycle_time)
"""

ROLLUP_DDL = f"""
CREATE TABLE IF NOT EXISTS {ROLLUP}
(
    minute            DateTime('UTC'),
    active            LowCardinality(String),
    standby           LowCardinality(String),
    group_id          String,
    topic             String,
    rows              SimpleAggregateFunction(sum, UInt64),
    dd_sum            SimpleAggregateFunction(sum, Int64),
    d_sum             SimpleAggregateFunction(sum, Int64),
    f_sum             SimpleAggregateFunction(sum, Int64),
    g_sum             SimpleAggregateFunction(sum, Int64),
    fg_rows           SimpleAggregateFunction(sum, UInt64),
    synced_rows       SimpleAggregateFunction(sum, UInt64),
    translated_rows   SimpleAggregateFunction(sum, UInt64),
    exact_rows        SimpleAggregateFunction(sum, UInt64),
    header_hit_rows   SimpleAggregateFunction(sum, UInt64),
    header_rows       SimpleAggregateFunction(sum, UInt64),
    timestamp_rows    SimpleAggregateFunction(sum, UInt64),
    timestamp_ok_rows SimpleAggregateFunction(sum, UInt64),
    in_sync_rows      SimpleAggregateFunction(sum, UInt64),
    broken_rows       SimpleAggregateFunction(sum, UInt64),
    inversion_rows    SimpleAggregateFunction(sum, UInt64),
    mirror_stalled_rows SimpleAggregateFunction(sum, UInt64),
    gap_sum           SimpleAggregateFunction(sum, Int64),
    max_sync_age_s    SimpleAggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (group_id, topic, active, standby, minute)
"""

ROLLUP_VIEW_DDL = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {ROLLUP_VIEW} TO {ROLLUP} AS
SELECT
    toStartOfMinute(toDateTime(cycle_time)) AS minute,
    active, standby, group_id, topic,
    toUInt64(count()) AS rows,
    toInt64(sum(ifNull(dd, 0))) AS dd_sum,
    toInt64(sum(ifNull(d, 0))) AS d_sum,
    toInt64(sum(if(d IS NULL, 0, assumeNotNull(f)))) AS f_sum,
    toInt64(sum(if(d IS NULL, 0, assumeNotNull(g)))) AS g_sum,
    toUInt64(countIf(d IS NOT NULL)) AS fg_rows,
    toUInt64(countIf(synced)) AS synced_rows,
    toUInt64(countIf(translated)) AS translated_rows,
    toUInt64(countIf(exact)) AS exact_rows,
    toUInt64(countIf(header_hit)) AS header_hit_rows,
    toUInt64(countIf(status IN ('header_exact', 'header_anchor', 'kept_anchor', 'no_anchor', 'not_yet_mirrored',
                                'copy_missing_on_standby'))) AS header_rows,
    toUInt64(countIf(strategy = 'timestamp_search')) AS timestamp_rows,
    toUInt64(countIf(strategy = 'timestamp_search' AND translated)) AS timestamp_ok_rows,
    toUInt64(countIf(sync_status = 'InSync')) AS in_sync_rows,
    toUInt64(countIf(sync_status IN ('Broken', 'SplitBrain'))) AS broken_rows,
    toUInt64(countIf(timestamp_inversion)) AS inversion_rows,
    toUInt64(countIf(mirror_stalled)) AS mirror_stalled_rows,
    toInt64(sum(ifNull(standby_lag - active_lag, 0))) AS gap_sum,
    toFloat64(max(ifNull(sync_age_s, 0))) AS max_sync_age_s
FROM {TABLE}
GROUP BY minute, active, standby, group_id, topic
"""

def _declared_columns(ddl: str) -> list[tuple[str, str]]:
    """(name, type) of the columns in a CREATE TABLE statement of this module."""
    body = ddl[ddl.index("(") + 1: ddl.index("\n)")]
    out = []
    for line in body.strip().splitlines():
        name, _, kind = line.strip().rstrip(",").partition(" ")
        out.append((name, kind.strip()))
    return out


def ensure_tables(client) -> None:
    """Create the tables and the view, or bring older ones up to date: missing columns are
    added (defaults for the rows already there), and views of older query versions are replaced.
    Idempotent. The TTLs follow the retention settings (``storage/retention.py``)."""
    retention = clickhouse_retention()
    for table, ddl, ttl in ((TABLE, DDL, delete_ttl("cycle_time", retention.history_days)),
                            (ROLLUP, ROLLUP_DDL, delete_ttl("minute", retention.rollup_days))):
        client.command(ddl)
        # One read of the table's columns, then an ALTER only for those missing: the step ensures
        # its tables every cycle, and an ALTER per declared column was ~45 statements, 0.24 s.
        present = {name for (name,) in client.query(
            "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String}",
            parameters={"t": table},
        ).result_rows}
        for name, kind in _declared_columns(ddl):
            if name not in present:
                client.command(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {kind}")
        ensure_ttl(client, table, ttl)
        ensure_upkeep(client, table)
    client.command(ROLLUP_VIEW_DDL)
    views = client.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, {p:String})",
        parameters={"p": ROLLUP_VIEW_PREFIX},
    ).result_rows
    for (name,) in views:
        if name != ROLLUP_VIEW:
            client.command(f"DROP VIEW IF EXISTS {name}")


_TIME_FIELDS = {"cycle_time_ms": "cycle_time", "last_synced_ms": "last_synced"}  # epoch ms -> DateTime64 column


def insert_rows(client, rows: list) -> int:
    """Append metric rows: dataclass instances whose fields are the table's columns, the two
    ``*_ms`` fields stored under their column names without ``_ms`` (``monitoring/metric_rules.MetricRow``
    makes them; a field the table lacks fails the insert, never a silent drop)."""
    if not rows:
        return 0
    names = [_TIME_FIELDS.get(f.name, f.name) for f in fields(rows[0])]
    # column-oriented, the *_ms fields as DateTime64(3) ticks (storage/row_inserts.py says why)
    return insert_dataclass_rows(client, TABLE, rows, names)


Key = tuple[str, str, int, str, str]  # group, topic, partition, active, standby (metric_rules.Key)


def previous_state(client, group_ids: Iterable[str], before_ms: int, *,
                   keys: Iterable[Key] | None = None) -> tuple[dict, dict]:
    """Per (group, topic, partition, active, standby): the newest ``d`` that is not NULL and the
    newest synced cycle time (epoch ms, ``max(last_synced)``) of the rows before ``before_ms``.
    Keys without such a value are absent from that dict.

    Without ``keys`` the groups' whole history is read. With ``keys`` (the keys the caller needs)
    only they are returned, and from the last ``RECENT_HOURS`` before ``before_ms`` (storage/recent.py):
    a key with any row there is answered from those rows; only the keys without one are read over
    their whole history, by the primary index. So a cycle reads about a day's partition, not 35.

    What the window changes, on purpose (``tests/storage/test_recent_reads.py``):

    * ``last_synced``: nothing while runs follow one another. Each row carries its key's newest sync
      forward (``metric_rules.metric_rows``), so the window's newest row holds it however old it
      is. A row written late (replayed from the spool) after a newer one was computed is not
      carried into it; the sync age then reads high until the key's next sync.
    * ``d``: a key whose rows of the last hours all lack a ``d`` (undecided, a cluster down) has no
      previous ``d``, so its first ``dd`` after that stretch is missing rather than measured
      against a ``d`` of hours ago. Reading those keys' whole history instead would cost every
      cycle of an outage a scan of every affected key's 35 days."""
    groups = sorted(set(group_ids))

    def read(where: str, **parameters) -> dict[Key, tuple[int | None, int | None]]:
        rows = client.query(
            "SELECT group_id, topic, partition, active, standby, argMax(d, cycle_time), "
            f"toUnixTimestamp64Milli(max(last_synced)) FROM {TABLE} "
            f"WHERE cycle_time < fromUnixTimestamp64Milli({{before_ms:Int64}}, 'UTC') AND {where} "
            "GROUP BY group_id, topic, partition, active, standby",
            parameters={"before_ms": before_ms, **parameters},
        ).result_rows
        return {(g, t, int(p), a, s): (None if d is None else int(d), None if ms is None else int(ms))
                for g, t, p, a, s, d, ms in rows}

    if keys is None:
        state = read("group_id IN {groups:Array(String)}", groups=groups) if groups else {}
    else:
        wanted = set(keys)
        window = read(f"group_id IN {{groups:Array(String)}} AND {recent('cycle_time', 'before_ms')}",
                      groups=sorted({k[0] for k in wanted})) if wanted else {}
        state = {k: v for k, v in window.items() if k in wanted}  # a key with a row in the window
        missing = sorted(wanted - set(state))
        if missing:
            state |= read("(group_id, topic, partition, active, standby) IN "
                          "{keys:Array(Tuple(String, String, UInt32, String, String))}", keys=missing)
    previous_d = {k: d for k, (d, _) in state.items() if d is not None}
    last_synced = {k: ms for k, (_, ms) in state.items() if ms is not None}
    return previous_d, last_synced


_CONVERGENCE = (
    f"SELECT minute, active, sum(dd_sum) FROM {ROLLUP} "
    "WHERE minute >= {since:DateTime('UTC')} AND active != '' GROUP BY minute, active ORDER BY minute"
)


def convergence_points(client, since: datetime) -> list[tuple]:
    """``(minute, active cluster, sum of dd)`` per minute since ``since``: the convergence graph."""
    return client.query(_CONVERGENCE, parameters={"since": since}).result_rows
