"""Steady traffic on a source cluster while its mirror's brokers are killed and restarted."""

from __future__ import annotations

import json
import threading

from confluent_kafka import Producer


class SteadyTraffic:
    """Records ``{"id": i}`` with increasing ids on the source, round-robin over ``partitions``
    partitions, about ``per_second`` a second, until stopped. ``acked`` holds the ids the broker
    acknowledged, in order; ``failed`` the delivery errors (a test expects none: the producer is
    idempotent and retries through a broker's outage)."""

    def __init__(self, bootstrap: str, topic: str, *, per_second: float, partitions: int = 2):
        self.topic, self.per_second, self.partitions = topic, per_second, partitions
        self.acked: list[int] = []
        self.failed: list[str] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"traffic-{topic}", daemon=True)

    def _delivered(self, err, msg):
        if err is None:
            self.acked.append(json.loads(msg.value())["id"])
        else:
            self.failed.append(str(err))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            for _ in range(10):
                self._producer.produce(self.topic, value=json.dumps({"id": i}).encode(), partition=i % self.partitions,
                                       on_delivery=self._delivered)
                i += 1
            self._producer.poll(0)
            self._stop.wait(10 / self.per_second)

    def __enter__(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=30)
        assert self._producer.flush(120) == 0, "the source producer could not deliver everything"

    def __exit__(self, *exc):
        if not self._stop.is_set():
            self.stop()
