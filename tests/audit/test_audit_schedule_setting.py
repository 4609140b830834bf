"""``OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON``: when the audit schedule runs (default 00:20 UTC), checked when
the code location loads. The schedule firing on it is tests/sensors/test_dagster_on_postgres.py."""

from __future__ import annotations

import pytest

from offset_pipeline.settings import DEFAULT_AUDIT_SCHEDULE_CRON, audit_schedule_cron


def test_the_default_is_twenty_past_midnight_and_a_cron_is_taken_as_given():
    assert audit_schedule_cron({}) == DEFAULT_AUDIT_SCHEDULE_CRON == "20 0 * * *"
    assert audit_schedule_cron({"OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON": ""}) == "20 0 * * *"  # empty: unset
    assert audit_schedule_cron({"OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON": " * * * * * "}) == "* * * * *"
    assert audit_schedule_cron({"OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON": "5 */6 * * 1-5"}) == "5 */6 * * 1-5"


@pytest.mark.parametrize("value", ["every minute", "0 0 * *", "61 * * * *", "* * * * * *"])
def test_a_cron_dagster_would_refuse_fails_naming_the_setting(value):
    with pytest.raises(ValueError, match=r"OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON=.*expected a cron schedule"):
        audit_schedule_cron({"OFFSET_PIPELINE_AUDIT_SCHEDULE_CRON": value})


def test_the_schedule_runs_on_the_setting():
    from offset_pipeline.definitions import defs

    assert defs.get_schedule_def("offset_failover_audit_schedule").cron_schedule == audit_schedule_cron()
