"""Long-running helper processes of the stack (mirrors, traffic, consumers, the Spark Connect
server), tracked by pid files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from offset_pipeline.devstack.cluster import pid_alive
from offset_pipeline.devstack.errors import DevStackError


@dataclass(frozen=True)
class ManagedProcess:
    """A detached ``python -m <module> <args>`` (or ``<program> <args>``) with its log and pid file
    under ``run_dir``. ``env``: variables added to this process's environment."""

    name: str
    module: str
    args: tuple[str, ...]
    run_dir: Path
    program: tuple[str, ...] = ()  # run this instead of ``python -m module``
    env: tuple[tuple[str, str], ...] = ()

    def command(self) -> list[str]:
        return [*(self.program or (sys.executable, "-m", self.module)), *self.args]

    @property
    def pid_path(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def start(self, settle_s: float = 1.5) -> int:
        """Start unless running; fail with the log tail if it exits right away."""
        running = self.pid()
        if running:
            return running
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== starting {self.name} at {time.strftime('%Y-%m-%dT%H:%M:%S')} ===\n".encode())
            log.flush()
            proc = subprocess.Popen(
                self.command(),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, **dict(self.env)} if self.env else None,
            )
        self.pid_path.write_text(str(proc.pid))
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
                raise DevStackError(f"{self.name} exited at start (code {proc.returncode}):\n{tail}")
            time.sleep(0.1)
        return proc.pid

    def stop(self, timeout: float = 20.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_path.unlink(missing_ok=True)
            return False
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid):
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                break
            time.sleep(0.1)
        self.pid_path.unlink(missing_ok=True)
        return True
