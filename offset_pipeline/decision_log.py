"""Where the one-line-per-decision logs go (translation, direction, commit decisions).

To the ``offset_pipeline.decisions`` Python logger, which by default writes them to the step's
stderr: Dagster captures it as the run's compute log (the step's "stderr" tab in the UI), and a
deployment can route the logger anywhere with standard ``logging`` configuration.

Not to ``context.log``: every ``context.log`` call is an event in Dagster's event log (a row in
its storage and an entry in the run view). At 10,000 group-partitions the per-decision events were
20,000 per cycle and ~10 s of a 25 s cycle (bench/cycle_benchmark.py, "no INFO logs" rows). The
assets log one summary event per step instead; every decision is also stored in ClickHouse
(``offset_translations``, ``offset_commits``) with its status and reason.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

LOGGER_NAME = "offset_pipeline.decisions"
_BATCH_LINES = 1000  # lines per log record: one write per batch, records of bounded size


def decision_logger() -> logging.Logger:
    """The decisions logger; on first use, if nothing configured it, a handler to stderr."""
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers and not _configured_elsewhere(logger):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def _configured_elsewhere(logger: logging.Logger) -> bool:
    """A level set on the logger itself means a deployment configured it: leave it alone."""
    return logger.level != logging.NOTSET


def write_decision_lines(lines: Iterable[str]) -> int:
    """Log ``lines`` (each one complete decision line) in batches; returns how many were logged."""
    logger = decision_logger()
    batch: list[str] = []
    count = 0
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH_LINES:
            logger.info("\n".join(batch))
            count += len(batch)
            batch = []
    if batch:
        logger.info("\n".join(batch))
        count += len(batch)
    return count
