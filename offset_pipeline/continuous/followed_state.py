"""What a continuous run knows of one cluster's group commits by following its commit log, which
groups changed, and how that knowledge compares with a full listing of the groups (pure: no Kafka,
Spark, Dagster or ClickHouse).

The run seeds a :class:`FollowedOffsets` with a full listing, then applies every commit the
follower (``kafka_io/commit_log.py``) hands over. The commits tell the run *which* groups changed
(:meth:`FollowedOffsets.take_news`). A group whose only news is offset commits takes its committed
offsets from here (the log is the coordinator's own record of them, read read_committed); a group
with another record (a member joined or left, its state changed) is read from the cluster again,
as is every log end. On a slow timer the run lists every group again and :meth:`FollowedOffsets.reconcile`
says where the followed offsets and the listing disagree: a commit the follower missed, or one it
saw that the cluster does not have. Expected: none.

A listing is not an instant of the log: commits go on while the groups are listed. So the run notes
the state's sequence number before it lists (``since``), waits until the follower has read the
log up to its end read after the listing, and compares only what no commit applied after ``since``
touched, in log partitions the follower has read to that end (``reached``).

Invariants (tests/continuous/test_followed_state.py, table-driven and property-based):

* **seeded**: after :meth:`seed`, the followed offsets equal the listing, except where a commit
  applied after the listing began says newer;
* **applied in order**: a commit sets its group-partition's offset, a deletion (offset None) removes
  it; the last one applied wins, as in the cluster (a group lives in one log partition, whose
  records the follower reads in order);
* **changed once**: every group a commit, a deletion or another record of it (:meth:`touch`)
  touched since the last :meth:`take_changed` (or :meth:`take_news`) is in its answer, exactly
  once, and no other group, except a group whose only news is its own echo; :meth:`take_news`
  also names, among them, every group another record touched, and hands the followed offsets of
  the others;
* **echo**: a commit of exactly the offset the run said it would write there (:meth:`expect`) is
  applied like any other, and is handed to :meth:`take_echoed` instead of :meth:`take_changed`: the
  run wrote it, it knows the offset, and reading the group again would say only that. Any commit of
  the group-partition ends the expectation, so an offset written by someone else is news;
* **no false difference**: when the follower has applied exactly the commits the listing reflects,
  :meth:`reconcile` finds no difference, whatever commits were applied after ``since``;
* **every real difference**: a group-partition untouched since ``since``, in a reached log partition,
  whose followed offset is not the listed one (or is present on one side only) is a difference;
* **healed**: after :meth:`reconcile`, the compared group-partitions hold the listing's offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

TopicPartitionKey = tuple[str, int]
#: group id -> (topic, partition) -> committed offset, as a full listing gives it
Listing = Mapping[str, Mapping[TopicPartitionKey, int]]


class FollowedCommitFacts(Protocol):
    """What :meth:`FollowedOffsets.apply` needs of a followed commit (``kafka_io.commit_log.FollowedCommit``)."""

    group: str
    topic: str
    partition: int
    offset: int | None  # None: a deletion


class DifferenceKind(str, Enum):
    """How the followed offsets and a full listing disagree on a group-partition."""

    OFFSET = "offset"  # both have it, at different offsets
    MISSED = "missed"  # the listing has it, the follower has not (a commit it missed)
    EXTRA = "extra"  # the follower has it, the listing has not (a deletion it missed)


@dataclass(frozen=True)
class Difference:
    group: str
    topic: str
    partition: int
    followed: int | None
    listed: int | None
    kind: DifferenceKind

    def __str__(self) -> str:
        return (f"{self.kind.value}: group {self.group!r} {self.topic}[{self.partition}] followed "
                f"{self.followed} listed {self.listed}")


@dataclass(frozen=True)
class Reconciliation:
    """One comparison with a full listing: how many group-partitions were compared, left out (a
    commit applied since ``since``, or a log partition not read to its end yet), and the differences."""

    compared: int
    skipped_changed: int
    skipped_unreached: int
    differences: tuple[Difference, ...] = ()


@dataclass(frozen=True)
class News:
    """What changed on a cluster since the last look (:meth:`FollowedOffsets.take_news`)."""

    changed: frozenset[str]  # every group with news
    touched: frozenset[str]  # ... those another record touched (members, state): read them again
    offsets: Mapping[str, Mapping[TopicPartitionKey, int]]  # the others' followed offsets, when they have any


@dataclass
class FollowedOffsets:
    """One cluster's committed offsets as followed (see the module's docstring)."""

    offsets: dict[str, dict[TopicPartitionKey, int]] = field(default_factory=dict)
    sequence: int = 0  # commits applied so far
    _touched_at: dict[tuple[str, str, int], int] = field(default_factory=dict)  # group-partition -> its last commit's sequence
    _changed: set[str] = field(default_factory=set)
    _touched: set[str] = field(default_factory=set)  # ... of those, groups another record touched
    _expected: dict[tuple[str, str, int], int] = field(default_factory=dict)  # group-partition -> the run's offset
    _echoed: dict[str, dict[TopicPartitionKey, int]] = field(default_factory=dict)

    def seed(self, listing: Listing, since: int | None = None) -> None:
        """The followed offsets become ``listing``'s (the first full read after the follower
        started), except those a commit applied after ``since`` touched: the listing, begun when
        the sequence was ``since``, may be older than them."""
        kept = {k: v for k, v in self._touched_at.items() if since is not None and v > since}
        offsets = {g: dict(parts) for g, parts in listing.items() if parts}
        for group, topic, partition in kept:
            value = self.offsets.get(group, {}).get((topic, partition))
            if value is None:
                offsets.get(group, {}).pop((topic, partition), None)
            else:
                offsets.setdefault(group, {})[(topic, partition)] = value
        self.offsets = {g: parts for g, parts in offsets.items() if parts}
        self._touched_at = kept
        self._expected, self._echoed = {}, {}  # the listing is newer than any echo still waited for

    def apply(self, commits: Iterable[FollowedCommitFacts], keep: Callable[[str], bool] = lambda group: True) -> int:
        """Apply ``commits`` in order (those of groups ``keep`` accepts); the count applied."""
        applied = 0
        for c in commits:
            if not keep(c.group):
                continue
            self.sequence += 1
            applied += 1
            key = (c.topic, c.partition)
            # A negative offset (a client that committed "no position", -1) is no committed offset: a
            # listing leaves it out, so the followed state does too (else a false difference).
            if c.offset is None or c.offset < 0:
                parts = self.offsets.get(c.group)
                if parts is not None:
                    parts.pop(key, None)
                    if not parts:
                        del self.offsets[c.group]
            else:
                self.offsets.setdefault(c.group, {})[key] = c.offset
            self._touched_at[(c.group, c.topic, c.partition)] = self.sequence
            expected = self._expected.pop((c.group, c.topic, c.partition), None)
            if expected is not None and c.offset is not None and c.offset >= 0 and c.offset == expected:
                self._echoed.setdefault(c.group, {})[key] = c.offset
            else:
                self._changed.add(c.group)
        return applied

    def expect(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """The run is about to commit ``offsets`` for ``group`` on this cluster: their commits, when
        they come, are echoes (:meth:`take_echoed`). A later expectation replaces an earlier one."""
        for (topic, partition), offset in offsets.items():
            self._expected[(group, topic, partition)] = offset

    def take_echoed(self) -> dict[str, dict[TopicPartitionKey, int]]:
        """group -> (topic, partition) -> offset of the echoes applied since the last call."""
        echoed, self._echoed = self._echoed, {}
        return echoed

    def has_changes(self) -> bool:
        """Whether :meth:`take_changed` would name a group now."""
        return bool(self._changed)

    def touch(self, groups: Iterable[str], keep: Callable[[str], bool] = lambda group: True) -> None:
        """``groups`` changed otherwise (a member joined or left): named by the next
        :meth:`take_changed`, their offsets untouched."""
        touched = {g for g in groups if keep(g)}
        self._changed |= touched
        self._touched |= touched

    def take_changed(self) -> set[str]:
        """The groups a commit or deletion touched since the last call (each once)."""
        return self.take_news().changed

    def take_news(self) -> News:
        """What :meth:`take_changed` gives, with which of those groups another record touched and
        the followed offsets of the rest (each group's whole offsets; none for a group whose
        offsets were all deleted)."""
        changed, touched = self._changed, self._touched & self._changed
        self._changed, self._touched = set(), set()
        offsets = {g: dict(self.offsets[g]) for g in changed - touched if g in self.offsets}
        return News(frozenset(changed), frozenset(touched), offsets)

    def reconcile(self, listing: Listing, since: int, reached: Callable[[str], bool] = lambda group: True
                  ) -> Reconciliation:
        """Compare with ``listing`` (made after the state's sequence was ``since``), then take the
        listing's offsets where they were compared. ``reached(group)``: whether the follower has read
        the group's log partition up to its end read after the listing."""
        compared = skipped_changed = skipped_unreached = 0
        differences: list[Difference] = []
        for group in sorted(set(self.offsets) | set(listing)):
            followed, listed = self.offsets.get(group, {}), listing.get(group, {})
            keys = set(followed) | set(listed)
            if not reached(group):
                skipped_unreached += len(keys)
                continue
            for key in sorted(keys):
                if self._touched_at.get((group, *key), 0) > since:
                    skipped_changed += 1
                    continue
                compared += 1
                f, l_ = followed.get(key), listed.get(key)
                if f != l_:
                    kind = DifferenceKind.OFFSET if f is not None and l_ is not None else (
                        DifferenceKind.MISSED if f is None else DifferenceKind.EXTRA)
                    differences.append(Difference(group, key[0], key[1], f, l_, kind))
        for d in differences:  # healed: the listing is the cluster's word
            if d.listed is None:
                parts = self.offsets.get(d.group, {})
                parts.pop((d.topic, d.partition), None)
                if not parts:
                    self.offsets.pop(d.group, None)
            else:
                self.offsets.setdefault(d.group, {})[(d.topic, d.partition)] = d.listed
        return Reconciliation(compared, skipped_changed, skipped_unreached, tuple(differences))
