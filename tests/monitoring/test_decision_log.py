"""decision_log: every line reaches the decisions logger, in order, in bounded batches, and a
deployment's own configuration of the logger is left alone."""

from __future__ import annotations

import logging
import sys

import pytest

from offset_pipeline.monitoring.decision_log import (
    DECISION_LOG_ENV, LOGGER_NAME, decision_log_level, decision_logger, write_decision_lines,
)


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


@pytest.mark.parametrize("setting, routine_logged", [(None, False), ("notable", False), ("all", True), (" ALL ", True)])
def test_routine_lines_are_left_out_unless_every_line_is_asked_for(monkeypatch, setting, routine_logged):
    logger = logging.getLogger(LOGGER_NAME)
    saved = (logger.handlers[:], logger.level, logger.propagate)
    if setting is None:
        monkeypatch.delenv(DECISION_LOG_ENV, raising=False)
    else:
        monkeypatch.setenv(DECISION_LOG_ENV, setting)
    logger.handlers, logger.level = [], logging.NOTSET  # unconfigured: the setting decides
    try:
        decision_logger()
        collect = Collect()
        logger.handlers = [collect]
        assert write_decision_lines(["offset-sync commit decision=refused_members"]) == 1
        assert write_decision_lines(["offset-sync commit decision=commit"] * 3, routine=True) == (3 if routine_logged else 0)
        written = [line for r in collect.records for line in r.getMessage().split("\n")]
        assert written == ["offset-sync commit decision=refused_members"] + (["offset-sync commit decision=commit"] * 3
                                                                          if routine_logged else [])
        assert {r.levelno for r in collect.records} == ({logging.INFO, logging.DEBUG} if routine_logged else {logging.INFO})
    finally:
        logger.handlers, logger.level, logger.propagate = saved


def test_a_deployment_level_wins_over_the_setting(configured, monkeypatch):
    monkeypatch.setenv(DECISION_LOG_ENV, "all")
    assert write_decision_lines(["routine"], routine=True) == 0  # the fixture set INFO on the logger
    assert configured.records == []


def test_a_bad_setting_is_refused_with_its_name():
    with pytest.raises(ValueError, match="OFFSET_PIPELINE_DECISION_LOG='some': expected one of notable, all"):
        decision_log_level({DECISION_LOG_ENV: "some"})


@pytest.mark.parametrize("status, inversion, line, routine", [
    ("header_anchor", False, "offset-sync decision status=header_anchor warnings=- reason=\"x\"", True),
    ("timestamp_search", False, "offset-sync decision status=timestamp_search warnings=- reason=\"x\"", True),
    ("timestamp_search", True, "offset-sync decision status=timestamp_search warnings=- reason=\"x\"", False),
    ("header_anchor", False, "offset-sync decision status=header_anchor warnings=anchor_far reason=\"x\"", False),
    ("cluster_unavailable", False, "offset-sync decision status=cluster_unavailable warnings=- reason=\"x\"", True),
    ("spark_unavailable", False, "offset-sync decision status=spark_unavailable warnings=- reason=\"x\"", True),
    ("no_anchor", False, "offset-sync decision status=no_anchor warnings=- reason=\"x\"", False),
    ("a_status_from_the_future", False, "offset-sync decision warnings=- reason=\"x\"", False),
])
def test_only_a_translated_offset_without_warning_is_routine(status, inversion, line, routine):
    from offset_pipeline.assets.translation import is_routine_translation

    assert is_routine_translation({"status": status, "timestamp_inversion": inversion, "decision": line}) is routine
