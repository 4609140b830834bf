"""MirrorMaker 2's pairs, stamped with the active log end read after them: what a pair proves
(``translation/offset_sync_anchor.py``) depends on it. Pure; a run keeps one across its cycles.

A pair ``(u, d)`` of one partition, first read before an active log end ``E`` was read, says every
record of the standby at or below ``d`` copies an active record below ``E``: it proves ``d + 1``
for every group whose committed offset is at or past ``E``. The earliest such ``E`` is the most
useful, so a pair keeps the stamp of the first cycle that saw it; a group that lags behind the
active end is served by pairs seen in earlier cycles, once it has passed their stamps.

Invariants (tests/sync/test_offset_sync_stamps.py):

* **Read order.** :meth:`OffsetSyncStamps.observe` takes the pairs read and the active log ends
  read *after* them (a cycle reads the offset-syncs topic, then the log ends). A pair of a
  partition without such an end stays unstamped (it proves nothing yet).
* **Earliest stamp kept.** A pair seen again keeps its first stamp; stamps only ever come from
  ends read after the pair.
* **Bounded.** A pair no longer in the topic (compacted away) is forgotten with its stamp: the
  memory holds at most the pairs of the last read.

:func:`offset_syncs_column` and :func:`offset_syncs_from_column` carry a partition's stamped pairs in
a work row (``spark_translation.WORK_SCHEMA``'s ``offset_syncs``: JSON text, NULL when none were
read) to the task that reads the partition; a round trip gives the same facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from offset_pipeline.translation.facts import OffsetSyncFacts, SyncPair

PartitionKey = tuple[str, int]  # upstream topic, partition
PairKey = tuple[str, int, int, int]  # topic, partition, u, d


class OffsetSyncStamps:
    """The stamps of one offset-syncs topic (one MirrorMaker 2 flow into one standby cluster)."""

    def __init__(self) -> None:
        self._stamps: dict[PairKey, int] = {}
        self._pairs: dict[PartitionKey, tuple[tuple[int, int], ...]] = {}
        self._unreadable: str | None = None

    def observe(self, pairs: Mapping[PartitionKey, tuple[tuple[int, int], ...]],
                active_ends_after: Mapping[PartitionKey, int], unreadable: str | None = None) -> None:
        """One cycle's read: ``pairs`` per partition in the topic's order, and the active log ends
        read after them. An unreadable topic keeps the stamps (the pairs are still facts) and is
        reported on every partition's facts until a read succeeds."""
        self._unreadable = unreadable
        if unreadable is not None:
            return
        kept: dict[PairKey, int] = {}
        for key, partition_pairs in pairs.items():
            end = active_ends_after.get(key)
            for u, d in partition_pairs:
                pair_key = (key[0], key[1], u, d)
                stamp = self._stamps.get(pair_key, end)
                if stamp is not None:
                    kept[pair_key] = stamp
        self._stamps = kept
        self._pairs = {key: tuple(value) for key, value in pairs.items()}

    def update(self, pairs: Mapping[PartitionKey, tuple[tuple[int, int], ...]],
               active_ends_after: Mapping[PartitionKey, int]) -> None:
        """:meth:`observe` for the partitions in ``pairs`` only (each with all its pairs now); the
        other partitions keep their pairs and stamps. What a run reading incrementally calls for
        the partitions a cycle touched, so a cycle costs what changed, not every pair kept."""
        self._unreadable = None
        for key, partition_pairs in pairs.items():
            end = active_ends_after.get(key)
            now = {(key[0], key[1], u, d) for u, d in partition_pairs}
            for u, d in self._pairs.get(key, ()):
                pair_key = (key[0], key[1], u, d)
                if pair_key not in now:
                    self._stamps.pop(pair_key, None)  # no longer kept: forgotten with its stamp
            for pair_key in now:
                if pair_key not in self._stamps and end is not None:
                    self._stamps[pair_key] = end
            self._pairs[key] = tuple(partition_pairs)

    def restore(self, pairs: Mapping[PartitionKey, tuple[tuple[int, int], ...]], stamps: Mapping[PairKey, int]) -> None:
        """What an earlier process kept: the pairs per partition in the topic's order and their stamps
        (each an end that process read after the pair; a stamp of a pair not given is dropped)."""
        self._pairs = {key: tuple(value) for key, value in pairs.items()}
        present = {(key[0], key[1], u, d) for key, value in self._pairs.items() for u, d in value}
        self._stamps = {key: int(end) for key, end in stamps.items() if key in present}
        self._unreadable = None

    def facts(self, topic: str, partition: int) -> OffsetSyncFacts:
        """The partition's pairs with their stamps, as the translation takes them."""
        pairs = tuple(
            SyncPair(u, d, self._stamps.get((topic, partition, u, d)))
            for u, d in self._pairs.get((topic, partition), ())
        )
        return OffsetSyncFacts(pairs, unreadable=self._unreadable)


def offset_syncs_column(facts: OffsetSyncFacts | None) -> str | None:
    """``facts`` as a work row's ``offset_syncs`` text (None: no offset syncs for this partition).
    The forward window is not carried: the task reads it."""
    if facts is None:
        return None
    return json.dumps({
        "pairs": [[p.upstream, p.downstream, p.active_end_after] for p in facts.pairs],
        "unreadable": facts.unreadable, "remote_topic": facts.remote_topic,
    }, separators=(",", ":"))


def offset_syncs_from_column(text: str | None) -> OffsetSyncFacts | None:
    """The facts of a work row's ``offset_syncs`` text; None for NULL or empty text. Text that is
    not what :func:`offset_syncs_column` writes raises ValueError (a bug, not a Kafka fact)."""
    if not text:
        return None
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("pairs"), list):
        raise ValueError(f"not an offset_syncs column: {text[:80]!r}")
    pairs = tuple(SyncPair(int(u), int(d), None if e is None else int(e)) for u, d, e in data["pairs"])
    return OffsetSyncFacts(pairs, unreadable=data.get("unreadable"), remote_topic=data.get("remote_topic"))
