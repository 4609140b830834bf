"""The kept anchors the cycle reads come from ``offset_anchors_current`` (one row per key), and they
are exactly what the whole ``offset_anchors`` history says: the newest row of each key, unless that
row dropped the anchor (storage/translations.py).

Invariants checked here, on the real engine (chdb):

* ``latest_anchors`` equals the newest-row-per-key of every row ever inserted, whatever the order
  of the inserts, the batches and the merges (a row inserted late with an older ``kept_at`` never
  wins; a drop is never undone by an older anchor).
* A current table created next to an older ``offset_anchors`` starts with that table's current
  anchors, and is filled once.
* The current table does not grow with the history: after a merge it holds a row per key.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage import translations
from offset_pipeline.translation import Anchor

KEYS = [("g 'q'", "t", 0, "idc1", "idc2"), ("g 'q'", "t", 1, "idc1", "idc2"), ("g 'q'", "t", 0, "idc2", "idc1"),
        ("h\n", "u", 3, "idc1", "idc2")]


def _row(key: tuple, kept_at: int, offsets: tuple[int, int] | None) -> dict:
    group, topic, partition, active, standby = key
    a, s = offsets if offsets else (None, None)
    return {"group_id": group, "topic": topic, "partition": partition, "active": active, "standby": standby,
            "active_offset": a, "standby_offset": s, "snapshot_id": f"s{kept_at}", "kept_at": kept_at}


def _expected(rows: list[dict]) -> dict:
    """The reference: newest row per key by kept_at, drops left out (pure Python, no SQL)."""
    newest: dict = {}
    for row in rows:
        key = tuple(row[c] for c in translations.ANCHOR_KEY)
        if key not in newest or row["kept_at"] > newest[key]["kept_at"]:
            newest[key] = row
    return {
        key: Anchor(row["active"], row["standby"], row["active_offset"], row["standby_offset"])
        for key, row in newest.items() if row["active_offset"] is not None
    }


@pytest.fixture
def client(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    translations.ensure_tables(client)
    return client


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _count(client, table: str) -> int:
    return client.query(f"SELECT count() FROM {table}").result_rows[0][0]


anchor_rows = st.lists(
    st.tuples(
        st.sampled_from(KEYS),
        st.integers(min_value=1, max_value=10_000),  # kept_at, ms
        st.one_of(st.none(), st.tuples(st.integers(0, 10**12), st.integers(0, 10**12))),
    ),
    max_size=25,
    # one row per key and kept_at: a cycle keeps at most one anchor per key
    unique_by=lambda r: (r[0], r[1]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=anchor_rows, batch_cuts=st.lists(st.integers(0, 25), max_size=4), merge_after=st.integers(0, 5))
def test_latest_anchors_is_the_newest_row_of_each_key_in_the_whole_history(client, rows, batch_cuts, merge_after):
    client.command(f"TRUNCATE TABLE {translations.ANCHORS_TABLE}")
    client.command(f"TRUNCATE TABLE {translations.ANCHORS_CURRENT_TABLE}")
    dicts = [_row(key, kept_at, offsets) for key, kept_at, offsets in rows]
    cuts = sorted({0, len(dicts), *(c for c in batch_cuts if c <= len(dicts))})
    for n, (start, end) in enumerate(zip(cuts, cuts[1:])):
        translations.insert_anchors(client, dicts[start:end])  # each batch is a part of its own
        if n == merge_after:
            client.command(f"OPTIMIZE TABLE {translations.ANCHORS_CURRENT_TABLE} FINAL")
    assert translations.latest_anchors(client) == _expected(dicts)


def test_a_late_older_row_does_not_replace_a_newer_one_nor_undo_a_drop(client):
    key, other = KEYS[0], KEYS[1]
    translations.insert_anchors(client, [_row(key, 2000, (9, 4)), _row(other, 2000, None)])
    translations.insert_anchors(client, [_row(key, 1000, (3, 1)), _row(other, 1000, (5, 5))])  # replayed late
    assert translations.latest_anchors(client) == {key: Anchor("idc1", "idc2", 9, 4)}
    client.command(f"OPTIMIZE TABLE {translations.ANCHORS_CURRENT_TABLE} FINAL")
    assert translations.latest_anchors(client) == {key: Anchor("idc1", "idc2", 9, 4)}


def test_the_current_table_holds_a_row_per_key_however_long_the_history(client):
    start_ms = int(time.time() * 1000) - 86_400_000  # within the TTL: the history keeps every row
    rows = [_row(key, start_ms + cycle * 30_000, (cycle * 10, cycle * 7)) for cycle in range(1, 201) for key in KEYS]
    for start in range(0, len(rows), 40):  # one insert per cycle or so, as the sync does
        translations.insert_anchors(client, rows[start:start + 40])
    client.command(f"OPTIMIZE TABLE {translations.ANCHORS_CURRENT_TABLE} FINAL")
    assert _count(client, translations.ANCHORS_TABLE) == len(rows)
    assert _count(client, translations.ANCHORS_CURRENT_TABLE) == len(KEYS)
    assert translations.latest_anchors(client) == _expected(rows)


def test_a_current_table_created_next_to_an_older_history_starts_with_its_anchors(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    # an installation of the release before the current table: only offset_anchors, no view
    client.command(translations.ANCHORS_DDL)
    old = [_row(KEYS[0], 1000, (3, 1)), _row(KEYS[0], 2000, (9, 4)), _row(KEYS[1], 1000, (5, 5)),
           _row(KEYS[1], 2000, None), _row(KEYS[2], 500, None), _row(KEYS[2], 700, (1, 2))]
    client.insert(translations.ANCHORS_TABLE,
                  [[_utc(r[c]) if c == "kept_at" else r[c] for c in translations.ANCHOR_COLUMNS] for r in old],
                  column_names=translations.ANCHOR_COLUMNS)

    translations.ensure_tables(client)
    assert translations.latest_anchors(client) == _expected(old)
    filled = _count(client, translations.ANCHORS_CURRENT_TABLE)
    assert filled == 3  # one row per key, the drop of KEYS[1] included

    translations.ensure_tables(client)  # filled once: the comment says so
    assert _count(client, translations.ANCHORS_CURRENT_TABLE) == filled
    newer = [_row(KEYS[1], 3000, (7, 6))]
    translations.insert_anchors(client, newer)  # and from now on, by the view
    assert translations.latest_anchors(client) == _expected(old + newer)
