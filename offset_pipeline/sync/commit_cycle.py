"""The commit step of one sync cycle: every group's :func:`commit_group`, and what it needs around it.

``assets/commit.py`` (``offset_standby_commits``) calls these in order:

* :func:`translated_by_group`: this run's ``offset_translations`` rows, by group (carried in the
  run's process, else read back from ClickHouse);
* :func:`read_commit_history`: each group's previous snapshot (active resets) and the standby
  offsets the newest recorded cycles left (unrecorded changes);
* :func:`commit_groups`: :func:`commit_group` for every group, ``parallel_groups`` at a time, each
  cluster's Kafka calls in a child process of its own;
* :func:`unrecorded_changes` and :func:`newest_synced_times`: what the asset reports and checks.

No Dagster here: the asset logs, turns the results into metadata and evaluates the checks.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import wait
from dataclasses import dataclass, field
from operator import itemgetter

from offset_pipeline.kafka_io.group_io import IsolatedGroupIO
from offset_pipeline.kafka_io.thread_pools import shared_pool
from offset_pipeline.storage import commits, cycle_rows, snapshots
from offset_pipeline.storage.commits import CommitRow
from offset_pipeline.sync.commit_rules import CommitDecision, commit_log_line
from offset_pipeline.sync.commit_step import TRANSLATED_COLUMNS, CycleContext, TranslatedRow, commit_group

_TRANSLATED_VALUES = itemgetter(*TRANSLATED_COLUMNS)
_GROUP_PARTITION = itemgetter(0, 1, 2)

# Logged at DEBUG (monitoring/decision_log.py): a commit forward, a standby already at t, and a result with
# no offset (its translation line, at INFO, already says why; during an outage these were half of
# 8 MB of compute log per cycle at 10,000 group-partitions).
ROUTINE_COMMITS = (CommitDecision.COMMIT, CommitDecision.UNCHANGED, CommitDecision.SKIPPED_UNTRANSLATED)


def translated_by_group(carried: Iterable[Mapping] | None, client, snapshot_id: str,
                        client_error: object) -> dict[str, list[TranslatedRow]]:
    """group -> its rows of this run's translations, groups and rows sorted by group-partition:
    ``carried`` (``cycle_carry``) when the translations ran in this process, else read back with
    ``client``; neither raises RuntimeError naming ``client_error`` (why there is no client)."""
    by_group: dict = defaultdict(list)
    if carried is not None:
        # itemgetter: one C call per row (100,000 rows a cycle); sorted by group, topic, partition
        translated = sorted(map(_TRANSLATED_VALUES, carried), key=_GROUP_PARTITION)
    elif client is not None:
        translated = cycle_rows.translation_rows(client, snapshot_id, TRANSLATED_COLUMNS)
    else:
        raise RuntimeError(f"this run's translations are neither in this process nor readable: {client_error}")
    for values in translated:
        row = TranslatedRow(*values)
        by_group[row.group_id].append(row)
    return by_group


@dataclass(frozen=True)
class CommitHistory:
    """What ClickHouse knows of the groups' earlier cycles (empty without ClickHouse)."""

    #: (cluster, group) -> {(topic, partition): committed offset} in the group's previous snapshot
    previous_committed: dict = field(default_factory=dict)
    #: (group, topic, partition, standby) -> the standby offset the newest recorded cycle left
    recorded: dict = field(default_factory=dict)
    #: why reading failed (what was read before it is kept); None when it did not
    error: Exception | None = None


def read_commit_history(client, snapshot_id: str, by_group: Mapping[str, list[TranslatedRow]],
                        clusters: Iterable[str]) -> CommitHistory:
    """:class:`CommitHistory` of ``by_group``'s groups on ``clusters``; ``client`` None: nothing read."""
    before: dict = {}
    recorded: dict = {}
    if client is None:
        return CommitHistory(before, recorded)
    try:
        before = snapshots.previous_committed_offsets(client, snapshot_id, sorted(by_group), clusters)
        recorded = commits.last_recorded_offsets(client, by_group)
    except Exception as exc:  # noqa: BLE001 - commits go on; only rewinds wait for ClickHouse
        return CommitHistory(before, recorded, exc)
    return CommitHistory(before, recorded)


@dataclass(frozen=True)
class CycleCommits:
    """Every group's :func:`commit_group` outcome, in group order."""

    stored: list[CommitRow]  # one row per group-partition, sorted by group
    decisions: list[tuple[object, bool]]  # (the planned commit, routine: in ROUTINE_COMMITS), same order
    unreachable: dict[str, str]  # cluster -> error, for the clusters found down in this cycle
    kafka_s: float  # seconds from the first group's Kafka call to the child processes closed

    def lines(self, routine: bool) -> Iterator[str]:
        """The decision lines (``commit_log_line``) of the routine decisions or of the others, made
        as they are consumed: a logger that leaves them out costs no formatting (at 100,000
        group-partitions, 4 s of the step's CPU)."""
        return (commit_log_line(commit) for commit, is_routine in self.decisions if is_routine == routine)

    @property
    def routine_count(self) -> int:
        return sum(1 for _, is_routine in self.decisions if is_routine)


def commit_groups(by_group: Mapping[str, list[TranslatedRow]], clusters: Mapping[str, object], cycle: CycleContext,
                  previous_committed: Mapping, parallel_groups: int, io: IsolatedGroupIO | None = None) -> CycleCommits:
    """:func:`commit_group` for each group of ``by_group``, ``parallel_groups`` at a time.

    ``clusters``: cluster name -> its ``KafkaClusterResource`` (as :func:`commit_group` takes
    them; each one's ``plain()`` settings go to its child process); ``previous_committed``:
    :attr:`CommitHistory.previous_committed`; ``io``: child processes that outlive this cycle (a
    continuous run's, closed by its owner); by default the cycle starts its own and closes them.
    """
    # Each cluster's calls in a child process of its own (kafka_io/group_io.py): a librdkafka
    # abort costs the groups in flight on that cluster, not the run.
    owned = io is None
    if io is None:
        io = IsolatedGroupIO({name: resource.plain() for name, resource in clusters.items()})
    unreachable: dict = {}

    kafka_started = time.monotonic()

    def one_group(item):
        group_id, rows = item
        return commit_group(
            rows, clusters, cycle, active_before=previous_committed.get((rows[0].active, group_id)), io=io,
            unreachable=unreachable,  # shared: a cluster found down spares the groups after it the wait
        )

    stored, decisions = [], []
    # the process's pool (kafka_io/thread_pools.py): a continuous run commits every cycle
    pool = shared_pool("offset-sync-commit", parallel_groups)
    futures = [pool.submit(one_group, item) for item in sorted(by_group.items())]
    try:
        # in the groups' order: the stored rows and decisions come out sorted by group
        for future in futures:
            plan, group_rows = future.result()
            decisions += [(commit, commit.decision in ROUTINE_COMMITS) for commit in plan]
            stored += group_rows
    finally:
        wait(futures)  # none still calls Kafka through io when it closes
        if owned:
            io.close()
    return CycleCommits(stored, decisions, unreachable, time.monotonic() - kafka_started)


def unrecorded_changes(stored, recorded: dict) -> list[dict]:
    """Rows whose standby offset, re-read before planning, differs from the newest recorded one."""
    out = []
    for row in stored:
        last = recorded.get((row.group_id, row.topic, int(row.partition), row.standby))
        if last is not None and row.previous_offset is not None and row.previous_offset != last:
            out.append({"group_id": row.group_id, "topic": row.topic, "partition": int(row.partition),
                        "standby": row.standby, "recorded": last, "found": row.previous_offset})
    return out


def newest_synced_times(by_group: Mapping[str, list[TranslatedRow]], stored: list[CommitRow], cycle_time_ms: int,
                        client, rows_deferred: int) -> dict[str, float]:
    """group -> epoch seconds of its newest fully synced cycle: this one, and (from ClickHouse, when
    there is a ``client``, no row of this cycle was deferred and it answers) earlier ones."""
    unsynced = {r.group_id for r in stored if not r.synced}  # one pass (per group it was groups x rows)
    synced_now = {g: cycle_time_ms / 1000 for g in by_group if g not in unsynced}
    newest_synced = dict(synced_now)
    if client is not None and rows_deferred == 0:
        try:
            newest_synced = {**commits.newest_synced_cycle_times(client, by_group), **synced_now}
        except Exception:  # noqa: BLE001 - judged from this cycle alone
            pass
    return newest_synced
