"""MirrorMaker 2's offset-syncs topics in the sync cycle: one incremental read of each per cycle, the
pairs stamped with the active log ends read after them, and the stamped pairs handed to the work
rows (``sync/work.py``'s ``offset_syncs``).

Order, the stamps' proof: :func:`~offset_pipeline.sync.snapshot_step.read_clusters` reads every
offset-syncs topic alongside the groups, before any log range (``OffsetSyncsReader.read_all``),
and :meth:`OffsetSyncsReader.observe` stamps the pairs with the log ends of the ranges read after
that. A pair read for the first time is therefore stamped only with an end read after it; a pair
already stamped keeps its earliest stamp (``sync/offset_sync_stamps.py``).

What is kept between cycles (:class:`OffsetSyncsReader`): per topic, the pairs read so far, thinned
(:func:`thinned_pairs`) and bounded per partition (:func:`bounded_pairs`: the newest densely, older
ones ever more sparsely; dropping a pair only ever proves less), their stamps, and where the next
read starts. A cycle's work is what its read touched, not every pair kept. A continuous run keeps one reader for its life, restored when it starts from what
earlier runs stored and storing what it added at each checkpoint (its successor, after the
rollover, goes on from there). The interval mode starts a process per cycle: its reader is restored
from the rows the previous cycles stored (``storage/offset_sync_pairs.py``, :func:`restored_reader`)
and the cycle stores what it added (:func:`store_new_pairs`). Re-deriving the stamps instead is not
possible: a fresh process can stamp a pair only with an end read after it, which is never below the
committed offsets it read before, so a group that never catches up with its log end would never
pass its stamp.

Faults: a topic that cannot be read (missing, refused, timed out, its cluster's child died) is a
reason on its direction's facts (``offset_syncs_unreadable`` on the rows that need the pairs); the
pairs kept so far stay facts. A topic whose end went below where the next read starts (recreated)
starts over from its beginning with no pairs and no stamps. Nothing here raises for a topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from offset_pipeline.kafka_io.group_offsets import PartitionRange
from offset_pipeline.kafka_io.offset_syncs import OffsetSyncsRead, read_offset_syncs_from
from offset_pipeline.settings import OffsetSyncsTopic
from offset_pipeline.storage import offset_sync_pairs
from offset_pipeline.sync.offset_sync_stamps import OffsetSyncStamps
from offset_pipeline.translation import OffsetSyncFacts

MAX_PAIRS_PER_PARTITION = 256  # pairs kept per partition: the newest densely, older ones ever more sparsely
MAX_RECORDS_PER_READ = 200_000  # a long backlog is read over several cycles, each within its bound

FlowKey = tuple[str, str]  # source, target
PartitionKey = tuple[str, int]  # upstream topic, partition
StoredPair = tuple[str, int, int, int, int | None]  # topic, partition, u, d, active_end_after


def thinned_pairs(previous: tuple[int, int] | None, new: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pairs of ``new`` (one read's pairs of one partition, in the topic's order, all stamped
    alike) worth keeping after ``previous`` (the last pair kept before them): the last one, and both
    pairs around every step where the downstream offset goes back.

    Why nothing is lost: the rule (``translation/offset_sync_anchor.py``) uses only the pairs after
    the last such step (B's current log), and among pairs of one stamp confirmed for a group the
    largest ``d`` wins; within a run without a step back ``d`` only grows, so the last pair of the
    read dominates every other pair of its run. Keeping both pairs around each step keeps every step
    visible, and a step between two kept pairs implies a true step at the later one, so the kept
    pairs' last step is the true last step."""
    keep: set[int] = set()
    before = previous
    for i, (u, d) in enumerate(new):
        if before is not None and d < before[1]:
            keep.update((i - 1, i) if i > 0 else (i,))
        before = (u, d)
    if new:
        keep.add(len(new) - 1)
    return [new[i] for i in sorted(keep)]


def bounded_pairs(pairs: list[tuple[int, int]], cap: int) -> list[tuple[int, int]]:
    """``pairs`` (a partition's kept pairs, in order) cut to at most ``cap``: the pairs before the
    last step back of the downstream offset go (the rule never uses them) but the one right before
    it (which shows the step); then, while too many are left, every other pair of the older half of
    the rest goes. Dropping a pair only proves less (a group then starts from an older pair: more
    duplicates, never a loss); halving the older half again and again keeps pairs for groups far
    behind, ever more sparsely, and the newest ones densely."""
    if len(pairs) <= cap:
        return pairs
    last_step = max((i for i in range(1, len(pairs)) if pairs[i][1] < pairs[i - 1][1]), default=0)
    head, rest = pairs[max(last_step - 1, 0):last_step], pairs[last_step:]
    # The pair right after the step stays with the one before it: without it the step is not seen
    # and the rule would take that older pair (from a log that is gone) for a current one.
    after_step, rest = (rest[:1], rest[1:]) if head else ([], rest)
    while len(head) + len(after_step) + len(rest) > cap and len(rest) > 2:
        half = len(rest) // 2
        rest = rest[:half][1::2] + rest[half:]  # keeps the older half's every second pair
    return (head + after_step + rest)[-cap:]


@dataclass
class _TopicState:
    topic: OffsetSyncsTopic
    stamps: OffsetSyncStamps = field(default_factory=OffsetSyncStamps)
    pairs: dict[PartitionKey, list[tuple[int, int]]] = field(default_factory=dict)
    next_offset: int = 0
    read: OffsetSyncsRead | None = None  # this cycle's read, until observed
    added: list[StoredPair] = field(default_factory=list)  # new pairs or stamps of the last observe
    advanced: bool = False  # the last observe moved where the next read starts
    unstored: list[StoredPair] = field(default_factory=list)  # ``added`` since the last take_unstored
    unstored_advanced: bool = False
    unstamped: set[PartitionKey] = field(default_factory=set)  # partitions with a pair not stamped yet
    # each partition's facts as the translation takes them, built once per change (a continuous
    # cycle asks for every partition's, most unchanged since the last cycle)
    facts: dict[PartitionKey, OffsetSyncFacts] = field(default_factory=dict)


class OffsetSyncsReader:
    """The offset-syncs topics of a run (or of one interval cycle) and what it keeps of them."""

    def __init__(self, topics: Iterable[OffsetSyncsTopic], client_configs: Mapping[str, Callable[[], dict[str, Any]]],
                 *, max_pairs: int = MAX_PAIRS_PER_PARTITION, max_records: int = MAX_RECORDS_PER_READ) -> None:
        self.client_configs = client_configs
        self.max_pairs, self.max_records = max_pairs, max_records
        self._topics: dict[FlowKey, _TopicState] = {(t.source, t.target): _TopicState(t) for t in topics}

    @property
    def topics(self) -> list[OffsetSyncsTopic]:
        return [state.topic for state in self._topics.values()]

    def restore(self, source: str, target: str, pairs: Iterable[StoredPair], next_offset: int) -> None:
        """What earlier cycles stored for ``source -> target``: pairs in the topic's order with their
        stamps (stamps are facts of the reads that made them), and where the next read starts."""
        state = self._topics.get((source, target))
        if state is None:
            return
        state.pairs, stamps = {}, {}
        for topic, partition, u, d, end in pairs:
            kept = state.pairs.setdefault((topic, partition), [])
            if (u, d) not in kept[-1:]:  # the store has a row per stamp of a pair
                kept.append((u, d))
            if end is not None:  # the earliest stamp stored for the pair
                key = (topic, partition, u, d)
                stamps[key] = min(stamps.get(key, end), end)
        for kept in state.pairs.values():
            kept[:] = bounded_pairs(kept, self.max_pairs)
        state.stamps, state.facts = OffsetSyncStamps(), {}
        state.stamps.restore({k: tuple(v) for k, v in state.pairs.items()}, stamps)
        state.unstamped = {key for key, kept in state.pairs.items()
                           if any((key[0], key[1], u, d) not in stamps for u, d in kept)}
        state.next_offset = max(0, int(next_offset))

    # -- the read, before the log ranges ---------------------------------------------------------

    def read_one(self, flow: FlowKey, call: Callable[..., OffsetSyncsRead], timeout_s: float) -> None:
        """Read the flow's topic from where the last read stopped. ``call(function, *args, **kwargs)``
        runs it (in the cluster's child process). Never raises."""
        state = self._topics[flow]
        t = state.topic
        try:
            read = call(read_offset_syncs_from, self.client_configs[t.stored_on](), t.stored_on, t.topic,
                        state.next_offset, timeout_s, self.max_records)
        except Exception as exc:  # noqa: BLE001 - this topic's pairs are unknown this cycle; nothing else is
            read = OffsetSyncsRead(t.stored_on, t.topic,
                                   unreadable=f"{t.stored_on}: {t.topic}: {type(exc).__name__}: {str(exc)[:300]}")
        state.read = read

    # -- the stamps, after the log ranges --------------------------------------------------------

    def observe(self, ranges: Mapping[str, list[PartitionRange]]) -> None:
        """This cycle's reads stamped with the log ends of ``ranges`` (read after them): each flow's
        pairs with its source cluster's ends. A flow not read this cycle is left as it was."""
        for state in self._topics.values():
            read, state.read, state.added, state.advanced = state.read, None, [], False
            if read is None:
                continue
            if read.unreadable is not None:
                state.stamps.observe({}, {}, unreadable=read.unreadable)
                state.facts = {}
                continue
            if read.next_offset is not None and read.next_offset < state.next_offset:
                # The topic was recreated or truncated: what was kept may belong to another log.
                state.pairs, state.stamps, state.next_offset, state.advanced = {}, OffsetSyncStamps(), 0, True
                state.unstamped, state.facts = set(), {}
                state.stamps.observe({}, {}, unreadable=f"{read.cluster}: {read.topic} starts over "
                                                        "(its end went back): read again next cycle")
                continue
            ends = {(r.topic, r.partition): r.log_end for r in ranges.get(state.topic.source, ())}
            # only the partitions this read named, and those waiting for a first stamp, can change
            touched = set(read.pairs) | {key for key in state.unstamped if key in ends}
            if state.stamps.facts("", -1).unreadable is not None:
                state.facts = {}  # read again after a failed read: every partition's reason goes
            for key in touched:
                state.facts.pop(key, None)
            before = {(key, u, d): stamp for key in touched for (u, d), stamp in self._stamped(state, key)}
            for key, new in read.pairs.items():
                kept = state.pairs.setdefault(key, [])
                kept.extend(thinned_pairs(kept[-1] if kept else None, list(new)))
                kept[:] = bounded_pairs(kept, self.max_pairs)
            state.stamps.update({key: tuple(state.pairs[key]) for key in touched}, ends)
            if read.next_offset is not None:
                state.advanced = read.next_offset != state.next_offset
                state.next_offset = read.next_offset
            # what the store lacks: pairs read for the first time, and pairs that got their first stamp
            for key in touched:
                stamped = self._stamped(state, key)
                for (u, d), stamp in dict(stamped).items():
                    if (key, u, d) not in before or (before[(key, u, d)] is None and stamp is not None):
                        state.added.append((key[0], key[1], u, d, stamp))
                if any(stamp is None for _, stamp in stamped):
                    state.unstamped.add(key)
                else:
                    state.unstamped.discard(key)
            state.unstored += state.added
            state.unstored_advanced = state.unstored_advanced or state.advanced

    @staticmethod
    def _stamped(state: _TopicState, key: PartitionKey) -> list[tuple[tuple[int, int], int | None]]:
        return [((p.upstream, p.downstream), p.active_end_after) for p in state.stamps.facts(*key).pairs]

    # -- what the cycle hands on -----------------------------------------------------------------

    def facts(self) -> dict[tuple[str, int, str, str], OffsetSyncFacts]:
        """(topic, partition, active, standby) -> the stamped pairs kept for that partition, as
        ``build_work`` takes them (``offset_syncs``). A partition unchanged since the last call gives
        the same object."""
        out: dict[tuple[str, int, str, str], OffsetSyncFacts] = {}
        for (source, target), state in self._topics.items():
            for key in state.pairs:
                facts = state.facts.get(key)
                if facts is None:
                    facts = state.facts[key] = state.stamps.facts(*key)
                out[(key[0], key[1], source, target)] = facts
        return out

    def direction_facts(self) -> dict[FlowKey, OffsetSyncFacts]:
        """(active, standby) -> the facts of a partition without pairs in a direction whose topic is
        read: none yet (``no_offset_sync``), or why the topic was not read this cycle
        (``offset_syncs_unreadable``). ``build_work``'s ``offset_syncs_default``."""
        return {flow: OffsetSyncFacts((), unreadable=state.stamps.facts("", -1).unreadable)
                for flow, state in self._topics.items()}

    def unreadable(self) -> dict[FlowKey, str]:
        """(source, target) -> why its topic was not read this cycle."""
        return {flow: facts.unreadable for flow, facts in self.direction_facts().items() if facts.unreadable}

    def was_read(self, source: str, target: str) -> bool:
        """The last :meth:`observe` moved where the flow's next read starts (so it must be stored)."""
        state = self._topics.get((source, target))
        return bool(state and state.advanced)

    def take_unstored(self) -> list[tuple[OffsetSyncsTopic, list[StoredPair], int]]:
        """What the observes since the last call added, per flow whose store needs a row (new pairs,
        first stamps, or a read that moved on), with where the next read starts; forgotten here, the
        caller stores it (a continuous run at its checkpoints, an interval cycle at its end)."""
        out = []
        for state in self._topics.values():
            if state.unstored or state.unstored_advanced:
                out.append((state.topic, state.unstored, state.next_offset))
            state.unstored, state.unstored_advanced = [], False
        return out

    def new_rows(self) -> dict[FlowKey, tuple[OffsetSyncsTopic, list[StoredPair], int]]:
        """Per flow: what the last :meth:`observe` added (new pairs, first stamps) and where the next
        read starts, for the interval mode's store."""
        return {flow: (state.topic, list(state.added), state.next_offset) for flow, state in self._topics.items()}


# -- the interval mode: a process per cycle, the reader restored from and saved to ClickHouse ------

def restored_reader(topics: Iterable[OffsetSyncsTopic], client_configs: Mapping[str, Callable[[], dict[str, Any]]],
                    client) -> tuple[OffsetSyncsReader, str | None]:
    """A reader with what earlier cycles stored (``storage/offset_sync_pairs.py``), read with
    ``client``; and why nothing was restored (None: restored). Without the store the reader starts
    from the topic's beginning with no stamps: fewer proofs this cycle, never a wrong one."""
    topics = list(topics)
    reader = OffsetSyncsReader(topics, client_configs)
    if not topics:
        return reader, None
    if client is None:
        return reader, "ClickHouse is not there: offset-sync pairs read afresh, unstamped until the next cycle"
    try:
        for t in topics:
            pairs, next_offset = offset_sync_pairs.stored_pairs(client, t.source, t.target, t.topic)
            reader.restore(t.source, t.target, pairs, next_offset)
    except Exception as exc:  # noqa: BLE001 - the store is an aid: without it the pairs are read afresh
        return (OffsetSyncsReader(topics, client_configs),
                f"reading stored offset-sync pairs failed: {type(exc).__name__}: {str(exc)[:300]}")
    return reader, None


def store_new_pairs(writer, reader: OffsetSyncsReader, cycle_time_ms: int) -> int:
    """The pairs and first stamps this cycle added, and where each read stopped, for the next
    cycle (``writer``: a storage writer; spooled when ClickHouse is down). Returns rows written."""
    return store_pairs(writer, reader.take_unstored(), cycle_time_ms)


def store_pairs(writer, unstored: list[tuple[OffsetSyncsTopic, list[StoredPair], int]], time_ms: int) -> int:
    """:meth:`OffsetSyncsReader.take_unstored`'s rows into ``offset_sync_pairs``. Returns rows written."""
    written = 0
    for topic, added, next_offset in unstored:
        written += offset_sync_pairs.insert_pairs(writer, topic.source, topic.target, topic.stored_on, topic.topic,
                                                  added, next_offset, time_ms)
    return written
