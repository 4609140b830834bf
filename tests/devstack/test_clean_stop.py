"""A stop of ``bin/up`` leaves nothing behind: SIGHUP to its pid alone (as the kernel sends it when
the terminal closes), or dagster dev crashing, stops every process it started -- both brokers, the
mirror, traffic, consumers, the Spark Connect server and its Python workers, ``dagster dev`` with its
webserver, daemon, code servers and any in-flight run -- within 30 s; so does SIGTERM to its pid
while the stack is still starting (``devstack up`` in flight, some parts up, others not yet).
Ctrl-C (SIGINT to its process group, as a terminal sends it) is the stop of the UI tests' ``bin/up``
at the end of the session, with the same census and limits (tests/ui/conftest.py): one start of the
whole stack fewer.

Each case starts the README's main command in a pseudo-terminal, on free ports in a temporary
folder, waits for the moment its stop is about (the UI and the sync sensor's first run, or the first
broker started), takes a census of the stack's processes (tests/devstack/stack_census.py) and stops
it one way.
"""

from __future__ import annotations

import fcntl
import os
import pty
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from devstack.paths import REPO_ROOT
from tests.conftest import devstack_env, free_port
from tests.devstack.stack_census import STOP_WITHIN_S, Proc, read_proc, stack_processes, survivors, wait_for_survivors
from tests.helpers.dagster_ui import DagsterUI, artifacts_dir, interruptible, wait_until_loaded

pytestmark = [pytest.mark.kafka, pytest.mark.whole_stack]

RUNS_QUERY = "{ runsOrError(limit: 20) { ... on Runs { results { runId status jobName } } } }"
IN_FLIGHT = {"STARTING", "STARTED", "CANCELING"}


def runs(ui: DagsterUI) -> list[dict]:
    try:
        return ui.graphql(RUNS_QUERY)["runsOrError"]["results"]
    except Exception:  # the UI may be busy: this is polled
        return []


def wait_for_a_sync_run(ui: DagsterUI, proc: subprocess.Popen, timeout: float = 240, settle: float = 90) -> dict:
    """The sensor's runs once one is in flight, or, past ``settle`` s after the first run, whatever
    runs there are: a stop must also work with no run in flight."""
    deadline, first_seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"bin/up exited with {proc.returncode}:\n{ui.log_tail()}"
        found = runs(ui)
        if found:
            first_seen = first_seen or time.monotonic()
            if any(r["status"] in IN_FLIGHT for r in found) or time.monotonic() - first_seen > settle:
                return {r["runId"]: r["status"] for r in found}
        time.sleep(2)
    raise AssertionError(f"the sync sensor launched no run within {timeout:.0f}s:\n{ui.log_tail()}")


def interruptible_terminal() -> None:
    """In the child before exec: the stop signals at their defaults (``interruptible``, from
    tests/helpers/dagster_ui.py), and the pseudo-terminal on stdin as the new session's controlling
    terminal, as in a terminal window."""
    interruptible()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A pseudo-terminal whose output is copied to a log file (a full terminal would block bin/up)."""

    def __init__(self, log_path: Path):
        self.master, self.slave = pty.openpty()
        self.log_path = log_path
        self._reader = threading.Thread(target=self._copy, daemon=True)

    def _copy(self) -> None:
        with open(self.log_path, "ab") as log:
            while True:
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # EIO: no process holds the terminal any more
                    return
                if not data:
                    return
                log.write(data)
                log.flush()

    def start(self) -> None:
        self._reader.start()

    def hang_up(self) -> None:
        self._close("master")  # the terminal's session leader (bin/up) gets SIGHUP

    def close(self) -> None:
        self._close("slave")
        self._close("master")
        self._reader.join(timeout=5)

    def _close(self, end: str) -> None:
        fd = getattr(self, end)
        if fd >= 0:
            setattr(self, end, -1)  # never close a number the system may have given out again
            os.close(fd)


def signal_state(pid: int) -> str:
    """Where ``pid`` waits and what it does with signals (blocked, ignored, caught, pending), from
    /proc: what a stop that changed nothing needs explained."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as exc:
        return f"pid {pid}: {exc}"
    wanted = ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return f"pid {pid} wchan={wchan} " + " ".join(line.replace("\t", "") for line in status if line.startswith(wanted))


def dagster_dev_pid(bin_up_pid: int) -> int:
    for entry in Path("/proc").iterdir():
        info = read_proc(int(entry.name)) if entry.name.isdigit() else None
        if info and info[0] == bin_up_pid and "bin/dagster dev " in info[3]:
            return int(entry.name)
    raise AssertionError("no dagster dev process under bin/up")


def wait_for_a_starting_stack(base: Path, ui: DagsterUI, proc: subprocess.Popen, timeout: float = 240) -> dict:
    """Until ``devstack up`` has started idc1's broker (its pid file is written) and Dagster is not
    started yet: the stack is half up. Returns no runs (there are none yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"bin/up exited with {proc.returncode}:\n{ui.log_tail()}"
        if (base / "idc1" / "broker.pid").exists():
            assert "Dagster UI" not in ui.log_path.read_text(errors="replace"), "the stack was up already"
            return {}
        time.sleep(0.2)
    raise AssertionError(f"devstack up started no broker within {timeout:.0f}s:\n{ui.log_tail()}")


# How each case stops bin/up, when, and the exit code bin/up then ends with. SIGINT is the UI tests'
# stop (Ctrl-C to the process group, tests/ui/conftest.py). SIGINT, SIGTERM and SIGHUP to the pid
# alone run one trap (bin/up's on_signal): SIGHUP stops the whole stack here, SIGTERM the stack while
# it starts (bin/up then stops its ``devstack up`` step first), one start of the whole stack fewer.
STOPS = {
    "sigterm-to-pid-while-starting": (lambda proc, terminal: os.kill(proc.pid, signal.SIGTERM),
                                      128 + signal.SIGTERM),
    # The terminal window closed: the kernel sends SIGHUP to bin/up's pid, and every later write
    # to the terminal fails.
    "sighup-to-pid-terminal-closed": (lambda proc, terminal: terminal.hang_up(), 128 + signal.SIGHUP),
    # dagster dev crashing (killed): bin/up stops what is left and fails with its exit code.
    "dagster-dev-crash": (lambda proc, terminal: os.kill(dagster_dev_pid(proc.pid), signal.SIGKILL),
                          128 + signal.SIGKILL),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stop_of_bin_up_leaves_no_process_behind(stop, kafka_jars, tmp_path):
    base = tmp_path / "stack"
    env = devstack_env(base, kafka_jars, rate_scale=0.5)
    env.update(OFFSET_PIPELINE_UI_PORT=str(free_port()), PYSPARK_PYTHON=sys.executable)
    ui = DagsterUI(f"http://127.0.0.1:{env['OFFSET_PIPELINE_UI_PORT']}", base / "dagster_home", env,
                   tmp_path / "bin-up.log")
    terminal = Terminal(ui.log_path)
    proc = subprocess.Popen([str(REPO_ROOT / "bin" / "up")], cwd=REPO_ROOT, env=env, stdin=terminal.slave,
                            stdout=terminal.slave, stderr=terminal.slave, start_new_session=True,
                            preexec_fn=interruptible_terminal)
    terminal.start()
    census: dict[int, Proc] = {}
    try:
        if stop.endswith("-while-starting"):
            runs_before = wait_for_a_starting_stack(base, ui, proc)
        else:
            wait_until_loaded(ui, proc, timeout=420)
            runs_before = wait_for_a_sync_run(ui, proc)
        census = stack_processes(base, proc.pid)
        send, exit_code = STOPS[stop]
        send(proc, terminal)
        left, took = wait_for_survivors(census, base, proc.pid, reap=proc.poll)  # reap bin/up, our child
        report = (f"{stop}: {len(census)} processes, runs {runs_before}; "
                  f"{'all gone' if not left else f'{len(left)} left'} after {took:.1f}s")
        print(report)
        assert not left, (report + "\n" + "\n".join(f"{p.pid} {p.cmd[:200]}" for p in left) + "\n"
                          + signal_state(proc.pid) + "\n" + ui.log_tail())
        assert took <= STOP_WITHIN_S, report + "\n" + ui.log_tail()
        assert proc.wait(timeout=10) == exit_code, ui.log_tail()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        subprocess.run([sys.executable, "-m", "devstack", "down"], env=env, timeout=180,
                       capture_output=True)
        for p in survivors(census, base, proc.pid):
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        terminal.close()
        # bin/up's output (Dagster's and the stack's stop lines) beside the UI tests' artifacts.
        folder = artifacts_dir().parent / "clean-stop"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(ui.log_path, folder / f"bin-up.{stop}.log")
        if (base / "run" / "down.log").exists():
            shutil.copy(base / "run" / "down.log", folder / f"down.{stop}.log")
