"""The browser tests' world: the README's main command (``bin/up``) on free ports in a temporary
folder -- both Kafka clusters, the mirror both ways, traffic, consumer groups, the Spark Connect
server, then ``dagster dev`` with its daemon -- and Debian's headless Chromium driven by Playwright.

At the end of the session the stack is stopped with Ctrl-C and must leave no process behind within
30 s (the clean stop; the fixture's teardown fails otherwise).

Screenshots go to ``test-artifacts/ui/`` (``OFFSET_PIPELINE_TEST_ARTIFACTS`` moves the folder): the
named ones each test takes, and one of the page as it was when each test ended, pass or fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from devstack.paths import REPO_ROOT
from tests.conftest import devstack_env, free_port
from tests.devstack.stack_census import STOP_WITHIN_S, stack_processes, survivors, wait_for_survivors

CHROMIUM_ARGS = (
    # As root, Chromium's sandbox cannot start; the rest keep it from calling Google's hosts, which
    # this machine's closed network refuses (slowly, many at a time).
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
)

LOCATION_QUERY = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus " \
                 "locationOrLoadError { __typename } } } } }"


def artifacts_dir() -> Path:
    path = Path(os.environ.get("OFFSET_PIPELINE_TEST_ARTIFACTS") or REPO_ROOT / "test-artifacts") / "ui"
    path.mkdir(parents=True, exist_ok=True)
    return path


def chromium_path() -> str:
    path = os.environ.get("OFFSET_PIPELINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        raise RuntimeError(f"no Chromium at {path}: bin/test installs Debian's chromium (bin/setup --browser)")
    return path


@dataclass
class DagsterUI:
    """A running ``dagster dev`` and where its instance and logs are."""

    url: str
    dagster_home: Path
    env: dict[str, str]
    log_path: Path

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)["data"]

    def location_loaded(self, name: str = "offset_pipeline") -> bool:
        try:
            entries = self.graphql(LOCATION_QUERY)["workspaceOrError"]["locationEntries"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, TypeError):
            return False
        entry = next((e for e in entries if e["name"] == name), None)
        if entry and entry["locationOrLoadError"] and entry["locationOrLoadError"]["__typename"] == "PythonError":
            raise AssertionError(f"code location {name} failed to load; see {self.log_path}")
        return bool(entry and entry["loadStatus"] == "LOADED" and entry["locationOrLoadError"])

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def wait_until_loaded(ui: DagsterUI, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited with {proc.returncode}:\n{ui.log_tail()}")
        if ui.location_loaded():
            return
        time.sleep(2)
    raise AssertionError(f"the UI did not load the code location in {timeout:.0f}s:\n{ui.log_tail()}")


def interruptible() -> None:
    """In the child before exec: SIGINT, SIGTERM and SIGHUP back to their defaults, as in a terminal
    window. A test run started in the background of a non-interactive shell inherits SIGINT
    ignored, one started under ``nohup`` SIGHUP, some job runners SIGTERM; a shell cannot trap a
    signal it was started with ignored, so bin/up would then never stop on it (seen: SigIgn of
    bin/up's bash held SIGHUP and SIGTERM, and both stop tests failed)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def stop_process_group(proc: subprocess.Popen, timeout: float = 120) -> None:
    """Ctrl-C, as a user stops ``bin/up``; killed if it does not end."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="session")
def dagster_ui(kafka_jars, tmp_path_factory) -> DagsterUI:
    """``bin/up`` exactly as the README runs it, on its own ports and folder."""
    base = tmp_path_factory.mktemp("ui_stack")
    # Half the default traffic: two cores also run the tests' own clusters and Chromium.
    env = devstack_env(base, kafka_jars, rate_scale=0.5)
    # The default continuous mode with a one-minute run: a cycle launched from the UI waits in the
    # queue for the run in progress to end (one sync run at a time), as a user's would.
    env.update(OFFSET_PIPELINE_UI_PORT=str(free_port()), PYSPARK_PYTHON=sys.executable,
               OFFSET_PIPELINE_CONTINUOUS_RUN_S="60")
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


@pytest.fixture(scope="session")
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
    context.set_default_timeout(30_000)
    page = context.new_page()
    # A fresh Dagster instance greets the first visitor with a newsletter dialog over every page.
    page.add_locator_handler(page.get_by_text("Join the Dagster community"),
                             lambda: page.get_by_role("button", name="Skip").click())
    yield page
    try:
        page.screenshot(path=artifacts_dir() / f"{request.node.name}.end.png")
    finally:
        context.close()
