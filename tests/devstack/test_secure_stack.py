"""The dev stack secure (docs/operating/security.md): ``OFFSET_PIPELINE_DEVSTACK_SECURE=1`` (what ``bin/up`` passes on)
starts both clusters with SASL_SSL, SCRAM-SHA-512 and ACLs; the mirror, traffic and consumers log in
as ``admin``; ``sync`` is granted its least rights; ``sync-env`` gives the product the settings to
sync as ``sync`` (the password through the environment only), and a sync cycle so commits; ``status``
(without the variable) and ``down`` work; the password is on no command line, in no log of the
stack and in no file of the repository.

One stack for the module, in the order a person meets it: up, a cycle, down."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from devstack.consumers import default_groups
from devstack.secure_cluster import ADMIN_USER, SYNC_USER, login_config
from devstack.stack import SECURE_ENV
from offset_pipeline.assets import all_assets
from offset_pipeline.definitions import build_resources, offset_sync_job
from offset_pipeline.run_targets import SYNC_JOB
from offset_pipeline.settings import read_settings
from tests.conftest import devstack_env, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.whole_stack]

CLUSTERS = ("idc1", "idc2")
REPO = Path(__file__).resolve().parents[2]
# the groups consuming on idc1 (synced to idc2) the cycle is asked to sync
IDC1_GROUPS = [g for g in default_groups() if g.active_cluster == "idc1"]


def devstack(env, *args, timeout=480) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devstack", *args], env=env, capture_output=True, text=True, check=False,
                          timeout=timeout)


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory, kafka_jars):
    base = tmp_path_factory.mktemp("secure-stack")
    env = {**devstack_env(base, kafka_jars, rate_scale=1.0), SECURE_ENV: "1"}
    started = time.monotonic()
    try:
        # inside the try: an `up` that fails or times out half-way has started parts, and a stack
        # left running costs every later test of the run its CPU
        up = devstack(env, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        print(f"secure stack up in {time.monotonic() - started:.0f}s")
        yield env, base, up.stdout
    finally:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # (end_connect_client, should the cycle test not run)
        devstack(env, "down", timeout=120)


def end_connect_client() -> None:
    """The cycle made this process a Spark Connect client of the stack's server (a default Connect
    session, ``SPARK_CONNECT_MODE_ENABLED``): both end right after the cycle, while the server is up
    (a stop after ``down`` retries for minutes), so the tests after this module get local Spark, or
    a Connect session of their own, not a client of a dead server."""
    from pyspark.sql.connect.session import SparkSession as ConnectSparkSession

    session = ConnectSparkSession._get_default_session() or ConnectSparkSession.getActiveSession()
    if session is not None:
        try:
            session.stop()
        except Exception:  # noqa: BLE001 - the server may have closed it already
            pass
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def exports(text: str) -> dict[str, str]:
    """``export NAME=VALUE`` lines (as bin/up evaluates them) -> {NAME: VALUE}."""
    variables = {}
    for line in text.splitlines():
        words = shlex.split(line)
        assert words[0] == "export" and len(words) == 2, line
        name, _, value = words[1].partition("=")
        variables[name] = value
    return variables


def admin_config(base: Path, env: dict, name: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{env[f'OFFSET_PIPELINE_{name.upper()}_PORT']}", "log_level": 3,
            **login_config(base / name / "secure-access.json", ADMIN_USER)}


def passwords(base: Path) -> dict[str, str]:
    """What must leak nowhere: each cluster's SCRAM passwords, named."""
    found = {}
    for name in CLUSTERS:
        for user in (ADMIN_USER, SYNC_USER):
            found[f"{name} {user} password"] = login_config(base / name / "secure-access.json", user)["sasl.password"]
    return found


def test_up_starts_a_secure_stack_whose_status_and_clients_log_in(secure_stack):
    env, base, up_output = secure_stack
    assert "secure clusters" in up_output and f"'{SYNC_USER}' may read" in up_output, up_output
    # bin/stack status from another shell, without the variable: the data folder says it is secure
    plain_shell = {k: v for k, v in env.items() if k != SECURE_ENV}
    status = devstack(plain_shell, "status").stdout
    for name in CLUSTERS:
        assert f"cluster {name}" in status and " ready " in status.split(f"cluster {name}", 1)[1].splitlines()[0], status
    for proc in ("mirrormaker2", "traffic", "consumers"):
        assert "running pid" in status.split(proc, 1)[1].splitlines()[0], status
    assert "SASL_SSL SCRAM-SHA-512" in status, status

    # the mirror copies and the consumers commit, logged in as admin: each idc1 group has committed
    def committed_groups() -> set[str]:
        admin = AdminClient(admin_config(base, env, "idc1"))
        listed = admin.list_consumer_groups(request_timeout=10).result(30).valid
        return {g.group_id for g in listed}
    wait_for(lambda: {g.group_id for g in IDC1_GROUPS} <= committed_groups(), timeout=60, what="the idc1 groups")

    # a client without a login is refused
    plaintext = Consumer({"bootstrap.servers": admin_config(base, env, "idc1")["bootstrap.servers"], "group.id": "x",
                          "log_level": 0, "socket.connection.setup.timeout.ms": 2000})
    try:
        with pytest.raises(KafkaException):
            plaintext.list_topics(timeout=3)
    finally:
        plaintext.close()


def test_a_cycle_with_the_exported_settings_commits_as_sync_and_nothing_shows_a_password(secure_stack, chdb_dsn,
                                                                                         monkeypatch, tmp_path):
    env, base, _ = secure_stack
    # `up` returns once MirrorMaker 2's JVM runs; the cycle needs its copies (its start took 35 s in a
    # full run on 2 cores, logged in): wait until it says both flows copy.
    mm2_log = base / "run" / "mirrormaker2.log"
    wait_for(lambda: "MirrorMaker 2 copies both ways" in mm2_log.read_text(), timeout=240,
             what="MirrorMaker 2 to copy both ways")
    printed = devstack(env, "sync-env")
    assert printed.returncode == 0, printed.stderr
    sync_env = exports(printed.stdout)
    assert {f"OFFSET_PIPELINE_{n.upper()}_{k}" for n in CLUSTERS
            for k in ("SECURITY_PROTOCOL", "SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD", "SSL_CA_LOCATION")} \
        == set(sync_env)
    # the product's environment as bin/up makes it: the stack's ports, topic shapes and Spark Connect server
    for name, value in {**{k: v for k, v in env.items() if k.startswith("OFFSET_PIPELINE_")}, **sync_env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OFFSET_PIPELINE_TOPIC_SHAPES", devstack(env, "shapes").stdout.strip())
    monkeypatch.setenv("OFFSET_PIPELINE_SPARK_CONNECT_URL", devstack(env, "spark-url").stdout.strip())
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    monkeypatch.setenv("OFFSET_PIPELINE_TRANSLATION_BUDGET_S", "120")  # a loaded machine
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    resources = build_resources(read_settings())
    assert resources["idc2"].client_config()["sasl.username"] == SYNC_USER
    definitions = dg.Definitions(assets=all_assets, jobs=[offset_sync_job], resources=resources)
    include = "^(" + "|".join(g.group_id for g in IDC1_GROUPS) + ")$"
    instance = dg.DagsterInstance.get()
    try:
        cycle = definitions.resolve_job_def(SYNC_JOB).execute_in_process(instance=instance, run_config={"ops": {
            "offset_snapshot": {"config": {"group_include": include}}}})
    finally:
        instance.dispose()
        end_connect_client()
    assert cycle.success
    applied = resources["clickhouse"].get_client().query(
        "SELECT group_id, topic, partition, new_offset FROM offset_commits "
        "WHERE snapshot_id = {s:String} AND applied AND decision = 'commit'", parameters={"s": cycle.run_id}).result_rows
    assert applied, "the cycle applied no standby commit"
    # read back as admin: the standby (idc2) holds what the sync committed there
    group, topic, partition, offset = applied[0]
    reader = Consumer({**admin_config(base, env, "idc2"), "group.id": group})
    try:
        [answer] = reader.committed([TopicPartition(topic, partition)], timeout=10)
    finally:
        reader.close()
    assert answer.offset >= offset

    # nowhere a person or a tool reads: the stack's logs (mirror, traffic, consumers, the Spark Connect
    # server that ran the cycle's tasks), the brokers' logs, the stack's processes' command lines, the
    # compute logs and storage of the cycle, and the repository's files (workspace.yaml included)
    # (MirrorMaker 2's own log is under run/mirrormaker2/; its 0600 secrets file there holds the
    # passwords on purpose and is not a log)
    haystacks = {str(p): p.read_bytes() for p in (base / "run").rglob("*.log*")}
    assert any(p.endswith("mm2.log") for p in haystacks), sorted(haystacks)
    haystacks |= {str(p): p.read_bytes() for name in CLUSTERS for p in (base / name).glob("broker.log*")}
    haystacks |= {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    haystacks |= {f"command line of pid {pid}": cmdline for pid, cmdline in command_lines(base)}
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=30).stdout
    haystacks |= {name: (REPO / name).read_bytes() for name in tracked.decode().split("\0")
                  if name and (REPO / name).is_file()}
    assert any("spark-connect" in where for where in haystacks) and any("command line" in w for w in haystacks)
    found = [f"{where}: {what}" for what, password in passwords(base).items() for where, text in haystacks.items()
             if password.encode() in text]
    assert found == []


def command_lines(base: Path) -> list[tuple[int, bytes]]:
    """The command lines of every process of this stack (those naming its folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(base).encode() in cmdline:
            found.append((int(proc.name), cmdline))
    return found


def test_down_stops_the_secure_stack_and_status_says_so(secure_stack):
    env, base, _ = secure_stack
    down = devstack(env, "down", timeout=120)
    assert down.returncode == 0, down.stderr
    for part in ("cluster idc1", "cluster idc2", "mirrormaker2", "traffic", "consumers"):
        assert f"stopped {part}" in down.stdout, down.stdout
    after = devstack({k: v for k, v in env.items() if k != SECURE_ENV}, "status").stdout
    assert "ready" not in after and "running pid" not in after, after
    assert not [pid for pid, cmdline in command_lines(base) if b"kafka.Kafka" in cmdline]
