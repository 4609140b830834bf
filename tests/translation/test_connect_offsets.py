"""MirrorMaker 2's source offsets decoded from Connect's offsets topic (translation/connect_offsets.py):
the bytes Kafka Connect 4.2 writes (written out by hand here), a table of every malformed shape, the
fold into positions, and round trips (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.translation.connect_offsets import (
    ConnectOffsetProblem,
    MirrorSourceOffset,
    decode_connect_offset,
    encode_connect_offset,
    positions_from_offsets,
)

# As Connect's JsonConverter (schemas off) writes them: the key [connector, partition map], the value a map.
KEY = b'["MirrorSourceConnector",{"cluster":"idc1","partition":3,"topic":"orders"}]'


def test_the_bytes_connect_writes():
    decoded = decode_connect_offset(KEY, b'{"offset":41}')
    assert decoded == MirrorSourceOffset("MirrorSourceConnector", "idc1", "orders", 3, 41)
    assert decoded.position == 42  # the last copied record is 41: every record below 42 is copied


def test_a_null_value_is_a_tombstone():
    for value in (None, b"null"):
        decoded = decode_connect_offset(KEY, value)
        assert decoded == MirrorSourceOffset("MirrorSourceConnector", "idc1", "orders", 3, None)
        assert decoded.position is None


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (None, b'{"offset":1}', ConnectOffsetProblem.KEY_MISSING),
        (b"\xff\xfe", b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_JSON),
        (b'["c",{"cluster":"a","topic":"t","partition":0}', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_JSON),
        (b'["c",NaN]', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_JSON),
        (b"[" * 100_000, b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_JSON),  # too deep: no RecursionError out
        (b'{"cluster":"a","topic":"t","partition":0}', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_A_PAIR),
        (b'["c"]', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_A_PAIR),
        (b'[1,{"cluster":"a","topic":"t","partition":0}]', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_A_PAIR),
        (b'["c",["a","t",0]]', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_A_PAIR),
        (b'["c",{"cluster":"a","topic":"t","partition":0},1]', b'{"offset":1}', ConnectOffsetProblem.KEY_NOT_A_PAIR),
        # the checkpoint and heartbeat connectors' partitions, and any other connector's
        (b'["MirrorCheckpointConnector",{"group":"g","topic":"t","partition":0}]', b'{"offset":0}',
         ConnectOffsetProblem.NOT_A_MIRROR_PARTITION),
        (b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"a","targetClusterAlias":"b"}]', b'{"offset":0}',
         ConnectOffsetProblem.NOT_A_MIRROR_PARTITION),
        (b'["c",{"cluster":"a","topic":"t","partition":-1}]', b'{"offset":1}', ConnectOffsetProblem.BAD_PARTITION),
        (b'["c",{"cluster":"a","topic":"t","partition":1.0}]', b'{"offset":1}', ConnectOffsetProblem.BAD_PARTITION),
        (b'["c",{"cluster":"a","topic":"t","partition":"1"}]', b'{"offset":1}', ConnectOffsetProblem.BAD_PARTITION),
        (b'["c",{"cluster":"a","topic":"t","partition":true}]', b'{"offset":1}', ConnectOffsetProblem.BAD_PARTITION),
        (b'["c",{"cluster":"","topic":"t","partition":0}]', b'{"offset":1}', ConnectOffsetProblem.BAD_PARTITION),
        (b'["c",{"cluster":"a","topic":7,"partition":0}]', b'{"offset":1}', ConnectOffsetProblem.BAD_PARTITION),
        (KEY, b"\x00", ConnectOffsetProblem.VALUE_NOT_JSON),
        (KEY, b'{"offset":Infinity}', ConnectOffsetProblem.VALUE_NOT_JSON),
        (KEY, b"41", ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
        (KEY, b"{}", ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
        (KEY, b'{"offset":-1}', ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
        (KEY, b'{"offset":41.5}', ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
        (KEY, b'{"offset":"41"}', ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
        (KEY, b'{"offset":true}', ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
        (KEY, b'{"offset":null}', ConnectOffsetProblem.VALUE_NOT_AN_OFFSET),
    ],
)
def test_every_malformed_record_is_named(key, value, problem):
    assert decode_connect_offset(key, value) is problem


@given(st.one_of(st.none(), st.binary(max_size=64)), st.one_of(st.none(), st.binary(max_size=64)))
def test_never_raises(key, value):
    assert isinstance(decode_connect_offset(key, value), (MirrorSourceOffset, ConnectOffsetProblem))


offsets = st.builds(
    MirrorSourceOffset,
    connector=st.text(max_size=20),
    cluster=st.text(min_size=1, max_size=10),
    topic=st.text(min_size=1, max_size=20),
    partition=st.integers(0, 2**31 - 1),
    offset=st.one_of(st.none(), st.integers(0, 2**63 - 1)),
)


@given(offsets)
def test_round_trip(record):
    assert decode_connect_offset(*encode_connect_offset(record)) == record


def r(connector: str, cluster: str, partition: int, offset: int | None, topic: str = "t") -> MirrorSourceOffset:
    return MirrorSourceOffset(connector, cluster, topic, partition, offset)


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([], {}),
        ([r("c", "a", 0, 9)], {("t", 0): 10}),
        ([r("c", "a", 0, 4), r("c", "a", 0, 9)], {("t", 0): 10}),  # last write wins
        ([r("c", "a", 0, 9), r("c", "a", 0, 4)], {("t", 0): 5}),  # even lower: an operator's reset
        ([r("c", "a", 0, 9), r("c", "a", 0, None)], {}),  # a tombstone deletes
        ([r("c", "a", 0, None), r("c", "a", 0, 2)], {("t", 0): 3}),  # ... and a later write is back
        ([r("c", "b", 0, 9)], {}),  # another source alias's flow
        ([r("c", "a", 0, 9), r("c", "a", 1, 2), r("c", "b", 1, 7)], {("t", 0): 10, ("t", 1): 3}),
        ([r("old", "a", 0, 3), r("new", "a", 0, 9)], {("t", 0): 4}),  # two connectors: the lowest
        ([r("old", "a", 0, 3), r("new", "a", 0, 9), r("old", "a", 0, None)], {("t", 0): 10}),
    ],
)
def test_positions_from_offsets(records, expected):
    assert positions_from_offsets(records, "a") == expected


@given(st.lists(st.tuples(st.sampled_from(["c1", "c2"]), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 50)))))
def test_a_position_is_one_past_some_connectors_newest_offset(writes):
    records = [r(c, "a", p, o) for c, p, o in writes]
    positions = positions_from_offsets(records, "a")
    newest = {}
    for c, p, o in writes:
        newest[(c, p)] = o
    for (_, p), position in positions.items():
        live = [o for (c, q), o in newest.items() if q == p and o is not None]
        assert position == min(live) + 1
    assert {p for (_, p) in positions} == {p for (c, p), o in newest.items() if o is not None}
