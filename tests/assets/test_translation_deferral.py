"""A cycle's read budget (no partition starves the others): past it, the partitions not read are
``translation_deferred`` with their anchors kept, and the next cycle reads them first.

The rules run without Kafka (a work row naming a cluster without client configuration is "read"
at once and comes back ``cluster_unavailable``: it shows which keys were attempted); the table runs
on the embedded ClickHouse engine; the whole cycle on real brokers is in tests/assets/test_outages.py.
"""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.assets.translation import is_routine_translation
from offset_pipeline.sync.translation_step import read_window_s
from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.sync.spark_translation import PARTITION_KEY, translate_keyed_rows
from offset_pipeline.storage import deferrals

DEFERRED, ATTEMPTED = "translation_deferred", "cluster_unavailable"


def work_row(group: str, partition: int, anchor: tuple[int, int] | None = None) -> dict:
    return {
        "group_id": group, "topic": "t", "partition": partition, "active": "idc1", "standby": "idc2",
        "committed": 7, "standby_committed": 3, "active_log_start": 0, "active_log_end": 10,
        "standby_log_start": 0, "standby_log_end": 10,
        "anchor_active_offset": anchor[0] if anchor else None, "anchor_standby_offset": anchor[1] if anchor else None,
        "shape": "two_way",
    }


def by_key(rows: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for row in rows:
        out.setdefault(tuple(row[k] for k in PARTITION_KEY), []).append(row)
    return out


def ticking(deadline_after: int):
    """A clock at 0, 1, 2, ...: with ``read_until=deadline_after`` exactly that many keys are read."""
    counter = itertools.count()
    return lambda: float(next(counter)), float(deadline_after)


def run(keys: dict, reads: int | None, first=frozenset(), threads: int = 1, batch_keys: int = 1) -> list[dict]:
    clock, until = ticking(reads if reads is not None else 0)
    return [row for rows in translate_keyed_rows(
        keys, {}, snapshot_id="s", cycle_time_ms=0, read_until=until if reads is not None else None,
        first_keys=frozenset(first), clock=clock, threads=threads, batch_keys=batch_keys,
    ) for row in rows]


@pytest.mark.parametrize("batch_keys", [1, 4])
@pytest.mark.parametrize("reads", [None, 0, 1, 3, 6])
def test_keys_read_at_once_each_give_one_row_and_stop_at_the_budget(reads, batch_keys):
    # Threads start keys (or batches of keys) in a racy order; what holds: one result row per work
    # row, in the work's key order, and exactly as many keys read as the budget allows (each key
    # asks the clock once, when its batch starts).
    keys = by_key([work_row(g, p) for p in range(6) for g in ("a", "b")])
    out = run(keys, reads, threads=4, batch_keys=batch_keys)
    assert [(r["partition"], r["group_id"]) for r in out] == [(p, g) for p in range(6) for g in ("a", "b")]
    attempted = {r["partition"] for r in out if r["status"] == ATTEMPTED}
    assert {r["partition"] for r in out if r["status"] == DEFERRED} == set(range(6)) - attempted
    assert len(attempted) == (6 if reads is None else min(reads, 6))


def key_of(partition: int) -> tuple:
    return ("t", partition, "idc1", "idc2")


@pytest.mark.parametrize(
    ("reads", "first", "attempted"),
    [
        (None, (), {0, 1, 2}),  # no budget: everything read
        (3, (), {0, 1, 2}),  # the budget lasts
        (0, (), set()),  # spent before the first key
        (1, (), {0}),  # keys in their given order
        (1, (2,), {2}),  # the last cycle's leftover first
        (2, (2, 1), {1, 2}),  # several leftovers, all before the rest
        (1, (9,), {0}),  # a leftover not in this task's work changes nothing
    ],
)
def test_the_budget_reads_leftovers_first_and_defers_the_rest(reads, first, attempted):
    out = run(by_key([work_row("g", p) for p in range(3)]), reads, {key_of(p) for p in first})
    assert {r["partition"]: r["status"] for r in out} == {
        p: ATTEMPTED if p in attempted else DEFERRED for p in range(3)
    }


def test_a_deferred_row_keeps_its_anchor_commits_nothing_names_the_budget_and_is_said_once():
    out = run(by_key([work_row("g", 0, anchor=(5, 2))]), reads=0)
    (row,) = out
    assert row["status"] == DEFERRED and row["standby_offset"] is None and row["safe_bound"] is None
    assert (row["keep_active_offset"], row["keep_standby_offset"]) == (5, 2)
    assert "OFFSET_PIPELINE_TRANSLATION_BUDGET_S" in row["reason"] and "t[0]" in row["reason"]
    assert is_routine_translation(row)  # said once by the step's warning and check, not per row


@given(
    partitions=st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["a", "b", "c"])), max_size=20),
    reads=st.one_of(st.none(), st.integers(0, 8)),
    first=st.sets(st.integers(0, 8)),
    batch_keys=st.sampled_from([1, 2, 3, 64]),
)
def test_every_row_gives_one_result_and_no_key_is_read_after_the_deadline(partitions, reads, first, batch_keys):
    rows = [work_row(g, p) for p, g in partitions]
    keys = by_key(rows)
    out = run(keys, reads, {key_of(p) for p in first}, batch_keys=batch_keys)
    assert sorted((r["group_id"], r["partition"]) for r in out) == sorted((g, p) for p, g in partitions)
    attempted = {r["partition"] for r in out if r["status"] == ATTEMPTED}
    assert len(attempted) == (len(keys) if reads is None else min(reads, len(keys)))
    # a leftover is never deferred while a key that was not one is read
    leftovers = {k[1] for k in keys} & first
    if attempted - leftovers:
        assert leftovers <= attempted
    # all rows of a key share its fate
    for key, key_rows in keys.items():
        assert len({r["status"] for r in out if r["partition"] == key[1]}) == 1


@pytest.mark.parametrize(
    ("budget", "bound", "kafka", "window"),
    [
        (60, 120, 10, 60),  # the defaults: the budget
        (200, 120, 10, 90),  # a budget past the bound leaves three Kafka timeouts under it
        (60, 40, 10, 20),  # a small bound: never below half of it
        (5, 120, 10, 5),
    ],
)
def test_the_read_window_stays_under_the_spark_bound(budget, bound, kafka, window):
    assert read_window_s(budget, bound, kafka) == window


def test_deferrals_are_kept_per_cycle_and_read_back_by_key(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    deferrals.ensure_table(client)
    keys = {("t 'q'", 0, "idc1", "idc2"), ("t 'q'", 3, "idc2", "idc1")}
    now_ms = int(time.time() * 1000)  # rows of long ago would be gone by the table's one-day TTL
    assert deferrals.insert_deferred(client, "s1", now_ms, keys) == 2
    assert deferrals.insert_deferred(client, "s2", now_ms + 1, set()) == 0
    assert deferrals.deferred_by(client, "s1") == keys
    assert deferrals.deferred_by(client, "s2") == set()
    assert deferrals.deferred_by(client, None) == set()
