"""The browser tests' world: the README's main command (``bin/up``) on free ports in a temporary
folder -- both Kafka clusters, the mirror both ways, traffic, consumer groups, the Spark Connect
server, then ``dagster dev`` with its daemon -- and Debian's headless Chromium driven by Playwright.

After the last browser test the stack is stopped with Ctrl-C and must leave no process behind within
30 s (the clean stop; the fixture's teardown fails otherwise).

Screenshots go to ``test-artifacts/ui/`` (``OFFSET_PIPELINE_TEST_ARTIFACTS`` moves the folder): the
named ones each test takes, and one of the page as it was when each test ended, pass or fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from devstack.paths import REPO_ROOT
from tests.conftest import devstack_env, free_port
from tests.devstack.stack_census import STOP_WITHIN_S, stack_processes, survivors, wait_for_survivors
from tests.helpers.dagster_ui import (
    CHROMIUM_ARGS,
    DagsterUI,
    artifacts_dir,
    chromium_path,
    interruptible,
    stop_process_group,
    wait_until_loaded,
)


# Package-scoped: the stack stops after the last browser test, not at the end of the worker's session
# (another whole stack may start on this worker after them).
@pytest.fixture(scope="package")
def dagster_ui(kafka_jars, tmp_path_factory) -> DagsterUI:
    """``bin/up`` exactly as the README runs it, on its own ports and folder."""
    base = tmp_path_factory.mktemp("ui_stack")
    # Half the default traffic: two cores also run the tests' own clusters and Chromium.
    env = devstack_env(base, kafka_jars, rate_scale=0.5)
    # The default continuous mode with a half-minute run: a cycle launched from the UI waits in the
    # queue for the run in progress to end (one sync run at a time), as a user's would.
    env.update(OFFSET_PIPELINE_UI_PORT=str(free_port()), PYSPARK_PYTHON=sys.executable,
               OFFSET_PIPELINE_CONTINUOUS_RUN_S="30")
    ui = DagsterUI(f"http://127.0.0.1:{env['OFFSET_PIPELINE_UI_PORT']}", base / "dagster_home", env, base / "bin-up.log")
    with open(ui.log_path, "wb") as log:
        proc = subprocess.Popen([str(REPO_ROOT / "bin" / "up")], cwd=REPO_ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=interruptible)
    census: dict = {}
    stopped: tuple[list, float] | None = None
    try:
        wait_until_loaded(ui, proc, timeout=420)
        yield ui
        # Ctrl-C, as in bin/up's terminal (the clean stop; tests/devstack/test_clean_stop.py has the
        # other ways): every process of the stack gone within the limit, bin/up ending with 130.
        census = stack_processes(base, proc.pid)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            stopped = wait_for_survivors(census, base, proc.pid, reap=proc.poll)
    finally:
        stop_process_group(proc)
        # bin/up's own exit trap stops the stack; this makes sure, even if bin/up was killed.
        subprocess.run([sys.executable, "-m", "devstack", "down"], env=env, timeout=180,
                       capture_output=True)
        for leftover in survivors(census, base, proc.pid) if census else ():
            try:
                os.kill(leftover.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.copy(ui.log_path, artifacts_dir() / "bin-up.log")
    assert stopped is not None, f"bin/up had ended before the session's Ctrl-C ({proc.returncode}):\n{ui.log_tail()}"
    left, took = stopped
    report = f"Ctrl-C: {len(census)} processes, {'all gone' if not left else f'{len(left)} left'} after {took:.1f}s"
    assert not left, report + "\n" + "\n".join(f"{p.pid} {p.cmd[:200]}" for p in left) + "\n" + ui.log_tail()
    assert took <= STOP_WITHIN_S, report + "\n" + ui.log_tail()
    assert proc.returncode == 128 + signal.SIGINT, report + "\n" + ui.log_tail()


@pytest.fixture(scope="package")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, request):
    """A fresh browser context per test (no state carried over), its last view saved as a screenshot."""
    context = chromium.new_context(viewport={"width": 1600, "height": 1000})
    # Playwright's 30 s was too short for a page of the Dagster UI on a 2-core machine also running the
    # suite's brokers and JVMs (three waits of the UI tests timed out in one CI run): 90 s.
    context.set_default_timeout(90_000)
    page = context.new_page()
    # A fresh Dagster instance greets the first visitor with a newsletter dialog over every page.
    page.add_locator_handler(page.get_by_text("Join the Dagster community"),
                             lambda: page.get_by_role("button", name="Skip").click())
    yield page
    try:
        page.screenshot(path=artifacts_dir() / f"{request.node.name}.end.png")
    finally:
        context.close()
