"""The settings of a secure cluster, without a broker: the CA reaches every client config, secrets stay
out of reprs, the secure broker has no way in without TLS and SCRAM, and the ``kafka-acls.sh``
commands of docs/operating/security.md are the rights the harness grants (tests/secure/test_secure_sync.py
proves those rights enough on real brokers)."""

from __future__ import annotations

from pathlib import Path

from devstack.certificates import BrokerCertificates
from devstack.cluster import ClusterSpec, broker_properties
from devstack.mirror import MirrorEndpoint
from devstack.secure_cluster import SecureAccess, secure_broker_settings
from devstack.sync_acls import commit_log_rights, kafka_acls_commands, sync_rights
from offset_pipeline.cli.connections import kafka_clusters
from offset_pipeline.definitions import build_resources
from offset_pipeline.settings import read_settings

SECURITY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating" / "security.md"
SECURE = {
    "OFFSET_PIPELINE_IDC1_SECURITY_PROTOCOL": "SASL_SSL",
    "OFFSET_PIPELINE_IDC1_SASL_MECHANISM": "SCRAM-SHA-512",
    "OFFSET_PIPELINE_IDC1_SASL_USERNAME": "sync",
    "OFFSET_PIPELINE_IDC1_SASL_PASSWORD": "not-a-real-password",
    "OFFSET_PIPELINE_IDC1_SSL_CA_LOCATION": "/etc/kafka/idc1-ca.pem",
}


def test_the_ca_location_is_read_per_cluster_and_empty_means_unset():
    assert read_settings(SECURE).kafka["idc1"].ssl_ca_location == "/etc/kafka/idc1-ca.pem"
    assert read_settings(SECURE).kafka["idc2"].ssl_ca_location is None
    assert read_settings({"OFFSET_PIPELINE_IDC2_SSL_CA_LOCATION": " "}).kafka["idc2"].ssl_ca_location is None


def test_the_ca_reaches_every_client_config_of_the_code_location(monkeypatch):
    for key, value in SECURE.items():
        monkeypatch.setenv(key, value)
    idc1, idc2 = (build_resources(read_settings())[name] for name in ("idc1", "idc2"))
    plain = idc1.plain()  # what child processes and Spark tasks get
    for config in (idc1.client_config(), idc1.admin_config(), idc1.producer_config(), idc1.consumer_config("g"),
                   plain.client_config, plain.admin_config, plain.consumer_config("g")):
        assert config["ssl.ca.location"] == "/etc/kafka/idc1-ca.pem"
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.username"] == "sync"
    assert not [key for key in idc2.client_config() if key.startswith(("ssl.", "sasl."))]


def test_the_commands_connections_carry_the_ca(monkeypatch):
    for key, value in SECURE.items():
        monkeypatch.setenv(key, value)
    assert kafka_clusters()["idc1"].client_config()["ssl.ca.location"] == "/etc/kafka/idc1-ca.pem"


def test_reprs_of_the_harness_settings_show_no_password():
    access = SecureAccess("127.0.0.1:1", Path("/x/ca.pem"), {"sync": "pw-1234567890"})
    endpoint = MirrorEndpoint("idc1", "127.0.0.1:1", client_config=access.client_config("sync"))
    spec = ClusterSpec("idc1", 1, 2, Path("/x"), format_args=("--add-scram", "SCRAM-SHA-512=[name=a,password=pw-1234567890]"),
                       client_config={"sasl.password": "pw-1234567890"})
    for shown in (repr(access), repr(endpoint), repr(spec)):
        assert "pw-1234567890" not in shown
    assert endpoint.settings()["sasl.password"] == "pw-1234567890"


def test_the_secure_broker_listens_only_with_tls_and_authorizes_every_request():
    certs = BrokerCertificates(Path("/x/ca.pem"), Path("/x/broker.p12"), "store-pw", "CN=broker-idc1")
    spec = ClusterSpec("idc1", 1, 2, Path("/x"), overrides=secure_broker_settings(1, 2, certs, "admin-pw"))
    props = broker_properties(spec)
    assert props["listeners"] == "SASL_SSL://127.0.0.1:1,CONTROLLER://127.0.0.1:2"
    assert props["listener.security.protocol.map"] == "CONTROLLER:SSL,SASL_SSL:SASL_SSL"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin;User:CN=broker-idc1"


def test_the_security_page_gives_the_sync_rights_as_kafka_acls_commands():
    page = SECURITY_PAGE.read_text()
    commands = kafka_acls_commands("User:sync", sync_rights("orders.", "orders-"))
    assert len(commands) == 3
    commands += kafka_acls_commands("User:sync", commit_log_rights())  # following the commit logs
    for command in commands:
        assert command in page, f"docs/operating/security.md lacks: {command}"
