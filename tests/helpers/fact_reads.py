"""Inputs of the translation-fact reads (kafka_io/partition_records.py) on the session clusters: a
cluster's client config, and a one-way log of transactions with markers, an aborted batch and a
batch stamped back in time."""

from __future__ import annotations

import json
import time
import uuid

from devstack.records import read_partition
from tests.conftest import Transactions


def conf(pair, cluster):
    return {"bootstrap.servers": pair.bootstrap(cluster)}


def produce_one_way(pair, topic) -> int:
    """Equal-timestamp batches on idc1, each in a transaction (markers), one aborted, one stamped
    back in time. Returns the number of real records, read back committed from idc1."""
    transactions = Transactions(pair.bootstrap("idc1"), f"tx-{uuid.uuid4().hex}")
    base = int(time.time() * 1000) - 3_600_000
    for batch in range(10):
        ts = base + 500 if batch == 7 else base + batch * 1000  # batch 7 goes back in time

        def send(producer, batch=batch, ts=ts):
            for i in range(6):
                producer.produce(topic, value=json.dumps({"id": f"b{batch}-{i}"}).encode(), partition=0, timestamp=ts)

        transactions.run(send, commit=batch != 4)
    n = len(read_partition(pair.bootstrap("idc1"), topic, 0))
    assert n == 54, n  # nine committed batches of six
    return n

