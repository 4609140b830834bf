"""Appending dataclass rows to a table: the one insert path of the append-only tables whose rows
are dataclasses with one epoch-milliseconds time field (``offset_commits``, ``offset_fast_forwards``).

The ``*_ms`` field is stored as ``DateTime64(3, 'UTC')`` under the column name without ``_ms``;
values go through clickhouse-connect's column binding, never SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from datetime import datetime, timezone
from functools import lru_cache
from operator import attrgetter


def columns_of(row_type, time_field: str) -> list[str]:
    """The table's column names for ``row_type``: ``time_field`` (``..._ms``) named without ``_ms``."""
    return [f.name.removesuffix("_ms") if f.name == time_field else f.name for f in fields(row_type)]


@lru_cache(maxsize=None)
def field_values(row_type) -> attrgetter:
    """A getter of a flat dataclass's field values, as a tuple in field order (what
    ``dataclasses.astuple`` gives for scalar fields, without its recursive copy)."""
    return attrgetter(*(f.name for f in fields(row_type)))


def row_values(rows: Iterable, time_index: int) -> list[list]:
    """Each row's field values in field order (a flat dataclass: its fields hold scalars, so no
    ``dataclasses.astuple``, whose recursive copy was most of a 10,000-row insert's CPU), the
    epoch-milliseconds field at ``time_index`` as a UTC datetime (converted once per distinct value:
    a cycle's rows share one time)."""
    data = []
    times: dict[int, datetime] = {}
    for row in rows:
        values = list(field_values(type(row))(row))
        ms = values[time_index]
        at = times.get(ms)
        if at is None:
            at = times[ms] = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
        values[time_index] = at
        data.append(values)
    return data


def insert_dataclass_rows(client, table: str, rows: Iterable, columns: list[str], time_index: int) -> int:
    """Insert ``rows`` (flat dataclass instances in ``columns`` order); ``time_index``: the position
    of the epoch-milliseconds field. Returns how many were inserted."""
    data = row_values(rows, time_index)
    if data:
        client.insert(table, data, column_names=columns)
    return len(data)
