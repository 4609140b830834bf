"""A whole sync cycle with one cluster or Spark unavailable: real brokers, chdb, local Spark.

The run must succeed, the groups whose facts were not read get a named status and no commit, checks
WARN naming the part that failed, and the next cycle after the part returns syncs by itself.
"""

from __future__ import annotations

import socket
import threading
import uuid

import dagster as dg
import pytest

from offset_pipeline.resources import ClickHouseResource, SparkResource
from tests.conftest import free_port, wait_for
from tests.helpers.groups import Member, committed
from tests.helpers.outages import cycle, resources, serves
from tests.helpers.sync_cycles import checks
from tests.helpers.topics import PARTITIONS

pytestmark = [pytest.mark.kafka, pytest.mark.own_clusters]


def rows(res, result, table: str, columns: str) -> dict[int, tuple]:
    client = res["clickhouse"].get_client()
    return {r[0]: r[1:] for r in client.query(
        f"SELECT partition, {columns} FROM {table} WHERE snapshot_id = {{s:String}}", parameters={"s": result.run_id},
    ).result_rows}


def test_a_stopped_standby_cluster_costs_no_run_and_the_next_cycle_resumes(kafka_pair, own_idc2, outage_topic, chdb_dsn):
    topic, group = outage_topic, f"outage-{uuid.uuid4().hex[:8]}"
    b1, b2 = kafka_pair.bootstrap("idc1"), own_idc2.spec.bootstrap_servers
    res, instance = resources(chdb_dsn, b1, b2), dg.DagsterInstance.ephemeral()
    member = Member(b1, group, topic)  # live on idc1: its active cluster
    try:
        member.commit(topic, {p: 10 for p in range(PARTITIONS)})
        first = cycle(res, group, topic, instance)
        assert checks(first)["clusters_readable"].passed
        assert {p: r[0] for p, r in rows(res, first, "offset_commits", "decision, applied").items()} == \
            {p: "commit" for p in range(PARTITIONS)}
        synced = committed(b2, group, topic)
        assert synced == {p: 10 for p in range(PARTITIONS)}  # one-way, exact: the copy of record 10

        own_idc2.stop()
        member.commit(topic, {p: 15 for p in range(PARTITIONS)})
        down = cycle(res, group, topic, instance)
        readable = checks(down)["clusters_readable"]
        assert not readable.passed and readable.severity == dg.AssetCheckSeverity.WARN
        assert "idc2 unavailable" in readable.description
        assert {p: r[0] for p, r in rows(res, down, "offset_translations", "status").items()} == \
            {p: "cluster_unavailable" for p in range(PARTITIONS)}
        decisions = rows(res, down, "offset_commits", "decision, applied")
        assert decisions == {p: ("skipped_untranslated", False) for p in range(PARTITIONS)}
        snapshot_meta = down.asset_materializations_for_node("offset_snapshot")[0].metadata
        assert snapshot_meta["unavailable_clusters"].value == "idc2"

        own_idc2.start()
        # The broker answers metadata before it leads its partitions again; "returned" is when
        # the topic reads (under load that took longer than the cycle's 3 s Kafka bound).
        wait_for(lambda: serves(b2, topic), timeout=60, what=f"{topic} readable on the restarted idc2")
        back = cycle(res, group, topic, instance)
        assert checks(back)["clusters_readable"].passed
        assert {p: r[0] for p, r in rows(res, back, "offset_commits", "decision").items()} == \
            {p: "commit" for p in range(PARTITIONS)}, \
            f"translations after the return: {rows(res, back, 'offset_translations', 'status, reason')}"
        assert committed(b2, group, topic) == {p: 15 for p in range(PARTITIONS)}
    finally:
        member.close()
        own_idc2.start()


@pytest.fixture
def silent_listener():
    """A TCP port that accepts connections and never answers (a broker hung, or a network black
    hole): Kafka clients connect, send, and wait."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    server.close()


def test_a_cluster_that_never_answers_is_unavailable_within_the_timeout(kafka_pair, outage_topic, chdb_dsn,
                                                                        silent_listener):
    topic, group = outage_topic, f"outage-{uuid.uuid4().hex[:8]}"
    b1 = kafka_pair.bootstrap("idc1")
    res = resources(chdb_dsn, b1, silent_listener)
    member = Member(b1, group, topic)
    try:
        member.commit(topic, {p: 10 for p in range(PARTITIONS)})
        result = cycle(res, group, topic, dg.DagsterInstance.ephemeral())
        readable = checks(result)["clusters_readable"]
        assert not readable.passed and "idc2 unavailable" in readable.description
        reason = result.asset_materializations_for_node("offset_snapshot")[0].metadata
        assert reason["unavailable_clusters"].value == "idc2"
        assert {p: r[0] for p, r in rows(res, result, "offset_translations", "status").items()} == \
            {p: "cluster_unavailable" for p in range(PARTITIONS)}
        assert all(r[0] != "commit" for r in rows(res, result, "offset_commits", "decision").values())
    finally:
        member.close()


def test_a_spark_connect_server_that_refuses_gives_spark_unavailable_and_local_spark_resumes(
    kafka_pair, own_idc2, outage_topic, chdb_dsn,
):
    topic, group = outage_topic, f"outage-{uuid.uuid4().hex[:8]}"
    b1, b2 = kafka_pair.bootstrap("idc1"), own_idc2.spec.bootstrap_servers
    instance = dg.DagsterInstance.ephemeral()
    refused = resources(chdb_dsn, b1, b2, SparkResource(connect_url=f"sc://127.0.0.1:{free_port()}",
                                                        connect_timeout_s=2.0))
    member = Member(b1, group, topic)
    try:
        member.commit(topic, {p: 12 for p in range(PARTITIONS)})
        down = cycle(refused, group, topic, instance)
        engine = checks(down)["translation_engine_available"]
        assert not engine.passed and engine.severity == dg.AssetCheckSeverity.WARN
        assert "did not accept a connection" in engine.description
        translated = rows(refused, down, "offset_translations", "status, reason")
        assert {p: r[0] for p, r in translated.items()} == {p: "spark_unavailable" for p in range(PARTITIONS)}
        assert all("Spark Connect server" in r[1] for r in translated.values())
        assert all(r[0] != "commit" for r in rows(refused, down, "offset_commits", "decision").values())
        assert committed(b2, group, topic) == {}

        back = cycle(resources(chdb_dsn, b1, b2), group, topic, instance)  # Spark answers again
        assert checks(back)["translation_engine_available"].passed
        assert committed(b2, group, topic) == {p: 12 for p in range(PARTITIONS)}
    finally:
        member.close()


def test_a_spent_read_budget_defers_partitions_without_commits_and_the_next_cycle_reads_them_first(
    kafka_pair, own_idc2, outage_topic, chdb_dsn,
):
    topic, group = outage_topic, f"outage-{uuid.uuid4().hex[:8]}"
    b1, b2 = kafka_pair.bootstrap("idc1"), own_idc2.spec.bootstrap_servers
    res, instance = resources(chdb_dsn, b1, b2), dg.DagsterInstance.ephemeral()
    member = Member(b1, group, topic)
    try:
        member.commit(topic, {p: 14 for p in range(PARTITIONS)})
        # A budget spent before Spark starts: nothing is read.
        starved = cycle(res, group, topic, instance, read_budget_s=0.001)
        complete = checks(starved)["translation_complete"]
        assert not complete.passed and complete.severity == dg.AssetCheckSeverity.WARN
        assert f"{PARTITIONS} Kafka partitions translation_deferred" in complete.description
        assert checks(starved)["translation_engine_available"].passed  # Spark did its job
        assert {p: r[0] for p, r in rows(res, starved, "offset_translations", "status").items()} == \
            {p: "translation_deferred" for p in range(PARTITIONS)}
        assert {p: r[0] for p, r in rows(res, starved, "offset_commits", "decision").items()} == \
            {p: "skipped_untranslated" for p in range(PARTITIONS)}
        assert committed(b2, group, topic) == {}
        assert rows(res, starved, "offset_translation_deferrals", "active, standby") == \
            {p: ("idc1", "idc2") for p in range(PARTITIONS)}

        back = cycle(res, group, topic, instance)  # the default budget
        meta = back.asset_materializations_for_node("offset_translations")[0].metadata
        assert meta["first_in_line_partitions"].value == PARTITIONS
        assert meta["deferred_partitions"].value == 0 and checks(back)["translation_complete"].passed
        assert committed(b2, group, topic) == {p: 14 for p in range(PARTITIONS)}
    finally:
        member.close()


def test_clickhouse_down_costs_late_rows_not_commits_and_the_rows_arrive_when_it_returns(
    kafka_pair, own_idc2, outage_topic, chdb_dsn, tmp_path,
):
    topic, group = outage_topic, f"outage-{uuid.uuid4().hex[:8]}"
    b1, b2 = kafka_pair.bootstrap("idc1"), own_idc2.spec.bootstrap_servers
    spool = str(tmp_path / "spool")
    down_res = {**resources(chdb_dsn, b1, b2),
                "clickhouse": ClickHouseResource(dsn=f"http://127.0.0.1:{free_port()}", spool_dir=spool, timeout_s=3)}
    instance = dg.DagsterInstance.ephemeral()
    member = Member(b1, group, topic)
    try:
        member.commit(topic, {p: 8 for p in range(PARTITIONS)})
        down = cycle(down_res, group, topic, instance)
        assert committed(b2, group, topic) == {p: 8 for p in range(PARTITIONS)}  # the sync committed anyway
        written = checks(down)["metrics_written"]
        assert not written.passed and written.severity == dg.AssetCheckSeverity.WARN
        assert "ClickHouse unavailable" in written.description
        meta = {k: v.value for k, v in down.asset_materializations_for_node("offset_sync_metrics")[0].metadata.items()}
        assert meta["monitoring_rows_dropped"] == PARTITIONS and meta["spooled_files_pending"] >= 3

        up_res = {**resources(chdb_dsn, b1, b2), "clickhouse": ClickHouseResource(dsn=chdb_dsn, spool_dir=spool)}
        back = cycle(up_res, group, topic, instance)
        assert checks(back)["metrics_written"].passed
        meta = {k: v.value for k, v in back.asset_materializations_for_node("offset_sync_metrics")[0].metadata.items()}
        assert meta["spooled_rows_replayed"] >= 3 * PARTITIONS  # snapshot, translations, commits of the outage
        # the outage cycle's rows are in ClickHouse now, late
        assert {p: r[0] for p, r in rows(up_res, down, "offset_commits", "decision").items()} == \
            {p: "commit" for p in range(PARTITIONS)}
        assert len(rows(up_res, down, "offset_snapshots", "cluster")) == PARTITIONS  # (one row per partition shown)
    finally:
        member.close()


def test_the_spool_is_bounded_drops_the_oldest_counted_and_replays_in_order(chdb_dsn, tmp_path):
    from offset_pipeline.storage.deferred_writes import DeferredWrites

    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    client.command("CREATE TABLE spooled (n UInt32, s String) ENGINE = MergeTree ORDER BY n")
    spool = DeferredWrites(tmp_path / "spool", max_bytes=2500)
    for n in range(6):  # ~600 bytes each: only the newest fit
        spool.put("spooled", [[n * 10 + i, uuid.uuid4().hex * 3] for i in range(5)], ["n", "s"])
    files, size = spool.pending()
    assert size <= 2500 and 0 < files < 6
    assert spool.dropped() == {"rows": (6 - files) * 5, "files": 6 - files}
    replayed = spool.replay(client)
    assert replayed.rows == files * 5 and replayed.error is None and spool.pending() == (0, 0)
    kept = [r[0] for r in client.query("SELECT n FROM spooled ORDER BY n").result_rows]
    assert kept == [n * 10 + i for n in range(6 - files, 6) for i in range(5)]
    # a failed replay stops and keeps the file for later
    spool.put("no_such_table", [[1]], ["n"])
    failed = spool.replay(client)
    assert failed.error and "no_such_table" in failed.error and spool.pending()[0] == 1
