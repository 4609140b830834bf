"""The main command's stack, end to end: `devstack up` brings clusters, the mirror (MirrorMaker 2 by
default), traffic, consumers and the Spark Connect server up; records flow both ways with origin
headers; `up` and `watch` restart exactly the parts that died, and the mirror's keeper restarts its
JVM; `status` and `down` tell the truth.

One stack for the module (a whole stack start is the slow part), in the order a person meets it:
up, crashes and restarts, the other mirror (the Python mirror) and back, down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from devstack.liveness import pid_alive
from devstack.mirror import ORIGIN_CLUSTER_HEADER
from devstack.mirrormaker2 import PROBE_TOPIC
from devstack.records import read_partition
from offset_pipeline.kafka_io.connect_offsets import read_connect_offsets
from offset_pipeline.settings import mirror_position_groups
from offset_pipeline.translation.headers import CopiedFrom, parse_origin
from tests.conftest import devstack_env, stopped_by_sigterm, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.whole_stack]


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory, kafka_jars):
    env = devstack_env(tmp_path_factory.mktemp("stack"), kafka_jars, rate_scale=2.0)
    yield env
    subprocess.run([sys.executable, "-m", "devstack", "down"], env=env, timeout=120)


def devstack(env, *args, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "devstack", *args],
        env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_up_starts_every_part_and_records_flow_both_ways(stack_env):
    up = devstack(stack_env, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    status = devstack(stack_env, "status").stdout
    for name in ("idc1", "idc2"):
        assert f"cluster {name}" in status and "ready" in status
    for proc in ("mirrormaker2", "traffic", "consumers", "spark-connect"):
        assert f"{proc}" in status and "running pid" in status.split(proc, 1)[1].splitlines()[0], status
    # The Spark Connect server answers on its configured port (status probes a real session).
    spark_line = status.split("spark-connect", 1)[1].splitlines()[0]
    assert " ready " in spark_line and f"sc://127.0.0.1:{stack_env['OFFSET_PIPELINE_SPARK_CONNECT_PORT']}" in spark_line
    url = devstack(stack_env, "spark-url").stdout.strip()  # what bin/up exports: the runs' shared session
    assert url.startswith(f"sc://127.0.0.1:{stack_env['OFFSET_PIPELINE_SPARK_CONNECT_PORT']}/;session_id="), url

    bootstrap = {n: f"127.0.0.1:{stack_env[f'OFFSET_PIPELINE_{n.upper()}_PORT']}" for n in ("idc1", "idc2")}
    # Copies arrive on both sides, and consumer groups commit on their active clusters.
    deadline = time.monotonic() + 120
    seen_copies = {"idc1": False, "idc2": False}
    while time.monotonic() < deadline and not all(seen_copies.values()):
        for name, other in (("idc1", "idc2"), ("idc2", "idc1")):
            topics = AdminClient({"bootstrap.servers": bootstrap[name], "log_level": 3}).list_topics(timeout=10).topics
            for topic, meta in topics.items():
                if topic.startswith("_") or seen_copies[name]:
                    continue
                for partition in meta.partitions:
                    if any(r.header(ORIGIN_CLUSTER_HEADER) == other.encode()
                           for r in read_partition(bootstrap[name], topic, partition)):
                        seen_copies[name] = True
                        break
        time.sleep(1)
    assert all(seen_copies.values()), seen_copies

    def consumer_groups(bootstrap_servers):
        admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})  # kept alive
        listed = admin.list_consumer_groups(request_timeout=10).result(30).valid
        return {g.group_id for g in listed if not g.group_id.startswith("offset-pipeline-mirror")}

    # Consumer groups are members on their active cluster: some on idc1, some on idc2.
    for name in ("idc1", "idc2"):
        wait_for(lambda: consumer_groups(bootstrap[name]), timeout=60, what=f"consumer groups on {name}")



def mirrormaker2_jvm(base: Path) -> int:
    """The pid of the stack's MirrorMaker 2 JVM (the part's pid file names its log wrapper, whose child
    runs the keeper that started the JVM)."""
    work_dir = str(base / "run" / "mirrormaker2").encode()
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:
            continue
        if b"org.apache.kafka.connect.mirror.MirrorMaker" in cmdline and work_dir in cmdline:
            return int(proc.name)
    raise AssertionError(f"no MirrorMaker 2 JVM runs for {base}")


def line_of(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(name))


def test_up_restarts_exactly_the_dead_parts_and_watch_keeps_restarting_them(stack_env, tmp_path):
    up = devstack(stack_env, "up")  # the running stack (or a new one when this test runs alone)
    assert up.returncode == 0, up.stdout + up.stderr
    base = Path(stack_env["OFFSET_PIPELINE_DEVSTACK_DIR"])
    parts = ("mirrormaker2", "traffic", "consumers")
    pids = {name: int((base / "run" / f"{name}.pid").read_text()) for name in parts}
    log = base / "run" / "mirrormaker2.log"
    wait_for(lambda: "MirrorMaker 2 copies both ways" in log.read_text(), timeout=180, what="MirrorMaker 2 ready")

    # kill -9 MirrorMaker 2's JVM alone: its keeper (the part's process, still running) starts another.
    os.kill(mirrormaker2_jvm(base), signal.SIGKILL)
    wait_for(lambda: "MirrorMaker 2 restarted: the JVM exited (code -9)" in log.read_text(), timeout=60,
             what="the keeper to restart the JVM")
    assert pid_alive(pids["mirrormaker2"])

    broker = int((base / "idc2" / "broker.pid").read_text())
    # kill -9 the mirror's part (the pid its pid file and `status` name; its JVM dies with it) and
    # idc2's broker: crashes.
    os.kill(pids["mirrormaker2"], signal.SIGKILL)
    os.kill(broker, signal.SIGKILL)
    wait_for(lambda: not pid_alive(broker) and not pid_alive(pids["mirrormaker2"]), what="the kills")
    status = devstack(stack_env, "status").stdout
    assert f"dead (pid {pids['mirrormaker2']} gone" in line_of(status, "mirrormaker2"), status
    assert " dead " in line_of(status, "cluster idc2"), status
    for name in parts[1:]:
        assert f"running pid {pids[name]}" in line_of(status, name), status

    again = devstack(stack_env, "up", timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "restarted: it had died" in line_of(again.stdout, "cluster idc2"), again.stdout
    assert "restarted: it had died" not in line_of(again.stdout, "cluster idc1"), again.stdout
    assert f"restarted (pid {pids['mirrormaker2']} had died)" in line_of(again.stdout, "mirrormaker2")
    for name in parts[1:]:
        assert f"pid {pids[name]}  already running" in line_of(again.stdout, name), again.stdout
    status = devstack(stack_env, "status").stdout
    new_mirror = int((base / "run" / "mirrormaker2.pid").read_text())
    assert new_mirror != pids["mirrormaker2"]
    assert f"running pid {new_mirror}" in line_of(status, "mirrormaker2"), status
    assert "ready" in line_of(status, "cluster idc2"), status
    # The new MirrorMaker 2 copies both ways again (its readiness: a probe copied on each flow).
    wait_for(lambda: "MirrorMaker 2 copies both ways" in log.read_text().rsplit("=== starting", 1)[-1],
             timeout=180, what="the restarted MirrorMaker 2 to copy both ways")

    # watch: a part that dies (here the traffic program itself crashes) is restarted, and
    # SIGTERM stops the watch (exit 0), leaving the stack running.
    watch_log = tmp_path / "watch.log"
    cmd = [sys.executable, "-m", "devstack", "watch", "--every", "2"]
    with stopped_by_sigterm(cmd, watch_log, env=stack_env):
        wait_for(lambda: "watching the stack" in watch_log.read_text(), timeout=180, what="watch to start")
        traffic = pids["traffic"]
        program = int((Path(f"/proc/{traffic}/task/{traffic}/children")).read_text().split()[0])
        os.kill(program, signal.SIGKILL)
        wait_for(lambda: "traffic restarted: pid" in watch_log.read_text(), timeout=120, what="watch to restart traffic")
    restarted = int((base / "run" / "traffic.pid").read_text())
    assert restarted != traffic and pid_alive(restarted)
    text = watch_log.read_text()
    assert "traffic is not running: restarting it" in text and "mirror" not in text.split("watching the stack", 1)[1]
    assert "=== exited with signal 9 at " in (base / "run" / "traffic.log").read_text()


def test_up_mirror_python_replaces_mirrormaker2_and_up_goes_back(stack_env):
    """``up --mirror python``: MirrorMaker 2 stops, the two Python mirrors copy; ``up`` without it
    goes back to MirrorMaker 2, whose positions ``mirror-positions`` names (what ``bin/up`` exports)."""
    assert devstack(stack_env, "up", timeout=300).returncode == 0  # MirrorMaker 2 runs (also when run alone)
    base = Path(stack_env["OFFSET_PIPELINE_DEVSTACK_DIR"])
    python = devstack(stack_env, "up", "--mirror", "python", timeout=240)
    assert python.returncode == 0, python.stdout + python.stderr
    assert "stopped mirrormaker2 (the python mirror replaces it)" in python.stdout, python.stdout
    status = devstack(stack_env, "status").stdout
    for name in ("mirror-idc1-to-idc2", "mirror-idc2-to-idc1"):
        assert "running pid" in line_of(status, name), status
    assert "stopped " in line_of(status, "mirrormaker2"), status  # status without --mirror: the default's part
    assert devstack({**stack_env, "OFFSET_PIPELINE_DEVSTACK_MIRROR": "python"}, "mirror-positions").stdout.strip() == ""

    back = devstack(stack_env, "up", timeout=300)
    assert back.returncode == 0, back.stdout + back.stderr
    for name in ("mirror-idc1-to-idc2", "mirror-idc2-to-idc1"):
        assert f"stopped {name} (the mm2 mirror replaces it)" in back.stdout, back.stdout
    status = devstack(stack_env, "status").stdout
    assert "running pid" in line_of(status, "mirrormaker2"), status
    assert "mirror-idc1-to-idc2" not in status, status  # stopped on purpose: no pid file, nothing to show
    log = base / "run" / "mirrormaker2.log"
    wait_for(lambda: "MirrorMaker 2 copies both ways" in log.read_text().rsplit("=== starting", 1)[-1]
             or "error:" in log.read_text().rsplit("=== starting", 1)[-1],
             timeout=180, what="MirrorMaker 2 to copy both ways")
    assert "MirrorMaker 2 copies both ways" in log.read_text().rsplit("=== starting", 1)[-1], log.read_text()[-3000:]
    bootstrap = {n: f"127.0.0.1:{stack_env[f'OFFSET_PIPELINE_{n.upper()}_PORT']}" for n in ("idc1", "idc2")}
    for name, other in (("idc1", "idc2"), ("idc2", "idc1")):
        probes = [parse_origin(list(r.headers), read_from=name, peer=other)
                  for r in read_partition(bootstrap[name], PROBE_TOPIC, 0)]
        assert any(isinstance(o, CopiedFrom) and o.cluster == other for o in probes), probes
    # What bin/up exports for it: the topics where MirrorMaker 2 keeps its positions, which hold them.
    setting = devstack(stack_env, "mirror-positions").stdout.strip()
    entries = mirror_position_groups({"OFFSET_PIPELINE_MIRROR_POSITIONS": setting})
    assert {(e["source"], e["target"]) for e in entries} == {("idc1", "idc2"), ("idc2", "idc1")}
    for entry in entries:
        read = read_connect_offsets({"bootstrap.servers": bootstrap[entry["stored_on"]]}, entry["stored_on"],
                                    entry["offsets_topic"], entry["source"])
        assert read.unreadable is None and read.positions.get((PROBE_TOPIC, 0), 0) >= 1, read


def test_down_stops_every_part_and_status_says_so(stack_env):
    up = devstack(stack_env, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    down = devstack(stack_env, "down")
    assert down.returncode == 0, down.stderr
    for part in ("cluster idc1", "cluster idc2", "mirrormaker2", "traffic", "consumers", "spark-connect"):
        assert f"stopped {part}" in down.stdout, down.stdout
    after = devstack(stack_env, "status").stdout
    assert "ready" not in after and "running pid" not in after, after
