"""A consumer group as its application runs it: a live member that commits what it processed, and
the group's committed offsets read back by a plain consumer (no project code)."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.conftest import wait_for

#: The coordinator answers of a cluster that is still loading its groups (just started or restarted):
#: worth asking again, never a refusal.
SETTLING = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE}


def odd_group() -> str:
    """A group id with quotes, spaces and non-ASCII letters (group ids can hold any character)."""
    return f'commit {uuid.uuid4().hex[:8]} "quoted" ü 한'


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """partition -> the group's committed offset on partitions 0 and 1 (those without one left out),
    read by a plain consumer; asked again for up to a minute while a broker just (re)started still
    loads its groups."""
    deadline = time.monotonic() + 60
    while True:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
        try:
            answer = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
            return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        finally:
            consumer.close()
        time.sleep(0.5)


class Member:
    """A live member of ``group`` on the cluster at ``bootstrap`` (the group's active cluster: the
    sync tells the direction by where the members are), polling in a thread until closed. It commits
    only what :meth:`commit` is given, as the group's own consumer would after processing the
    records below."""

    def __init__(self, bootstrap: str, group: str, topic: str | list[str]):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "latest", "log_level": 3, "session.timeout.ms": 30000})
        self.lock = threading.Lock()
        assigned = threading.Event()
        topics = [topic] if isinstance(topic, str) else list(topic)
        self.consumer.subscribe(topics, on_assign=lambda c, parts: assigned.set())
        wait_for(lambda: self.consumer.poll(0.2) is None and assigned.is_set(), timeout=30, what=f"{group} assigned")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self):
        while not self.stop.is_set():
            with self.lock:
                self.consumer.poll(0.1)
            time.sleep(0.05)

    def commit(self, topic: str, offsets: dict[int, int]) -> None:
        """One synchronous commit; retried while the group coordinator is still loading (the first
        commit on a cluster started moments ago can be refused with COORDINATOR_LOAD_IN_PROGRESS)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.lock:
                    self.consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                         asynchronous=False)
                return
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args else None
                if code not in SETTLING or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)
        self.consumer.close()


def commit_as_group(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A commit by hand on partition 0 for a group without members (as an operator would with
    kafka-consumer-groups, or the group's own consumer after reading up to ``offset``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()
