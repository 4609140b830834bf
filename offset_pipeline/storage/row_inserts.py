"""Appending dataclass rows to a table: the one insert path of the append-only tables whose rows
are dataclasses with one epoch-milliseconds time field (``offset_commits``, ``offset_fast_forwards``).

The ``*_ms`` field is stored as ``DateTime64(3, 'UTC')`` under the column name without ``_ms``;
values go through clickhouse-connect's column binding, never SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import astuple, fields
from datetime import datetime, timezone


def columns_of(row_type, time_field: str) -> list[str]:
    """The table's column names for ``row_type``: ``time_field`` (``..._ms``) named without ``_ms``."""
    return [f.name.removesuffix("_ms") if f.name == time_field else f.name for f in fields(row_type)]


def insert_dataclass_rows(client, table: str, rows: Iterable, columns: list[str], time_index: int) -> int:
    """Insert ``rows`` (dataclass instances in ``columns`` order); ``time_index``: the position of
    the epoch-milliseconds field. Returns how many were inserted."""
    data = []
    for row in rows:
        values = list(astuple(row))
        values[time_index] = datetime.fromtimestamp(values[time_index] / 1000.0, tz=timezone.utc)
        data.append(values)
    if data:
        client.insert(table, data, column_names=columns)
    return len(data)
