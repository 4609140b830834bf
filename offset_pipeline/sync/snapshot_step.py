"""The snapshot step of a sync cycle: what both clusters say, read in a child process per cluster.

:func:`read_clusters` reads each cluster's matching groups, then the log ranges and timestamp types
of every partition any group of either cluster involves (``kafka_io/cluster_snapshot.py``), both
clusters at once. A cluster whose reads fail, time out or crash is not an error of the cycle
(the other cluster is synced as usual): it is in :attr:`ClusterReads.unavailable` with the reason, and its rows say so
(``sync/snapshot_rows.py``). :func:`unread_facts` counts what the rows say was not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from offset_pipeline.kafka_io.cluster_snapshot import (
    ClusterRanges,
    cluster_groups,
    cluster_named_groups,
    cluster_ranges,
)
from offset_pipeline.kafka_io.connection_probe import explained
from offset_pipeline.kafka_io.group_offsets import (
    UNREADABLE_GROUP_STATE,
    GroupFilter,
    GroupState,
    PartitionRange,
    describe_error,
)
from offset_pipeline.kafka_io.isolated import IsolatedCalls
from offset_pipeline.kafka_io.thread_pools import shared_pool
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.sync.offset_sync_step import OffsetSyncsReader
from offset_pipeline.sync.snapshot_rows import build_snapshot_rows, involved_partitions

CHILD_START_S = 30.0  # beyond the Kafka bound: starting the child process that reads a cluster

#: cluster name -> its admin client configuration (called in the reading thread, once per call)
AdminConfigs = Mapping[str, Callable[[], dict[str, Any]]]


@dataclass
class ClusterReads:
    """What was read from each cluster, as ``build_snapshot_rows`` takes it."""

    groups: dict[str, list[GroupState]] = field(default_factory=dict)  # [] for an unavailable cluster
    unavailable: dict[str, str] = field(default_factory=dict)  # cluster -> why it did not answer
    ranges: dict[str, list[PartitionRange]] = field(default_factory=dict)
    timestamp_types: dict[str, dict[str, str]] = field(default_factory=dict)
    range_errors: dict[str, dict[tuple[str, int], str]] = field(default_factory=dict)
    carried: int = 0  # partitions (per cluster, summed) whose log facts were carried from an earlier read
    # cluster -> the partitions its log facts were asked of (read or carried); one absent there is
    # asked and has neither a range nor an error
    asked: dict[str, set[tuple[str, int]]] = field(default_factory=dict)

    def add_groups(self, cluster: str, result: list[GroupState] | Exception) -> None:
        if isinstance(result, Exception):
            self.groups[cluster] = []
            # A cause the client reported (TLS, authentication, ...) says cluster and fix itself.
            self.unavailable[cluster] = (explained(result)
                                         or f"listing consumer groups on {cluster} failed: {describe_error(result)}")
        else:
            self.groups[cluster] = result

    def add_ranges(self, cluster: str, result: ClusterRanges) -> None:
        # A group this cluster hid from the listing and refused to describe: unreadable here (its
        # rows say why, the translation names it not_authorized), not absent.
        refused = [GroupState(cluster, gid, UNREADABLE_GROUP_STATE, 0, {}, read_error=why)
                   for gid, why in sorted(result.refused_groups.items())]
        if result.unavailable:
            self.unavailable[cluster] = result.unavailable
            self.groups[cluster] = []
            return
        self.groups[cluster] = self.groups.get(cluster, []) + refused
        self.ranges[cluster] = result.ranges
        self.timestamp_types[cluster] = result.timestamp_types
        self.range_errors[cluster] = result.errors

    def carry_ranges(self, cluster: str, earlier: "ClusterReads", partitions: set[tuple[str, int]]) -> None:
        """``earlier``'s log facts of ``partitions`` on ``cluster``, beside this read's own."""
        self.ranges[cluster] = self.ranges.get(cluster, []) + [
            r for r in earlier.ranges.get(cluster, []) if (r.topic, r.partition) in partitions]
        self.timestamp_types[cluster] = {**earlier.timestamp_types.get(cluster, {}), **self.timestamp_types.get(cluster, {})}
        self.range_errors[cluster] = {**{tp: why for tp, why in earlier.range_errors.get(cluster, {}).items()
                                         if tp in partitions}, **self.range_errors.get(cluster, {})}
        self.carried += len(partitions)

    def known_partitions(self, cluster: str) -> set[tuple[str, int]]:
        """The partitions this read asked ``cluster`` the log facts of (read or carried)."""
        return self.asked.get(cluster, set())

    def rows(self, snapshot_id: str, snapshot_time_ms: int) -> list[SnapshotRow]:
        return build_snapshot_rows(
            snapshot_id, snapshot_time_ms, self.groups, self.ranges, self.timestamp_types,
            unavailable=self.unavailable, range_errors=self.range_errors,
        )


@dataclass(frozen=True)
class _ClusterReader:
    """The two bounded calls of the snapshot, each in its cluster's child process."""

    calls: dict[str, IsolatedCalls]
    admin_configs: AdminConfigs
    timeout_s: float

    def groups_of(self, cluster: str, group_filter: GroupFilter) -> list[GroupState] | Exception:
        try:
            return self.calls[cluster].call(cluster_groups, self.admin_configs[cluster](), cluster, group_filter,
                                            self.timeout_s, timeout_s=self.timeout_s + CHILD_START_S)
        except Exception as exc:  # noqa: BLE001 - this cluster's facts are unknown; the other's are not
            return exc

    def named_groups_of(self, cluster: str, previous: list[GroupState], group_ids: list[str]
                        ) -> list[GroupState] | Exception:
        """``previous`` (the cluster's groups as last read) with ``group_ids``, and any group whose
        facts were not read last time, read again."""
        reread = set(group_ids) | {g.group_id for g in previous if g.read_error}
        kept = [g for g in previous if g.group_id not in reread]
        if not reread:
            return kept
        try:
            fresh = self.calls[cluster].call(cluster_named_groups, self.admin_configs[cluster](), cluster,
                                             sorted(reread), self.timeout_s, timeout_s=self.timeout_s + CHILD_START_S)
        except Exception as exc:  # noqa: BLE001 - this cluster's facts are unknown; the other's are not
            return exc
        return sorted(kept + fresh, key=lambda g: g.group_id)

    def ranges_of(self, cluster: str, partitions: list[tuple[str, int]], unlisted_groups: list[str]) -> ClusterRanges:
        try:
            # three bounded requests: metadata, offsets (one deadline), topic configs; the unlisted
            # groups' description runs alongside (a deadline of its own, in the same bound)
            return self.calls[cluster].call(cluster_ranges, self.admin_configs[cluster](), cluster, partitions,
                                            self.timeout_s, unlisted_groups,
                                            timeout_s=4 * self.timeout_s + CHILD_START_S)
        except Exception as exc:  # noqa: BLE001 - no log range of this cluster is known
            return ClusterRanges(unavailable=f"reading topic metadata on {cluster} failed: {describe_error(exc)}")

    def call_on(self, cluster: str):
        """``call(function, *args, **kwargs)`` in ``cluster``'s child process, bounded by the Kafka
        timeout plus the child's start (the offset-syncs reads)."""
        def call(function, *args, **kwargs):
            calls = self.calls.get(cluster)
            if calls is None:
                raise RuntimeError(f"{cluster} is not a cluster of this snapshot")
            return calls.call(function, *args, **kwargs, timeout_s=self.timeout_s + CHILD_START_S)
        return call

    def close(self) -> None:
        for c in self.calls.values():
            c.close()


@dataclass(frozen=True)
class ChangedGroups:
    """A read of only the groups that changed (a commit-log follower saw them commit): each cluster's
    groups as last read (``previous``), and the ids to read again on every cluster.

    ``carried``: the last read, whose log facts stand for the partitions where nothing changed (a
    settled group-partition whose committed offset and group did not change needs no new log end:
    its answer stands, ``continuous/revisit_rules.py``); ``also``: partitions to read anyway (the
    owner's unsettled ones, waiting for a copy to arrive)."""

    previous: Mapping[str, list[GroupState]]
    group_ids: list[str]
    carried: ClusterReads | None = None
    also: frozenset[tuple[str, int]] = frozenset()
    # the groups as the carried read gave them, when ``previous`` holds offsets put in since (a
    # commit log's): a partition whose offset moved so has its log facts read (default: previous)
    before: Mapping[str, list[GroupState]] | None = None

    def fresh_partitions(self, groups: Mapping[str, list[GroupState]], involved: set[tuple[str, int]]
                         ) -> set[tuple[str, int]]:
        """The partitions whose log facts this read reads (pure): on either cluster, every partition
        of a group whose members or state changed, that is new or unreadable; each partition whose
        committed offset changed, appeared or went; ``also``; and any the carried read did not ask
        about. So a group-partition the cycle revisits for a change of its group or offset
        (``revisit_rules``) is translated from log facts read after that change."""
        fresh = set(self.also & involved)
        earlier = self.before if self.before is not None else self.previous
        for cluster, states in groups.items():
            before = {g.group_id: g for g in earlier.get(cluster, [])}
            for now in states:
                was = before.get(now.group_id)
                if now is was:  # a group not read again: carried whole
                    continue
                if was is None or now.read_error or was.read_error \
                        or (now.member_count, now.state) != (was.member_count, was.state):
                    fresh |= set(now.committed) | (set(was.committed) if was is not None else set())
                elif now.committed != was.committed:
                    fresh |= {tp for tp in set(now.committed) | set(was.committed)
                              if now.committed.get(tp) != was.committed.get(tp)}
            fresh |= involved - self.carried.known_partitions(cluster)
        return fresh & involved


def read_clusters(admin_configs: AdminConfigs, group_filter: GroupFilter, timeout_s: float,
                  calls: Mapping[str, IsolatedCalls] | None = None,
                  offset_syncs: OffsetSyncsReader | None = None,
                  changed: ChangedGroups | None = None) -> ClusterReads:
    """Every cluster's groups, then the log facts of the partitions they involve, ``timeout_s`` per
    Kafka wait. Never raises for a cluster that cannot be read: it is in ``unavailable``.

    ``calls``: a child process per cluster that outlives this read (a continuous run's, closed by its
    owner); by default each cluster gets one for this read only. ``offset_syncs``: MirrorMaker 2's
    offset-syncs topics, read alongside the groups, so before every log range, then stamped with the
    log ends (``sync/offset_sync_step.py``: a pair is stamped only with an end read after it).
    ``changed``: instead of listing every group, the groups as last read with the changed ones read
    again; with ``changed.carried`` (the last read), the log facts too are read only where they may
    have changed (:meth:`ChangedGroups.fresh_partitions`), the others carried from that read."""
    # Each cluster's reads in a child process of its own (kafka_io/isolated.py): librdkafka can
    # abort its process when admin requests time out around a broker restart; so it costs only that
    # cluster's facts. Both clusters are read at once.
    reads = ClusterReads()
    owned = calls is None
    reader = _ClusterReader(dict(calls) if calls is not None else {name: IsolatedCalls(name) for name in admin_configs},
                            admin_configs, timeout_s)
    syncs_topics = offset_syncs.topics if offset_syncs is not None else []
    # the process's pool (kafka_io/thread_pools.py): a continuous run reads both clusters every cycle
    pool = shared_pool("offset-snapshot", 2 * (len(admin_configs) + len(syncs_topics)))
    futures = []
    try:
        syncs_reads = [pool.submit(offset_syncs.read_one, (t.source, t.target),
                                   reader.call_on(t.stored_on), timeout_s) for t in syncs_topics]
        futures += syncs_reads
        if changed is None:
            listed = [pool.submit(reader.groups_of, name, group_filter) for name in admin_configs]
        else:
            listed = [pool.submit(reader.named_groups_of, name, list(changed.previous.get(name, [])),
                                  changed.group_ids) for name in admin_configs]
        futures += listed
        for name, groups in zip(admin_configs, listed):
            reads.add_groups(name, groups.result())
        for done in syncs_reads:  # every pair read is read before any log end below
            done.result()
        involved = involved_partitions(g for states in reads.groups.values() for g in states)
        carried = changed.carried if changed is not None else None
        fresh = involved if carried is None else changed.fresh_partitions(reads.groups, involved)
        partitions = sorted(fresh)
        readable = [name for name in admin_configs if name not in reads.unavailable]
        ranged = [pool.submit(reader.ranges_of, name, partitions, _unlisted(reads.groups, name)) for name in readable]
        futures += ranged
        for name, ranges in zip(readable, ranged):
            reads.add_ranges(name, ranges.result())
            if name in reads.unavailable:
                continue
            reads.asked[name] = involved
            if carried is not None:
                reads.carry_ranges(name, carried, involved - fresh)
        if offset_syncs is not None:
            offset_syncs.observe(reads.ranges)
    finally:
        wait(futures)  # none still uses the children when they close
        if owned:
            reader.close()
    return reads


def _unlisted(groups: Mapping[str, list[GroupState]], cluster: str) -> list[str]:
    """Groups another cluster listed that ``cluster`` did not (hidden from a principal without
    Describe on them there, or absent)."""
    here = {g.group_id for g in groups.get(cluster, [])}
    return sorted({g.group_id for name, states in groups.items() if name != cluster for g in states} - here)


class UnreadFacts(NamedTuple):
    groups: list[tuple[str, str]]  # (cluster, group id) unreadable on a cluster that answered
    rows: int  # snapshot rows with a read_error (those of unavailable clusters included)


def unread_facts(rows: Iterable[SnapshotRow], unavailable: Mapping[str, str]) -> UnreadFacts:
    rows = list(rows)
    return UnreadFacts(
        groups=sorted({(r.cluster, r.group_id) for r in rows if r.read_error and r.cluster not in unavailable}),
        rows=sum(1 for r in rows if r.read_error),
    )
