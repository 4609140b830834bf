"""No secret leaks (docs/operating/security.md): real Dagster runs as the ``sync`` principal on the secure pair, with
every setting from the environment (the password through dg.EnvVar), leave none of the secrets
anywhere a person or a tool reads.

The secrets: both SCRAM passwords (``admin``, ``sync``) of both clusters, each cluster's keystore
(and CA store) password, and the private keys of its CA and broker, as PEM lines and as the raw
private scalar (extracted from the PKCS12 stores with the ``openssl`` command).

Where they are looked for, after an interval sync cycle and a stale fast-forward run on a
persistent instance (sqlite in a DAGSTER_HOME of the test's own, compute logs captured):

* every event of each run's event log, serialized as stored;
* each run's record (its run config and tags: what the UI shows as the run's config), its job and
  execution plan snapshots, and the repository snapshot the UI shows resources from (each
  resource's configured values);
* every row of every ClickHouse table, each value as a string;
* every file under DAGSTER_HOME (the sqlite storage and the compute logs: stdout and stderr of the
  steps, the local Spark JVM's log lines and librdkafka's own included), as bytes;
* every Python log record (DEBUG and up) and every decision line written meanwhile;
* the brokers' own logs.

The scanner proves it can fail: a secret planted afterwards in an event and in a file under
DAGSTER_HOME is found in both places.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._serdes import serialize_value

from devstack.secure_cluster import ACCESS_FILE
from offset_pipeline.assets import all_assets
from offset_pipeline.definitions import (
    build_resources,
    offset_fast_forward_job,
    offset_sync_job,
)
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.run_targets import FAST_FORWARD_JOB, SYNC_JOB
from offset_pipeline.settings import read_settings
from tests.helpers.secure_sync import (
    CLUSTERS,
    GROUPS,
    PARTITIONS,
    RECORDS,
    TOPICS,
    grant_sync_rights,
    live_member,
    log_end,
    mirrored_one_way,
    sync_environment,
)
from tests.helpers.sync_cycles import decision_lines

pytestmark = pytest.mark.kafka

OPENSSL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Secret:
    what: str  # e.g. "idc1 sync SCRAM password"; never the secret itself
    value: bytes = b""

    def __repr__(self) -> str:  # a failing assertion names the secret, never shows it
        return f"Secret({self.what!r})"


@dataclass(frozen=True)
class Haystack:
    where: str
    content: bytes


# -- the secrets --------------------------------------------------------------------------------

def _openssl(*args: str, password: str) -> str:
    # the store's password through the environment, not the command line
    done = subprocess.run(["openssl", *args], env={**os.environ, "STORE_PASSWORD": password},
                          capture_output=True, timeout=OPENSSL_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"openssl {args[0]} failed: {done.stderr.decode(errors='replace')}"
    return done.stdout.decode()


def private_key_secrets(store: Path, password: str) -> list[Secret]:
    """The private key in a PKCS12 store: each base64 line of its PKCS8 PEM block, and its raw
    private scalar (bytes, hex with and without colons)."""
    pem = _openssl("pkcs12", "-in", str(store), "-nocerts", "-nodes", "-passin", "env:STORE_PASSWORD",
                   password=password)
    block = re.search(r"-----BEGIN PRIVATE KEY-----\n(.*?)-----END PRIVATE KEY-----", pem, re.DOTALL)
    assert block, f"no private key in {store}"
    secrets = [Secret(f"{store.name} private key PEM line {i}", line.encode())
               for i, line in enumerate(block.group(1).split(), 1) if len(line) >= 16]
    text = subprocess.run(["openssl", "pkey", "-noout", "-text"], input=block.group(0).encode(), capture_output=True,
                          timeout=OPENSSL_TIMEOUT_S, check=True).stdout.decode()
    scalar = re.search(r"priv:\s*\n((?:\s+[0-9a-f:]+\n)+)", text)
    assert scalar, f"no private scalar in the key of {store}"
    colons = "".join(scalar.group(1).split())
    raw = bytes.fromhex(colons.replace(":", ""))
    if len(raw) == 33 and raw[0] == 0:  # openssl pads a scalar whose top bit is set
        raw = raw[1:]
    assert len(raw) == 32, f"{store}: expected a P-256 private scalar, got {len(raw)} bytes"
    return secrets + [Secret(f"{store.name} private scalar (raw)", raw),
                      Secret(f"{store.name} private scalar (hex)", raw.hex().encode()),
                      Secret(f"{store.name} private scalar (hex, colons)", colons.strip(":").encode())]


def cluster_secrets(pair) -> list[Secret]:
    """Every secret of the secure pair, read from each cluster's own (0600) access file."""
    secrets = [Secret("a PEM private key block", b"PRIVATE KEY-----")]
    for name in CLUSTERS:
        data_dir = pair.clusters[name].spec.data_dir
        access = json.loads((data_dir / ACCESS_FILE).read_text())
        secrets += [Secret(f"{name} {user} SCRAM password", password.encode())
                    for user, password in access["passwords"].items()]
        secrets.append(Secret(f"{name} keystore and CA store password", access["keystore_password"].encode()))
        for store in ("ca.p12", "broker.p12"):
            secrets += private_key_secrets(data_dir / "tls" / store, access["keystore_password"])
    return secrets


# -- where they are looked for -------------------------------------------------------------------

def leaks(haystacks: Iterable[Haystack], secrets: list[Secret]) -> list[str]:
    """``"<where>: <what>"`` for every secret found in a haystack."""
    return [f"{stack.where}: {secret.what}" for stack in haystacks for secret in secrets if secret.value in stack.content]


def _text(value: object) -> bytes:
    return (value if isinstance(value, str) else repr(value)).encode(errors="surrogateescape")


def dagster_records(instance: dg.DagsterInstance, run_ids: list[str], definitions: dg.Definitions) -> Iterator[Haystack]:
    """Each run's events, record (run config, tags), job and plan snapshots; the repository
    snapshot the UI shows resource configuration from."""
    for run_id in run_ids:
        for entry in instance.all_logs(run_id):
            kind = entry.dagster_event_type.value if entry.dagster_event_type else "log message"
            yield Haystack(f"run {run_id} event {kind}", serialize_value(entry).encode())
        run = instance.get_run_by_id(run_id)
        assert run is not None, run_id
        yield Haystack(f"run {run_id} record (run config, tags)", serialize_value(run).encode())
        yield Haystack(f"run {run_id} run config", json.dumps(run.run_config, default=str).encode())
        yield Haystack(f"run {run_id} job snapshot", serialize_value(instance.get_job_snapshot(run.job_snapshot_id)).encode())
        yield Haystack(f"run {run_id} execution plan snapshot",
                       serialize_value(instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)).encode())
    repository = RepositorySnap.from_def(definitions.get_repository_def())
    yield Haystack("repository snapshot (the UI's resources and their configured values)",
                   serialize_value(repository).encode())
    for resource in repository.resources:
        yield Haystack(f"resource {resource.name} configured values",
                       json.dumps({k: serialize_value(v) for k, v in resource.configured_values.items()}).encode())


def clickhouse_tables(client) -> Iterator[Haystack]:
    """Every row of every table of the database, each value as a string."""
    tables = [row[0] for row in client.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase()").result_rows]
    assert tables, "no ClickHouse tables to scan"
    for table in tables:
        rows = client.query(f"SELECT * FROM `{table}`").result_rows
        yield Haystack(f"ClickHouse table {table}", "\n".join("\t".join(str(v) for v in row) for row in rows).encode())


def files_under(root: Path, label: str) -> Iterator[Haystack]:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        yield Haystack(f"{label} file {path.relative_to(root)}", path.read_bytes())


# -- the runs -------------------------------------------------------------------------------------

def product_definitions() -> dg.Definitions:
    """The code location's definitions as ``offset_pipeline/definitions.py`` builds them, from this
    environment (that module's ``defs`` was built when it was first imported)."""
    return dg.Definitions(assets=all_assets, jobs=[offset_sync_job, offset_fast_forward_job],
                          resources=build_resources(read_settings()))


def interval_cycle_config(group: str, topic: str) -> dict:
    timeout = {"kafka_timeout_s": 10.0}
    return {"ops": {
        "offset_snapshot": {"config": {"group_include": f"^{group}$", **timeout}},
        "offset_translations": {"config": {"topic_shapes": {topic: "one_way:idc1"}, **timeout}},
        "offset_standby_commits": {"config": timeout},
    }}


def fast_forward_config(pair, group: str, topic: str) -> dict:
    """The stale sensor's request for every partition, both log ends unmoved for a minute."""
    stable_since_ms = int(time.time() * 1000) - 60_000
    return {"ops": {"offset_fast_forwards": {"config": {
        "group_id": group, "active": "idc1", "standby": "idc2", "window_s": 5.0, "kafka_timeout_s": 10.0,
        "partitions": [{"topic": topic, "partition": p, "active_end": log_end(pair.admin_config("idc1"), topic, p),
                        "standby_end": log_end(pair.admin_config("idc2"), topic, p),
                        "stable_since_ms": stable_since_ms} for p in range(PARTITIONS)],
    }}}}


def test_a_resolved_resource_and_its_plain_client_show_no_password(monkeypatch):
    """What a log line, an error or a traceback's locals would print of the resolved resources."""
    password = f"pw-{uuid.uuid4().hex}"
    monkeypatch.setenv("OFFSET_PIPELINE_TEST_PASSWORD", password)
    shown = []

    @dg.asset
    def show(idc1: KafkaClusterResource, clickhouse: ClickHouseResource) -> None:
        assert idc1.client_config()["sasl.password"] == password  # resolved, and still used
        shown.extend([repr(idc1), str(idc1), repr(idc1.plain()), str(idc1.plain()), repr(clickhouse), str(clickhouse)])

    secret = dg.EnvVar("OFFSET_PIPELINE_TEST_PASSWORD")
    assert dg.materialize([show], resources={
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL",
                                     sasl_mechanism="SCRAM-SHA-512", sasl_username="sync", sasl_password=secret),
        "clickhouse": ClickHouseResource(dsn="http://127.0.0.1:1", username="u", password=secret),
    }).success
    assert shown and not [text for text in shown if password in text]
    assert "sasl_username='sync'" in shown[0]  # the rest is still shown


@pytest.fixture
def dagster_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_no_secret_reaches_events_run_config_clickhouse_files_or_logs(secure_pair, chdb_dsn, dagster_home,
                                                                       monkeypatch, caplog):
    secrets = cluster_secrets(secure_pair)
    topic, group = f"{TOPICS}{uuid.uuid4().hex[:8]}", f"{GROUPS}{uuid.uuid4().hex[:8]}"
    mirrored_one_way(secure_pair, topic)
    grant_sync_rights(secure_pair)
    sync_environment(secure_pair, monkeypatch)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    monkeypatch.setenv("OFFSET_PIPELINE_TRANSLATION_BUDGET_S", "180")  # as test_secure_sync: a loaded machine
    monkeypatch.setenv("OFFSET_PIPELINE_SPARK_TIMEOUT_S", "240")
    caplog.set_level(logging.DEBUG)
    definitions = product_definitions()
    instance = dg.DagsterInstance.get()  # DAGSTER_HOME: sqlite storage, compute logs on
    try:
        with decision_lines() as lines, live_member(secure_pair.admin_config("idc1"), group, topic, RECORDS):
            cycle = definitions.resolve_job_def(SYNC_JOB).execute_in_process(
                run_config=interval_cycle_config(group, topic), instance=instance)
            # the stale path's reads as sync (its outcome is not this test's: whatever it decides, or
            # whatever it was refused, is scanned)
            fast_forward = definitions.resolve_job_def(FAST_FORWARD_JOB).execute_in_process(
                run_config=fast_forward_config(secure_pair, group, topic), instance=instance, raise_on_error=False)
        assert cycle.success
        committed_rows = definitions.resources["clickhouse"].get_client().query(
            "SELECT count() FROM offset_commits WHERE snapshot_id = {s:String} AND applied",
            parameters={"s": cycle.run_id}).result_rows
        assert committed_rows == [(PARTITIONS,)], "the cycle committed as the sync principal"
        run_ids = [cycle.run_id, fast_forward.run_id]
        compute_logs = [p for p in (dagster_home / "storage").rglob("*") if p.suffix in (".out", ".err")]
        assert compute_logs, "no compute log was captured: the file scan would prove nothing"

        haystacks = [
            *dagster_records(instance, run_ids, definitions),
            *clickhouse_tables(definitions.resources["clickhouse"].get_client()),
            *files_under(dagster_home, "DAGSTER_HOME"),
            *(Haystack(f"log record {r.name} {r.levelname}", _text(r.getMessage()) + _text(r.exc_text or ""))
              for r in caplog.records),
            Haystack("decision lines", "\n".join(lines).encode()),
            *(Haystack(f"{name} broker log", secure_pair.clusters[name].log_path.read_bytes()) for name in CLUSTERS),
        ]
        assert leaks(haystacks, secrets) == []

        # The scanner finds what is there: a secret planted in an event and in a file under DAGSTER_HOME.
        planted = next(s for s in secrets if s.what == "idc2 sync SCRAM password")
        instance.report_engine_event(f"planted {planted.value.decode()}", instance.get_run_by_id(cycle.run_id))
        (dagster_home / "storage" / "planted.txt").write_bytes(b"x" + planted.value + b"x")
        found = leaks([*dagster_records(instance, [cycle.run_id], definitions),
                       *files_under(dagster_home, "DAGSTER_HOME")], [planted])
        assert any("event ENGINE_EVENT" in line for line in found), found
        assert any("planted.txt" in line for line in found), found
    finally:
        instance.dispose()
