"""The commit step for one group: re-read, plan with ``commit_rules``, write once, record every decision.

:func:`commit_group` takes one group's rows of this cycle's ``offset_translations`` and returns one
:class:`~offset_pipeline.storage.commits.CommitRow` per row, whatever happens:

* an undecided group (split brain, undetermined direction, a cluster unavailable when translating)
  gets ``split_brain`` or ``skipped_untranslated`` rows, and no Kafka call at all;
* otherwise the active cluster's member count and the standby group's members and committed
  offsets are re-read just before planning (:mod:`offset_pipeline.kafka_io.standby_groups`);
  ``active_reset`` is every partition whose committed offset on the active cluster went down since
  the group's previous snapshot; :func:`plan_standby_commits` decides with each partition's safe
  bound; the offsets to write go out in ONE commit call (:mod:`offset_pipeline.kafka_io`),
  never in a dry run;
* a group whose state cannot be re-read (a cluster down or slow, bad rows) gets ``failed`` rows
  with the error: it never fails the other groups. A re-read or commit the broker refused for want
  of an ACL gives ``not_authorized`` rows instead, their reason naming the right to grant. ``unreachable`` remembers clusters that did not
  answer, so the groups after it fail at once instead of each waiting for the timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, replace

from offset_pipeline.sync.commit_rules import (
    CommitDecision,
    StandbyCommit,
    StandbyGroupState,
    offsets_to_commit,
    plan_standby_commits,
)
from offset_pipeline.kafka_io.authorization import not_authorized_reason
from offset_pipeline.kafka_io.standby_groups import TP, LiveGroupState
from offset_pipeline.kafka_io.group_commits import GroupCommitWrite
from offset_pipeline.kafka_io.group_io import DirectGroupIO, GroupIOError
from offset_pipeline.kafka_io.thread_pools import shared_pool
from offset_pipeline.storage.commits import CommitRow
from offset_pipeline.translation import Strategy, TranslationResult, TranslationStatus

REREAD_THREADS = 32  # the standby re-reads of a cycle's groups at once (parallel_groups), with room to spare

#: Columns of ``offset_translations`` the commit step reads, in :class:`TranslatedRow` order.
TRANSLATED_COLUMNS = (
    "group_id", "topic", "partition", "active", "standby", "committed", "standby_offset", "status", "strategy",
    "reason", "safe_bound",
)


@dataclass(frozen=True)
class TranslatedRow:
    """One row of this cycle's ``offset_translations``."""

    group_id: str
    topic: str
    partition: int
    active: str  # "" when the direction was not decided
    standby: str
    committed: int | None
    standby_offset: int | None
    status: str
    strategy: str
    reason: str
    safe_bound: int | None

    @property
    def tp(self) -> TP:
        return (self.topic, int(self.partition))

    def result(self) -> TranslationResult:
        """The translation result the row records (raises ValueError on an inconsistent row)."""
        return TranslationResult(
            group_id=self.group_id, topic=self.topic, partition=int(self.partition),
            strategy=None if self.strategy in ("", "none") else Strategy(self.strategy),
            standby_offset=self.standby_offset, status=TranslationStatus(self.status), reason=self.reason,
            active=self.active or None, standby=self.standby or None, committed=self.committed,
        )


@dataclass(frozen=True)
class CycleContext:
    snapshot_id: str
    cycle_time_ms: int
    dry_run: bool
    timeout_s: float


def _row(commit: StandbyCommit, source: TranslatedRow, cycle: CycleContext, *, applied: bool = False,
         error: str | None = None, committed_after: int | None = None) -> CommitRow:
    return CommitRow(
        snapshot_id=cycle.snapshot_id, cycle_time_ms=cycle.cycle_time_ms, group_id=commit.group_id,
        topic=commit.topic, partition=commit.partition, active=source.active, standby=source.standby,
        previous_offset=commit.previous_offset, new_offset=commit.new_offset, safe_bound=source.safe_bound,
        decision=commit.decision.value, reason=commit.reason, translation_status=source.status,
        strategy=source.strategy or "none", dry_run=cycle.dry_run, applied=applied, error=error,
        committed_after=committed_after,
    )


def _unplanned(source: TranslatedRow, decision: CommitDecision, reason: str) -> StandbyCommit:
    return StandbyCommit(
        group_id=source.group_id, topic=source.topic, partition=int(source.partition),
        standby_cluster=source.standby, previous_offset=None, new_offset=source.standby_offset,
        decision=decision, reason=reason, translation_status=TranslationStatus(source.status),
        strategy=None if source.strategy in ("", "none") else Strategy(source.strategy),
        safe_bound=source.safe_bound,
    )


def undecided_commits(rows: list[TranslatedRow]) -> list[StandbyCommit]:
    """Rows of a group the translation gave no direction: recorded, nothing read or written."""
    out = []
    for source in rows:
        if source.status == TranslationStatus.SPLIT_BRAIN.value:
            out.append(_unplanned(source, CommitDecision.SPLIT_BRAIN,
                                  f"split brain when translating, nothing committed: {source.reason}"))
        else:
            out.append(_unplanned(source, CommitDecision.SKIPPED_UNTRANSLATED,
                                  f"no direction ({source.status}), nothing committed: {source.reason}"))
    return out


def active_reset(rows: list[TranslatedRow], before: Mapping[TP, int] | None) -> set[TP]:
    """Partitions whose committed offset on the active cluster went down since the previous snapshot."""
    if not before:
        return set()
    return {r.tp for r in rows if r.committed is not None and r.tp in before and r.committed < before[r.tp]}


def commit_group(
    rows: list[TranslatedRow],
    clusters: Mapping[str, object],
    cycle: CycleContext,
    *,
    active_before: Mapping[TP, int] | None = None,
    admins: Mapping[str, object] | None = None,
    unreachable: MutableMapping[str, str] | None = None,
    io=None,
) -> tuple[list[StandbyCommit], list[CommitRow]]:
    """One group's rows (same ``group_id``) -> its commit decisions and the rows to store.

    ``clusters``: cluster name -> :class:`KafkaClusterResource`; ``active_before``: the active
    cluster's committed offsets in the group's previous snapshot; ``admins``: an AdminClient per
    cluster to reuse; ``unreachable``: cluster -> error, shared across the cycle's groups; ``io``:
    where the Kafka calls run (``kafka_io/group_io.py``; default: in this process, with
    ``clusters`` and ``admins``).
    """
    if not rows:
        return [], []
    unreachable = unreachable if unreachable is not None else {}
    group_id = rows[0].group_id
    by_source = {r.tp: r for r in rows}
    directions = {(r.active, r.standby) for r in rows}
    if any(not a or not s for a, s in directions):
        commits = undecided_commits(rows)
        return commits, [_row(c, by_source[(c.topic, c.partition)], cycle) for c in commits]

    refused = _refusal_before_kafka(rows, by_source, directions, clusters, unreachable)
    if refused is not None:
        return _failed_group(rows, by_source, cycle, refused)
    [(active, standby)] = directions
    try:
        results = [r.result() for r in rows]
    except ValueError as exc:
        return _failed_group(rows, by_source, cycle, f"a translation row is inconsistent: {exc}")
    partitions = sorted(by_source)
    io = io if io is not None else DirectGroupIO(clusters, admins)
    read = _reread_group(io, active, standby, group_id, partitions, cycle.timeout_s, unreachable)
    if isinstance(read, str):
        return _failed_group(rows, by_source, cycle, read, refused_by=read_by(read, active, standby),
                             user=_user(clusters, standby))
    active_members, live = read

    plan = _plan_group(rows, results, group_id, standby, live, active_members, active_before, cycle.dry_run)
    if isinstance(plan, str):
        return _failed_group(rows, by_source, cycle, plan)
    offsets = offsets_to_commit(plan)
    write: GroupCommitWrite | None = None
    if offsets and not cycle.dry_run:
        try:
            write = _apply_commit(io, standby, group_id, offsets, partitions, cycle.timeout_s, unreachable)
        except GroupIOError as exc:  # recorded, not raised
            return plan, _commit_failure_rows(plan, exc, standby, live, by_source, cycle, unreachable)
    if write is not None:
        plan = _refused_writes(plan, write, standby, _user(clusters, standby))
    return plan, _stored_rows(plan, write, live, by_source, cycle)


def _user(clusters: Mapping[str, object], cluster: str) -> str | None:
    """The principal's user on ``cluster`` (named in a not_authorized reason), when known."""
    return getattr(clusters.get(cluster), "sasl_username", None)


def read_by(error: str, active: str, standby: str) -> str:
    """The cluster a re-read error of :func:`_reread_group` is about."""
    return standby if error.startswith(f"re-reading the group on {standby} ") else active


def _failed_group(rows: list[TranslatedRow], by_source: Mapping[TP, TranslatedRow], cycle: CycleContext,
                  error: str, refused_by: str | None = None,
                  user: str | None = None) -> tuple[list[StandbyCommit], list[CommitRow]]:
    """Every row of the group ``failed`` with ``error``: nothing planned or written; ``not_authorized``
    when ``error`` is a refusal by ACL on the cluster ``refused_by``."""
    refused = not_authorized_reason(error, refused_by, group=rows[0].group_id, user=user,
                                    doing="re-reading the group") if refused_by else None
    if refused:
        commits = [_unplanned(r, CommitDecision.NOT_AUTHORIZED, f"nothing planned or written: {refused}")
                   for r in rows]
    else:
        commits = [_unplanned(r, CommitDecision.FAILED, f"nothing planned or written: {error}") for r in rows]
    return commits, [_row(c, by_source[(c.topic, c.partition)], cycle, error=error) for c in commits]


def _refused_writes(plan: list[StandbyCommit], write: GroupCommitWrite, standby: str,
                    user: str | None) -> list[StandbyCommit]:
    """The plan with each write the broker refused for want of an ACL as ``not_authorized`` (the
    commit was decided, the standby group kept its offset); the error stays on the row."""
    errors = {(w.topic, w.partition): w.error for w in write.partitions if not w.applied and w.error}
    out = []
    for commit in plan:
        error = errors.get((commit.topic, commit.partition)) if commit.decision.writes else None
        refused = not_authorized_reason(error, standby, group=commit.group_id, user=user,
                                        doing="committing") if error else None
        out.append(replace(commit, decision=CommitDecision.NOT_AUTHORIZED,
                           reason=f"{commit.decision.value} decided, not applied: {refused}") if refused else commit)
    return out


def _refusal_before_kafka(rows: list[TranslatedRow], by_source: Mapping[TP, TranslatedRow],
                          directions: set[tuple[str, str]], clusters: Mapping[str, object],
                          unreachable: Mapping[str, str]) -> str | None:
    """Why the group fails before any Kafka call (bad rows, no resource, a cluster already found
    down), or None when it can be re-read."""
    if len(by_source) != len(rows):
        return "a partition appears twice in the group's translation rows"
    if len(directions) > 1:
        return f"rows of one group with different directions: {sorted(directions)}"
    [(active, standby)] = directions
    if active not in clusters or standby not in clusters:
        return f"no Kafka resource for {active} or {standby}"
    down = [name for name in (active, standby) if name in unreachable]
    if down:
        return f"{down[0]} did not answer earlier in this cycle: {unreachable[down[0]]}"
    return None


def _reread_group(io, active: str, standby: str, group_id: str, partitions: list[TP], timeout_s: float,
                  unreachable: MutableMapping[str, str]) -> tuple[int, LiveGroupState] | str:
    """The active cluster's member count and the standby group's live state (members, committed
    offsets), or the error of the call that failed (the active cluster's first).

    Both are read at once, on their two clusters: the plan needs both as they stood before the
    commit, in no order, and reading one after the other put a second round trip between every
    group's commit in the log and the standby's."""
    standby_read = shared_pool("offset-sync-reread", REREAD_THREADS).submit(
        io.live_state, standby, group_id, partitions, timeout_s)
    reading = active
    try:
        active_members = io.member_count(active, group_id, timeout_s)
        reading = standby
        live = standby_read.result()
    except GroupIOError as exc:  # any failure is this group's, recorded on its rows
        error = f"re-reading the group on {reading} failed: {exc}"
        if exc.unreachable:
            unreachable[reading] = error
        return error
    return active_members, live


def _plan_group(rows: list[TranslatedRow], results: list[TranslationResult], group_id: str, standby: str,
                live: LiveGroupState, active_members: int, active_before: Mapping[TP, int] | None,
                dry_run: bool) -> list[StandbyCommit] | str:
    """:func:`plan_standby_commits` on the re-read state with each partition's safe bound, or why it
    refused the rows."""
    try:
        return plan_standby_commits(
            results,
            StandbyGroupState(group_id, standby, live.member_count, live.committed),
            active_member_count=active_members,
            active_reset=active_reset(rows, active_before),
            dry_run=dry_run,
            safe_bounds={r.tp: r.safe_bound for r in rows},
        )
    except ValueError as exc:  # caller bugs (a partition twice, ...): this group's, not the cycle's
        return f"planning refused the rows: {exc}"


def _apply_commit(io, standby: str, group_id: str, offsets: Mapping[TP, int], partitions: list[TP],
                  timeout_s: float, unreachable: MutableMapping[str, str]) -> GroupCommitWrite:
    """The ONE commit call, with the group's partitions read back after it (raises
    :class:`GroupIOError` as ``io.commit`` does)."""
    write = io.commit(standby, group_id, offsets, partitions, timeout_s)
    if write.call_error and write.reread_error and not write.applied:
        unreachable.setdefault(standby, write.call_error)
    return write


def _commit_failure_rows(plan: list[StandbyCommit], exc: GroupIOError, standby: str, live: LiveGroupState,
                         by_source: Mapping[TP, TranslatedRow], cycle: CycleContext,
                         unreachable: MutableMapping[str, str]) -> list[CommitRow]:
    """The plan's rows when the commit call raised: its error on the rows it was to write."""
    # In this process only a client that cannot be created raises (no request was sent); a
    # client process that died or hung may have sent the one commit request, applied whole
    # or not at all: the next cycle re-reads the group either way.
    error = (f"committing on {standby} failed, the group is at its old or its new offsets: {exc}"
             if exc.unreachable else f"committing on {standby} failed before any request: {exc}")
    if exc.unreachable:
        unreachable.setdefault(standby, error)
    known = {} if exc.unreachable else live.committed  # after a lost answer the offsets are unknown
    return [_row(c, by_source[(c.topic, c.partition)], cycle, error=error if c.decision.writes else None,
                 committed_after=known.get((c.topic, c.partition))) for c in plan]


def _stored_rows(plan: list[StandbyCommit], write: GroupCommitWrite | None, live: LiveGroupState,
                 by_source: Mapping[TP, TranslatedRow], cycle: CycleContext) -> list[CommitRow]:
    """One row per planned commit: the re-read offsets when nothing was written (a dry run, nothing
    to write), else what the commit applied and read back."""
    stored = []
    # by partition, once (the first write of a partition wins): a search of the written list per
    # planned commit was quadratic in the group's partitions (200 x 200 per group of the benchmark)
    written_by_tp = {(w.topic, w.partition): w for w in reversed(write.partitions)} if write is not None else {}
    for commit in plan:
        tp = (commit.topic, commit.partition)
        if write is None:
            stored.append(_row(commit, by_source[tp], cycle, committed_after=live.committed.get(tp)))
            continue
        written = written_by_tp.get(tp)
        after = write.committed_after.get(tp) if write.reread_error is None else None
        error = written.error if written is not None else None
        if written is None and write.reread_error is not None:
            error = f"re-read after the commit failed: {write.reread_error}"
        stored.append(_row(
            commit, by_source[tp], cycle, applied=written is not None and written.applied, error=error,
            committed_after=after,
        ))
    return stored
