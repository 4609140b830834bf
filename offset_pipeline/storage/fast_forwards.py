"""The ``offset_fast_forwards`` table: every group-partition a fast-forward run looked at, append-only.

One row per group-partition and run (``run_id``), whatever happened: fast-forwarded, dry run,
already there (``unchanged``), left alone because a live re-check failed (``rejection`` names the
condition: ``receiving_data``, ``group_has_lag``, ``mirror_stopped``, ...), refused by the commit
rules, or failed. It keeps the live facts the decision rested on (log ends as the sensor saw them
and as re-read, ``c``, both mirrors' positions, how long the logs were quiet), so every decision can
be audited later. The newest applied row of a group-partition and direction is the **kept point**
the sync cycle translates with (``translation/caught_up.py``: :class:`CaughtUpPoint`).

Retention (``storage/retention.py``): rows that are not kept points expire after
``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS``; expired kept points are rolled up per group-partition and
direction into the newest one, which therefore stays however old it is (a quiet partition's point
may not change for months and is still what the cycle translates with). The roll-up needs the
direction in the sorting key: a table of an older version (sorted by group, topic, partition, time)
is copied once into the new layout by :func:`ensure_table`.

Inserts use clickhouse-connect's column binding; queries are parameterized.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from offset_pipeline.storage.retention import clickhouse_retention, ensure_ttl, rollup_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep
from offset_pipeline.storage.row_inserts import columns_of, insert_dataclass_rows
from offset_pipeline.translation import CaughtUpPoint

TABLE = "offset_fast_forwards"

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE}
(
    run_id                  String,
    checked_at              DateTime64(3, 'UTC'),
    group_id                String,
    topic                   String,
    partition               UInt32,
    active                  LowCardinality(String),
    standby                 LowCardinality(String),
    outcome                 LowCardinality(String),
    rejection               LowCardinality(String),
    decision                LowCardinality(String),
    reason                  String,
    committed               Nullable(Int64),
    expected_active_end     Nullable(Int64),
    expected_standby_end    Nullable(Int64),
    active_log_end          Nullable(Int64),
    standby_log_end         Nullable(Int64),
    standby_mirror_position Nullable(Int64),
    active_mirror_position  Nullable(Int64),
    stable_for_s            Nullable(Float64),
    previous_offset         Nullable(Int64),
    new_offset              Nullable(Int64),
    committed_after         Nullable(Int64),
    dry_run                 Bool,
    applied                 Bool,
    error                   Nullable(String)
)
ENGINE = MergeTree
ORDER BY (group_id, topic, partition, active, standby, checked_at)
"""
POINT_KEY = ["group_id", "topic", "partition", "active", "standby"]  # the sorting key's prefix before checked_at

# Outcomes (stable: stored).
FAST_FORWARDED = "fast_forwarded"  # the standby offset was moved to the standby log end
UNCHANGED = "unchanged"  # it was there already
DRY_RUN = "dry_run"  # would have been moved; dry run
LEFT_ALONE = "left_alone"  # a live re-check failed: ``rejection`` says which
REFUSED = "refused"  # the commit rules refused (members on the standby, split brain, ...)
FAILED = "failed"  # a read or the write failed: ``error``


@dataclass(frozen=True)
class FastForwardRow:
    run_id: str
    checked_at_ms: int
    group_id: str
    topic: str
    partition: int
    active: str
    standby: str
    outcome: str
    rejection: str  # "" unless left alone
    decision: str  # the commit decision ("" when the commit step was not reached)
    reason: str
    committed: int | None
    expected_active_end: int | None
    expected_standby_end: int | None
    active_log_end: int | None
    standby_log_end: int | None
    standby_mirror_position: int | None
    active_mirror_position: int | None
    stable_for_s: float | None
    previous_offset: int | None
    new_offset: int | None
    committed_after: int | None
    dry_run: bool
    applied: bool
    error: str | None = None


COLUMNS = columns_of(FastForwardRow, "checked_at_ms")

#: A row that is a kept point (:func:`latest_points`), as SQL without parameters (a TTL needs it
#: literal). ``ifNull``: a NULL comparison must read as "not kept", never as unknown.
KEPT_POINT_SQL = (
    f"outcome IN ('{FAST_FORWARDED}', '{UNCHANGED}') AND NOT dry_run AND committed IS NOT NULL "
    "AND new_offset IS NOT NULL AND ifNull(committed_after = new_offset, 0)"
)
_RESORTING = f"{TABLE}__resorting"


def _sorting_key(client, table: str) -> list[str]:
    rows = client.query(
        "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        parameters={"t": table},
    ).result_rows
    return [c.strip() for c in rows[0][0].split(",")] if rows else []


def _resort_older_table(client) -> None:
    """Copy a table of an older layout into the current one (rows unchanged), then swap them.
    Fast-forward runs and sync cycles never overlap (one concurrency tag), so no insert races it;
    an interrupted copy is dropped and redone by the next call."""
    client.command(f"DROP TABLE IF EXISTS {_RESORTING}")
    client.command(DDL.replace(f"EXISTS {TABLE}\n", f"EXISTS {_RESORTING}\n", 1))
    names = ", ".join(COLUMNS)
    client.command(f"INSERT INTO {_RESORTING} ({names}) SELECT {names} FROM {TABLE}")
    client.command(f"EXCHANGE TABLES {TABLE} AND {_RESORTING}")
    client.command(f"DROP TABLE {_RESORTING}")


def ensure_table(client) -> None:
    client.command(DDL)
    if _sorting_key(client, TABLE)[:len(POINT_KEY)] != POINT_KEY:
        _resort_older_table(client)
    newest = [c for c in COLUMNS if c not in POINT_KEY and c != "checked_at"]
    ensure_ttl(client, TABLE, rollup_ttl("checked_at", clickhouse_retention().history_days, POINT_KEY, newest,
                                         where_kept=KEPT_POINT_SQL))
    ensure_upkeep(client, TABLE)


def insert_rows(client, rows: Iterable[FastForwardRow]) -> int:
    return insert_dataclass_rows(client, TABLE, rows, COLUMNS)


PointKey = tuple[str, str, int, str, str]  # group, topic, partition, active, standby


def latest_points(client) -> dict[PointKey, CaughtUpPoint]:
    """Per group-partition and direction, the newest fast-forward that left the standby at its
    offset (fast-forwarded or already there, not a dry run): the sync cycle's kept point."""
    rows = client.query(
        "SELECT group_id, topic, partition, active, standby, argMax(tuple(committed, new_offset), checked_at) "
        f"FROM {TABLE} WHERE {KEPT_POINT_SQL} GROUP BY group_id, topic, partition, active, standby",
    ).result_rows
    return {
        (group_id, topic, int(partition), active, standby): CaughtUpPoint(active, standby, int(c), int(t))
        for group_id, topic, partition, active, standby, (c, t) in rows
    }
