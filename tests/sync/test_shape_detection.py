"""shape_detection (pure): which topics are sampled per cycle, and the verdicts from the evidence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.sync.shape_detection import detect_shapes, partition_to_sample, topics_to_sample
from offset_pipeline.translation.shape import HeaderObservation, ShapeKind, ShapeSource

CLUSTERS = ("idc1", "idc2")


def test_never_sampled_topics_first_then_the_least_recently_sampled_within_the_limit():
    last = {"b": 500, "c": 100, "d": 900}
    assert topics_to_sample(["d", "c", "b", "z", "a"], last, 3) == ["a", "z", "c"]
    assert topics_to_sample(["d", "c", "b"], last, 10) == ["c", "b", "d"]
    assert topics_to_sample(["a"], {}, 0) == []
    with pytest.raises(ValueError):
        topics_to_sample(["a"], {}, -1)


def test_the_sampled_partition_is_one_of_them_and_rotates_with_the_cycle():
    seen = {partition_to_sample([0, 1, 2, 3], f"run-{i}") for i in range(40)}
    assert seen == {0, 1, 2, 3}
    assert partition_to_sample({5}, "x") == 5
    assert partition_to_sample([3, 1], "same") == partition_to_sample([1, 3], "same")  # order-free
    with pytest.raises(ValueError):
        partition_to_sample([], "x")


def obs(cluster, local=0, copies=0, malformed=0):
    return HeaderObservation(cluster, local, copies, malformed)


CASES = [
    # (name, idc1 evidence, idc2 evidence, expected shape value)
    ("local on idc1, copies on idc2: one-way idc1", obs("idc1", local=30), obs("idc2", copies=30), "one_way:idc1"),
    ("the reverse: one-way idc2", obs("idc1", copies=25), obs("idc2", local=25), "one_way:idc2"),
    ("local records on both: two-way", obs("idc1", local=30, copies=5), obs("idc2", local=1, copies=30), "two_way"),
    ("copies of idc2 on idc1 make idc2 a producer", obs("idc1", local=30, copies=1), obs("idc2", copies=30), "two_way"),
    ("a header the mirror never writes on idc2: produced there", obs("idc1", local=30), obs("idc2", copies=29, malformed=1),
     "two_way"),
    ("too little evidence on idc2", obs("idc1", local=30), obs("idc2", copies=19), "unknown"),
    ("no evidence at all", None, None, "unknown"),
]


@pytest.mark.parametrize("name, first, second, expected", CASES, ids=[c[0] for c in CASES])
def test_verdicts_from_the_evidence(name, first, second, expected):
    evidence = {k: v for k, v in ((("t", "idc1"), first), (("t", "idc2"), second)) if v is not None}
    (shape,) = detect_shapes(["t"], CLUSTERS, evidence).values()
    assert shape.value == expected, shape.reason
    assert shape.source is (ShapeSource.DEFAULT if expected == "unknown" else ShapeSource.DETECTED)


counts = st.integers(0, 60)


@given(counts, counts, counts, counts, counts, counts)
def test_a_cluster_with_a_record_produced_on_it_is_never_the_copying_side(l1, c1, m1, l2, c2, m2):
    evidence = {("t", "idc1"): obs("idc1", l1, c1, m1), ("t", "idc2"): obs("idc2", l2, c2, m2)}
    shape = detect_shapes(["t"], CLUSTERS, evidence)["t"]
    idc1_produced = l1 + m1 > 0 or c2 > 0
    idc2_produced = l2 + m2 > 0 or c1 > 0
    if shape.kind is ShapeKind.ONE_WAY:
        copying = "idc2" if shape.producer == "idc1" else "idc1"
        assert not (idc1_produced if copying == "idc1" else idc2_produced)
        assert l1 + c1 + m1 >= 20 and l2 + c2 + m2 >= 20
    if idc1_produced and idc2_produced:
        assert shape.kind is ShapeKind.TWO_WAY
