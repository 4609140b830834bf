"""The real Dagster processes of the soak: ``dagster-daemon run`` (sensors, schedules, run queue,
run monitoring) and optionally ``dagster-webserver``, each in a session of its own with
DAGSTER_HOME in the soak's folder. Standalone (not ``dagster dev``), so the daemon can be stopped
and started again on its own, as an operator restarting it would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.soak import procs

VENV_BIN = Path(sys.executable).parent


class DagsterProcesses:
    def __init__(self, repo: Path, env: dict[str, str], log_dir: Path, webserver_port: int | None):
        self.repo = repo
        self.env = env
        self.log_dir = log_dir
        self.webserver_port = webserver_port
        self.daemon: subprocess.Popen | None = None
        self.webserver: subprocess.Popen | None = None
        self.sessions: list[int] = []  # every process group started (a restarted daemon's old code server too)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        """``args`` under the stack's log wrapper (devstack/logpipe.py): its output in a rotated,
        size-bounded log, as the stack's own parts have, so the soak measures bounded logs. Signals
        to the wrapper are passed on to the command; it dies with the wrapper."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        wrapped = [sys.executable, "-m", "devstack.logpipe", "--log", str(self.log_dir / f"{name}.log"),
                   "--", *args]
        with open(self.log_dir / f"{name}.wrapper.log", "ab") as log:
            proc = subprocess.Popen(wrapped, cwd=self.repo, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.sessions.append(proc.pid)
        return proc

    def start_daemon(self) -> int:
        self.daemon = self._spawn("dagster-daemon", [str(VENV_BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"])
        return self.daemon.pid

    def start_webserver(self) -> int | None:
        if self.webserver_port is None:
            return None
        self.webserver = self._spawn("dagster-webserver", [
            str(VENV_BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(self.webserver_port)])
        return self.webserver.pid

    def daemon_pid(self) -> int | None:
        return self.daemon.pid if self.daemon and self.daemon.poll() is None else None

    def webserver_pid(self) -> int | None:
        return self.webserver.pid if self.webserver and self.webserver.poll() is None else None

    def stop_daemon(self, grace_s: float = 60.0) -> None:
        """SIGTERM to the daemon alone (its run workers finish their runs), SIGKILL after ``grace_s``."""
        proc = self.daemon
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def stop_all(self, grace_s: float = 30.0) -> None:
        """Interrupt every process group started (as Ctrl-C would), then kill what is left."""
        for pgid in self.sessions:
            try:
                os.killpg(pgid, signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_group_alive(g) for g in self.sessions):
            for proc in (self.daemon, self.webserver):
                if proc is not None:
                    proc.poll()
            time.sleep(0.3)
        for pgid in self.sessions:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in (self.daemon, self.webserver):
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass

    def code_servers(self, kids: dict[int, list[int]]) -> dict[int, tuple[int, int]]:
        """Each live code server of the daemon, by pid (``procs.code_server_instances``)."""
        return procs.code_server_instances(self.daemon_pid(), kids)

    def roles(self, kids: dict[int, list[int]]) -> dict[str, tuple[int, int, int]]:
        out = procs.dagster_roles("dagster-daemon", self.daemon_pid(), kids)
        out.update(procs.dagster_roles("dagster-webserver", self.webserver_pid(), kids))
        return out


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
