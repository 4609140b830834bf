"""What a continuous cycle reads of both clusters: every group (a listing, as the polling mode does),
or, while both clusters' commit logs are followed (``continuous/commit_feed.py``), only the groups
that committed since the last cycle.

A cycle lists every group when:

* it is the run's first, or a follower (re)started since the last listing (its commits before it
  began are known only to a listing): ``listed: first`` / ``listed: commit_log_restarted``;
* a cluster's follower is not following (no Read right on ``__consumer_offsets``, the log
  unreadable, the follower lagging, following off): ``listed: <mode>``, the polling mode for as long
  as that lasts;
* a cluster did not answer the last read, or ``reconcile_s`` passed since the last listing:
  ``listed: reconciliation``. Each listing while following is compared with the followed offsets
  (``continuous/followed_state.py``): every difference is counted, logged and expected to be none.

Otherwise the cycle reads again the groups another record touched (a member joined or left, the
state changed) and any group the last read did not have or could not read, on both clusters; a
group whose only news is offset commits takes its committed offsets from the commit log
(``FollowedOffsets.take_news``: the coordinator's own record of them) without a read, and the
run's own standby commits coming back are put in as they were written. It reads the log facts of
the partitions whose committed offset moved or whose group changed, and of the unsettled
partitions the run names; every other partition's log facts are carried from the last read (``sync/snapshot_step.py``, ``ChangedGroups``): its cost follows the
commits, not the groups. The run asks for every partition's log facts before a checkpoint, so the
rows it stores (lag, the stale sensor's log ends) are as new as a listing's.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from offset_pipeline.continuous.commit_feed import CommitLogFeed, FollowerMode
from offset_pipeline.continuous.followed_state import Difference, Listing, News
from offset_pipeline.kafka_io.group_offsets import GroupFilter
from offset_pipeline.storage.commit_log_follow import CommitLogFollowRow
from offset_pipeline.sync.snapshot_step import ChangedGroups, ClusterReads, read_clusters

#: a reconciliation waits this long at most for the follower to read up to the log's end after the listing
RECONCILE_WAIT_S = 30.0


@dataclass(frozen=True)
class FollowSettings:
    follow_commit_log: bool = True
    reconcile_s: float = 60.0
    lagging_after_s: float = 10.0


@dataclass
class _Pending:
    """A listing waiting to be compared once the follower has read the log up to ``ends``."""

    cluster: str
    listing: Listing
    unreadable: frozenset[str]
    since: int
    ends: Mapping[int, int]
    made_s: float


@dataclass
class FollowStatus:
    """What the run's metadata, readiness and monitoring say of the following."""

    modes: dict[str, tuple[str, str]] = field(default_factory=dict)  # cluster -> (mode, reason)
    reads: Counter = field(default_factory=Counter)  # "followed", "listed: <why>" -> cycles
    reconciliations: int = 0
    examples: list[str] = field(default_factory=list)  # the first differences found
    records: dict[str, Counter] = field(default_factory=dict)  # cluster -> records followed by kind
    compared_by: Counter = field(default_factory=Counter)  # cluster -> group-partitions compared
    differences_by: Counter = field(default_factory=Counter)  # cluster -> differences found
    ranges_read: int = 0  # partitions (per cluster) whose log facts the cycles read
    ranges_carried: int = 0  # ... and those a followed cycle carried from the read before it
    echoes: int = 0  # the run's own standby commits seen in the commit logs, applied without a read
    followed_commits: int = 0  # groups' commits taken from the commit logs without a read (group, cluster, cycle)

    @property
    def compared(self) -> int:
        return sum(self.compared_by.values())

    @property
    def differences(self) -> int:
        return sum(self.differences_by.values())


class CycleReads:
    """The cycles' reads (see the module's docstring)."""

    def __init__(self, admin_configs, client_configs, group_filter: GroupFilter, timeout_s: float, calls,
                 settings: FollowSettings, log):
        self._admin_configs, self._filter, self._timeout_s, self._calls = admin_configs, group_filter, timeout_s, calls
        self.settings, self.log = settings, log
        self.feed = (CommitLogFeed(client_configs, group_filter.matches, kafka_timeout_s=timeout_s,
                                   lagging_after_s=settings.lagging_after_s).start()
                     if settings.follow_commit_log else None)
        self.status = FollowStatus()
        self._groups: dict[str, list] | None = None  # each cluster's groups as last read
        self._last: ClusterReads | None = None  # the last read, when every cluster answered it
        self._listed_generation: dict[str, int] = {}
        self._next_listing_s = 0.0
        self._pending: list[_Pending] = []
        self.last_kind = ""
        self._reported: dict[str, tuple] = {}  # cluster -> the counts of the last checkpoint_rows

    # -- the cycle's read -----------------------------------------------------------------------

    def wait_for_commits(self, timeout_s: float) -> bool:
        """Until a followed commit arrived or ``timeout_s`` passed (no follower: just the wait)."""
        if self.feed is None:
            time.sleep(timeout_s)
            return False
        return self.feed.wait(timeout_s)

    def read(self, offset_syncs=None, also: frozenset[tuple[str, int]] = frozenset(),
             all_ranges: bool = False) -> ClusterReads:
        """This cycle's read. A followed one reads the log facts where an offset or a group changed
        and of ``also`` (the owner's unsettled partitions), the others carried from the last read,
        unless ``all_ranges`` (the owner's checkpoints: the rows it stores have every log end new)."""
        modes = self.modes()
        why = self._why_list(modes)
        if why is None:
            news = self.feed.take_news()
            unpatched = self._patch_echoes(self.feed.take_echoed())
            # as last read, the run's own commits in: the log facts of what the commits below move are read
            before = {cluster: list(states) for cluster, states in self._groups.items()}
            ids = sorted(unpatched | self._patch_commits(news))
            carried = None if all_ranges else self._last
            reads = read_clusters(self._admin_configs, self._filter, self._timeout_s, calls=self._calls,
                                  offset_syncs=offset_syncs,
                                  changed=ChangedGroups(self._groups, ids, carried, frozenset(also), before=before))
            kind = "followed"
        else:
            reads = self._list(modes, offset_syncs)
            kind = f"listed: {why}"
        self.status.reads[kind] += 1
        asked = sum(len(p) for p in reads.asked.values())
        self.status.ranges_read += asked - reads.carried
        self.status.ranges_carried += reads.carried
        self.last_kind = kind
        self._groups = None if reads.unavailable else {c: list(g) for c, g in reads.groups.items()}
        self._last = None if reads.unavailable else reads
        self._compare_pending()
        return reads

    def expect(self, results) -> None:
        """The cycle is about to commit ``results`` (translation rows): each standby offset, when its
        commit comes back through the commit log, is applied to the groups as last read instead of
        reading the group again (:meth:`_patch_echoes`), and wakes no cycle."""
        if self.feed is None:
            return
        by_group: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
        for r in results:
            if r.get("standby") and r.get("standby_offset") is not None:
                by_group.setdefault((r["standby"], r["group_id"]), {})[(r["topic"], int(r["partition"]))] = \
                    int(r["standby_offset"])
        for (cluster, group), offsets in by_group.items():
            self.feed.expect(cluster, group, offsets)

    def _patch_echoes(self, echoed: Mapping[str, Mapping[str, Mapping[tuple[str, int], int]]]) -> set[str]:
        """The run's own commits seen in the commit logs, put into the groups as last read (what a
        read of them would say: the offset is the one the log holds, and a commit changes no member).
        Returns the groups that cannot be patched so (not in the last read there): read them again."""
        unpatched: set[str] = set()
        if self._groups is None:
            return unpatched
        for cluster, groups in echoed.items():
            if not groups:
                continue
            states = self._groups.get(cluster)
            if states is None:
                unpatched |= set(groups)
                continue
            index = {g.group_id: n for n, g in enumerate(states)}
            for group, offsets in groups.items():
                n = index.get(group)
                if n is None or states[n].read_error:
                    unpatched.add(group)
                    continue
                states[n] = replace(states[n], committed={**states[n].committed, **offsets})
                self.status.echoes += len(offsets)
        return unpatched

    def _patch_commits(self, news: Mapping[str, News]) -> set[str]:
        """The groups' followed offsets put into the groups as last read, for each group whose only
        news on a cluster is offset commits (what a read would say: the log is where the coordinator
        keeps them, and a commit changes no member). Returns the groups to read again: another
        record touched them, the last read did not have them or could not read them, or the log
        holds no offset of theirs any more (a listing leaves such a group out)."""
        again: set[str] = set()
        for cluster, n in news.items():
            if not n.changed:
                continue
            states = self._groups.get(cluster)
            if states is None:
                again |= set(n.changed)
                continue
            index = {g.group_id: i for i, g in enumerate(states)}
            for group in n.changed:
                i = index.get(group)
                if group in n.touched or i is None or states[i].read_error or group not in n.offsets:
                    again.add(group)
                    continue
                states[i] = replace(states[i], committed=dict(n.offsets[group]))
                self.status.followed_commits += 1
        return again

    def modes(self) -> dict[str, tuple[FollowerMode, str, int]]:
        if self.feed is None:
            return {c: (FollowerMode.OFF, "following the commit logs is off", 0) for c in self._admin_configs}
        return self.feed.mode()

    def _why_list(self, modes) -> str | None:
        if self._groups is None:
            return "first" if not self.status.reads else "a cluster did not answer the last read"
        for cluster, (mode, _reason, generation) in sorted(modes.items()):
            if mode != FollowerMode.FOLLOWING:
                return mode.value
            if self._listed_generation.get(cluster) != generation:
                return FollowerMode.RESTARTED.value if cluster in self._listed_generation else "commit_log_started"
        if time.monotonic() >= self._next_listing_s:
            return "reconciliation"
        return None

    def _list(self, modes, offset_syncs) -> ClusterReads:
        since = self.feed.sequence() if self.feed is not None else {}
        if self.feed is not None:
            self.feed.take_changed()  # what changed before the listing, the listing has
            self.feed.take_echoed()
        reads = read_clusters(self._admin_configs, self._filter, self._timeout_s, calls=self._calls,
                              offset_syncs=offset_syncs)
        self._next_listing_s = time.monotonic() + self.settings.reconcile_s
        if self.feed is None:
            return reads
        for cluster, (mode, _reason, generation) in modes.items():
            if cluster in reads.unavailable or mode != FollowerMode.FOLLOWING:
                continue
            states = reads.groups.get(cluster, [])
            listing = {g.group_id: dict(g.committed) for g in states if not g.read_error}
            if self._listed_generation.get(cluster) != generation:
                # the first listing since this follower began: the followed offsets start from it
                self.feed.seed(cluster, listing, since[cluster])
                self._listed_generation[cluster] = generation
                continue
            ends = self.feed.ends(cluster)
            if ends is not None:
                self._pending.append(_Pending(cluster, listing, frozenset(g.group_id for g in states if g.read_error),
                                              since[cluster], ends, time.monotonic()))
        return reads

    def _compare_pending(self) -> None:
        still = []
        for p in self._pending:
            reached = self.feed.reached(p.cluster, p.ends)
            everything = all(reached(g) for g in p.listing)
            if not everything and time.monotonic() - p.made_s < RECONCILE_WAIT_S:
                still.append(p)
                continue
            result = self.feed.reconcile(p.cluster, p.listing, p.since,
                                         lambda g, reached=reached, p=p: g not in p.unreadable and reached(g))
            self._count(p.cluster, result.compared, result.differences)
        self._pending = still

    def _count(self, cluster: str, compared: int, differences: tuple[Difference, ...]) -> None:
        self.status.reconciliations += 1
        self.status.compared_by[cluster] += compared
        self.status.differences_by[cluster] += len(differences)
        self.log.debug(f"offset-sync followed state reconciled with a listing on {cluster}: {compared} "
                       f"compared, {len(differences)} differ")
        for d in differences[:20]:
            self.log.warning(f"offset-sync followed state differs from the listing on {cluster}: {d}")
        self.status.examples += [f"{cluster} {d}" for d in differences][: 20 - len(self.status.examples)]

    def checkpoint_rows(self, checkpoint_id: str, time_ms: int, run_id: str) -> list[CommitLogFollowRow]:
        """One row per cluster: its mode now and what happened since the previous call."""
        status = self.report()
        followed = status.reads["followed"]
        listed = sum(n for kind, n in status.reads.items() if kind != "followed")
        now = {c: (followed, listed, status.compared_by[c], status.differences_by[c],
                   sum(status.records.get(c, Counter()).values())) for c in status.modes}
        rows = []
        for cluster, (mode, why) in sorted(status.modes.items()):
            before = self._reported.get(cluster, (0, 0, 0, 0, 0))
            delta = [a - b for a, b in zip(now[cluster], before)]
            rows.append(CommitLogFollowRow(checkpoint_id, time_ms, run_id, cluster, mode, why, *delta))
        self._reported = now
        return rows

    def report(self) -> FollowStatus:
        self.status.modes = {c: (m.value, why) for c, (m, why, _g) in self.modes().items()}
        if self.feed is not None:
            self.status.records = {c: Counter(n) for c, n in self.feed.counts.items()}
        return self.status

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
