"""A record of a cluster's group-commit log (``__consumer_offsets``), decoded from its key and value
bytes: "group g committed offset o on topic t, partition p, at time ts", for a follower of the log
that reacts to each commit instead of polling every group.

Written from Kafka's published record schemas (the group coordinator's ``OffsetCommitKey`` and
``OffsetCommitValue``). The layout:

* key: an int16 record type, then that type's key. Types 0 and 1 are offset commits (group, topic
  as int16-length strings, partition as int32); every other type (2: a classic group's metadata,
  the new consumer-group protocol's records, share and streams groups) is recognised by its number
  and skipped;
* value: null for a deletion (a tombstone: the group's offset for the partition was deleted or
  expired), else an int16 version and the fields of that version:

  ====== ================================================================================
  v0, v2 offset int64, metadata string, commit timestamp int64
  v1     offset int64, metadata string, commit timestamp int64, expire timestamp int64
  v3     offset int64, leader epoch int32, metadata string, commit timestamp int64
  v4     as v3 with a compact metadata string (unsigned varint length + 1), then tagged fields
  ====== ================================================================================

Invariants (tests/translation/test_group_commit_records.py):

* never raises: bytes that do not decode are an :class:`UnreadableRecord` with the reason;
* an offset commit decodes to exactly the fields it was written with, for every value version;
* a record decodes whole or not at all: bytes left over after the last field are unreadable
  (a v4 value's unknown tagged fields are read past, as Kafka's own reader does);
* a record type other than an offset commit is an :class:`OtherRecord` naming the type and, when
  its key starts with one, the group, whatever its value holds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_COMMIT_TYPES = (0, 1)
CLASSIC_GROUP_METADATA_TYPE = 2
NEWEST_VALUE_VERSION = 4


@dataclass(frozen=True)
class OffsetCommitRecord:
    """Group ``group`` committed ``offset`` on ``topic``/``partition`` at ``commit_timestamp_ms``."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp_ms: int
    leader_epoch: int | None = None  # v3+; -1 (unknown) is None
    expire_timestamp_ms: int | None = None  # v1 only; -1 is None
    value_version: int = 0


@dataclass(frozen=True)
class OffsetDeletion:
    """A tombstone: the group's offset for the partition was deleted (or expired)."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OtherRecord:
    """A record of another type (group metadata, the new protocol's records, ...): skipped as an
    offset, but ``group`` says whose it is (every group coordinator record's key starts with the group
    id; None when the key does not): a member joined or left, the group's state changed."""

    record_type: int
    group: str | None = None


@dataclass(frozen=True)
class UnreadableRecord:
    reason: str


CommitLogRecord = OffsetCommitRecord | OffsetDeletion | OtherRecord | UnreadableRecord


def record_kind(record: CommitLogRecord) -> str:
    """The record's kind for counters: ``offset_commit``, ``offset_deletion``, ``type_<n>``,
    ``unreadable``."""
    if isinstance(record, OffsetCommitRecord):
        return "offset_commit"
    if isinstance(record, OffsetDeletion):
        return "offset_deletion"
    if isinstance(record, OtherRecord):
        return f"type_{record.record_type}"
    return "unreadable"


class _Truncated(Exception):
    pass


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise _Truncated(f"{n} bytes wanted at byte {self.at} of {len(self.data)}")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:  # Kafka's unsigned varints are 32-bit: at most five bytes
                raise _Truncated(f"a varint longer than five bytes at byte {self.at}")

    def string(self) -> str | None:
        length = self.int16()
        return None if length == -1 else self.take(length).decode("utf-8")

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length == -1 else self.take(length).decode("utf-8")

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag: no field of OffsetCommitValue v4 is needed from them
            self.take(self.uvarint())

    def rest(self) -> int:
        return len(self.data) - self.at


def parse_commit_log_record(key: bytes | None, value: bytes | None) -> CommitLogRecord:
    """One record of ``__consumer_offsets`` (see the module's table). Never raises."""
    if key is None:
        return UnreadableRecord("a record without a key")
    try:
        reader = _Reader(key)
        record_type = reader.int16()
        if record_type not in OFFSET_COMMIT_TYPES:
            return OtherRecord(record_type, _leading_group(reader))
        group, topic, partition = reader.string(), reader.string(), reader.int32()
        if reader.rest():
            return UnreadableRecord(f"{reader.rest()} bytes after an offset commit's key")
        if group is None or topic is None:
            return UnreadableRecord("an offset commit's key without a group or a topic")
        if value is None:
            return OffsetDeletion(group, topic, partition)
        return _offset_commit(group, topic, partition, value)
    except _Truncated as exc:
        return UnreadableRecord(f"truncated: {exc}")
    except UnicodeDecodeError as exc:
        return UnreadableRecord(f"a name that is not UTF-8: {exc.reason}")


def _leading_group(reader: _Reader) -> str | None:
    try:
        return reader.string()
    except (_Truncated, UnicodeDecodeError):
        return None


def _offset_commit(group: str, topic: str, partition: int, value: bytes) -> CommitLogRecord:
    reader = _Reader(value)
    version = reader.int16()
    if not 0 <= version <= NEWEST_VALUE_VERSION:
        return UnreadableRecord(f"offset commit value version {version} (this reader knows 0-{NEWEST_VALUE_VERSION})")
    offset = reader.int64()
    epoch = reader.int32() if version >= 3 else -1
    metadata = reader.compact_string() if version >= 4 else reader.string()
    committed_at = reader.int64()
    expires_at = reader.int64() if version == 1 else -1
    if version >= 4:
        reader.tagged_fields()
    if reader.rest():
        return UnreadableRecord(f"{reader.rest()} bytes after an offset commit's value (version {version})")
    return OffsetCommitRecord(group, topic, partition, offset, metadata or "", committed_at,
                              leader_epoch=None if epoch < 0 else epoch,
                              expire_timestamp_ms=None if expires_at < 0 else expires_at, value_version=version)


def commit_log_partition(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` (of ``partitions``) that holds ``group``'s records: the
    group coordinator's choice, ``Utils.abs(groupId.hashCode()) % partitions`` (Java's ``String.hashCode``
    over UTF-16 code units, a signed 32-bit int; Kafka's ``Utils.abs`` is ``Math.abs``, except that
    ``Integer.MIN_VALUE`` gives 0)."""
    if partitions <= 0:
        raise ValueError(f"a commit log has at least one partition, not {partitions}")
    h = 0
    data = group.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions
