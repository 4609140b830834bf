"""The session's two clusters and their MirrorMaker 2, one set per test run, shared by every
pytest-xdist worker: each worker used to start its own (six brokers and three MirrorMaker 2s on a
2-core machine, most of them idle most of the time, every one of them costing CPU all run long).

A holder process owns them. The first process that asks for the pair (:func:`attach`, under a file
lock) starts the holder; the others read where it listens from its state file. The holder stops them
when the run's main process ends it (:func:`stop`, from the main process's ``pytest_unconfigure``)
or when that process is gone (it checks every second): a killed run leaves no JVM behind.

The tests use the pair as they did their own: topics and groups are named per test, so workers do
not meet; the Python mirror's topics and positions are per worker (``tests/conftest.py``).

``python -m tests.helpers.shared_pair <dir> <jars dir> <main pid>`` is the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from devstack.cluster import ClusterSpec, KafkaCluster
from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config, MirrorMaker2Keeper
from devstack.paths import REPO_ROOT

#: where the main process tells every worker to find (or make) the holder, and its own pid
DIR_VARIABLE = "OFFSET_PIPELINE_TEST_SHARED_PAIR_DIR"
MAIN_PID_VARIABLE = "OFFSET_PIPELINE_TEST_MAIN_PID"
MIRRORED_PREFIX = "t."  # the session's MirrorMaker 2 copies the topics named so, both ways
START_TIMEOUT_S = 300.0
BROKER_GRACE_S = 5.0  # at the run's end: nobody reads their data again
MIRROR_GRACE_S = 2.0


def free_port() -> int:
    """A loopback port free now (``tests/conftest.py`` hands it to the tests too)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _clusters(state: dict, jars: Path) -> list[KafkaCluster]:
    return [KafkaCluster(ClusterSpec(name, c["port"], c["controller_port"], Path(c["data_dir"])), jars)
            for name, c in sorted(state["clusters"].items())]


def attach(directory: Path, jars: Path, main_pid: int) -> list[KafkaCluster]:
    """The shared clusters (idc1, idc2), started by this call if no process started them yet."""
    directory.mkdir(parents=True, exist_ok=True)
    state_path = directory / "state.json"
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while the first one starts them
        if not state_path.exists():
            _start_holder(directory, jars, main_pid, state_path)
    return _clusters(json.loads(state_path.read_text()), jars)


def _start_holder(directory: Path, jars: Path, main_pid: int, state_path: Path) -> None:
    log_path = directory / "holder.log"
    with open(log_path, "ab") as log:
        holder = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.shared_pair", str(directory), str(jars), str(main_pid)],
            cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # a worker's Ctrl-C or exit is not the holder's
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not state_path.exists():
        if holder.poll() is not None or time.monotonic() > deadline:
            if holder.poll() is None:
                holder.kill()
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the session's clusters did not start (holder {holder.returncode}):\n{tail}")
        time.sleep(0.2)


def stop(directory: Path, timeout_s: float = 90.0) -> None:
    """End the holder (its clusters and mirror stop with it), if one was started."""
    state_path = directory / "state.json"
    if not state_path.exists():
        return
    pid = json.loads(state_path.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def hold(directory: Path, jars: Path, main_pid: int) -> None:
    """The holder: start both clusters and the mirror, write the state, wait for the end, stop them."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    clusters = [KafkaCluster(ClusterSpec(name, free_port(), free_port(), directory / name), jars)
                for name in ("idc1", "idc2")]
    keeper = None
    try:
        starts = [threading.Thread(target=c.start) for c in clusters]  # both brokers start at once
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        for c in clusters:
            if not c.status().ready:
                raise RuntimeError(f"{c.spec.name} did not start")
        config = MirrorMaker2Config(
            tuple(MirrorEndpoint(c.spec.name, c.spec.bootstrap_servers) for c in clusters), directory / "mirrormaker2",
            topics=re.escape(MIRRORED_PREFIX) + ".*", rest_port=free_port())
        keeper = MirrorMaker2Keeper(MirrorMaker2(config))
        keeper.start()
        state = {"pid": os.getpid(), "clusters": {
            c.spec.name: {"port": c.spec.port, "controller_port": c.spec.controller_port, "data_dir": str(c.spec.data_dir)}
            for c in clusters}}
        partial = directory / "state.json.partial"
        partial.write_text(json.dumps(state))
        partial.rename(directory / "state.json")  # whole or not at all, for the workers waiting on it
        print(f"shared pair ready: {state}", flush=True)
        while not done.wait(1.0):
            if not _alive(main_pid):
                print(f"the run's main process {main_pid} is gone: stopping", flush=True)
                break
    finally:
        if keeper is not None:
            keeper.stop(grace_s=MIRROR_GRACE_S)
        stops = [threading.Thread(target=c.stop, kwargs={"timeout": BROKER_GRACE_S}) for c in clusters]
        for t in stops:
            t.start()
        for t in stops:
            t.join()
        print("shared pair stopped", flush=True)


if __name__ == "__main__":
    hold(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
