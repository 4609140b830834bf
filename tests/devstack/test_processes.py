"""The stack's managed processes, on real processes: their logs rotate by size and keep a crash's
traceback; a part whose process died, is a zombie or whose pid now belongs to another program is
dead, and the part and its log wrapper die together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from devstack.liveness import pid_alive
from devstack.processes import ManagedProcess, PartState

from tests.conftest import wait_for


def part(tmp_path: Path, name: str, code: str, **env: str) -> ManagedProcess:
    return ManagedProcess(name, "", (), tmp_path, program=(sys.executable, "-c", code), env=tuple(env.items()))


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_log_rotates_by_size_and_keeps_the_crash_traceback_at_the_end(tmp_path):
    marker = uuid.uuid4().hex
    code = (
        "import sys\n"
        "for i in range(3000):\n"
        "    print(f'line {i:05d} ' + 'x' * 50, file=sys.stdout if i % 2 else sys.stderr)\n"
        f"raise RuntimeError('boom {marker}')\n"
    )
    chatty = part(tmp_path, "chatty", code, OFFSET_PIPELINE_LOG_MAX_BYTES="4000", OFFSET_PIPELINE_LOG_BACKUPS="3")
    chatty.start(settle_s=0)
    wait_for(lambda: chatty.state()[0] is PartState.DEAD, timeout=60, what="the program to crash")

    logs = sorted(tmp_path.glob("chatty.log*"))
    assert [p.name for p in logs] == ["chatty.log", "chatty.log.1", "chatty.log.2", "chatty.log.3"]
    for path in logs:
        assert path.stat().st_size <= 4000 + 200, (path, path.stat().st_size)  # one line past the limit at most
    current = chatty.log_path.read_text()
    # The crash is at the end of the current file: the last lines, the traceback, the exit code.
    assert "line 02999" in current
    assert f"RuntimeError: boom {marker}" in current
    assert current.rstrip().splitlines()[-1].startswith("=== exited with code 1 at ")
    # Bounded: the first ~180 KB of output are gone, the newest lines kept in order.
    kept = "".join(p.read_text() for p in reversed(logs))
    assert "line 00000" not in kept
    numbers = [int(line.split()[1]) for line in kept.splitlines() if line.startswith("line ")]
    assert numbers == sorted(numbers) and numbers[-1] == 2999


def test_a_killed_wrapper_takes_its_program_along_and_the_part_is_dead(tmp_path):
    sleeper = part(tmp_path, "sleeper", "import time; time.sleep(600)")
    pid = sleeper.start(settle_s=0.5)
    assert sleeper.state() == (PartState.RUNNING, pid)
    program = wait_for(lambda: children(pid), timeout=30, what="the wrapped program")[0]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(program), timeout=30, what="the program to die with its wrapper")
    # The wrapper is this test's child, a zombie until reaped: dead all the same.
    assert sleeper.state() == (PartState.DEAD, pid)
    assert sleeper.pid() is None


def test_a_program_that_dies_ends_its_wrapper_and_the_log_says_how(tmp_path):
    sleeper = part(tmp_path, "sleeper", "import time; time.sleep(600)")
    pid = sleeper.start(settle_s=0.5)
    program = wait_for(lambda: children(pid), timeout=30, what="the wrapped program")[0]
    os.kill(program, signal.SIGKILL)
    wait_for(lambda: sleeper.state()[0] is PartState.DEAD, timeout=30, what="the wrapper to exit")
    assert "=== exited with signal 9 at " in sleeper.log_path.read_text()


def test_a_pid_file_naming_another_program_is_dead_and_stop_leaves_that_program_alone(tmp_path):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(601)"])
    try:
        sleeper = part(tmp_path, "sleeper", "import time; time.sleep(600)")
        sleeper.pid_path.write_text(str(stranger.pid))  # as after a reboot that reused the pid
        assert sleeper.state() == (PartState.DEAD, stranger.pid)
        assert sleeper.stop() is False
        assert stranger.poll() is None
        assert not sleeper.pid_path.exists()
        assert sleeper.state() == (PartState.STOPPED, None)
    finally:
        stranger.kill()
        stranger.wait()


def test_stop_ends_program_and_wrapper(tmp_path):
    sleeper = part(tmp_path, "sleeper", "import time; time.sleep(600)")
    pid = sleeper.start(settle_s=0.5)
    program = wait_for(lambda: children(pid), timeout=30, what="the wrapped program")[0]
    assert sleeper.stop(timeout=30)
    assert not pid_alive(pid) and not pid_alive(program)
    assert sleeper.state() == (PartState.STOPPED, None)
    assert "=== exited with signal 15 at " in sleeper.log_path.read_text()
    time.sleep(0)  # nothing left to wait for: both are gone
