"""The cause and message of a failed connection from what librdkafka reported (pure; the texts are
those librdkafka 2.16 gave against the secure dev broker, tests/secure/ runs them for real)."""

from __future__ import annotations

import pytest

from offset_pipeline.kafka_io.authorization import not_authorized_reason, refusal
from offset_pipeline.kafka_io.connection_errors import (
    ClientSettings,
    ConnectionCause,
    ReportedError,
    diagnose,
    librdkafka_detail,
)
from offset_pipeline.kafka_io.connection_probe import ClusterConnectionError, explained

SECURE = ClientSettings("idc1", "127.0.0.1:9093", "SASL_SSL", "SCRAM-SHA-512", "sync", "/etc/op/idc1-ca.pem")
BROKER = "sasl_ssl://127.0.0.1:9093/bootstrap: "
UNTRUSTED = (BROKER + "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker "
             "certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA "
             "certificates are installed (install ca-certificates package) (after 10ms in state SSL_HANDSHAKE)")
BAD_LOGIN = (BROKER + "SASL authentication error: Authentication failed during authentication due to invalid "
             "credentials with SASL mechanism SCRAM-SHA-512 (after 311ms in state AUTH_REQ)")
PLAIN_REFUSED = (BROKER + "SASL PLAIN mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's "
                 "supported mechanisms: SCRAM-SHA-512 (after 2ms in state AUTH_HANDSHAKE)")
DOWN = ReportedError("_ALL_BROKERS_DOWN", "1/1 brokers are down")


def e(code: str, text: str) -> ReportedError:
    return ReportedError(code, text)


CASES = [
    # (name, settings, reported, client_error, cause, the message must contain)
    ("wrong CA", SECURE, [e("_SSL", UNTRUSTED), DOWN], None, ConnectionCause.TLS_UNTRUSTED,
     [("idc1 (127.0.0.1:9093): TLS handshake failed: the broker's certificate is not signed by the CA in "
      "OFFSET_PIPELINE_IDC1_SSL_CA_LOCATION (/etc/op/idc1-ca.pem) — set it to the PEM of the CA that signed "
      "the brokers' certificates")]),
    ("wrong CA, only the transport's copy", SECURE,
     [e("_TRANSPORT", BROKER + "error:0A000086:SSL routines::certificate verify failed (after 4ms in state "
        "SSL_HANDSHAKE)")], None, ConnectionCause.TLS_UNTRUSTED, ["OFFSET_PIPELINE_IDC1_SSL_CA_LOCATION"]),
    ("no CA set, system store", ClientSettings("idc2", "k:9093", "SSL"), [e("_SSL", UNTRUSTED)], None,
     ConnectionCause.TLS_UNTRUSTED, ["idc2 (k:9093)", ("a CA of this host's store (OFFSET_PIPELINE_IDC2_SSL_CA_LOCATION "
                                     "is unset)")]),
    ("other TLS failure", SECURE, [e("_SSL", BROKER + "SSL handshake failed: wrong version number")], None,
     ConnectionCause.TLS_HANDSHAKE_FAILED, ["TLS handshake failed: SSL handshake failed: wrong version number"]),
    ("wrong password", SECURE, [e("_AUTHENTICATION", BAD_LOGIN), DOWN], None, ConnectionCause.AUTHENTICATION_FAILED,
     [("idc1 (127.0.0.1:9093): authentication failed for user sync (SCRAM-SHA-512): wrong password in "
      "OFFSET_PIPELINE_IDC1_SASL_PASSWORD or no such user")]),
    ("wrong mechanism PLAIN", ClientSettings("idc1", "127.0.0.1:9093", "SASL_SSL", "PLAIN", "sync"),
     [e("_AUTHENTICATION", PLAIN_REFUSED), DOWN], None, ConnectionCause.MECHANISM_NOT_ENABLED,
     [("idc1 (127.0.0.1:9093): SASL mechanism PLAIN is not enabled on the broker (it offers SCRAM-SHA-512) — set "
      "OFFSET_PIPELINE_IDC1_SASL_MECHANISM")]),
    ("wrong mechanism SCRAM-SHA-256", SECURE,
     [e("_AUTHENTICATION", PLAIN_REFUSED.replace("PLAIN", "SCRAM-SHA-256")), e("_AUTHENTICATION", BAD_LOGIN)], None,
     ConnectionCause.MECHANISM_NOT_ENABLED, ["SASL mechanism SCRAM-SHA-256 is not enabled"]),
    ("refused", SECURE, [e("_TRANSPORT", BROKER + "Connect to ipv4#127.0.0.1:9093 failed: Connection refused "
                           "(after 0ms in state CONNECT)"), DOWN], None, ConnectionCause.UNREACHABLE,
     [("idc1 (127.0.0.1:9093): cannot connect: Connect to ipv4#127.0.0.1:9093 failed: Connection refused — check "
      "OFFSET_PIPELINE_IDC1_BOOTSTRAP")]),
    ("SSL to a SASL_SSL listener", ClientSettings("idc1", "127.0.0.1:9093", "SSL"), [DOWN], None,
     ConnectionCause.PROTOCOL_MISMATCH, ["OFFSET_PIPELINE_IDC1_SECURITY_PROTOCOL (SSL) probably does not match"]),
    ("silence", SECURE, [], None, ConnectionCause.NO_ANSWER, ["no answer and no connection error reported"]),
    ("CA file missing", SECURE, [], "ssl.ca.location failed: error:80000002:system library::No such file or directory",
     ConnectionCause.CA_FILE_UNREADABLE, [("the CA file in OFFSET_PIPELINE_IDC1_SSL_CA_LOCATION (/etc/op/idc1-ca.pem) "
                                          "cannot be loaded")]),
    ("another bad setting", SECURE, [], 'Invalid value "x" for configuration property "security.protocol"',
     ConnectionCause.CLIENT_SETTINGS_INVALID, ["the Kafka client refused its settings"]),
]


@pytest.mark.parametrize("name, settings, reported, client_error, cause, says", CASES, ids=[c[0] for c in CASES])
def test_each_failure_gets_its_cause_and_a_message_naming_cluster_and_fix(name, settings, reported, client_error,
                                                                          cause, says):
    diagnosis = diagnose(settings, reported, client_error=client_error)
    assert diagnosis.cause is cause
    assert diagnosis.cluster == settings.cluster
    for text in says:
        assert text in diagnosis.message


def test_an_answer_wins_over_errors_reported_before_it():
    assert diagnose(SECURE, [e("_AUTHENTICATION", BAD_LOGIN)], answered=True).connected


def test_the_message_never_holds_a_password():
    settings = ClientSettings.from_client_config("idc1", {
        "bootstrap.servers": "b:1", "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "sync", "sasl.password": "s3cret-value"})
    assert settings.security_protocol == "SASL_SSL"
    for reported in ([e("_AUTHENTICATION", BAD_LOGIN)], [e("_SSL", UNTRUSTED)], []):
        assert "s3cret-value" not in diagnose(settings, reported).message


def test_librdkafka_detail_drops_the_broker_and_the_state():
    assert librdkafka_detail(BAD_LOGIN).startswith("SASL authentication error:")
    assert "(after" not in librdkafka_detail(BAD_LOGIN)


def test_a_diagnosis_survives_the_trip_back_from_a_child_as_text():
    error = ClusterConnectionError(diagnose(SECURE, [e("_AUTHENTICATION", BAD_LOGIN)]))
    as_text = f"KafkaCallFailed: ClusterConnectionError: {error}"
    assert explained(as_text) == explained(error) == error.diagnosis.message
    assert explained("KafkaCallFailed: KafkaException: timed out") is None


TOPIC_REFUSED = 'KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,str="Fetch from broker 1 failed"}'
GROUP_REFUSED = "GROUP_AUTHORIZATION_FAILED: Broker: Group authorization failed"

REFUSALS = [
    # (error, topic, group, resource, the reason must contain)
    (TOPIC_REFUSED, "orders.eu", "orders-billing", "topic",
     ["not authorized on idc2", "User:sync may not read topic 'orders.eu'",
      "--operation Read --operation DescribeConfigs --topic 'orders.eu'"]),
    (GROUP_REFUSED, "orders.eu", "orders-billing", "group",
     ["User:sync may not read group 'orders-billing'", "--operation Read --group 'orders-billing'"]),
    (GROUP_REFUSED, "orders.eu", None, "group",
     ["the sync's own reader groups", "--operation Describe --group 'offset-pipeline-' --resource-pattern-type prefixed"]),
    ("KafkaException: CLUSTER_AUTHORIZATION_FAILED", None, None, "cluster", ["refused on the cluster"]),
]


@pytest.mark.parametrize("error, topic, group, resource, says", REFUSALS)
def test_a_refusal_names_cluster_resource_and_the_acl_to_add(error, topic, group, resource, says):
    assert refusal(error).resource == resource
    reason = not_authorized_reason(error, "idc2", topic=topic, group=group, user="sync")
    for text in says:
        assert text in reason


@pytest.mark.parametrize("error", ["KafkaException: _TIMED_OUT", "UNKNOWN_TOPIC_OR_PART", "", None])
def test_other_errors_are_no_refusal(error):
    assert refusal(error) is None
    assert error is None or not_authorized_reason(error, "idc1", topic="t") is None
