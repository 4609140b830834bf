"""MirrorMaker 2's source positions, decoded from Kafka Connect's offsets topic (no Kafka library).

MirrorMaker 2's source task keeps how far it has copied each upstream partition as Kafka Connect
*source offsets*, in the offsets topic of the Connect worker that runs it, on the flow's target
cluster (dedicated mode: ``mm2-offsets.<source alias>.internal``; a Connect cluster: its workers'
``offset.storage.topic``). Connect writes them with its internal JSON converter, schemas off:

* **key** = a JSON array ``[connector name, source partition]``; MirrorMaker 2's source partition is
  ``{"cluster": <source alias>, "topic": <upstream topic>, "partition": <upstream partition>}``;
* **value** = the source offset, ``{"offset": <upstream offset of the last record copied>}``, or
  null: a tombstone, which deletes the key's offset (what an operator's offset reset writes).

The stored offset is the *last copied* record's, not the next one to copy: on restart the task
resumes at ``offset + 1``. So the position -- every upstream record below it has its copy on the
target -- is ``offset + 1`` (:attr:`MirrorSourceOffset.position`). An offset is written with its
copies (exactly-once: in the same transaction) or after the producer acknowledged them
(at-least-once), never ahead of them; which is what the stale rule needs from a position.

Records a transform drops (the dev harness's filter drops copies so they never loop) advance no
offset: Connect records an offset only for a record it sends. A position therefore stops at the
last record the flow *sent*; records after it that were dropped are not counted as copied here.

The same topic holds other connectors' offsets (dedicated mode: the checkpoint and heartbeat
connectors, partitions without ``cluster``; a Connect cluster: any connector): such a record is
:attr:`ConnectOffsetProblem.NOT_A_MIRROR_PARTITION`, skipped, never an error.

Invariants (tests/translation/test_connect_offsets.py, table-driven and hypothesis):

* **Never raises.** :func:`decode_connect_offset` returns a :class:`MirrorSourceOffset` or a
  :class:`ConnectOffsetProblem` naming what is wrong, for any bytes (or None) in.
* **Integers are integers**: a partition or offset given as a float, a string or a boolean is a
  problem (JSON ``true`` is not the offset 1); partitions and offsets are non-negative.
* **Round trip.** Any valid record written as Connect writes it decodes back to its values.
* **Last write wins, tombstones delete** (:func:`positions_from_offsets`); several connectors
  naming the same upstream partition (a renamed connector's old offsets) give the *lowest*
  position: a position must never claim a copy that one of them may not have made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class ConnectOffsetProblem(str, Enum):
    """Why a record of a Connect offsets topic names no MirrorMaker 2 source position."""

    KEY_MISSING = "key_missing"  # a null key
    KEY_NOT_JSON = "key_not_json"  # not UTF-8 JSON
    KEY_NOT_A_PAIR = "key_not_a_pair"  # not [connector name (a string), partition (an object)]
    NOT_A_MIRROR_PARTITION = "not_a_mirror_partition"  # another connector's partition (no cluster/topic/partition)
    BAD_PARTITION = "bad_partition"  # cluster or topic not a non-empty string, partition not an integer >= 0
    VALUE_NOT_JSON = "value_not_json"
    VALUE_NOT_AN_OFFSET = "value_not_an_offset"  # not {"offset": integer >= 0}

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


@dataclass(frozen=True)
class MirrorSourceOffset:
    """One decoded record: connector ``connector`` copied ``cluster``'s ``topic[partition]`` up to and
    including upstream offset ``offset``; ``offset`` None is a tombstone (the offset was deleted)."""

    connector: str
    cluster: str
    topic: str
    partition: int
    offset: int | None

    @property
    def position(self) -> int | None:
        """Every upstream record below it has its copy on the target (None: deleted)."""
        return None if self.offset is None else self.offset + 1


def _json(data: bytes) -> tuple[bool, object]:
    try:
        return True, json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False, None


def _refuse_constant(name: str) -> object:
    raise ValueError(f"not JSON: {name}")  # NaN, Infinity: Python accepts them, JSON does not


def _count(value: object) -> int | None:
    """A non-negative integer, or None (bool is an int in Python, never here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def decode_connect_offset(key: bytes | None, value: bytes | None) -> MirrorSourceOffset | ConnectOffsetProblem:
    """One record of a Connect offsets topic: a MirrorMaker 2 source offset, or why not. Never raises."""
    if key is None:
        return ConnectOffsetProblem.KEY_MISSING
    ok, parsed = _json(bytes(key))
    if not ok:
        return ConnectOffsetProblem.KEY_NOT_JSON
    if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str)
            and isinstance(parsed[1], dict)):
        return ConnectOffsetProblem.KEY_NOT_A_PAIR
    connector, source_partition = parsed
    if not {"cluster", "topic", "partition"} <= source_partition.keys():
        return ConnectOffsetProblem.NOT_A_MIRROR_PARTITION
    cluster, topic = source_partition["cluster"], source_partition["topic"]
    partition = _count(source_partition["partition"])
    if not (isinstance(cluster, str) and cluster and isinstance(topic, str) and topic) or partition is None:
        return ConnectOffsetProblem.BAD_PARTITION
    if value is None:
        return MirrorSourceOffset(connector, cluster, topic, partition, None)
    ok, parsed = _json(bytes(value))
    if not ok:
        return ConnectOffsetProblem.VALUE_NOT_JSON
    if parsed is None:  # the text "null": a tombstone too
        return MirrorSourceOffset(connector, cluster, topic, partition, None)
    offset = _count(parsed.get("offset")) if isinstance(parsed, dict) else None
    if offset is None:
        return ConnectOffsetProblem.VALUE_NOT_AN_OFFSET
    return MirrorSourceOffset(connector, cluster, topic, partition, offset)


def encode_connect_offset(record: MirrorSourceOffset) -> tuple[bytes, bytes | None]:
    """The key and value bytes Connect writes for ``record`` (tests and the dev harness write with it)."""
    key = json.dumps([record.connector, {"cluster": record.cluster, "partition": record.partition,
                                         "topic": record.topic}], separators=(",", ":"))
    value = None if record.offset is None else json.dumps({"offset": record.offset}, separators=(",", ":"))
    return key.encode(), None if value is None else value.encode()


def positions_from_offsets(records: Iterable[MirrorSourceOffset], source_alias: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the position of ``source_alias``'s flow, from the records in the topic's
    order (per partition of the offsets topic; a key always lands on the same one). Last write per
    connector wins, a tombstone deletes; several connectors: the lowest position."""
    latest: dict[tuple[str, str, int], int | None] = {}
    for record in records:
        if record.cluster == source_alias:
            latest[(record.connector, record.topic, record.partition)] = record.position
    out: dict[tuple[str, int], int] = {}
    for (_, topic, partition), position in latest.items():
        if position is not None:
            out[(topic, partition)] = min(position, out.get((topic, partition), math.inf))
    return {tp: int(p) for tp, p in out.items()}
