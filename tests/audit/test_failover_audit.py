"""The failover audit on the real clusters: a deliberately wrong standby offset is reported
with exactly the records it would lose; correct sync audits to 0 lost and to the duplicates a real
failover then reads; re-running a day replaces its rows."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Consumer

from tests.helpers.audit import AuditStack, processed_up_to
from tests.helpers.groups import Member, commit_as_group
from tests.helpers.one_partition import mirrored, produce, read_values
from tests.helpers.records import log_end

pytestmark = pytest.mark.kafka


def records(bootstrap: str, topic: str) -> list[tuple[int, str]]:
    """(offset, value) of every real record of partition 0 (read_committed)."""
    return read_values(bootstrap, topic, 0, log_end(bootstrap, topic))


@pytest.fixture
def two_way(kafka_pair, session_mirrors, chdb_dsn, topic_name):
    """A two-way topic with records from both sides, and a group on idc1 that read part of it."""
    topic = kafka_pair.create_topic(topic_name, partitions=1)
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    produce(idc2, topic, [f"b{i}" for i in range(3)])
    mirrored(kafka_pair, topic)
    produce(idc1, topic, [f"a{i}" for i in range(6)])
    produce(idc2, topic, [f"b{i}" for i in range(3, 5)])
    mirrored(kafka_pair, topic)
    return topic, AuditStack(kafka_pair, chdb_dsn, f"audited '{uuid.uuid4().hex[:6]}'", topic)


def test_a_standby_offset_set_too_high_reports_exactly_the_records_it_loses(kafka_pair, two_way):
    topic, stack = two_way
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    on_a = records(idc1, topic)
    c = next(o for o, v in on_a if v == "a3")  # processed: everything before a3 on idc1
    member = Member(idc1, stack.group, topic)
    try:
        member.commit(topic, {0: c})
        stack.cycle()
        stack.cycle()
        on_b = records(idc2, topic)
        wrong = len(on_b) and max(o for o, _ in on_b) + 1  # the standby's log end: too high
        commit_as_group(idc2, stack.group, topic, wrong)
        stack.cycle()  # its snapshot sees the wrong offset (the sync never moves it back)
    finally:
        member.close()
    processed = {v for o, v in on_a if o < c}
    expected_lost = [o for o, v in on_b if o < wrong and v not in processed]
    assert expected_lost  # a3, a4, a5 and b3, b4 are not processed on idc1... as far as idc1 knows

    result = stack.audit()
    rows = stack.rows()
    last = rows[-1]
    assert (last["committed"], last["standby_committed"], last["status"]) == (c, wrong, "audited"), last["reason"]
    assert last["lost"] == len(expected_lost) and list(last["lost_offsets"]) == expected_lost
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.severity is dg.AssetCheckSeverity.ERROR
    synced = [r for r in rows if r["standby_committed"] not in (None, wrong)]
    assert synced and all(r["status"] == "audited" and r["lost"] == 0 for r in synced)  # the synced moments lose nothing


def test_correct_sync_loses_nothing_and_duplicates_what_a_failover_reads_again(kafka_pair, two_way):
    topic, stack = two_way
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    on_a = records(idc1, topic)
    c = next(o for o, v in on_a if v == "a3")
    processed_up_to(kafka_pair, stack, c)
    stack.cycle()  # the moment audited last: group stopped, its offsets synced
    result = stack.audit()
    rows = stack.rows()
    # the first snapshot saw no standby offset yet (said, not counted); the synced ones lose nothing
    assert rows[0]["status"] == "no_standby_offset" and rows[0]["lost"] is None
    assert len(rows) == 3 and all(r["status"] == "audited" and r["lost"] == 0 for r in rows[1:]), [r["reason"] for r in rows]
    [check] = result.get_asset_check_evaluations()
    assert check.passed
    last = rows[-1]

    # The failover itself: the group resumes on idc2 at its synced offset.
    processed = {v for o, v in on_a if o < c}
    resumed = Consumer({"bootstrap.servers": idc2, "group.id": stack.group, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
    expected = [o for o, _ in records(idc2, topic) if last["standby_committed"] <= o < last["standby_end_at"]]
    read = []
    try:
        resumed.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(read) < len(expected):
            msg = resumed.poll(0.5)
            if msg is not None and not msg.error():
                read.append((msg.offset(), msg.value().decode()))
    finally:
        resumed.close()
    again = [o for o, v in read if v in processed]
    assert last["duplicated"] == len(again) and list(last["duplicated_offsets"]) == again


def test_re_running_a_day_replaces_its_rows(kafka_pair, two_way):
    topic, stack = two_way
    processed_up_to(kafka_pair, stack, 2)
    stack.audit()
    first = stack.rows()
    stack.audit()
    assert stack.rows() == first and len(first) == 2
    assert stack.client.query("SELECT count() FROM offset_failover_audits").result_rows == [(2,)]


def test_records_gone_by_retention_are_said_per_group_partition(kafka_pair, two_way):
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient

    topic, stack = two_way
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    processed_up_to(kafka_pair, stack, next(o for o, v in records(idc1, topic) if v == "a3"))
    # Retention on the standby removes everything below the synced offset: the records that show
    # nothing below it was lost are gone.
    probe = Consumer({"bootstrap.servers": idc2, "group.id": stack.group, "log_level": 3})
    try:
        [synced] = probe.committed([TP(topic, 0)], timeout=10)
    finally:
        probe.close()
    assert synced.offset > 0
    admin = AdminClient({"bootstrap.servers": idc2, "log_level": 3})
    [future] = admin.delete_records([TP(topic, 0, synced.offset)]).values()
    future.result(timeout=30)
    stack.audit()
    rows = stack.rows()
    assert rows[-1]["standby_committed"] == synced.offset
    assert rows[-1]["status"] == "records_deleted", rows[-1]["reason"]
    assert rows[-1]["lost"] is None and "log start" in rows[-1]["reason"]
