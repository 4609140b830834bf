"""The group-commit log's records decoded (translation/group_commit_records.py): table tests on bytes
laid out by hand from Kafka's published schemas, every value version, deletions, other record types
and broken bytes; properties: a commit written in any version reads back as written, and no bytes
make the reader raise."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.translation.group_commit_records import (
    OffsetCommitRecord,
    OffsetDeletion,
    OtherRecord,
    UnreadableRecord,
    commit_log_partition,
    parse_commit_log_record,
    record_kind,
)


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def compact_string(text: str) -> bytes:
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def key(group: str, topic: str, partition: int, record_type: int = 1) -> bytes:
    return struct.pack(">h", record_type) + string(group) + string(topic) + struct.pack(">i", partition)


def value(version: int, offset: int, metadata: str = "", committed: int = 0, epoch: int = -1, expires: int = -1,
          tagged: list[tuple[int, bytes]] = ()) -> bytes:
    out = struct.pack(">hq", version, offset)
    if version >= 3:
        out += struct.pack(">i", epoch)
    out += compact_string(metadata) if version >= 4 else string(metadata)
    out += struct.pack(">q", committed)
    if version == 1:
        out += struct.pack(">q", expires)
    if version >= 4:
        out += uvarint(len(tagged)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in tagged)
    return out


GROUP, TOPIC = 'payments "eu" ü', "orders.v1"


@pytest.mark.parametrize(("raw_value", "expected"), [
    (value(0, 42, "m", 1_700_000_000_000),
     OffsetCommitRecord(GROUP, TOPIC, 3, 42, "m", 1_700_000_000_000, value_version=0)),
    (value(1, 42, "", 5, expires=9),
     OffsetCommitRecord(GROUP, TOPIC, 3, 42, "", 5, expire_timestamp_ms=9, value_version=1)),
    (value(1, 42, "", 5, expires=-1),
     OffsetCommitRecord(GROUP, TOPIC, 3, 42, "", 5, value_version=1)),
    (value(2, 0, "x", 5), OffsetCommitRecord(GROUP, TOPIC, 3, 0, "x", 5, value_version=2)),
    (value(3, 7, "", 5, epoch=12), OffsetCommitRecord(GROUP, TOPIC, 3, 7, "", 5, leader_epoch=12, value_version=3)),
    (value(3, 7, "", 5, epoch=-1), OffsetCommitRecord(GROUP, TOPIC, 3, 7, "", 5, value_version=3)),
    (value(4, 2**40, "é", 5, epoch=0),
     OffsetCommitRecord(GROUP, TOPIC, 3, 2**40, "é", 5, leader_epoch=0, value_version=4)),
    # v4's tagged fields (a later broker's additions) are read past
    (value(4, 8, "", 5, epoch=1, tagged=[(0, b"\x01" * 16), (7, b"")]),
     OffsetCommitRecord(GROUP, TOPIC, 3, 8, "", 5, leader_epoch=1, value_version=4)),
])
def test_an_offset_commit_of_every_value_version(raw_value, expected):
    for record_type in (0, 1):  # the legacy and the current key type are both offset commits
        got = parse_commit_log_record(key(GROUP, TOPIC, 3, record_type), raw_value)
        assert got == expected and record_kind(got) == "offset_commit"


def test_a_null_value_is_a_deletion():
    got = parse_commit_log_record(key(GROUP, TOPIC, 0), None)
    assert got == OffsetDeletion(GROUP, TOPIC, 0) and record_kind(got) == "offset_deletion"


@pytest.mark.parametrize("record_type", [2, 3, 5, 8, 11, 16, 20, 99])
def test_other_record_types_are_named_and_skipped_whatever_their_value(record_type):
    raw_key = struct.pack(">h", record_type) + string(GROUP)
    for raw_value in (None, b"", b"\x00\x03garbage", value(3, 1)):
        got = parse_commit_log_record(raw_key, raw_value)
        assert got == OtherRecord(record_type, GROUP) and record_kind(got) == f"type_{record_type}"


@pytest.mark.parametrize("raw_key", [struct.pack(">h", 2), struct.pack(">hh", 2, 40) + b"short",
                                     struct.pack(">hh", 2, 2) + b"\xff\xfe"])
def test_another_records_key_without_a_readable_group_names_none(raw_key):
    assert parse_commit_log_record(raw_key, b"") == OtherRecord(2, None)


@pytest.mark.parametrize(("raw_key", "raw_value", "reason"), [
    (None, value(3, 1), "without a key"),
    (b"", value(3, 1), "truncated"),
    (b"\x00", value(3, 1), "truncated"),
    (key(GROUP, TOPIC, 0)[:-1], value(3, 1), "truncated"),
    (key(GROUP, TOPIC, 0) + b"\x00", value(3, 1), "1 bytes after an offset commit's key"),
    (struct.pack(">h", 1) + struct.pack(">h", -1) + string(TOPIC) + struct.pack(">i", 0), value(3, 1),
     "without a group"),
    (struct.pack(">h", 1) + struct.pack(">h", 2) + b"\xff\xfe" + string(TOPIC) + struct.pack(">i", 0), value(3, 1),
     "not UTF-8"),
    (key(GROUP, TOPIC, 0), value(3, 1)[:-1], "truncated"),
    (key(GROUP, TOPIC, 0), value(3, 1) + b"\x00", "1 bytes after an offset commit's value (version 3)"),
    (key(GROUP, TOPIC, 0), struct.pack(">hq", 5, 1), "value version 5"),
    (key(GROUP, TOPIC, 0), struct.pack(">hq", -1, 1), "value version -1"),
    (key(GROUP, TOPIC, 0), b"", "truncated"),
    (key(GROUP, TOPIC, 0), struct.pack(">hqi", 4, 1, 0) + b"\xff" * 6, "varint longer than five bytes"),
])
def test_bytes_that_do_not_decode_are_unreadable_with_the_reason(raw_key, raw_value, reason):
    got = parse_commit_log_record(raw_key, raw_value)
    assert isinstance(got, UnreadableRecord) and reason in got.reason, got
    assert record_kind(got) == "unreadable"


texts = st.text(max_size=40)
int64s = st.integers(min_value=0, max_value=2**63 - 1)


@given(group=texts, topic=texts, partition=st.integers(0, 2**31 - 1), version=st.integers(0, 4), offset=int64s,
       metadata=texts, committed=int64s, epoch=st.integers(-1, 2**31 - 1), expires=st.integers(-1, 2**62),
       tagged=st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=20)), max_size=3))
def test_a_commit_written_in_any_version_reads_back_as_written(group, topic, partition, version, offset, metadata,
                                                               committed, epoch, expires, tagged):
    got = parse_commit_log_record(key(group, topic, partition),
                                  value(version, offset, metadata, committed, epoch, expires, tagged))
    assert got == OffsetCommitRecord(
        group, topic, partition, offset, metadata, committed,
        leader_epoch=epoch if version >= 3 and epoch >= 0 else None,
        expire_timestamp_ms=expires if version == 1 and expires >= 0 else None, value_version=version)


@given(raw_key=st.one_of(st.none(), st.binary(max_size=60)), raw_value=st.one_of(st.none(), st.binary(max_size=60)))
def test_no_bytes_make_the_reader_raise(raw_key, raw_value):
    got = parse_commit_log_record(raw_key, raw_value)
    assert record_kind(got) in {"offset_commit", "offset_deletion", "unreadable"} or record_kind(got).startswith("type_")


@pytest.mark.parametrize("group, partitions, expected", [
    ("", 50, 0),
    ("a", 50, 97 % 50),
    ("ab", 50, (97 * 31 + 98) % 50),
    ("polygenelubricants", 50, 0),  # Java's hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    ("zz", 7, 3904 % 7),
    ("commit 07dff3ec \"quoted\" ü 한", 10, 3),  # a negative hashCode: Math.abs, not the sign bit masked
                                                  # (the partition a Kafka 4.2 broker chose)
    ("\U0001f600", 7, (0xD83D * 31 + 0xDE00) % 7),  # outside the BMP: two UTF-16 code units
])
def test_the_commit_log_partition_of_a_group_is_the_coordinators(group, partitions, expected):
    assert commit_log_partition(group, partitions) == expected


def test_a_commit_log_has_partitions():
    with pytest.raises(ValueError, match="at least one partition"):
        commit_log_partition("g", 0)
