"""What a continuous sync run remembers between its cycles, and the checkpoint it writes from it.

A continuous run (``continuous/loop.py``) keeps the newest answer of every group-partition in
memory: the last read of both clusters, the last translation result, the last commit row, the
anchors, each group's direction and the offsets it wrote. A cycle replaces the entries of the
group-partitions it translated again (``continuous/revisit_rules.py``); the others keep theirs.

Every checkpoint interval the state is written to ClickHouse as one cycle of the interval mode
(:meth:`ContinuousState.checkpoint`): the newest read as the snapshot, every group-partition's
current result as its translation, its newest commit row, so the audits, the stale sensor, the
monitoring and the next run read the same tables at the same 30-second grain as before, and
ClickHouse grows no faster than with a cycle every 30 s.

Invariants (tests/continuous/test_run_state.py):

* a checkpoint holds exactly one snapshot row per row of the newest read, one translation row and
  at most one commit row per group-partition of it, all stamped with the checkpoint's id and time;
* a commit row not made since the previous checkpoint is written as what it left behind: a write
  that was applied becomes ``unchanged`` at its new offset, ``applied`` false (the metrics count a
  write once, and the partition stays synced);
* a group-partition gone from the newest read is forgotten (its group or topic was deleted);
* anchors: a checkpoint writes the anchors that changed since the previous checkpoint only.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from offset_pipeline.continuous.revisit_rules import GroupPartition, PartitionMemory, unsettled_wait_s
from offset_pipeline.readiness.report import readiness_row
from offset_pipeline.readiness.rules import (
    GroupReadiness,
    PartitionFacts,
    group_readiness,
)
from offset_pipeline.storage.commits import SYNCED_WRITES, CommitRow
from offset_pipeline.storage.readiness import ReadinessRow
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.sync.translation_step import anchor_changes
from offset_pipeline.sync.work import SNAPSHOT_COLUMNS
from offset_pipeline.translation import Anchor, DirectionHistory

AnchorKey = tuple[str, str, int, str, str]  # group, topic, partition, active, standby


_SNAPSHOT_FIELDS = operator.attrgetter(*SNAPSHOT_COLUMNS)


def snapshot_tuple(row: SnapshotRow) -> tuple:
    """The row's ``SNAPSHOT_COLUMNS``, in order (one C call: a continuous cycle makes 10,000s)."""
    return _SNAPSHOT_FIELDS(row)


def carried_commit(row: CommitRow, snapshot_id: str, cycle_time_ms: int) -> CommitRow:
    """``row`` as a checkpoint after the one that recorded it writes it: an applied write is now
    ``unchanged`` at its new offset; anything else keeps its decision, not applied again."""
    stamped = replace(row, snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms, applied=False)
    if row.decision in SYNCED_WRITES and row.applied:
        at = row.committed_after if row.committed_after is not None else row.new_offset
        return replace(stamped, decision="unchanged", previous_offset=at, new_offset=at, committed_after=at, error=None,
                       reason=f"standby at {at} since cycle {row.snapshot_id}")
    return stamped


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint's rows, ready for the storage modules' inserts."""

    checkpoint_id: str
    time_ms: int
    snapshot_rows: list[SnapshotRow]
    translation_rows: list[dict[str, Any]]
    commit_rows: list[CommitRow]
    anchor_rows: list[dict[str, Any]]
    readiness_rows: list[ReadinessRow] = field(default_factory=list)
    # MirrorMaker 2's pairs and stamps the run added since the last checkpoint
    # (sync/offset_sync_step.OffsetSyncsReader.take_unstored), for the next run
    offset_sync_rows: list = field(default_factory=list)
    # how each cluster was read since the last checkpoint (storage/commit_log_follow.CommitLogFollowRow)
    follow_rows: list = field(default_factory=list)


@dataclass
class ContinuousState:
    """The run's memory (see the module's docstring). Not thread-safe: the loop's thread owns it;
    :meth:`checkpoint` returns copies another thread may write."""

    clusters: tuple[str, str]
    snapshot: list[SnapshotRow] | None = None  # the newest read
    results: dict[GroupPartition, dict[str, Any]] = field(default_factory=dict)
    commits: dict[GroupPartition, CommitRow] = field(default_factory=dict)
    memory: dict[GroupPartition, PartitionMemory] = field(default_factory=dict)
    anchors: dict[AnchorKey, Anchor] = field(default_factory=dict)
    points: dict = field(default_factory=dict)  # kept fast-forward points (read when the run starts)
    previous_active: dict[str, str] = field(default_factory=dict)
    written_by_sync: dict[tuple[str, str], dict[tuple[str, int], int]] = field(default_factory=dict)
    detected_shapes: dict[str, str] = field(default_factory=dict)
    anchors_written: dict[AnchorKey, Anchor] = field(default_factory=dict)  # as of the last checkpoint
    committed_since_checkpoint: set[GroupPartition] = field(default_factory=set)
    # epoch s of the newest sync: a synced commit, or a read that found the offsets still where it left them
    synced_at: dict[GroupPartition, float] = field(default_factory=dict)
    # derived from ``snapshot`` once per read (a cycle asks for them more than once, over every row)
    _tuples: list[tuple] | None = field(default=None, repr=False)
    _committed_before: dict | None = field(default=None, repr=False)

    def snapshot_tuples(self) -> list[tuple] | None:
        if self.snapshot is None:
            return None
        if self._tuples is None:
            self._tuples = [snapshot_tuple(r) for r in self.snapshot]
        return self._tuples

    def history(self) -> DirectionHistory:
        """What the direction rules need: the newest read's offsets as ``committed_before``, the offsets
        this run wrote, and each group's last direction."""
        if self.snapshot is None:
            return DirectionHistory(previous_active=dict(self.previous_active))
        return DirectionHistory(committed_before=self._newest_committed(), written_by_sync=self.written_by_sync,
                                previous_active=dict(self.previous_active))

    def _newest_committed(self) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
        if self._committed_before is None:
            before: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
            for r in self.snapshot or ():
                if r.committed_offset is not None:
                    before.setdefault((r.cluster, r.group_id), {})[(r.topic, int(r.partition))] = int(r.committed_offset)
            self._committed_before = before
        return self._committed_before

    def previous_committed(self) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
        """(cluster, group) -> {(topic, partition): committed offset} of the newest read (the commit
        step's ``active_before``: resets on the active cluster)."""
        return self.history().committed_before or {}

    def record(self, snapshot: list[SnapshotRow], results: Iterable[dict[str, Any]], commits: Iterable[CommitRow],
               directions: Mapping[str, Any], now_s: float, tuples: list[tuple] | None = None,
               offset_syncs_marks: Mapping[tuple[str, int], object] | None = None) -> None:
        """A cycle's read (and its ``snapshot_tuple``s, when the caller has them), its new results and
        commit rows, its groups' directions (``DirectionDecision``), and the offset-sync pairs each
        partition was translated with (``revisit_rules.offset_syncs_mark``)."""
        marks = offset_syncs_marks or {}
        self.snapshot = snapshot
        self._tuples, self._committed_before = tuples, None
        ends: dict[GroupPartition, list] = {}
        for r in snapshot:
            ends.setdefault((r.group_id, r.topic, int(r.partition)), []).append((r.cluster, r.log_end))
        earlier: dict[GroupPartition, PartitionMemory] = {}
        for row in results:
            key = (row["group_id"], row["topic"], int(row["partition"]))
            self.results[key] = row
            self._keep_anchor(row)
            if key in self.memory:
                earlier[key] = self.memory[key]
            self.memory[key] = PartitionMemory(now_s, row["status"], commit_synced=False,
                                               log_ends=tuple(sorted(ends.get(key, ()))),
                                               offset_syncs_mark=marks.get((key[1], key[2])))
        for commit in commits:
            key = (commit.group_id, commit.topic, int(commit.partition))
            self.commits[key] = commit
            self.committed_since_checkpoint.add(key)
            if key in self.memory:
                self.memory[key] = replace(self.memory[key], commit_synced=commit.synced)
            if commit.synced:
                self.synced_at[key] = commit.cycle_time_ms / 1000
            if commit.applied and commit.standby and commit.new_offset is not None:
                self.written_by_sync.setdefault((commit.standby, commit.group_id), {})[
                    (commit.topic, int(commit.partition))] = int(commit.new_offset)
        for key in {(r["group_id"], r["topic"], int(r["partition"])) for r in results}:
            # how long it has been unsettled: its next revisit waits about as long (revisit_rules.py)
            m, before = self.memory[key], earlier.get(key)
            if not m.settled:
                since = before.unsettled_since_s if before is not None and not before.settled else None
                self.memory[key] = replace(m, unsettled_since_s=now_s if since is None else since)
        for group_id, decision in directions.items():
            if decision.active:
                self.previous_active[group_id] = decision.active
        self._forget_gone({(r.group_id, r.topic, int(r.partition)) for r in snapshot})
        self._still_synced_at_this_read()

    def _offsets_read(self) -> dict[tuple[str, str, str, int], SnapshotRow]:
        return {(r.cluster, r.group_id, r.topic, int(r.partition)): r for r in self.snapshot or []}

    def _still_synced_at_this_read(self) -> None:
        """A partition whose active and standby offsets in the newest read are still what its synced
        commit left was synced at that read: nothing happened that needs a new commit."""
        if not self.snapshot:
            return
        read_at_s = self.snapshot[0].snapshot_time_ms / 1000
        offsets = self._offsets_read()
        for key, commit in self.commits.items():
            result = self.results.get(key)
            if result is None or not commit.synced:
                continue
            group_id, topic, partition = key
            a = offsets.get((result["active"], group_id, topic, partition))
            b = offsets.get((result["standby"], group_id, topic, partition))
            if a is not None and b is not None and a.committed_offset == result["committed"] \
                    and b.committed_offset is not None and b.committed_offset == commit.committed_after:
                self.synced_at[key] = max(self.synced_at.get(key, 0.0), read_at_s)

    def unsettled_partitions(self, now_s: float, revisit_s: float,
                             revisit_first_s: float | None = None) -> frozenset[tuple[str, int]]:
        """The (topic, partition)s with a group-partition not settled and translated its wait
        (``revisit_rules.unsettled_wait_s``) or more ago: a cycle may revisit them when their log
        ends moved, so a followed read reads those log ends anew (``continuous/cycle_reads.py``)."""
        return frozenset((key[1], key[2]) for key, m in self.memory.items()
                         if not m.settled and now_s - m.translated_at_s >= unsettled_wait_s(m, revisit_s, revisit_first_s))

    def next_unsettled_due_s(self, now_s: float, revisit_s: float, revisit_first_s: float | None) -> float:
        """Seconds until the next unsettled group-partition's wait ends (at most ``revisit_s``): the
        run's next cycle when no commit comes before. One whose wait ended already is not waited
        for again (it is due at the next cycle, whenever that is): a quiet one never keeps the run
        cycling. Without a shorter first wait, ``revisit_s``: the unsettled partitions due then are
        revisited in one cycle, not each in a cycle of its own."""
        soonest = revisit_s
        if revisit_first_s is None or revisit_first_s >= revisit_s:
            return soonest
        for m in self.memory.values():
            if not m.settled:
                due = m.translated_at_s + unsettled_wait_s(m, revisit_s, revisit_first_s) - now_s
                if 0 < due < soonest:
                    soonest = due
        return soonest

    def forget_topics(self, topics: Iterable[str]) -> None:
        """Translate these topics' group-partitions again next cycle (their shape changed)."""
        topics = set(topics)
        for key in [k for k in self.memory if k[1] in topics]:
            del self.memory[key]

    def _keep_anchor(self, row: Mapping[str, Any]) -> None:
        if not (row["active"] and row["standby"]):
            return
        key = (row["group_id"], row["topic"], int(row["partition"]), row["active"], row["standby"])
        a, s = row.get("keep_active_offset"), row.get("keep_standby_offset")
        if a is None or s is None:
            self.anchors.pop(key, None)
        else:
            self.anchors[key] = Anchor(row["active"], row["standby"], int(a), int(s))

    def _forget_gone(self, present: set[GroupPartition]) -> None:
        for table in (self.results, self.commits, self.memory, self.synced_at):
            for key in [k for k in table if k not in present]:
                del table[key]
        self.committed_since_checkpoint &= present

    def readiness(self, now_s: float, max_age_s: float) -> list[GroupReadiness]:
        """Every group's readiness to switch now (``readiness/rules.py``) from the newest read and results."""
        return group_readiness(self.readiness_facts(), now_s, max_age_s)

    def readiness_facts(self) -> list[PartitionFacts]:
        offsets = self._offsets_read()
        facts = []
        for key, result in sorted(self.results.items()):
            group_id, topic, partition = key
            active, standby = result["active"], result["standby"]
            a, s = offsets.get((active, group_id, topic, partition)), offsets.get((standby, group_id, topic, partition))
            commit = self.commits.get(key)
            active_now = a.committed_offset if a else None
            standby_now = s.committed_offset if s else None
            facts.append(PartitionFacts(
                group_id, topic, partition, active, standby, result["status"], result["committed"],
                result["standby_offset"], result.get("anchor_active_offset"),
                commit.decision if commit else None, bool(commit and commit.synced), standby_now, active_now,
                self.synced_at.get(key), read_error="; ".join(r.read_error for r in (a, s) if r is not None and r.read_error),
            ))
        return facts

    def checkpoint(self, checkpoint_id: str, time_ms: int, max_age_s: float = 300.0) -> Checkpoint:
        """The rows of a checkpoint now (see the module's invariants), and the state's marks moved on."""
        snapshot_rows = [replace(r, snapshot_id=checkpoint_id, snapshot_time_ms=time_ms) for r in self.snapshot or []]
        translation_rows = [{**row, "snapshot_id": checkpoint_id, "cycle_time": time_ms}
                            for _, row in sorted(self.results.items())]
        commit_rows = [
            replace(row, snapshot_id=checkpoint_id, cycle_time_ms=time_ms) if key in self.committed_since_checkpoint
            else carried_commit(row, checkpoint_id, time_ms)
            for key, row in sorted(self.commits.items())
        ]
        anchor_rows = anchor_changes(translation_rows, self.anchors_written, checkpoint_id, time_ms)
        readiness_rows = [readiness_row(g, checkpoint_id, time_ms) for g in self.readiness(time_ms / 1000, max_age_s)]
        self.anchors_written = dict(self.anchors)
        self.committed_since_checkpoint = set()
        return Checkpoint(checkpoint_id, time_ms, snapshot_rows, translation_rows, commit_rows, anchor_rows,
                          readiness_rows)
