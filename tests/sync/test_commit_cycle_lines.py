"""CycleCommits' decision lines: the routine ones and the others, in order, each exactly
commit_log_line's, and made only when a logger takes them."""

from __future__ import annotations

import logging

from offset_pipeline.monitoring.decision_log import (
    decision_logger,
    write_decision_lines,
)
from offset_pipeline.sync.commit_cycle import ROUTINE_COMMITS, CycleCommits
from offset_pipeline.sync.commit_rules import (
    CommitDecision,
    StandbyCommit,
    commit_log_line,
)
from offset_pipeline.translation import TranslationStatus


class CountedCommit(StandbyCommit):
    """A StandbyCommit that counts how often its fields are read for a line."""

    reads = 0

    def __getattribute__(self, name):
        if name == "group_id":
            type(self).reads += 1
        return super().__getattribute__(name)


def commit(partition: int, decision: CommitDecision) -> StandbyCommit:
    return CountedCommit("g", "t", partition, "idc2", 3, 5, decision, "why", TranslationStatus.HEADER_EXACT, None)


def cycle() -> CycleCommits:
    decisions = [commit(0, CommitDecision.COMMIT), commit(1, CommitDecision.REFUSED_REWIND),
                 commit(2, CommitDecision.UNCHANGED)]
    return CycleCommits([], [(c, c.decision in ROUTINE_COMMITS) for c in decisions], {}, 0.0)


def test_the_lines_are_commit_log_lines_split_by_routine_in_order():
    done = cycle()
    routine = [c for c, r in done.decisions if r]
    assert list(done.lines(routine=True)) == [commit_log_line(c) for c in routine] and len(routine) == 2
    assert list(done.lines(routine=False)) == [commit_log_line(done.decisions[1][0])]
    assert done.routine_count == 2


def test_routine_lines_are_not_even_made_when_the_logger_leaves_them_out():
    logger = decision_logger()
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        CountedCommit.reads = 0
        assert write_decision_lines(cycle().lines(routine=True), routine=True) == 0
        assert CountedCommit.reads == 0
        assert write_decision_lines(cycle().lines(routine=False)) == 1
        assert CountedCommit.reads == 1
    finally:
        logger.setLevel(level)
