"""What a data engineer does in the Dagster UI of ``bin/up``, in a real browser: launch a sync cycle,
read the monitoring asset, backfill two days of audits. Each outcome read on the page is checked
against Dagster's own instance, so the page is shown to tell the truth."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from devstack.consumers import default_groups
from offset_pipeline.monitoring.metric_rules import STATUS_ORDER
from tests.conftest import wait_for
from tests.helpers.dagster_ui import artifacts_dir
from tests.ui.dagster_pages import (
    backfill_outcome_shown,
    launch_backfill_from_ui,
    launch_job_from_ui,
    run_status_shown,
    shot,
)

pytestmark = [pytest.mark.ui, pytest.mark.ui_stack]

SYNC_ASSETS = {"offset_snapshot", "offset_translations", "offset_standby_commits", "offset_sync_metrics"}
STATUS_TABLE_HEADER = ["group", "topic", "status", "partitions", "InSync", "max sync age (s)", "d"]


def materialized_assets(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    return {r.event_log_entry.dagster_event.asset_key.to_user_string() for r in records}


def runs_picture(instance: dg.DagsterInstance, limit: int = 12) -> str:
    """The newest runs, a line each (job, status, tags that queue it, event count, last message):
    what a run that never ended was waiting behind."""
    lines = []
    for run in instance.get_runs(limit=limit):
        logs = instance.all_logs(run.run_id)
        last = next((e.user_message for e in reversed(logs) if e.user_message), "")
        lines.append(f"{run.run_id[:8]} {run.job_name} {run.status.value} "
                     f"sync={run.tags.get('offset_pipeline/sync', '-')} events={len(logs)} last={last[:160]!r}")
    return "\n".join(lines)


def wait_for_run_end(instance: dg.DagsterInstance, run_id: str, timeout_s: float) -> None:
    """Until the run is finished; if it is not within ``timeout_s``, the failure shows the newest runs."""
    try:
        wait_for(lambda: (run := instance.get_run_by_id(run_id)) is not None and run.is_finished,
                 timeout=timeout_s, what=f"run {run_id} to end")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the newest runs:\n{runs_picture(instance)}") from None


def test_a_sync_cycle_launched_from_the_ui_succeeds(dagster_ui, page):
    run_id = launch_job_from_ui(page, dagster_ui.url, "offset_sync_cycle")
    shot(page, artifacts_dir(), "sync-launched")
    # Queued behind the sensor's own run if one is in flight (one sync run at a time), then a run
    # worker that starts its own Spark: minutes on a loaded machine. Run monitoring ends a cycle
    # within start_timeout + max_runtime (deploy/dagster.yaml), so the wait is a bound.
    with dg.DagsterInstance.from_config(str(dagster_ui.dagster_home)) as instance:
        wait_for_run_end(instance, run_id, timeout_s=720)
    status = run_status_shown(page, dagster_ui.url, run_id, timeout_s=90)
    shot(page, artifacts_dir(), "sync-run-done")
    assert status == "Success", dagster_ui.log_tail()
    with dg.DagsterInstance.from_config(str(dagster_ui.dagster_home)) as instance:
        run = instance.get_run_by_id(run_id)
        assert run.job_name == "offset_sync_cycle" and run.status is dg.DagsterRunStatus.SUCCESS
        assert run.tags.get("dagster/from_ui") == "true" and "dagster/sensor_name" not in run.tags
        assert materialized_assets(instance, run_id) == SYNC_ASSETS


def latest_metrics(instance: dg.DagsterInstance) -> tuple[str, dict]:
    """The newest materialization of the monitoring asset: (its run id, its metadata)."""
    event = instance.get_latest_materialization_event(dg.AssetKey("offset_sync_metrics"))
    return (event.run_id, event.asset_materialization.metadata) if event else ("", {})


def markdown_rows(table: str) -> list[list[str]]:
    rows = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            for line in table.splitlines()]
    return [rows[0]] + rows[2:]  # without the |---| line


def test_the_metrics_asset_shows_the_convergence_picture_and_the_status_table(dagster_ui, page):
    with dg.DagsterInstance.from_config(str(dagster_ui.dagster_home)) as instance:
        deadline = time.monotonic() + 300
        while not latest_metrics(instance)[1] and time.monotonic() < deadline:
            time.sleep(3)  # the sensor's cycles (or the test above) write the monitoring rows
        for _ in range(5):  # read the page between two materializations, to compare with one of them
            before, metadata = latest_metrics(instance)
            assert metadata, "offset_sync_metrics never materialized"
            page.goto(f"{dagster_ui.url}/assets/offset_sync_metrics")
            shown_table = page.locator("table table").first
            shown_table.wait_for()
            shown = [[c.strip() for c in row.locator("th, td").all_inner_texts()]
                     for row in shown_table.locator("tr").all()]
            if latest_metrics(instance)[0] == before:
                break
    shown_table.scroll_into_view_if_needed()
    shot(page, artifacts_dir(), "metrics-status-table")
    assert shown == markdown_rows(metadata["status_table"].value)
    assert shown[0] == STATUS_TABLE_HEADER and len(shown) > 1
    stack_groups = {g.group_id for g in default_groups()}
    for group, topic, status, *_ in shown[1:]:
        assert group in stack_groups and status in STATUS_ORDER, (group, topic, status)

    row = page.locator("tr").filter(has=page.get_by_text("convergence", exact=True)).last
    row.get_by_text("[Show Markdown]").click()
    dialog = page.get_by_role("dialog").filter(has_text="convergence")
    picture = dialog.locator("img")
    picture.wait_for()
    page.wait_for_function("img => img.complete", arg=picture.element_handle())
    shot(page, artifacts_dir(), "metrics-convergence")
    # Decoded and drawn at the size the asset rendered it (8 x 3 inches at 100 dpi).
    assert picture.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [800, 300]
    src = re.search(r"\((data:image/png;base64,[^)]+)\)", metadata["convergence"].value)[1]
    assert picture.get_attribute("src") == src


def test_a_backfill_of_two_audit_days_launched_from_the_ui_completes(dagster_ui, page):
    today = datetime.now(timezone.utc).date()
    days = [(today - timedelta(days=1)).isoformat(), today.isoformat()]
    backfill_id = launch_backfill_from_ui(page, dagster_ui.url, "offset_failover_audit", f"[{days[0]}...{days[1]}]")
    shot(page, artifacts_dir(), "audit-backfill-launched")
    outcome = backfill_outcome_shown(page, dagster_ui.url, backfill_id, "offset_failover_audit", timeout_s=480)
    shot(page, artifacts_dir(), "audit-backfill-done")
    assert outcome == {"status": "Succeeded", "completed_pct": 100, "targeted": 2, "in_progress": 0,
                       "succeeded": 2, "failed": 0}, dagster_ui.log_tail()

    page.goto(f"{dagster_ui.url}/assets/offset_failover_audit?view=partitions")
    page.get_by_text(days[1], exact=True).first.wait_for()
    shot(page, artifacts_dir(), "audit-partitions")
    with dg.DagsterInstance.from_config(str(dagster_ui.dagster_home)) as instance:
        assert set(days) <= instance.get_materialized_partitions(dg.AssetKey("offset_failover_audit"))
        [run] = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        # The single-run backfill policy: both days in one run.
        assert (run.tags["dagster/asset_partition_range_start"], run.tags["dagster/asset_partition_range_end"]) == (
            days[0], days[1])


def test_the_continuous_run_started_by_its_sensor_shows_readiness_to_switch(dagster_ui, page):
    """The default mode as bin/up runs it: the sensor's continuous run (half a minute in this stack)
    materializes offset_continuous_sync, and its page shows the readiness table of its metadata."""
    with dg.DagsterInstance.from_config(str(dagster_ui.dagster_home)) as instance:
        # A run of more than one cycle: continuous, not a cycle run once. (A run's start -- its
        # process, its imports, its Spark session -- took most of its half minute on a loaded
        # 2-core machine, where one run of the suite saw a single cycle: the next run gets more.)
        deadline = time.monotonic() + 480
        event = None
        while time.monotonic() < deadline:
            event = instance.get_latest_materialization_event(dg.AssetKey("offset_continuous_sync"))
            if event is not None and event.asset_materialization.metadata["cycles"].value >= 2:
                break
            time.sleep(3)
        assert event is not None, "offset_continuous_sync never materialized: " + dagster_ui.log_tail()
        run = instance.get_run_by_id(event.run_id)
        assert run.job_name == "offset_sync_continuous"
        assert run.tags.get("dagster/sensor_name") == "offset_continuous_sync_sensor"
        metadata = event.asset_materialization.metadata
        assert metadata["cycles"].value >= 2, dagster_ui.log_tail()
    page.goto(f"{dagster_ui.url}/assets/offset_continuous_sync")
    shown_table = page.locator("table table").filter(has_text="safe to switch").first
    shown_table.wait_for()
    shown_table.scroll_into_view_if_needed()
    shot(page, artifacts_dir(), "continuous-readiness")
    shown = [[c.strip() for c in row.locator("th, td").all_inner_texts()] for row in shown_table.locator("tr").all()]
    expected = markdown_rows(metadata["readiness"].value)
    assert shown[0] == expected[0] == ["group", "direction", "safe to switch", "expected duplicates",
                                       "duplicates at most", "seconds since sync", "why not"]
    assert len(shown) > 1
    stack_groups = {g.group_id for g in default_groups()}
    assert {row[0] for row in shown[1:]} <= stack_groups | {row[0] for row in expected[1:]}
