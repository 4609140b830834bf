"""build_snapshot_rows: what could not be read is said on its rows, never guessed."""

from __future__ import annotations

from offset_pipeline.kafka_io.group_offsets import GroupState, PartitionRange
from offset_pipeline.sync.snapshot_rows import build_snapshot_rows

G, H = "g ü", 'h "q"'


def ranges(cluster, *tps):
    return [PartitionRange(cluster, t, p, 0, 10, 10) for t, p in tps]


def by_key(rows):
    return {(r.cluster, r.group_id, r.partition): r for r in rows}


def test_an_unavailable_cluster_gets_unavailable_rows_for_every_group_seen_on_the_other():
    groups = {"idc1": [GroupState("idc1", G, "STABLE", 1, {("t", 0): 4, ("t", 1): 2})], "idc2": []}
    rows = by_key(build_snapshot_rows(
        "s", 1, groups, {"idc1": ranges("idc1", ("t", 0), ("t", 1))}, unavailable={"idc2": "refused"},
    ))
    assert {k: (r.group_state, r.read_error, r.committed_offset, r.log_end) for k, r in rows.items()} == {
        ("idc1", G, 0): ("STABLE", "", 4, 10),
        ("idc1", G, 1): ("STABLE", "", 2, 10),
        ("idc2", G, 0): ("UNAVAILABLE", "refused", None, None),
        ("idc2", G, 1): ("UNAVAILABLE", "refused", None, None),
    }


def test_an_unreadable_group_and_an_unreadable_partition_stay_on_their_own_rows():
    groups = {
        "idc1": [GroupState("idc1", G, "STABLE", 1, {("t", 0): 4, ("t", 1): 2}),
                 GroupState("idc1", H, "STABLE", 1, {("t", 0): 7})],
        "idc2": [GroupState("idc2", G, "UNREADABLE", 0, {}, read_error="timed out"),
                 GroupState("idc2", H, "EMPTY", 0, {("t", 0): 7})],
    }
    rows = by_key(build_snapshot_rows(
        "s", 1, groups, {"idc1": ranges("idc1", ("t", 0), ("t", 1)), "idc2": ranges("idc2", ("t", 0))},
        range_errors={"idc2": {("t", 1): "leader not available"}},
    ))
    errors = {k: r.read_error for k, r in rows.items() if r.read_error}
    assert errors == {
        ("idc2", G, 0): "timed out",
        ("idc2", G, 1): "timed out",  # the group's error wins: its whole state there is unknown
    }
    assert rows[("idc2", H, 0)].read_error == "" and rows[("idc2", H, 0)].committed_offset == 7
    # H does not involve partition 1; G's partition 1 range error is hidden by the group error above,
    # so check a group that reads fine on a partition whose range failed:
    groups["idc2"][0] = GroupState("idc2", G, "EMPTY", 0, {("t", 0): 3})
    rows = by_key(build_snapshot_rows(
        "s", 1, groups, {"idc1": ranges("idc1", ("t", 0), ("t", 1)), "idc2": ranges("idc2", ("t", 0))},
        range_errors={"idc2": {("t", 1): "leader not available"}},
    ))
    assert {k: r.read_error for k, r in rows.items() if r.read_error} == {("idc2", G, 1): "leader not available"}
    assert rows[("idc2", G, 1)].topic_present is False and rows[("idc2", G, 1)].log_end is None
