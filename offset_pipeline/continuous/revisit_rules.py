"""Which group-partitions a continuous sync cycle translates again, and why (pure).

A continuous run (``continuous/loop.py``) reads both clusters every cycle, about once a
second, but translates and commits only what may have a new answer. This module decides that from
two consecutive reads (snapshot tuples in ``sync/work.py``'s ``SNAPSHOT_COLUMNS`` order) and what
the run remembers of each group-partition. No Kafka, Spark, Dagster or ClickHouse here.

Invariants (tests/continuous/test_revisit_rules.py, table-driven and property-based):

* **new**: a group-partition this run never translated is revisited;
* **group_changed**: every group-partition of a group whose member count or state changed on either
  cluster is revisited (its direction may have changed);
* **offset_moved**: a group-partition whose committed offset changed on either cluster is revisited,
  except a standby offset equal to what this run wrote there (its own commit is not news);
* **facts_changed**: a group-partition whose log start moved, whose log end went back (a truncated
  or recreated topic), whose presence, timestamp type or read error changed, is revisited;
* **unsettled**: a group-partition whose last result was not settled (an inexact or no translation,
  or a commit that did not end synced) is revisited once its wait passed since its last
  translation *and* a log end moved since then on either cluster (a copy may have arrived, an anchor
  with it), or once ``retry_s`` (plus a spread of up to as much again, fixed per group-partition)
  passed whatever happened. A quiet, unsettled partition (no anchor yet, a live standby group) costs
  one read per ``retry_s``, not one per cycle;
* **backing off**: the wait (:func:`unsettled_wait_s`) is as long as the partition had been unsettled
  at its last translation, at least ``revisit_first_s`` and at most ``revisit_s``: a commit
  translated before the mirror copied its records is tried again within a fraction of a second,
  then after 0.5, 1, 2 s..., so a partition that stays unsettled costs a few translations more
  than one per ``revisit_s``, not one per cycle. Without ``revisit_first_s`` (or what the partition
  was unsettled since) the wait is ``revisit_s``;
* **offset_syncs_changed**: a group-partition whose last result was not settled is revisited once
  its wait passed since its last translation when MirrorMaker 2's pairs of its partition
  changed since then (a new pair, a pair's first stamp, the topic read again or not): a pair that
  could not prove the group's offset yet may now (``translation/offset_sync_anchor.py``);
* nothing else is revisited. A settled group-partition (an exact translation, committed) whose
  facts did not change keeps its answer: the copy of the record at an unchanged committed offset
  does not move, and a group at its log end stays right as records arrive after it (its standby
  offset is where the copy of the next record lands). A growing log end alone is not a change.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from offset_pipeline.translation import TranslationStatus

GroupPartition = tuple[str, str, int]  # group, topic, partition


class RevisitReason(str, Enum):
    """Why a group-partition is translated again this cycle (counted in the run's metadata)."""

    NEW = "new"
    GROUP_CHANGED = "group_changed"
    OFFSET_MOVED = "offset_moved"
    FACTS_CHANGED = "facts_changed"
    UNSETTLED = "unsettled"
    OFFSET_SYNCS_CHANGED = "offset_syncs_changed"

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


_EXACT_STATUSES = frozenset(s.value for s in TranslationStatus if s.exact)


@dataclass(frozen=True)
class PartitionMemory:
    """What the run remembers of one group-partition since it last translated it."""

    translated_at_s: float  # monotonic seconds of that translation
    status: str  # its translation status
    commit_synced: bool  # its commit ended synced (or nothing needed writing)
    log_ends: tuple = ()  # ((cluster, log end), ...) of the read it was translated from
    offset_syncs_mark: object = None  # its partition's offset-sync pairs then (offset_syncs_mark)
    # not settled: since when, over consecutive translations (None: not known, the wait is revisit_s)
    unsettled_since_s: float | None = None

    @property
    def settled(self) -> bool:
        """An exact translation whose commit ended synced: nothing to gain from reading it again."""
        return self.commit_synced and self.status in _EXACT_STATUSES  # an unknown status is not exact


@dataclass(frozen=True)
class SideFacts:
    """One cluster's facts of one group-partition, as compared between cycles."""

    members: int
    group_state: str
    committed: int | None
    present: bool
    log_start: int | None
    log_end: int | None
    timestamp_type: str
    read_error: str


def side_facts(rows: Iterable[tuple]) -> dict[tuple[str, str, str, int], SideFacts]:
    """(cluster, group, topic, partition) -> :class:`SideFacts` of snapshot tuples (``SNAPSHOT_COLUMNS``)."""
    return {(row[0], row[1], row[3], int(row[4])): _side(row) for row in rows}


def _side(row: tuple) -> SideFacts:
    """One snapshot tuple's :class:`SideFacts`."""
    _, _, members, _, _, committed, present, log_start, log_end, ts_type = row[:10]
    group_state, read_error = (tuple(row[10:12]) + ("", ""))[:2]
    return SideFacts(
        int(members), group_state or "", None if committed is None else int(committed), bool(present),
        log_start, log_end, ts_type or "", read_error or "",
    )


def _facts_changed(before: SideFacts | None, now: SideFacts | None) -> bool:
    if before is None or now is None:
        return before is not now
    if (before.present, before.timestamp_type, before.read_error) != (now.present, now.timestamp_type, now.read_error):
        return True
    if before.log_start != now.log_start:
        return True
    return before.log_end is not None and now.log_end is not None and now.log_end < before.log_end


def unsettled_wait_s(remembered: PartitionMemory, revisit_s: float, revisit_first_s: float | None) -> float:
    """How long after its last translation an unsettled group-partition waits for its next one
    (the module's **backing off**): how long it had been unsettled then, within
    ``[revisit_first_s, revisit_s]``."""
    if revisit_first_s is None or remembered.unsettled_since_s is None:
        return revisit_s
    unsettled_for = remembered.translated_at_s - remembered.unsettled_since_s
    return min(revisit_s, max(revisit_first_s, unsettled_for))


def retry_after_s(key: GroupPartition, retry_s: float) -> float:
    """``retry_s`` plus a spread in [0, retry_s) fixed per group-partition (crc32 of its key): the
    partitions translated together by a run's first cycle do not all come back in one cycle."""
    return retry_s * (1.0 + (zlib.crc32(repr(key).encode()) % 1000) / 1000)


def partitions_to_revisit(
    previous: Iterable[tuple] | None,
    current: Iterable[tuple],
    memory: Mapping[GroupPartition, PartitionMemory],
    written_by_sync: Mapping[tuple[str, str], Mapping[tuple[str, int], int]],
    now_s: float,
    revisit_s: float,
    retry_s: float = 300.0,
    offset_syncs_marks: Mapping[tuple[str, int], object] | None = None,
    revisit_first_s: float | None = None,
) -> dict[GroupPartition, RevisitReason]:
    """group-partition -> why it is translated again this cycle, for every group-partition of
    ``current`` that needs it (see the module's invariants).

    ``previous``: the previous cycle's snapshot tuples (None: this run's first read, everything is
    new); ``memory``: what the run remembers per group-partition; ``written_by_sync``: (cluster,
    group) -> {(topic, partition): offset} this run committed there; ``now_s``: monotonic seconds;
    ``offset_syncs_marks``: (topic, partition) -> what its offset-sync pairs are now
    (:func:`offset_syncs_mark`; a partition not in it has none); ``revisit_first_s``: the shortest
    wait of an unsettled group-partition (:func:`unsettled_wait_s`).
    """
    marks = offset_syncs_marks or {}
    # A continuous run asks this every cycle of every group-partition (10,000s of rows): rows equal to
    # the previous read's (tuple equality) cannot have moved or changed, so only the rows that differ
    # become SideFacts; the result is the same as comparing every row's facts.
    now_rows = _rows_by_key(current)
    before_rows = _rows_by_key(previous) if previous is not None else {}
    groups_now, groups_before = _group_facts_of_rows(now_rows), _group_facts_of_rows(before_rows)
    changed_groups = {group for (cluster, group), facts in groups_now.items()
                      if groups_before.get((cluster, group)) != facts}
    changed_groups |= {group for (cluster, group) in groups_before if (cluster, group) not in groups_now}

    out: dict[GroupPartition, RevisitReason] = {}
    by_partition: dict[GroupPartition, list[tuple[str, tuple]]] = {}
    for (cluster, group_id, topic, partition), row in now_rows.items():
        by_partition.setdefault((group_id, topic, partition), []).append((cluster, row))
    for key, sides in by_partition.items():
        group_id, topic, partition = key
        remembered = memory.get(key)
        if remembered is None or previous is None:
            out[key] = RevisitReason.NEW
            continue
        if group_id in changed_groups:
            out[key] = RevisitReason.GROUP_CHANGED
            continue
        changed = [(c, _side(row), _side_or_none(before_rows.get((c, group_id, topic, partition))))
                   for c, row in sides if before_rows.get((c, group_id, topic, partition)) != row]
        if any(_offset_moved(b, f, written_by_sync.get((c, group_id), {}).get((topic, partition)))
               for c, f, b in changed):
            out[key] = RevisitReason.OFFSET_MOVED
        elif any(_facts_changed(b, f) for _, f, b in changed):
            out[key] = RevisitReason.FACTS_CHANGED
        elif remembered.settled:
            continue
        elif remembered.offset_syncs_mark != marks.get((topic, partition)) \
                and now_s - remembered.translated_at_s >= unsettled_wait_s(remembered, revisit_s, revisit_first_s):
            out[key] = RevisitReason.OFFSET_SYNCS_CHANGED
        elif _unsettled_due_rows(key, remembered, sides, now_s,
                                 unsettled_wait_s(remembered, revisit_s, revisit_first_s), retry_s):
            out[key] = RevisitReason.UNSETTLED
    return out


def offset_syncs_mark(pairs_by_direction: Iterable[tuple[str, str, object]]) -> object:
    """What a partition's offset-sync facts are, compared between cycles: per direction (active,
    standby, ``OffsetSyncFacts``), how many pairs, how many stamped, the newest pair, the unreadable
    reason. Pairs only ever come and get stamped, so a change of any of these is a change."""
    mark = []
    for active, standby, facts in sorted(pairs_by_direction, key=lambda x: (x[0], x[1])):
        pairs = facts.pairs
        mark.append((active, standby, len(pairs), sum(1 for p in pairs if p.active_end_after is not None),
                     (pairs[-1].upstream, pairs[-1].downstream) if pairs else None, facts.unreadable))
    return tuple(mark) or None


def _unsettled_due_rows(key: GroupPartition, remembered: PartitionMemory, sides: list[tuple[str, tuple]],
                        now_s: float, revisit_s: float, retry_s: float) -> bool:
    """``_unsettled_due`` on snapshot tuples (log end at index 8), cheapest test first: most unsettled
    group-partitions (no anchor yet) are asked this every cycle."""
    age = now_s - remembered.translated_at_s
    if age < min(revisit_s, retry_s):  # retry_after_s is never below retry_s
        return False
    if age >= retry_after_s(key, retry_s):
        return True
    return age >= revisit_s and tuple(sorted((cluster, row[8]) for cluster, row in sides)) != remembered.log_ends


def _rows_by_key(rows: Iterable[tuple]) -> dict[tuple[str, str, str, int], tuple]:
    return {(row[0], row[1], row[3], int(row[4])): tuple(row) for row in rows}


def _side_or_none(row: tuple | None) -> SideFacts | None:
    return None if row is None else _side(row)


def _group_facts_of_rows(rows: Mapping[tuple[str, str, str, int], tuple]) -> dict[tuple[str, str], tuple[int, str]]:
    """(cluster, group) -> (members, state): the largest member count any row of it says, and its state."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for (cluster, group_id, _, _), row in rows.items():
        members, _ = out.get((cluster, group_id), (0, ""))
        state = (row[10] if len(row) > 10 else "") or ""
        out[(cluster, group_id)] = (max(members, int(row[2])), state)
    return out


def _offset_moved(before: SideFacts | None, now: SideFacts, written: int | None) -> bool:
    if before is None:
        return True
    return now.committed != before.committed and not (written is not None and now.committed == written)
