"""Which cluster a group is active on (docs/concepts/problem.md: active and standby clusters).

Facts per cluster: is it reachable, how many members the group has there, and its committed
offsets now and at the previous snapshot. Offsets this pipeline committed itself (the sync writes
the standby group every cycle) are not the group's own movement and are ignored.

Rules, in order:

1. a cluster that cannot be read -> ``CLUSTER_UNAVAILABLE`` (members there are unknown, so a split
   brain cannot be ruled out);
2. members on both clusters -> ``SPLIT_BRAIN``: an alarm, never something to write through;
3. members on exactly one cluster -> that cluster is active;
4. no members: the group's own offsets moved on exactly one cluster -> that one; on both ->
   ``SPLIT_BRAIN``;
5. no members and no movement -> keep the previous direction if known, else ``DIRECTION_UNDETERMINED``.

Only a decided direction lets the sync write to the standby, and the standby is, by construction,
a cluster where the group has no members.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

from .result import TranslationResult, TranslationStatus, untranslatable

TopicPartitionKey = tuple[str, int]
ClusterGroup = tuple[str, str]  # (cluster, group_id)


class DirectionBasis(str, Enum):
    MEMBERS = "members"
    OFFSET_MOVEMENT = "offset_movement"
    PREVIOUS = "previous"
    SPLIT_BRAIN = "split_brain"
    UNDETERMINED = "undetermined"
    CLUSTER_UNAVAILABLE = "cluster_unavailable"


_FAILURE_STATUS = {
    DirectionBasis.SPLIT_BRAIN: TranslationStatus.SPLIT_BRAIN,
    DirectionBasis.UNDETERMINED: TranslationStatus.DIRECTION_UNDETERMINED,
    DirectionBasis.CLUSTER_UNAVAILABLE: TranslationStatus.CLUSTER_UNAVAILABLE,
}


@dataclass(frozen=True)
class GroupSideFacts:
    """What one cluster says about one consumer group."""

    cluster: str
    available: bool = True
    members: int = 0
    committed_now: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    committed_before: Mapping[TopicPartitionKey, int] | None = None  # None: no previous snapshot
    written_by_sync: Mapping[TopicPartitionKey, int] = field(default_factory=dict)  # what we committed here

    def moved(self) -> list[TopicPartitionKey]:
        """Partitions whose committed offset changed since the previous snapshot, not by the sync."""
        if self.committed_before is None:
            return []
        return sorted(
            key
            for key, offset in self.committed_now.items()
            if self.committed_before.get(key) != offset and self.written_by_sync.get(key) != offset
        )


@dataclass(frozen=True)
class DirectionDecision:
    group_id: str
    active: str | None
    standby: str | None
    basis: DirectionBasis
    reason: str

    @property
    def decided(self) -> bool:
        return self.active is not None

    @property
    def status(self) -> TranslationStatus | None:
        """The translation status when undecided, None when decided."""
        return _FAILURE_STATUS.get(self.basis)

    def result_for(self, topic: str, partition: int) -> TranslationResult:
        """The (untranslated) result of a partition of an undecided group."""
        if self.status is None:
            raise ValueError(f"group {self.group_id!r} has a direction ({self.active} active): translate it")
        return untranslatable(self.group_id, topic, partition, self.status, self.reason)


def decide_direction(
    group_id: str,
    first: GroupSideFacts,
    second: GroupSideFacts,
    previous_active: str | None = None,
) -> DirectionDecision:
    if first.cluster == second.cluster:
        raise ValueError("two facts of one cluster")
    sides = (first, second)

    def decided(active: GroupSideFacts, basis: DirectionBasis, reason: str) -> DirectionDecision:
        standby = second if active is first else first
        return DirectionDecision(group_id, active.cluster, standby.cluster, basis, reason)

    def undecided(basis: DirectionBasis, reason: str) -> DirectionDecision:
        return DirectionDecision(group_id, None, None, basis, reason)

    down = [s.cluster for s in sides if not s.available]
    if down:
        return undecided(DirectionBasis.CLUSTER_UNAVAILABLE, f"cannot read group state on {', '.join(down)}")
    with_members = [s for s in sides if s.members > 0]
    moved = {s.cluster: s.moved() for s in sides}
    if len(with_members) == 2:
        return undecided(
            DirectionBasis.SPLIT_BRAIN,
            f"members on both clusters ({first.cluster}: {first.members}, {second.cluster}: {second.members})",
        )
    if len(with_members) == 1:
        active = with_members[0]
        other = second if active is first else first
        reason = f"{active.members} members on {active.cluster}, none on {other.cluster}"
        if moved[other.cluster]:
            reason += f" (offsets also moved on {other.cluster} without members: {len(moved[other.cluster])} partitions)"
        return decided(active, DirectionBasis.MEMBERS, reason)
    moving = [s for s in sides if moved[s.cluster]]
    if len(moving) == 2:
        return undecided(
            DirectionBasis.SPLIT_BRAIN,
            f"no members, but the group's offsets moved on both clusters "
            f"({first.cluster}: {len(moved[first.cluster])}, {second.cluster}: {len(moved[second.cluster])} partitions)",
        )
    if len(moving) == 1:
        active = moving[0]
        return decided(
            active, DirectionBasis.OFFSET_MOVEMENT,
            f"no members; offsets moved on {active.cluster} only ({len(moved[active.cluster])} partitions)",
        )
    if previous_active is not None:
        matches = [s for s in sides if s.cluster == previous_active]
        if matches:
            return decided(matches[0], DirectionBasis.PREVIOUS, f"no members, no movement: keeping {previous_active} active")
    return undecided(DirectionBasis.UNDETERMINED, "no members and no offset movement on either cluster, no previous direction")


@dataclass(frozen=True)
class DirectionHistory:
    """What earlier cycles left that the direction rules use.

    ``committed_before``: the previous snapshot's committed offsets per (cluster, group); None when
    there is no previous snapshot at all (then nothing counts as movement). A group missing from a
    previous snapshot that exists had no offsets then.
    ``written_by_sync``: offsets the sync committed per (cluster, group) since the previous snapshot.
    ``previous_active``: the active cluster of each group's last decided cycle.
    """

    committed_before: Mapping[ClusterGroup, Mapping[TopicPartitionKey, int]] | None = None
    written_by_sync: Mapping[ClusterGroup, Mapping[TopicPartitionKey, int]] = field(default_factory=dict)
    previous_active: Mapping[str, str] = field(default_factory=dict)

    def before(self, cluster: str, group_id: str) -> Mapping[TopicPartitionKey, int] | None:
        if self.committed_before is None:
            return None
        return self.committed_before.get((cluster, group_id), {})
