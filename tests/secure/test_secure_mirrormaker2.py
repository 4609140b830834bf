"""MirrorMaker 2 (devstack/mirrormaker2.py) between two secure clusters (SASL_SSL, SCRAM-SHA-512, each
broker's certificate from a CA of its own, ACLs enforced), logged in as ``admin`` with the login the
Python clients use (``client_config``), mapped to its per-cluster settings.

Invariants checked on the run's secure pair (nothing mocked):
* logged in, both flows copy: every copy of a probe record on either cluster carries ``IDC`` = the
  other cluster and ``Offset`` = the offset of a record of that value there;
* the password is in no line of MirrorMaker 2's log nor in its Connect config topics (which hold its
  connectors' configurations, logins included), and its configuration files are 0600;
* a wrong password copies nothing: ``start`` fails within its timeout with an error naming the
  cluster and the authentication failure MirrorMaker 2 logged, never the password, and the JVM is gone.
"""

from __future__ import annotations

import stat
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from devstack.errors import DevStackError
from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import PROBE_TOPIC, MirrorMaker2, MirrorMaker2Config
from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER
from tests.conftest import free_port

pytestmark = pytest.mark.kafka

TOPICS_REGEX = r"mm2-secure\..*"
WRONG_PASSWORD_TOPIC = "mm2-secure.wrong-password"
PEER = {"idc1": "idc2", "idc2": "idc1"}


def read_all(config: dict, topic: str) -> list[tuple[int, bytes, dict]]:
    """Every committed record of partition 0 of ``topic``: (offset, value, headers)."""
    consumer = Consumer({**config, "group.id": f"mm2-secure-test-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, 0, low)])
        found: list[tuple[int, bytes, dict]] = []
        for _ in range(60):  # bounded; ends at the end offset (transaction markers take offsets too)
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= high:
                break
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                found.append((message.offset(), message.value(), dict(message.headers() or [])))
        else:
            raise AssertionError(f"{topic}: did not read up to its end offset {high}")
        return found
    finally:
        consumer.close()


def test_logged_in_mirrormaker2_copies_both_ways_with_exact_origin_headers(secure_pair, tmp_path):
    endpoints = (secure_pair.admin_endpoint("idc1"), secure_pair.admin_endpoint("idc2"))
    mirror = MirrorMaker2(MirrorMaker2Config(endpoints, tmp_path / "mm2", topics=TOPICS_REGEX, rest_port=free_port()))
    try:
        took = mirror.start(timeout_s=150)
        print(f"\nMirrorMaker 2 logged in to both secure clusters, probes copied both ways {took:.1f}s after its start")
    finally:
        mirror.stop()
    records = {name: read_all(secure_pair.admin_config(name), PROBE_TOPIC) for name in PEER}
    for name, peer in PEER.items():
        copies = [(headers, value) for _, value, headers in records[name] if ORIGIN_CLUSTER_HEADER in headers]
        assert copies, f"no copy reached {name}"
        by_offset = {offset: value for offset, value, headers in records[peer] if ORIGIN_CLUSTER_HEADER not in headers}
        for headers, value in copies:
            assert headers[ORIGIN_CLUSTER_HEADER] == peer.encode()
            assert by_offset[int(headers[ORIGIN_OFFSET_HEADER])] == value
    log = mirror.log_path.read_text()
    # MirrorMaker 2 keeps its connectors' configurations, logins included, in its Connect config
    # topics: they hold the reference to the secrets file, not the passwords
    for target, source in (("idc2", "idc1"), ("idc1", "idc2")):
        stored = read_all(secure_pair.admin_config(target), f"mm2-configs.{source}.internal")
        assert any(b"sasl.jaas.config" in (value or b"") for _, value, _ in stored)
        for endpoint in endpoints:
            assert not [value for _, value, _ in stored if endpoint.client_config["sasl.password"].encode() in (value or b"")]
    assert "Successfully logged in" in log
    for endpoint in endpoints:
        assert endpoint.client_config["sasl.password"] not in log
    for path in (mirror.config.properties_path, mirror.config.secrets_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_wrong_password_copies_nothing_and_names_the_authentication_failure(secure_pair, tmp_path):
    for name in PEER:
        admin = secure_pair.admin(name)  # kept referenced until the topic is made: its handle ends with it
        admin.create_topics([NewTopic(WRONG_PASSWORD_TOPIC, 1)], operation_timeout=15)[WRONG_PASSWORD_TOPIC].result(timeout=30)
    producer = Producer({**secure_pair.admin_config("idc1"), "enable.idempotence": True})
    producer.produce(WRONG_PASSWORD_TOPIC, value=b"never copied")
    assert producer.flush(30) == 0
    right = secure_pair.admin_endpoint("idc2")
    wrong_password = "wrong-" + uuid.uuid4().hex
    wrong = MirrorEndpoint("idc2", right.bootstrap_servers, client_config={**right.client_config, "sasl.password": wrong_password})
    mirror = MirrorMaker2(MirrorMaker2Config((secure_pair.admin_endpoint("idc1"), wrong), tmp_path / "mm2",
                                             topics=TOPICS_REGEX, rest_port=free_port()))
    try:
        with pytest.raises(DevStackError, match="could not log in to idc2: authentication failed") as refused:
            mirror.start(timeout_s=75)
    finally:
        mirror.stop()
    message = str(refused.value)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in message
    for password in (wrong_password, right.client_config["sasl.password"]):
        assert password not in message and password not in repr(refused.value)
        assert password not in mirror.log_path.read_text()
    assert not mirror.running()
    assert read_all(secure_pair.admin_config("idc2"), WRONG_PASSWORD_TOPIC) == []
    assert [value for _, value, _ in read_all(secure_pair.admin_config("idc1"), WRONG_PASSWORD_TOPIC)] == [b"never copied"]
