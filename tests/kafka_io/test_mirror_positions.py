"""kafka_io/mirror_positions.py against the Python mirror's session threads on real clusters (the mirror
that keeps its positions in consumer groups; MirrorMaker 2's are read by kafka_io/connect_offsets.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from offset_pipeline.kafka_io.mirror_positions import read_mirror_positions
from tests.conftest import wait_for

pytestmark = pytest.mark.kafka


def test_a_mirror_that_copied_everything_is_at_the_source_log_end(kafka_pair, python_mirrors, python_topic_name):
    topic = kafka_pair.create_topic(python_topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})
    for i in range(7):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    (forward,) = [m for m in python_mirrors if m.config.source.name == "idc1"]
    conf = {"bootstrap.servers": kafka_pair.bootstrap("idc2")}  # where the idc1->idc2 mirror keeps them

    def positions():
        return read_mirror_positions(conf, forward.config.group_id, [(topic, 0), (topic, 1)])

    wait_for(lambda: positions().get((topic, 0)) == 7, timeout=60, what="the mirror's position at idc1's log end")
    got = positions()
    assert got[(topic, 0)] == 7 and got.get((topic, 1), 0) == 0  # an empty partition: nothing or 0
    assert read_mirror_positions(conf, "no-such-mirror-group", [(topic, 0)]) == {}
    assert read_mirror_positions(conf, forward.config.group_id, []) == {}
