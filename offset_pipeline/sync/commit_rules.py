"""Pure commit-planning rules: translation results in, one commit decision per partition out.

The rules and their NO-LOSS guard are explained in docs/concepts/no-loss.md (the commit guard). No
Kafka, Spark or Dagster imports: the I/O layer re-reads the standby group, calls
:func:`plan_standby_commits`, and writes :func:`offsets_to_commit` in ONE commit call per group, so a
failure leaves every partition at its old offset or at its new one.

Invariants (each one is tested):

* **Never rewind unless reset on active.** A translated offset below the standby's current offset
  is committed only when the partition is in ``active_reset`` (the group itself was reset backwards
  on the active cluster); otherwise ``refused_rewind``.
* **Never write to a group with members.** Members on the standby only: ``refused_members`` for
  every partition. The sync never writes to a live group.
* **Split brain commits nothing.** Members on both clusters: ``split_brain`` for every partition.
* **Dry run writes nothing.** What would be written is recorded as ``dry_run``, with the reason.
* **A committed offset always comes from a translated result** (``standby_offset`` set) that passed
  :func:`~offset_pipeline.translation.check_no_loss` when facts were given; a result whose facts
  show a violation, or that has no facts when facts were given for the group, is
  ``refused_no_loss_check``.
* **Never above the proven bound** (when ``safe_bounds`` is given): a translated ``t`` above its
  partition's :func:`~offset_pipeline.translation.safe_standby_bound`, or without one (None or
  missing), is ``refused_no_loss_check``, whatever else would be decided (unchanged, dry run, ...).
  Membership decisions come first: nothing is planned for a live group.

``StandbyCommit.new_offset`` is the offset the translation proposed (None when it proposed none),
whatever the decision; only decisions with :attr:`CommitDecision.writes` are written.
``FAILED`` is never planned here: the I/O layer (``commit_step``) records it for a group whose live
state could not be re-read (a cluster down or slow): nothing planned, nothing written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from offset_pipeline.translation import (
    NoLossViolation,
    PartitionFacts,
    Strategy,
    TranslationResult,
    TranslationStatus,
    check_no_loss,
)
from offset_pipeline.translation.log_line import PREFIX, log_line, parse_log_line

TopicPartition = tuple[str, int]

COMMIT_KIND = "commit"
COMMIT_LOG_PREFIX = f"{PREFIX} {COMMIT_KIND}"


class CommitDecision(str, Enum):
    """What the commit step does with one group-partition. Values are stored in ClickHouse: stable."""

    COMMIT = "commit"  # moves the standby offset forward (or sets a first one)
    UNCHANGED = "unchanged"  # the standby is already at t
    SKIPPED_UNTRANSLATED = "skipped_untranslated"  # the result has no offset: keep the old one
    REFUSED_REWIND = "refused_rewind"  # t below the standby's offset, group not reset on active
    REWIND_AFTER_RESET = "rewind_after_reset"  # t below it because the group was reset on active
    REFUSED_MEMBERS = "refused_members"  # the standby group has members: never write to a live group
    SPLIT_BRAIN = "split_brain"  # members on both clusters: alarm, nothing committed
    DRY_RUN = "dry_run"  # would commit (forward or after a reset); dry run set
    REFUSED_NO_LOSS_CHECK = "refused_no_loss_check"  # check_no_loss raised, or t above its safe bound
    FAILED = "failed"  # recorded by the I/O layer: the group could not be re-read, nothing planned or written
    # recorded by the I/O layer: the broker refused the group's re-read or commit for want of an ACL
    # (the reason names cluster, group and the right); the other groups are committed as usual
    NOT_AUTHORIZED = "not_authorized"

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value

    @property
    def writes(self) -> bool:
        """This decision is written to the standby cluster."""
        return self in (CommitDecision.COMMIT, CommitDecision.REWIND_AFTER_RESET)


@dataclass(frozen=True)
class StandbyGroupState:
    """The standby group's live state, re-read just before committing."""

    group_id: str
    cluster: str
    member_count: int
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class StandbyCommit:
    """One planned commit (or non-commit) for one group-partition, with its reason."""

    group_id: str
    topic: str
    partition: int
    standby_cluster: str
    previous_offset: int | None
    new_offset: int | None
    decision: CommitDecision
    reason: str
    translation_status: TranslationStatus
    strategy: Strategy | None
    safe_bound: int | None = None  # the bound the guard compared with (None: no guard, or no bound)


def _decide(
    result: TranslationResult,
    previous: int | None,
    standby: StandbyGroupState,
    active_member_count: int,
    active_reset: frozenset[TopicPartition] | set[TopicPartition],
    dry_run: bool,
    facts_by_partition: Mapping[TopicPartition, PartitionFacts] | None,
    safe_bounds: Mapping[TopicPartition, int | None] | None,
) -> tuple[CommitDecision, str]:
    tp = (result.topic, result.partition)
    where = standby.cluster
    t = result.standby_offset
    if active_member_count > 0 and standby.member_count > 0:
        return CommitDecision.SPLIT_BRAIN, (
            f"group has {active_member_count} member(s) on the active cluster and {standby.member_count} on "
            f"{where}: split brain, nothing committed"
        )
    if standby.member_count > 0:
        return CommitDecision.REFUSED_MEMBERS, (
            f"standby group on {where} has {standby.member_count} active member(s): never write to a live group"
        )
    if t is None:
        kept = "no committed offset" if previous is None else f"its offset {previous}"
        return CommitDecision.SKIPPED_UNTRANSLATED, (
            f"not translated ({result.status.value}): {where} keeps {kept}"
        )
    if facts_by_partition is not None:
        facts = facts_by_partition.get(tp)
        if facts is None:
            return CommitDecision.REFUSED_NO_LOSS_CHECK, (
                f"no facts for {result.topic}[{result.partition}] to re-check t={t} against: not committed"
            )
        try:
            check_no_loss(facts, result)
        except NoLossViolation as exc:
            return CommitDecision.REFUSED_NO_LOSS_CHECK, f"NO-LOSS re-check failed for t={t}, not committed: {exc}"
    if safe_bounds is not None:
        bound = safe_bounds.get(tp)
        if bound is None:
            return CommitDecision.REFUSED_NO_LOSS_CHECK, (
                f"no safe bound proven for {result.topic}[{result.partition}]: t={t} not committed"
            )
        if t > bound:
            return CommitDecision.REFUSED_NO_LOSS_CHECK, (
                f"t={t} is above the safe bound {bound} the facts prove: not committed"
            )

    if previous is None:
        decision, why = CommitDecision.COMMIT, f"first offset {t} on {where} ({result.status.value})"
    elif t > previous:
        decision, why = CommitDecision.COMMIT, (
            f"moves {where} forward from {previous} to {t} (+{t - previous}, {result.status.value})"
        )
    elif t == previous:
        return CommitDecision.UNCHANGED, f"{where} is already at {t}"
    elif tp in active_reset:
        decision, why = CommitDecision.REWIND_AFTER_RESET, (
            f"moves {where} back from {previous} to {t} (-{previous - t}): the group was reset backwards "
            f"on the active cluster ({result.status.value})"
        )
    else:
        return CommitDecision.REFUSED_REWIND, (
            f"t={t} is below {where}'s offset {previous} and the group was not reset on the active cluster: "
            "never rewind"
        )
    if dry_run:
        return CommitDecision.DRY_RUN, f"dry run, would {decision.value}: {why}"
    return decision, why


def plan_standby_commits(
    results: Iterable[TranslationResult],
    standby: StandbyGroupState,
    *,
    active_member_count: int,
    active_reset: set[TopicPartition] | frozenset[TopicPartition] = frozenset(),
    dry_run: bool = False,
    facts_by_partition: Mapping[TopicPartition, PartitionFacts] | None = None,
    safe_bounds: Mapping[TopicPartition, int | None] | None = None,
) -> list[StandbyCommit]:
    """One :class:`StandbyCommit` per result, in order, following the commit rules (module docstring).

    ``safe_bounds``: per partition, the largest standby offset its facts proved loss-free
    (:func:`~offset_pipeline.translation.safe_standby_bound`); None turns the bound guard off.

    Raises ValueError on caller bugs: a result for another group or another standby cluster, the
    same partition twice, or a negative member count.
    """
    if active_member_count < 0 or standby.member_count < 0:
        raise ValueError("member counts cannot be negative")
    plan: list[StandbyCommit] = []
    seen: set[TopicPartition] = set()
    for result in results:
        tp = (result.topic, result.partition)
        if result.group_id != standby.group_id:
            raise ValueError(f"result for group {result.group_id!r} planned against {standby.group_id!r}")
        if result.standby is not None and result.standby != standby.cluster:
            raise ValueError(f"result translated to {result.standby!r}, standby state is {standby.cluster!r}")
        if tp in seen:
            raise ValueError(f"{result.topic}[{result.partition}] appears twice")
        seen.add(tp)
        previous = standby.committed.get(tp)
        decision, reason = _decide(
            result, previous, standby, active_member_count, active_reset, dry_run, facts_by_partition, safe_bounds
        )
        plan.append(
            StandbyCommit(
                group_id=standby.group_id,
                topic=result.topic,
                partition=result.partition,
                standby_cluster=standby.cluster,
                previous_offset=previous,
                new_offset=result.standby_offset,
                decision=decision,
                reason=reason,
                translation_status=result.status,
                strategy=result.strategy,
                safe_bound=safe_bounds.get(tp) if safe_bounds is not None else None,
            )
        )
    return plan


def offsets_to_commit(plan: Iterable[StandbyCommit]) -> dict[TopicPartition, int]:
    """What the I/O layer writes, in one commit call per group: ``commit`` and ``rewind_after_reset``."""
    out: dict[TopicPartition, int] = {}
    for commit in plan:
        if commit.decision.writes:
            assert commit.new_offset is not None  # guaranteed by _decide
            out[(commit.topic, commit.partition)] = commit.new_offset
    return out


# -- the commit log ------------------------------------------------------------------------------


def commit_log_line(commit: StandbyCommit) -> str:
    """One line per planned commit, in the decision lines' format (translation/log_line.py).

    ``offset-sync commit group="g" topic="t" partition=0 standby="idc2" previous_offset=5
    new_offset=7 safe_bound=9 decision=commit translation_status=header_anchor strategy=header_anchor
    reason="..."``
    """
    return log_line(COMMIT_KIND, [
        ("group", commit.group_id),
        ("topic", commit.topic),
        ("partition", commit.partition),
        ("standby", commit.standby_cluster),
        ("previous_offset", commit.previous_offset),
        ("new_offset", commit.new_offset),
        ("safe_bound", commit.safe_bound),
        ("decision", commit.decision),
        ("translation_status", commit.translation_status),
        ("strategy", commit.strategy),
        ("reason", commit.reason),
    ])


def parse_commit_log_line(line: str) -> dict[str, object]:
    """The fields of a :func:`commit_log_line` line: quoted strings decoded, ``-`` as None, integers
    typed, enum values as text."""
    return parse_log_line(COMMIT_KIND, line)
