"""The sync against the secure clusters (tests/secure/conftest.py): the ``sync`` principal's rights and
settings, a one-way topic copied by the data mirror logged in as admin, a live member, reads back."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic

from devstack.mirror import DataMirror, MirrorConfig
from devstack.secure_cluster import SCRAM_MECHANISM, SYNC_USER
from devstack.sync_acls import grant, sync_rights
from tests.conftest import wait_for

PARTITIONS, RECORDS, COMMITTED = 2, 20, 10
TOPICS, GROUPS = "sec.", "sec-"  # the prefixes the sync principal is granted
CLUSTERS = ("idc1", "idc2")


def grant_sync_rights(pair) -> None:
    """The sync's rights on each cluster, the mirror's position group there (the other cluster's
    copies into it) included."""
    for name, other in zip(CLUSTERS, reversed(CLUSTERS)):
        position_group = MirrorConfig(pair.admin_endpoint(other), pair.admin_endpoint(name)).group_id
        grant(pair.admin_config(name), f"User:{SYNC_USER}", sync_rights(TOPICS, GROUPS, position_group))


def sync_environment(pair, monkeypatch) -> None:
    """The product's settings for both secure clusters, as an operator would export them."""
    for name in CLUSTERS:
        access, prefix = pair.access[name], f"OFFSET_PIPELINE_{name.upper()}_"
        for key, value in {"BOOTSTRAP": access.bootstrap_servers, "SECURITY_PROTOCOL": "SASL_SSL",
                           "SASL_MECHANISM": SCRAM_MECHANISM, "SASL_USERNAME": SYNC_USER,
                           "SASL_PASSWORD": access.passwords[SYNC_USER],
                           "SSL_CA_LOCATION": str(access.ca_pem)}.items():
            monkeypatch.setenv(prefix + key, value)


def produce(config: dict, topic: str) -> None:
    producer = Producer(config)
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0, "records left unsent"


def log_end(config: dict, topic: str, partition: int) -> int:
    consumer = Consumer({**config, "group.id": "sec-probe"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def mirrored_one_way(pair, topic: str) -> None:
    """``topic`` on both clusters, ``RECORDS`` per partition produced on idc1 and copied to idc2 by
    the data mirror (logged in as admin), which then stops."""
    for name in CLUSTERS:
        admin = pair.admin(name)
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(timeout=30)
    produce(pair.admin_config("idc1"), topic)
    stop = threading.Event()
    mirror = DataMirror(MirrorConfig(pair.admin_endpoint("idc1"), pair.admin_endpoint("idc2"),
                                     topic_pattern=rf"^{topic.replace('.', '[.]')}$", metadata_refresh_s=0.5))
    thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True)
    thread.start()
    try:
        for p in range(PARTITIONS):  # the copies and the mirror's commit marker
            wait_for(lambda p=p: log_end(pair.admin_config("idc2"), topic, p) > RECORDS, timeout=60,
                     what=f"{topic}[{p}] mirrored to idc2")
    finally:
        stop.set()
        thread.join(timeout=30)


@contextmanager
def live_member(config: dict, group: str, topic: str, offset: int):
    """A member of ``group`` on its active cluster (logged in as admin: the application), which
    commits ``offset`` on every partition and keeps polling, as a consumer would, until the end."""
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "latest"})
    assigned, stop, lock = threading.Event(), threading.Event(), threading.Lock()
    consumer.subscribe([topic], on_assign=lambda c, parts: assigned.set())
    wait_for(lambda: consumer.poll(0.2) is None and assigned.is_set(), timeout=30, what=f"{group} assigned")
    deadline = time.monotonic() + 30
    while True:  # retried while the group coordinator of a fresh cluster still loads
        try:
            consumer.commit(offsets=[TopicPartition(topic, p, offset) for p in range(PARTITIONS)], asynchronous=False)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)

    def keep_polling():
        while not stop.is_set():
            with lock:
                consumer.poll(0.1)

    thread = threading.Thread(target=keep_polling, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
        consumer.close()


def committed(config: dict, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({**config, "group.id": group})
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}
    finally:
        consumer.close()

