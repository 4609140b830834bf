"""The real ``dagster-daemon run`` on the project's ``workspace.yaml``, in a process group of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from devstack.paths import REPO_ROOT

DAEMON = str(Path(sys.executable).parent / "dagster-daemon")


class Daemon:
    """``dagster-daemon run`` with ``env``, its output appended to ``log_path``; stopped with SIGTERM as a
    service manager does, or its whole process group killed when a test ends early."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env, self.log_path, self.proc = env, log_path, None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([DAEMON, "run", "-w", "workspace.yaml"], cwd=REPO_ROOT, env=self.env,
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def terminate(self, timeout: float = 90) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill_group(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

