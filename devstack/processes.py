"""Long-running helper processes of the stack (mirrors, traffic, consumers, the Spark Connect
server), tracked by pid files.

Each runs under :mod:`devstack.logpipe`, which writes its output into
``<run_dir>/<name>.log``, rotated by size, and lives and dies with it. The pid file names the
wrapper, the leader of the part's process group.
"""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from devstack.errors import DevStackError
from devstack.liveness import pid_alive, pid_runs

LOG_WRAPPER = "devstack.logpipe"


class PartState(enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"  # never started, or stopped on purpose: no pid file
    DEAD = "dead"  # the pid file names a process that is gone, a zombie, or another program


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
        """The part's own command."""
        return [*(self.program or (sys.executable, "-m", self.module)), *self.args]

    def launch_command(self) -> list[str]:
        """The part's command under the log-rotating wrapper: what the pid file names."""
        return [sys.executable, "-m", LOG_WRAPPER, "--log", str(self.log_path), "--", *self.command()]

    @property
    def pid_path(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def _recorded_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _is_ours(self, pid: int) -> bool:
        # The log path is unique to the part and its stack: a reused pid never matches it. The
        # second form is a part started without the wrapper (a stack started before it existed),
        # so `down` still stops it and `up` does not start a second one.
        return pid_runs(pid, LOG_WRAPPER, str(self.log_path)) or pid_runs(pid, *self.command()[1:])

    def pid(self) -> int | None:
        """The wrapper's pid while the part runs; None when it is stopped or dead."""
        pid = self._recorded_pid()
        return pid if pid is not None and self._is_ours(pid) else None

    def state(self) -> tuple[PartState, int | None]:
        """``(state, pid)``: the running pid, or for a dead part the pid its file still names."""
        pid = self._recorded_pid()
        if pid is None:
            return PartState.STOPPED, None
        return (PartState.RUNNING if self._is_ours(pid) else PartState.DEAD), pid

    def start(self, settle_s: float = 1.5) -> int:
        """Start unless running; fail with the log tail if it exits right away."""
        running = self.pid()
        if running:
            return running
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # The wrapper's own stderr (a failure before it runs the command) goes to the log too.
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                self.launch_command(),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, **dict(self.env)} if self.env else None,
            )
        self.pid_path.write_text(str(proc.pid))
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DevStackError(f"{self.name} exited at start (code {proc.returncode}):\n{self.log_tail()}")
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

    def log_tail(self, lines: int = 30) -> str:
        return log_file_tail(self.log_path, lines)


def log_file_tail(path: Path, lines: int, missing: str = "(no log was written)") -> str:
    """The last ``lines`` lines of a part's log, for an error message; ``missing`` when there is none."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return missing
    return "\n".join(text.splitlines()[-lines:])
