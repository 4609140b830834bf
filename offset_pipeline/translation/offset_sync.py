"""MirrorMaker 2's offset-sync records, decoded into plain values (no Kafka library involved).

MirrorMaker 2 writes one record per sync into its offset-syncs topic (one partition, compacted):

* **key** = the upstream topic as a string (a big-endian signed 16-bit length N, then N bytes of
  UTF-8; a negative length is not a string) followed by the upstream partition (a big-endian
  signed 32-bit integer): 2 + N + 4 bytes;
* **value** = the upstream offset, then the downstream offset (two big-endian signed 64-bit
  integers): 16 bytes.

That is Kafka's own struct encoding of two fixed schemas (a string and an int32; two int64s). A
record ``(topic, partition, u, d)`` says: the upstream record at offset ``u`` of ``topic[partition]``
was written downstream at offset ``d``.

Invariants (tests/translation/test_offset_sync.py, table-driven and with hypothesis):

* **Never raises.** :func:`decode_offset_sync` returns an :class:`OffsetSync` or an
  :class:`OffsetSyncProblem` naming what is wrong, for any bytes (or None) in.
* **Exact lengths.** A key must be exactly 2 + N + 4 bytes and a value exactly 16: missing bytes
  and trailing bytes are both problems (Kafka's own reader ignores trailing bytes; a record that
  carries more than the schema says was not written by the writer this module reads, so nothing in
  it is trusted).
* **Strict UTF-8**, non-negative partition and offsets. A null value is a tombstone: it deletes the
  key's sync and names no pair.
* **Round trip.** Bytes laid out as above from any valid ``(topic, partition, u, d)`` decode back to
  exactly those values.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_TWO_INT64 = struct.Struct(">qq")


class OffsetSyncProblem(str, Enum):
    """Why an offset-sync record names no pair."""

    KEY_MISSING = "key_missing"  # a null key
    KEY_TOO_SHORT = "key_too_short"  # fewer bytes than the length prefix, the string and the partition
    KEY_TOO_LONG = "key_too_long"  # bytes left over after the partition
    NEGATIVE_TOPIC_LENGTH = "negative_topic_length"
    TOPIC_NOT_UTF8 = "topic_not_utf8"
    NEGATIVE_PARTITION = "negative_partition"
    TOMBSTONE = "tombstone"  # a null value: the key's sync was deleted
    VALUE_TOO_SHORT = "value_too_short"
    VALUE_TOO_LONG = "value_too_long"
    NEGATIVE_OFFSET = "negative_offset"

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


@dataclass(frozen=True)
class OffsetSync:
    """One decoded pair: upstream ``topic[partition]`` offset ``upstream`` was written at downstream
    offset ``downstream``."""

    topic: str
    partition: int
    upstream: int
    downstream: int


def _decode_key(key: bytes | None) -> tuple[str, int] | OffsetSyncProblem:
    if key is None:
        return OffsetSyncProblem.KEY_MISSING
    if len(key) < _INT16.size:
        return OffsetSyncProblem.KEY_TOO_SHORT
    (length,) = _INT16.unpack_from(key, 0)
    if length < 0:
        return OffsetSyncProblem.NEGATIVE_TOPIC_LENGTH
    expected = _INT16.size + length + _INT32.size
    if len(key) < expected:
        return OffsetSyncProblem.KEY_TOO_SHORT
    if len(key) > expected:
        return OffsetSyncProblem.KEY_TOO_LONG
    try:
        topic = bytes(key[_INT16.size:_INT16.size + length]).decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return OffsetSyncProblem.TOPIC_NOT_UTF8
    (partition,) = _INT32.unpack_from(key, _INT16.size + length)
    if partition < 0:
        return OffsetSyncProblem.NEGATIVE_PARTITION
    return topic, partition


def _decode_value(value: bytes | None) -> tuple[int, int] | OffsetSyncProblem:
    if value is None:
        return OffsetSyncProblem.TOMBSTONE
    if len(value) < _TWO_INT64.size:
        return OffsetSyncProblem.VALUE_TOO_SHORT
    if len(value) > _TWO_INT64.size:
        return OffsetSyncProblem.VALUE_TOO_LONG
    upstream, downstream = _TWO_INT64.unpack(value)
    if upstream < 0 or downstream < 0:
        return OffsetSyncProblem.NEGATIVE_OFFSET
    return upstream, downstream


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync | OffsetSyncProblem:
    """The pair an offset-sync record names, or the problem that keeps it from naming one (the
    key's problem first). Never raises."""
    decoded_key = _decode_key(key)
    if isinstance(decoded_key, OffsetSyncProblem):
        return decoded_key
    decoded_value = _decode_value(value)
    if isinstance(decoded_value, OffsetSyncProblem):
        return decoded_value
    topic, partition = decoded_key
    upstream, downstream = decoded_value
    return OffsetSync(topic, partition, upstream, downstream)


def offset_syncs_topic(source_alias: str, target_alias: str, *, on_target: bool = False) -> str:
    """The name of the offset-syncs topic of a MirrorMaker 2 flow ``source_alias -> target_alias``
    (the replication policies' default). It is named after the cluster it does NOT sit on: on the
    source cluster (MirrorMaker 2's default location) after the target's alias, on the target
    (``offset-syncs.topic.location = target``) after the source's."""
    return f"mm2-offset-syncs.{source_alias if on_target else target_alias}.internal"
