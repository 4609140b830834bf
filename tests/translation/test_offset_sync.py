"""MirrorMaker 2's offset-sync records decoded (translation/offset_sync.py): hand-made bytes, a table
of every malformed shape, and round trips of bytes laid out here from the documented format (a
big-endian int16 length + UTF-8 topic + int32 partition; int64 upstream + int64 downstream)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.translation.offset_sync import (
    OffsetSync,
    OffsetSyncProblem,
    decode_offset_sync,
    offset_syncs_topic,
)


def key_bytes(topic: bytes, partition: int, *, length: int | None = None) -> bytes:
    return struct.pack(">h", len(topic) if length is None else length) + topic + struct.pack(">i", partition)


def value_bytes(upstream: int, downstream: int) -> bytes:
    return struct.pack(">q", upstream) + struct.pack(">q", downstream)


def test_a_hand_made_record():
    key = b"\x00\x06orders\x00\x00\x00\x03"
    value = b"\x00\x00\x00\x00\x00\x00\x00\x2a" + b"\x00\x00\x00\x00\x00\x00\x01\x00"
    assert decode_offset_sync(key, value) == OffsetSync("orders", 3, 42, 256)


def test_an_empty_topic_name_and_zero_offsets_are_a_pair():
    assert decode_offset_sync(b"\x00\x00\x00\x00\x00\x00", bytes(16)) == OffsetSync("", 0, 0, 0)


GOOD_KEY = key_bytes(b"t", 0)
GOOD_VALUE = value_bytes(1, 2)


@pytest.mark.parametrize(
    "key, value, problem",
    [
        (None, GOOD_VALUE, OffsetSyncProblem.KEY_MISSING),
        (b"", GOOD_VALUE, OffsetSyncProblem.KEY_TOO_SHORT),
        (b"\x00", GOOD_VALUE, OffsetSyncProblem.KEY_TOO_SHORT),
        (b"\x00\x05abc", GOOD_VALUE, OffsetSyncProblem.KEY_TOO_SHORT),  # string cut
        (key_bytes(b"abc", 1)[:-1], GOOD_VALUE, OffsetSyncProblem.KEY_TOO_SHORT),  # partition cut
        (key_bytes(b"abc", 1) + b"\x00", GOOD_VALUE, OffsetSyncProblem.KEY_TOO_LONG),
        (key_bytes(b"abc", 1, length=2), GOOD_VALUE, OffsetSyncProblem.KEY_TOO_LONG),  # length too small
        (key_bytes(b"abc", 1, length=-1), GOOD_VALUE, OffsetSyncProblem.NEGATIVE_TOPIC_LENGTH),
        (key_bytes(b"", 1, length=-32768), GOOD_VALUE, OffsetSyncProblem.NEGATIVE_TOPIC_LENGTH),
        (key_bytes(b"\xff\xfe", 1), GOOD_VALUE, OffsetSyncProblem.TOPIC_NOT_UTF8),
        (key_bytes(b"\xc3", 1), GOOD_VALUE, OffsetSyncProblem.TOPIC_NOT_UTF8),  # a cut two-byte sequence
        (key_bytes(b"\xed\xa0\x80", 1), GOOD_VALUE, OffsetSyncProblem.TOPIC_NOT_UTF8),  # a surrogate
        (key_bytes(b"t", -1), GOOD_VALUE, OffsetSyncProblem.NEGATIVE_PARTITION),
        (GOOD_KEY, None, OffsetSyncProblem.TOMBSTONE),
        (GOOD_KEY, b"", OffsetSyncProblem.VALUE_TOO_SHORT),
        (GOOD_KEY, GOOD_VALUE[:15], OffsetSyncProblem.VALUE_TOO_SHORT),
        (GOOD_KEY, GOOD_VALUE + b"\x00", OffsetSyncProblem.VALUE_TOO_LONG),
        (GOOD_KEY, value_bytes(-1, 2), OffsetSyncProblem.NEGATIVE_OFFSET),
        (GOOD_KEY, value_bytes(1, -2), OffsetSyncProblem.NEGATIVE_OFFSET),
        (GOOD_KEY, value_bytes(-(2**63), 0), OffsetSyncProblem.NEGATIVE_OFFSET),
        (None, None, OffsetSyncProblem.KEY_MISSING),  # the key's problem is named first
        (b"\x00", None, OffsetSyncProblem.KEY_TOO_SHORT),
    ],
)
def test_malformed_records_are_named_problems(key, value, problem):
    assert decode_offset_sync(key, value) is problem


def test_the_topic_name_follows_the_other_cluster():
    assert offset_syncs_topic("east", "west") == "mm2-offset-syncs.west.internal"
    assert offset_syncs_topic("east", "west", on_target=True) == "mm2-offset-syncs.east.internal"


_topics = st.text(max_size=60).filter(lambda s: len(s.encode("utf-8")) <= 32767)
_offsets = st.integers(0, 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(_topics, st.integers(0, 2**31 - 1), _offsets, _offsets)
def test_round_trip_of_the_documented_layout(topic, partition, upstream, downstream):
    key = key_bytes(topic.encode("utf-8"), partition)
    assert decode_offset_sync(key, value_bytes(upstream, downstream)) == OffsetSync(topic, partition, upstream, downstream)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=24)))
def test_any_bytes_give_a_pair_or_a_named_problem(key, value):
    decoded = decode_offset_sync(key, value)
    assert isinstance(decoded, (OffsetSync, OffsetSyncProblem))
    if isinstance(decoded, OffsetSync):
        # only exact layouts decode: re-laying the pair out gives the very bytes read
        assert key_bytes(decoded.topic.encode("utf-8"), decoded.partition) == key
        assert value_bytes(decoded.upstream, decoded.downstream) == value


@settings(max_examples=300, deadline=None)
@given(_topics, st.integers(0, 2**31 - 1), _offsets, _offsets, st.data())
def test_every_cut_or_extended_record_is_refused(topic, partition, upstream, downstream, data):
    key = key_bytes(topic.encode("utf-8"), partition)
    value = value_bytes(upstream, downstream)
    cut = data.draw(st.integers(0, len(key) - 1))
    assert isinstance(decode_offset_sync(key[:cut], value), OffsetSyncProblem)
    extra = data.draw(st.binary(min_size=1, max_size=4))
    assert decode_offset_sync(key + extra, value) is OffsetSyncProblem.KEY_TOO_LONG
    assert decode_offset_sync(key, value[: data.draw(st.integers(0, 15))]) is OffsetSyncProblem.VALUE_TOO_SHORT
    assert decode_offset_sync(key, value + extra) is OffsetSyncProblem.VALUE_TOO_LONG
