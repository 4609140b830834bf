"""decision_log: every line reaches the decisions logger, in order, in bounded batches, and a
deployment's own configuration of the logger is left alone."""

from __future__ import annotations

import logging
import sys

import pytest

from offset_pipeline.decision_log import LOGGER_NAME, decision_logger, write_decision_lines


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def configured():
    """The logger as a deployment would configure it: its own handler and level."""
    logger = logging.getLogger(LOGGER_NAME)
    saved = (logger.handlers[:], logger.level, logger.propagate)
    handler = Collect()
    logger.handlers = [handler]
    logger.setLevel(logging.INFO)
    yield handler
    logger.handlers, logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_every_line_in_order_in_batches_of_at_most_a_thousand(configured):
    lines = [f'offset-sync decision group="g {i}" status=header_exact' for i in range(2500)]
    assert write_decision_lines(lines) == 2500
    assert [len(r.getMessage().split("\n")) for r in configured.records] == [1000, 1000, 500]
    assert "\n".join(r.getMessage() for r in configured.records).split("\n") == lines
    assert write_decision_lines([]) == 0 and len(configured.records) == 3


def test_a_configured_logger_keeps_its_handlers(configured):
    logger = decision_logger()
    # (pytest's own capture handlers may sit beside it, depending on the run)
    assert configured in logger.handlers
    assert not [h for h in logger.handlers if type(h) is logging.StreamHandler]  # nothing added


def test_unconfigured_it_writes_to_stderr_without_the_root_logger():
    logger = logging.getLogger(LOGGER_NAME)
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logger.handlers, logger.level = [], logging.NOTSET
    try:
        logger = decision_logger()
        added = [h for h in logger.handlers if type(h) is logging.StreamHandler]
        assert len(added) == 1 and added[0].stream is sys.stderr and logger.level == logging.INFO
        assert logger.propagate is False  # not duplicated into Dagster's managed loggers or root
    finally:
        logger.handlers, logger.level, logger.propagate = saved
