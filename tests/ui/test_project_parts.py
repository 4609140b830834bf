"""Every asset, check, sensor, schedule and job of the project is where a data engineer looks for it
in the Dagster UI -- and the same look reports what is missing when a part is removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.paths import REPO_ROOT
from tests.conftest import free_port
from tests.helpers.dagster_ui import DagsterUI, artifacts_dir, interruptible, stop_process_group, wait_until_loaded
from tests.ui import reduced_location
from tests.ui.dagster_pages import parts_missing_from_ui
from tests.ui.project_parts import PROJECT, parts_of_definitions

pytestmark = [pytest.mark.ui, pytest.mark.ui_stack]


def test_the_list_the_browser_checks_is_the_projects():
    from offset_pipeline.definitions import defs

    assert parts_of_definitions(defs) == PROJECT


def test_the_ui_shows_every_asset_check_sensor_schedule_and_job(dagster_ui, page):
    missing = parts_missing_from_ui(page, dagster_ui.url, PROJECT, artifacts_dir(), "project")
    assert missing == set()


@pytest.fixture
def reduced_ui(tmp_path, chromium) -> DagsterUI:
    """A bare ``dagster-webserver`` (no daemon, no stack) serving the code location with parts removed."""
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        "load_from:\n  - python_module:\n      module_name: tests.ui.reduced_location\n"
        f"      location_name: offset_pipeline\n      working_directory: {REPO_ROOT}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OFFSET_PIPELINE_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(tmp_path / "dagster_home"), OFFSET_PIPELINE_DATA_DIR=str(tmp_path / "data"))
    Path(env["DAGSTER_HOME"]).mkdir()
    port = free_port()
    ui = DagsterUI(f"http://127.0.0.1:{port}", Path(env["DAGSTER_HOME"]), env, tmp_path / "webserver.log")
    webserver = Path(sys.executable).with_name("dagster-webserver")
    with open(ui.log_path, "wb") as log:
        proc = subprocess.Popen([str(webserver), "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
                                cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=interruptible)
    try:
        wait_until_loaded(ui, proc, timeout=180)
        yield ui
    finally:
        stop_process_group(proc, timeout=30)


def test_a_removed_asset_check_job_and_sensor_are_reported_missing(reduced_ui, page):
    missing = parts_missing_from_ui(page, reduced_ui.url, PROJECT, artifacts_dir(), "reduced")
    assert missing == reduced_location.REMOVED
