"""Topic shape: configured wins; detection is conservative (unknown is treated as two-way)."""

from __future__ import annotations

import pytest

from offset_pipeline.translation import (
    CopiedFrom,
    HeaderObservation,
    LOCAL,
    MalformedHeader,
    ShapeKind,
    ShapeSource,
    TopicShape,
    decide_shape,
    parse_shape,
)
from offset_pipeline.translation.headers import HeaderProblem
from devstack.two_cluster_model import TwoClusterModel


def obs(cluster, local=0, copies=0, malformed=0):
    return HeaderObservation(cluster, local, copies, malformed)


@pytest.mark.parametrize(
    ("first", "second", "kind", "producer"),
    [
        (obs("idc1", local=30), obs("idc2", copies=30), ShapeKind.ONE_WAY, "idc1"),
        (obs("idc1", copies=25), obs("idc2", local=25), ShapeKind.ONE_WAY, "idc2"),
        (obs("idc1", local=30, malformed=2), obs("idc2", copies=32), ShapeKind.ONE_WAY, "idc1"),
        (obs("idc1", local=30), obs("idc2", copies=29, local=1), ShapeKind.TWO_WAY, None),
        (obs("idc1", local=30, copies=1), obs("idc2", copies=30), ShapeKind.TWO_WAY, None),
        (obs("idc1", local=30), obs("idc2", copies=29, malformed=1), ShapeKind.TWO_WAY, None),
        (obs("idc1", local=1), obs("idc2", local=1), ShapeKind.TWO_WAY, None),
        (obs("idc1", local=30), obs("idc2", copies=5), ShapeKind.UNKNOWN, None),
        (obs("idc1", local=3), obs("idc2", copies=30), ShapeKind.UNKNOWN, None),
        (obs("idc1"), obs("idc2"), ShapeKind.UNKNOWN, None),
    ],
)
def test_detection(first, second, kind, producer):
    shape = decide_shape(first, second)
    assert (shape.kind, shape.producer) == (kind, producer)
    assert shape.reason
    assert shape.source is (ShapeSource.DEFAULT if kind is ShapeKind.UNKNOWN else ShapeSource.DETECTED)


def test_configured_wins():
    shape = decide_shape(obs("idc1", local=30), obs("idc2", local=30), TopicShape.one_way("idc1"))
    assert (shape.kind, shape.producer, shape.source) == (ShapeKind.ONE_WAY, "idc1", ShapeSource.CONFIGURED)


def test_min_evidence_is_configurable():
    assert decide_shape(obs("idc1", local=3), obs("idc2", copies=3), min_evidence=3).kind is ShapeKind.ONE_WAY


def test_timestamp_search_only_from_the_producing_side():
    one_way = TopicShape.one_way("idc1")
    assert one_way.allows_timestamp_search("idc1")
    assert not one_way.allows_timestamp_search("idc2")
    assert one_way.produced_only_on("idc1")
    for shape in (TopicShape.two_way(), TopicShape.unknown()):
        assert not shape.allows_timestamp_search("idc1")
        assert not shape.allows_timestamp_search("idc2")


def test_values_for_storage():
    assert TopicShape.one_way("idc2").value == "one_way:idc2"
    assert TopicShape.two_way().value == "two_way"
    assert TopicShape.unknown().value == "unknown"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("two_way", TopicShape.two_way()), ("50:50", TopicShape.two_way()), ("one_way:idc1", TopicShape.one_way("idc1")),
     ("", None), (None, None)],
)
def test_parse_shape(text, expected):
    assert parse_shape(text) == expected


@pytest.mark.parametrize("text", ["100:0", "one_way", "one_way:", "sideways"])
def test_parse_shape_rejects(text):
    with pytest.raises(ValueError):
        parse_shape(text)


def test_one_way_needs_a_producer():
    with pytest.raises(ValueError):
        TopicShape(ShapeKind.ONE_WAY)
    with pytest.raises(ValueError):
        TopicShape(ShapeKind.TWO_WAY, "idc1")


def test_observation_from_origins_and_sum():
    origins = [LOCAL, LOCAL, CopiedFrom("idc2", 3), MalformedHeader(HeaderProblem.THIRD_CLUSTER)]
    seen = HeaderObservation.from_origins("idc1", origins)
    assert (seen.local, seen.copies_from_peer, seen.malformed, seen.total) == (2, 1, 1, 4)
    assert (seen + seen).total == 8
    with pytest.raises(ValueError):
        seen + obs("idc2")


def test_detection_from_model_logs():
    one_way = TwoClusterModel.from_notation([f"a{i}" for i in range(25)], [f"a{i}'" for i in range(25)])
    assert decide_shape(one_way.observation("idc1"), one_way.observation("idc2")) == TopicShape.one_way(
        "idc1", source=ShapeSource.DETECTED, reason=decide_shape(one_way.observation("idc1"), one_way.observation("idc2")).reason
    )
    crossing = TwoClusterModel.from_notation(
        [f"a{i}" for i in range(25)] + ["b0'"], ["b0"] + [f"a{i}'" for i in range(25)]
    )
    assert decide_shape(crossing.observation("idc1"), crossing.observation("idc2")).kind is ShapeKind.TWO_WAY
