"""offset_snapshot + offset_translations against real clusters, real mirrors, chdb and local Spark."""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timezone

import dagster as dg
import pytest
from confluent_kafka import Producer

from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.sync.spark_translation import translate_partition_rows
from offset_pipeline.storage.translations import (
    TRANSLATIONS_DDL,
    ensure_tables,
    insert_anchors,
    insert_translations,
    latest_anchors,
)
from offset_pipeline.translation import Anchor, TranslationStatus, parse_decision_log_line
from tests.conftest import wait_for
from tests.helpers.groups import Member
from tests.helpers.records import read_values, records_in
from tests.helpers.topics import PARTITIONS

pytestmark = pytest.mark.kafka


def translate_with_member(kafka_pair, chdb_dsn, group: str, topics, commits: dict, topic_shapes: dict,
                          group_include: str | None = None, translation_config: dict | None = None,
                          ) -> dg.ExecuteInProcessResult:
    """offset_snapshot + offset_translations materialized while ``group`` is a live member on idc1
    (its active cluster) that committed ``commits`` ({topic: {partition: offset}})."""
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    member = Member(b1, group, topics)
    try:
        for topic, offsets in commits.items():
            member.commit(topic, offsets)
        return dg.materialize(
            [offset_snapshot, offset_translations],
            resources={
                "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=b1),
                "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=b2),
                "clickhouse": ClickHouseResource(dsn=chdb_dsn),
                "spark": SparkResource(),
            },
            run_config={"ops": {
                "offset_snapshot": {"config": {"group_include": group_include or f"^{re.escape(group)}$"}},
                "offset_translations": {"config": {"topic_shapes": topic_shapes, **(translation_config or {})}},
            }},
        )
    finally:
        member.close()


def test_translations_for_a_two_way_topic_satisfy_no_loss(kafka_pair, chdb_dsn, mirrored_topic):
    topic, per_partition = mirrored_topic
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")

    # The group is a member on idc1 (its active cluster) for the whole materialization.
    group = f"translate-{uuid.uuid4().hex[:8]} \"quoted\" ü"
    idc1_values = {p: read_values(b1, topic, p, per_partition) for p in range(PARTITIONS)}
    committed = {p: per_partition - 7 for p in range(PARTITIONS)}
    result = translate_with_member(
        kafka_pair, chdb_dsn, group, topic, {topic: committed}, {topic: "two_way"},
        group_include="^translate-" + group.split(" ")[0][len("translate-"):],
    )
    assert result.success
    metadata = result.asset_materializations_for_node("offset_translations")[0].metadata
    assert metadata["group_partitions"].value == PARTITIONS
    assert metadata["translated"].value == PARTITIONS

    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    rows = client.query(
        "SELECT partition, active, standby, committed, standby_offset, status, strategy, "
        "anchor_active_offset, anchor_standby_offset, safe_bound FROM offset_translations "
        "WHERE group_id = {g:String} AND snapshot_id = {s:String} ORDER BY partition",
        parameters={"g": group, "s": result.run_id},
    ).result_rows
    assert [r[0] for r in rows] == list(range(PARTITIONS))
    anchors = latest_anchors(client)
    for p, active, standby, c, t, status, strategy, anchor_a, anchor_s, bound in rows:
        assert (active, standby, c) == ("idc1", "idc2", committed[p])
        assert TranslationStatus(status).translated, (p, status)
        assert strategy == "header_anchor"
        assert t is not None and 0 <= t <= per_partition
        assert bound is not None and t <= bound <= per_partition, (p, t, bound)
        # NO-LOSS against the real data: every idc2 record below t is a copy of an idc1 record
        # below c (records are identified by their unique values).
        idc1_offset = {v: o for o, v in idc1_values[p].items()}
        idc2_values = read_values(b2, topic, p, per_partition)
        below_t = [v for o, v in idc2_values.items() if o < t]
        assert all(idc1_offset[v] < c for v in below_t), (p, c, t)
        # Not trivially safe: the translation is close to c (a header anchor within the window).
        assert t > 0
        # The anchor used is a real standby-origin copy: idc1's record at a is idc2's record at s.
        assert idc1_values[p][anchor_a] == idc2_values[anchor_s]
        kept = anchors[(group, topic, p, "idc1", "idc2")]
        assert idc1_values[p][kept.active_offset] == idc2_values[kept.standby_offset]
        assert kept.active_offset <= c

    assert metadata["status_header_exact"].value + metadata.get("status_header_anchor", dg.MetadataValue.int(0)).value \
        + metadata.get("status_kept_anchor", dg.MetadataValue.int(0)).value == PARTITIONS
    assert metadata["anchors_written"].value == PARTITIONS


def test_unreachable_cluster_gives_cluster_unavailable_rows_not_a_failure(free_port_conf):
    rows = [{
        "group_id": g, "topic": "t.x", "partition": 0, "active": "idc1", "standby": "idc2", "committed": 5,
        "standby_committed": None, "active_log_start": 0, "active_log_end": 10, "standby_log_start": 0,
        "standby_log_end": 10, "anchor_active_offset": None, "anchor_standby_offset": None, "shape": "two_way",
    } for g in ("a", "b")]
    out = translate_partition_rows(
        rows, {"idc1": free_port_conf, "idc2": free_port_conf}, snapshot_id="s", cycle_time_ms=0, timeout_s=1.0,
    )
    assert [(r["group_id"], r["status"], r["standby_offset"], r["safe_bound"]) for r in out] == [
        ("a", "cluster_unavailable", None, None), ("b", "cluster_unavailable", None, None),
    ]
    assert parse_decision_log_line(out[0]["decision"])["status"] == "cluster_unavailable"


def test_latest_anchors_newest_row_wins_and_a_drop_forgets(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    ensure_tables(client)
    key = {"group_id": "g 'q'", "topic": "t", "partition": 0, "active": "idc1", "standby": "idc2", "snapshot_id": "s"}
    insert_anchors(client, [
        {**key, "active_offset": 3, "standby_offset": 1, "kept_at": 1000},
        {**key, "active_offset": 9, "standby_offset": 4, "kept_at": 2000},
        {**key, "partition": 1, "active_offset": 9, "standby_offset": 4, "kept_at": 1000},
        {**key, "partition": 1, "active_offset": None, "standby_offset": None, "kept_at": 2000},
    ])
    assert latest_anchors(client) == {("g 'q'", "t", 0, "idc1", "idc2"): Anchor("idc1", "idc2", 9, 4)}


def test_log_append_time_on_the_standby_is_read_from_the_topic_config(kafka_pair, session_mirrors, chdb_dsn, topic_name):
    # One-way idc1 -> idc2, but idc2 stamps the topic itself: copies lose idc1's timestamps, so the
    # timestamp search must not run (status log_append_time), whatever the shape says.
    topic = kafka_pair.create_topic(topic_name, on=("idc2",), config={"message.timestamp.type": "LogAppendTime"})
    kafka_pair.create_topic(topic_name, on=("idc1",))
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    producer = Producer({"bootstrap.servers": b1, "log_level": 3})
    # Timestamps within the retention (7 days by default): older records are deleted by the
    # brokers' retention check, which runs every 5 minutes.
    recent_ms = int(time.time() * 1000) - 600_000
    for i in range(30):
        producer.produce(topic, value=f"r{i}".encode(), partition=0, timestamp=recent_ms + i)
    assert producer.flush(30) == 0
    wait_for(lambda: records_in(b2, topic, 0) >= 30, timeout=60, what=f"mirrored {topic}")
    group = f"lat-{uuid.uuid4().hex[:8]}"
    result = translate_with_member(kafka_pair, chdb_dsn, group, topic, {topic: {0: 12}}, {topic: "one_way:idc1"})
    assert result.success
    snapshot_meta = result.asset_materializations_for_node("offset_snapshot")[0].metadata
    assert snapshot_meta["log_append_time_topics"].value == [f"idc2:{topic}"]
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    types = client.query(
        "SELECT cluster, timestamp_type FROM offset_snapshots WHERE snapshot_id = {s:String} ORDER BY cluster",
        parameters={"s": result.run_id},
    ).result_rows
    assert types == [("idc1", "CreateTime"), ("idc2", "LogAppendTime")]
    ((active, status, offset, reason),) = client.query(
        "SELECT active, status, standby_offset, reason FROM offset_translations "
        "WHERE group_id = {g:String} AND snapshot_id = {s:String}",
        parameters={"g": group, "s": result.run_id},
    ).result_rows
    assert (active, status, offset) == ("idc1", "log_append_time_on_standby", None), reason


def test_a_mirror_without_headers_is_translated_by_timestamp_search_when_told(kafka_pair, chdb_dsn, topic_name):
    # MirrorMaker 2 copies records with their timestamps and writes no origin headers. Copied here
    # the same way, by a plain producer (a topic name the session mirrors leave alone).
    topic = kafka_pair.create_topic("mm2-like." + topic_name.split(".", 1)[1])
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    recent_ms = int(time.time() * 1000) - 600_000
    for bootstrap in (b1, b2):
        producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
        for i in range(30):
            producer.produce(topic, value=f"r{i}".encode(), partition=0, timestamp=recent_ms + i * 10)
        assert producer.flush(30) == 0
    shapes = {topic: "one_way:idc1"}

    def translated(group: str, config: dict) -> tuple:
        result = translate_with_member(kafka_pair, chdb_dsn, group, topic, {topic: {0: 12}}, shapes,
                                       translation_config=config)
        assert result.success
        ((status, offset, strategy, reason),) = ClickHouseResource(dsn=chdb_dsn).get_client().query(
            "SELECT status, standby_offset, strategy, reason FROM offset_translations "
            "WHERE group_id = {g:String} AND snapshot_id = {s:String}",
            parameters={"g": group, "s": result.run_id},
        ).result_rows
        return status, offset, strategy, reason

    status, offset, strategy, reason = translated(f"nohdr-{uuid.uuid4().hex[:8]}", {"mirror_writes_headers": False})
    # the search lands on the copy, and record identity shows it is the one (translation/timestamp_search.py)
    assert (status, offset, strategy) == ("timestamp_exact", 12, "timestamp_search"), reason
    assert "the only record with the same identity" in reason
    # Told the mirror marks every copy, the header-less copies read as records produced on idc2.
    status, offset, _, reason = translated(f"hdr-{uuid.uuid4().hex[:8]}", {})
    assert (status, offset) == ("shape_conflict", None), reason


def test_unconfigured_topics_get_their_shape_from_origin_headers(kafka_pair, session_mirrors, chdb_dsn, topic_name):
    one_way = kafka_pair.create_topic(topic_name + ".one")
    two_way = kafka_pair.create_topic(topic_name + ".two")
    b1, b2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    producers = {c: Producer({"bootstrap.servers": b, "log_level": 3}) for c, b in (("idc1", b1), ("idc2", b2))}
    recent_ms = int(time.time() * 1000) - 600_000  # within the retention (see the test above)
    for i in range(30):
        producers["idc1"].produce(one_way, value=f"o{i}".encode(), partition=0, timestamp=recent_ms + 1000 * i)
        for cluster, producer in producers.items():
            producer.produce(two_way, value=f"{cluster}-{i}".encode(), partition=0)
    for producer in producers.values():
        assert producer.flush(30) == 0
    for bootstrap in (b1, b2):
        wait_for(lambda: records_in(bootstrap, two_way, 0) >= 60, timeout=60, what=f"mirrored {two_way}")
    wait_for(lambda: records_in(b2, one_way, 0) >= 30, timeout=60, what=f"mirrored {one_way}")

    group = f"shape-{uuid.uuid4().hex[:8]}"
    result = translate_with_member(kafka_pair, chdb_dsn, group, [one_way, two_way],
                                   {one_way: {0: 12}, two_way: {0: 50}}, {})
    assert result.success
    metadata = result.asset_materializations_for_node("offset_translations")[0].metadata
    assert metadata["shapes_detected"].value == {one_way: "one_way:idc1", two_way: "two_way"}
    assert metadata["shape_topics_sampled"].value == 2
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    observed = client.query(
        "SELECT topic, cluster, local, copies, malformed FROM topic_shape_observations "
        "WHERE snapshot_id = {s:String} ORDER BY topic, cluster",
        parameters={"s": result.run_id},
    ).result_rows
    # The newest 50 offsets: all of the one-way logs; on the two-way logs, records of both origins
    # (and the mirror's transaction markers, which are not records).
    assert observed[:2] == [(one_way, "idc1", 30, 0, 0), (one_way, "idc2", 0, 30, 0)]
    assert [(t, c) for t, c, *_ in observed[2:]] == [(two_way, "idc1"), (two_way, "idc2")]
    assert all(local > 0 and copies > 0 and malformed == 0 and 40 <= local + copies <= 50
               for _, _, local, copies, malformed in observed[2:]), observed
    rows = dict(
        ((topic, (strategy, status)) for topic, strategy, status in client.query(
            "SELECT topic, strategy, status FROM offset_translations WHERE group_id = {g:String} AND snapshot_id = {s:String}",
            parameters={"g": group, "s": result.run_id},
        ).result_rows)
    )
    # The detected one-way topic is searched by timestamp from its producing side; the two-way one
    # is anchored by headers only.
    assert rows[one_way] == ("timestamp_search", "timestamp_exact"), rows
    assert rows[two_way][0] == "header_anchor" and TranslationStatus(rows[two_way][1]).translated


def test_ensure_tables_adds_safe_bound_to_a_table_from_before_it(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    old_ddl = TRANSLATIONS_DDL.replace(",\n    safe_bound            Nullable(Int64)", "")
    assert "safe_bound" not in old_ddl
    client.command(old_ddl)
    client.insert("offset_translations", [["old", datetime.now(timezone.utc), "g", "t", 0]],
                  column_names=["snapshot_id", "cycle_time", "group_id", "topic", "partition"])
    ensure_tables(client)
    ensure_tables(client)  # idempotent
    insert_translations(client, [{
        "snapshot_id": "new", "cycle_time": int(time.time() * 1000), "group_id": "g 'q'", "topic": "t", "partition": 0,
        "active": "idc1", "standby": "idc2", "committed": 5, "standby_committed": None, "strategy": "header_anchor",
        "standby_offset": 4, "status": "header_exact", "reason": "", "expected_duplicates": None,
        "timestamp_inversion": False, "anchor_active_offset": 5, "anchor_standby_offset": 4, "safe_bound": 4,
    }])
    assert client.query("SELECT snapshot_id, safe_bound FROM offset_translations ORDER BY snapshot_id").result_rows == [
        ("new", 4), ("old", None)]


@pytest.fixture
def free_port_conf():
    from tests.conftest import free_port

    return {"bootstrap.servers": f"127.0.0.1:{free_port()}", "socket.connection.setup.timeout.ms": 1000}
