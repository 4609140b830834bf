"""A sync cycle against secure clusters (docs/operating/security.md): SASL_SSL, SCRAM-SHA-512, ACLs enforced, run as
the ``sync`` principal holding only the rights of devstack/sync_acls.py; its settings come from the
environment, as in production (``OFFSET_PIPELINE_<CLUSTER>_...``, the password through dg.EnvVar)."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.secure_cluster import SCRAM_MECHANISM, SYNC_USER
from offset_pipeline.definitions import build_resources
from offset_pipeline.settings import read_settings
from tests.helpers.secure_sync import (
    COMMITTED,
    GROUPS,
    PARTITIONS,
    TOPICS,
    committed,
    grant_sync_rights,
    live_member,
    mirrored_one_way,
    sync_environment,
)
from tests.helpers.sync_cycles import SYNC_ASSETS

pytestmark = pytest.mark.kafka


def run_cycle(resources: dict, group: str, topic: str) -> dg.ExecuteInProcessResult:
    timeout = {"kafka_timeout_s": 10.0}
    return dg.materialize(SYNC_ASSETS, resources=resources, instance=dg.DagsterInstance.ephemeral(), run_config={
        "ops": {
            "offset_snapshot": {"config": {"group_include": f"^{group}$", **timeout}},
            "offset_translations": {"config": {"topic_shapes": {topic: "one_way:idc1"}, **timeout}},
            "offset_standby_commits": {"config": timeout},
        }})


def decisions(resources: dict, result) -> dict[int, tuple]:
    client = resources["clickhouse"].get_client()
    return {r[0]: r[1:] for r in client.query(
        "SELECT partition, decision, applied FROM offset_commits WHERE snapshot_id = {s:String}",
        parameters={"s": result.run_id}).result_rows}


def test_an_interval_cycle_as_the_minimal_sync_principal_commits_the_standby_offset(secure_pair, chdb_dsn,
                                                                                  monkeypatch):
    topic, group = f"{TOPICS}{uuid.uuid4().hex[:8]}", f"{GROUPS}{uuid.uuid4().hex[:8]}"
    mirrored_one_way(secure_pair, topic)
    grant_sync_rights(secure_pair)
    sync_environment(secure_pair, monkeypatch)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    # This test is about rights, not speed: on a loaded 2-core machine local Spark's start alone
    # spent the default 60 s read budget once (translation_deferred, nothing committed).
    monkeypatch.setenv("OFFSET_PIPELINE_TRANSLATION_BUDGET_S", "180")
    monkeypatch.setenv("OFFSET_PIPELINE_SPARK_TIMEOUT_S", "240")
    resources = build_resources(read_settings())
    assert resources["idc1"].client_config()["sasl.username"] == SYNC_USER
    with live_member(secure_pair.admin_config("idc1"), group, topic, COMMITTED):
        result = run_cycle(resources, group, topic)

    assert result.success
    assert {c.check_name: c.passed for c in result.get_asset_check_evaluations()}["clusters_readable"]
    assert decisions(resources, result) == {p: ("commit", True) for p in range(PARTITIONS)}
    # one-way, exact: the copy of record 10 on idc2, read back independently as admin
    assert committed(secure_pair.admin_config("idc2"), group, topic) == {p: COMMITTED for p in range(PARTITIONS)}


def test_the_sync_principal_is_refused_outside_its_rights_and_plaintext_is_refused(secure_pair):
    grant_sync_rights(secure_pair)
    other_topic = f"other.{uuid.uuid4().hex[:8]}"
    admin = secure_pair.admin("idc1")
    admin.create_topics([NewTopic(other_topic, num_partitions=1)])[other_topic].result(timeout=30)
    sync = {**secure_pair.access["idc1"].client_config(SYNC_USER), "log_level": 3}

    sync_admin = AdminClient(sync)
    assert other_topic not in sync_admin.list_topics(timeout=10).topics  # the broker hides what it may not see
    assert other_topic in admin.list_topics(timeout=10).topics
    other_group = f"other-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as refused:
        sync_admin.describe_consumer_groups([other_group], request_timeout=10)[other_group].result(timeout=15)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    plaintext = Consumer({"bootstrap.servers": secure_pair.access["idc1"].bootstrap_servers, "group.id": "sec-x",
                          "log_level": 0, "socket.connection.setup.timeout.ms": 2000})
    try:
        with pytest.raises(KafkaException):
            plaintext.list_topics(timeout=3)
    finally:
        plaintext.close()


WRONG = {  # case -> (the variable set wrong for idc1, its value from the pair, the cause, the message must say)
    "wrong_ca": ("SSL_CA_LOCATION", lambda pair: str(pair.access["idc2"].ca_pem), "tls_untrusted",
                 ("TLS handshake failed: the broker's certificate is not signed by the CA in "
                 "OFFSET_PIPELINE_IDC1_SSL_CA_LOCATION ({value}) — set it to the PEM of the CA that signed the "
                 "brokers' certificates")),
    "wrong_password": ("SASL_PASSWORD", lambda pair: "not-" + pair.access["idc1"].passwords[SYNC_USER],
                       "authentication_failed",
                       (f"authentication failed for user {SYNC_USER} ({SCRAM_MECHANISM}): wrong password in "
                       "OFFSET_PIPELINE_IDC1_SASL_PASSWORD or no such user")),
    "wrong_mechanism": ("SASL_MECHANISM", lambda pair: "SCRAM-SHA-256", "mechanism_not_enabled",
                        (f"SASL mechanism SCRAM-SHA-256 is not enabled on the broker (it offers {SCRAM_MECHANISM}) — "
                        "set OFFSET_PIPELINE_IDC1_SASL_MECHANISM")),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_wrong_ca_password_or_mechanism_is_named_with_the_cluster_and_the_fix(secure_pair, monkeypatch, capsys,
                                                                               case):
    """Where a user meets the failure: ``offset-pipeline connections``, the snapshot's read of the
    cluster (its reason is the rows' read_error and the clusters_readable check's) and the resource's
    ``describe``. The other cluster, set right, is read as usual."""
    from offset_pipeline.cli import main
    from offset_pipeline.cli.connections import kafka_clusters
    from offset_pipeline.kafka_io.group_offsets import GroupFilter
    from offset_pipeline.resources import KafkaClusterUnreachable
    from offset_pipeline.sync.snapshot_step import read_clusters

    variable, value_of, cause, says = WRONG[case]
    sync_environment(secure_pair, monkeypatch)
    value = value_of(secure_pair)
    monkeypatch.setenv(f"OFFSET_PIPELINE_IDC1_{variable}", value)
    expected = f"idc1 ({secure_pair.access['idc1'].bootstrap_servers}): " + says.format(value=value)

    started = time.monotonic()
    assert main(["connections", "--timeout-s", "10"]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert time.monotonic() - started < 8  # the cause ends the probe, not its timeout
    assert printed[0].startswith(expected) and printed[0].endswith(f"[{cause}]")
    assert printed[1].startswith(f"idc2 ({secure_pair.access['idc2'].bootstrap_servers}): connected")

    clusters = kafka_clusters()
    reads = read_clusters({name: r.admin_config for name, r in clusters.items()}, GroupFilter(f"^{GROUPS}"), 3.0)
    assert reads.unavailable["idc1"].startswith(expected)
    assert "idc2" not in reads.unavailable

    with pytest.raises(KafkaClusterUnreachable) as unreachable:
        clusters["idc1"].describe(timeout_s=3.0)
    assert unreachable.value.diagnosis.cause.value == cause and expected in str(unreachable.value)
    assert secure_pair.access["idc1"].passwords[SYNC_USER] not in str(unreachable.value) + reads.unavailable["idc1"]
