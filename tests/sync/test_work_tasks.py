"""sync/spark_translation.py task_rows and the payloads: how the driver spreads a cycle's work over
the Spark tasks (whole Kafka partitions per task, the deferred ones first, balanced), and the
Arrow IPC payloads in and out of a task on a real local Spark."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.sync.spark_translation import (
    PARTITION_KEY,
    RESULT_COLUMNS,
    collected_rows,
    ipc_payload,
    ipc_table,
    task_rows,
    translate_groups,
    work_tasks,
)
from offset_pipeline.translation import TranslationStatus


def key(row: dict) -> tuple:
    return tuple(row[k] for k in PARTITION_KEY)


def work_row(i: int, topic: str, partition: int, active: str = "idc1", standby: str = "idc2") -> dict:
    return {
        "group_id": f"g-{i} \"q\" ü", "topic": topic, "partition": partition, "active": active, "standby": standby,
        "committed": 10 + i, "standby_committed": None, "active_log_start": 0, "active_log_end": 100,
        "standby_log_start": 0, "standby_log_end": 100, "anchor_active_offset": 3, "anchor_standby_offset": 4,
        "shape": "two_way", "standby_timestamp_type": None, "shape_source": None,
        "ff_active_offset": None, "ff_standby_offset": None,
    }


rows_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c.d"]), st.integers(0, 7), st.sampled_from([("idc1", "idc2"), ("idc2", "idc1")])),
    max_size=80,
).map(lambda specs: [work_row(i, t, p, *d) for i, (t, p, d) in enumerate(specs)])


@settings(max_examples=200, deadline=None)
@given(rows=rows_strategy, tasks=st.integers(1, 6), salt=st.text(max_size=8), first_share=st.integers(0, 4))
def test_every_row_in_one_task_keys_whole_first_keys_first_and_balanced(rows, tasks, salt, first_share):
    keys = list(dict.fromkeys(key(r) for r in rows))
    first = set(keys[::first_share]) if first_share else set()
    parts = task_rows(rows, tasks, salt=salt, first_keys=first)

    assert sorted(map(id, (r for part in parts for r in part))) == sorted(map(id, rows))  # each row once
    assert len(parts) == min(tasks, len(keys)) and all(parts)
    task_of = {}
    for i, part in enumerate(parts):
        for r in part:
            assert task_of.setdefault(key(r), i) == i  # a key's rows in one task
        in_order = [key(r) for r in part]
        seen_other = False
        for k in dict.fromkeys(in_order):
            if k not in first:
                seen_other = True
            assert not (k in first and seen_other), "a first key after another key"
        for k in dict.fromkeys(in_order):  # a key's rows keep their given order
            assert [r for r in part if key(r) == k] == [r for r in rows if key(r) == k]
    sizes = Counter(key(r) for r in rows)
    loads = [len(part) for part in parts]
    # Greedy to the least loaded: no task exceeds another by more than its own largest key.
    for i, part in enumerate(parts):
        largest = max(sizes[key(r)] for r in part)
        assert loads[i] - min(loads) <= largest


def test_the_salt_moves_keys_between_tasks_and_is_deterministic():
    rows = [work_row(i, f"t{i % 10}", i % 4) for i in range(40)]
    assign = lambda salt: {key(r): i for i, part in enumerate(task_rows(rows, 4, salt=salt)) for r in part}  # noqa: E731
    assert assign("cycle-1") == assign("cycle-1")
    assert len({tuple(sorted(assign(f"cycle-{n}").items())) for n in range(5)}) > 1


def test_a_bad_task_count_is_refused():
    with pytest.raises(ValueError, match="tasks must be positive"):
        task_rows([work_row(0, "t", 0)], 0)


def test_a_payload_keeps_every_value_and_type():
    import pyarrow as pa

    table = pa.table({"group_id": ["g \"q\" ü", None], "partition": pa.array([1, None], pa.int32()),
                      "committed": pa.array([2**62, None], pa.int64())})
    assert ipc_table(ipc_payload(table)).equals(table)


def test_rows_without_client_configuration_come_back_one_each_through_local_spark():
    """The whole way on a real local Spark (work payloads in, result payloads out): every work row
    gives one result row, named, and no Kafka is needed to prove it (no client configuration)."""
    from offset_pipeline.resources.spark import get_spark_session

    spark = get_spark_session()  # local[*], as the assets
    rows = [work_row(i, f"t{i % 7}", i % 3) for i in range(60)]
    out = collected_rows(translate_groups(work_tasks(spark, rows, 4, salt="s"), {}, snapshot_id="s-1",
                                          cycle_time_ms=5))
    assert len(out) == len(rows)
    assert all(set(r) == set(RESULT_COLUMNS) for r in out)
    assert sorted((r["group_id"], r["topic"], r["partition"]) for r in out) == sorted(
        (r["group_id"], r["topic"], r["partition"]) for r in rows)
    assert {r["status"] for r in out} == {TranslationStatus.CLUSTER_UNAVAILABLE.value}
    assert all(r["snapshot_id"] == "s-1" and r["cycle_time"] == 5 for r in out)
    # the kept anchor survives the outage (untranslated_rows)
    assert all((r["keep_active_offset"], r["keep_standby_offset"]) == (3, 4) for r in out)
