"""Appending dataclass rows to a table: the one insert path of the append-only tables whose rows
are dataclasses with epoch-milliseconds time fields (``offset_snapshots``, ``offset_commits``,
``offset_fast_forwards``, ``offset_sync_metrics``, ``offset_group_readiness``).

A ``*_ms`` field is stored as ``DateTime64(3, 'UTC')`` under the column name without ``_ms``;
values go through clickhouse-connect's column binding, never SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from operator import attrgetter


def columns_of(row_type, time_field: str) -> list[str]:
    """The table's column names for ``row_type``: ``time_field`` (``..._ms``) named without ``_ms``."""
    return [f.name.removesuffix("_ms") if f.name == time_field else f.name for f in fields(row_type)]


def column_values(rows: Iterable) -> list[list]:
    """The columns of ``rows`` (flat dataclass instances of one type), in field order: what a
    column-oriented insert takes. The epoch-milliseconds fields stay integers: a ``DateTime64(3)``
    column takes its ticks (milliseconds) as they are, so no datetime is made per row, and no
    row-to-column transposition is left to the client (both were most of a 100,000-row insert)."""
    rows = rows if isinstance(rows, list) else list(rows)
    if not rows:
        return []
    # one C-level map per field (a zip(*rows) transposition made a tuple per row: 4x slower at 100k)
    return [list(map(attrgetter(f.name), rows)) for f in fields(rows[0])]


def insert_dataclass_rows(client, table: str, rows: Iterable, columns: list[str]) -> int:
    """Insert ``rows`` (flat dataclass instances in ``columns`` order; their ``*_ms`` fields are
    epoch milliseconds, stored as ``DateTime64(3, 'UTC')``), column-oriented. Returns how many
    were inserted."""
    data = column_values(rows)
    if data:
        client.insert(table, data, column_names=columns, column_oriented=True)
    return len(data[0]) if data else 0
