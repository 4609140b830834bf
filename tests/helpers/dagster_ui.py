"""``dagster dev`` as the browser tests and the clean-stop tests drive it: where their screenshots go,
the Chromium they use, the UI's GraphQL answer on the code location, and the stack's process group
started interruptible and stopped with Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devstack.paths import REPO_ROOT

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

