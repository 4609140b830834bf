"""Where the one-line-per-decision logs go (translation, direction, commit decisions).

To the ``offset_pipeline.decisions`` Python logger, which by default writes them to the step's
stderr: Dagster captures it as the run's compute log (the step's "stderr" tab in the UI), and a
deployment can route the logger anywhere with standard ``logging`` configuration.

Not to ``context.log``: every ``context.log`` call is an event in Dagster's event log (a row in
its storage and an entry in the run view). At 10,000 group-partitions the per-decision events were
20,000 per cycle and ~10 s of a 25 s cycle (bench/cycle_benchmark.py, "no INFO logs" rows). The
assets log one summary event per step instead; every decision is also stored in ClickHouse
(``offset_translations``, ``offset_commits``) with its status and reason.

Routine decisions (a translated offset without a warning, a commit forward or an unchanged standby:
nearly every line of a healthy cycle) are logged at DEBUG, the rest at INFO. At 10,000
group-partitions the routine lines were ~3.8 MB of compute log per 30-s cycle, 11 GB a day in
``DAGSTER_HOME`` (the soak, docs/results/soak.md), so by default only the INFO ones are written, as MirrorMaker 2's
``OffsetSyncStore`` keeps its per-offset lines at DEBUG/TRACE. ``OFFSET_PIPELINE_DECISION_LOG=all``
writes every line (``notable``, the default: INFO only); a level set on the logger by a deployment's
own logging configuration wins over both.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable

LOGGER_NAME = "offset_pipeline.decisions"
DECISION_LOG_ENV = "OFFSET_PIPELINE_DECISION_LOG"
_LEVELS = {"notable": logging.INFO, "all": logging.DEBUG}
_BATCH_LINES = 1000  # lines per log record: one write per batch, records of bounded size


def decision_logger() -> logging.Logger:
    """The decisions logger; on first use, if nothing configured it, a handler to stderr."""
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers and not _configured_elsewhere(logger):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(decision_log_level())
        logger.propagate = False
    return logger


def decision_log_level(env=None) -> int:
    """``OFFSET_PIPELINE_DECISION_LOG``: ``notable`` (default, INFO) or ``all`` (DEBUG)."""
    text = ((os.environ if env is None else env).get(DECISION_LOG_ENV) or "").strip().lower() or "notable"
    if text not in _LEVELS:
        raise ValueError(f"{DECISION_LOG_ENV}={text!r}: expected one of {', '.join(_LEVELS)}")
    return _LEVELS[text]


def _configured_elsewhere(logger: logging.Logger) -> bool:
    """A level set on the logger itself means a deployment configured it: leave it alone."""
    return logger.level != logging.NOTSET


def write_decision_lines(lines: Iterable[str], routine: bool = False) -> int:
    """Log ``lines`` (each one complete decision line) in batches, at DEBUG if ``routine`` else
    INFO; returns how many were logged (0 when the logger's level leaves them out)."""
    logger = decision_logger()
    level = logging.DEBUG if routine else logging.INFO
    if not logger.isEnabledFor(level):
        return 0
    batch: list[str] = []
    count = 0
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH_LINES:
            logger.log(level, "\n".join(batch))
            count += len(batch)
            batch = []
    if batch:
        logger.log(level, "\n".join(batch))
        count += len(batch)
    return count
