"""offset_sync_metrics after real sync cycles (real clusters, session mirrors, chdb, local Spark):
the raw rows, the per-minute rollup and the status table."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from offset_pipeline.assets import metrics as metrics_asset
from offset_pipeline.assets.metrics import offset_sync_metrics
from offset_pipeline.storage import metrics
from tests.helpers.dashboards import check_every_panel
from tests.helpers.groups import Member, odd_group
from tests.helpers.sync_cycles import Cycles
from tests.helpers.topics import PARTITIONS

pytestmark = pytest.mark.kafka


def test_dry_run_then_synced_cycles_give_d_dd_and_statuses(kafka_pair, chdb_dsn, mirrored_topic, monkeypatch):
    topic, per_partition = mirrored_topic
    group = odd_group() + " it's"  # a single quote too: the dashboards' variables must escape it
    c = {p: per_partition - 7 for p in range(PARTITIONS)}
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    member.commit(topic, c)
    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    try:
        dry = cycles.run(dry_run=True, extra_assets=[offset_sync_metrics])
        real = cycles.run(extra_assets=[offset_sync_metrics])
        # the third cycle's commit rows are not carried: its facts are read back from ClickHouse
        monkeypatch.setattr(metrics_asset, "COMMIT_ROWS", "not carried")
        again = cycles.run(extra_assets=[offset_sync_metrics])
    finally:
        member.close()
    client = cycles.client
    rows = client.query(
        f"SELECT partition, f, g, d, dd, synced, sync_status, translated, sync_age_s FROM {metrics.TABLE} "
        "WHERE group_id = {g:String} ORDER BY cycle_time, partition",
        parameters={"g": group},
    ).result_rows
    assert len(rows) == 3 * PARTITIONS
    first, second, third = rows[:PARTITIONS], rows[PARTITIONS:2 * PARTITIONS], rows[2 * PARTITIONS:]
    for p, f, g, d, dd, synced, status, translated, age in first:  # dry run: nothing on the standby
        assert (f, g, d, dd, synced, translated, age) == (c[p], None, None, None, False, True, None)
        assert status == "Lagging"
    t = {}
    for p, f, g, d, dd, synced, status, translated, age in second:  # written
        assert synced and g is not None and d == f - g and dd is None and age == 0.0
        assert status in ("InSync", "Mirroring")
        t[p] = g
    for p, f, g, d, dd, synced, status, translated, age in third:  # nothing moved: d unchanged, dd 0
        assert (g, d, dd, synced) == (t[p], c[p] - t[p], 0, True)

    # the rollup holds the same rows, per minute
    (rolled,) = client.query(
        f"SELECT sum(rows), sum(synced_rows), sum(translated_rows), sum(dd_sum) FROM {metrics.ROLLUP} "
        "WHERE group_id = {g:String}",
        parameters={"g": group},
    ).result_rows
    assert rolled == (3 * PARTITIONS, 2 * PARTITIONS, 3 * PARTITIONS, 0)

    assert dry.success  # a dry run's rows are metrics too (the first cycle above)
    meta = again.asset_materializations_for_node("offset_sync_metrics")[0].metadata
    assert meta["cycle_rows_from"].value == "clickhouse"
    assert cycles.instance.get_run_record_by_id(again.run_id).start_time is not None  # read from the run's start on
    assert real.asset_materializations_for_node("offset_sync_metrics")[0].metadata["cycle_rows_from"].value == "carried"
    assert meta["group_partitions"].value == PARTITIONS
    table = meta["status_table"].value
    assert group.replace("|", "\\|") in table and topic in table
    assert meta["convergence"].value.startswith("![convergence](data:image/png;base64,")
    assert sum(meta[f"partitions_{s}"].value for s in ("InSync", "Mirroring")) == PARTITIONS

    # Every Grafana panel's SQL on these rows (tests/helpers/dashboards.py)
    panels = check_every_panel(client, group, topic)
    (status_row,) = panels["Status per group and topic (newest cycle)"]
    assert status_row[:4] == (group, topic, "idc1", "idc2") and status_row[4] in ("InSync", "Mirroring")
    assert status_row[5] == PARTITIONS
    # f, g and D: the means of the synced cycles (two rows of each partition). The three cycles may
    # straddle a minute: every minute holding synced rows shows the same means (nothing moved), a
    # minute holding only the dry run none (0: no row with both f and g).
    means = {(f, g, d) for _, _, f, g, d in panels["f, g and D per group (mean per partition)"] if g}
    assert means == {(sum(c.values()) / PARTITIONS, sum(t.values()) / PARTITIONS,
                      sum(c[p] - t[p] for p in c) / PARTITIONS)}
    # no progress after the first sync: dD 0, and so its 10-minute sum
    assert {(r[1], r[2], r[3]) for r in panels["Convergence per group"]} == {(group, 0, 0)}


def test_a_partition_whose_mirror_does_not_copy_is_flagged_stalled(kafka_pair, chdb_dsn):
    # An "x." topic: on both clusters, but no session mirror copies it (as if the mirror were down).
    topic = f"x.stalled.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(topic)
    producer = Producer({"bootstrap.servers": kafka_pair.bootstrap("idc1"), "log_level": 3})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, value=f"r{i}".encode(), partition=0)
        assert producer.flush(30) == 0

    produce(10)
    group = odd_group()
    member = Member(kafka_pair.bootstrap("idc1"), group, topic)
    member.commit(topic, {0: 5})
    cycles = Cycles(kafka_pair, chdb_dsn, group, topic)
    config = {"offset_sync_metrics": {"config": {"mirror_window_s": 1.0}}}
    try:
        cycles.run(extra_assets=[offset_sync_metrics], extra_ops_config=config)
        time.sleep(1.5)
        produce(5)  # idc1 grows, idc2 does not
        cycles.run(extra_assets=[offset_sync_metrics], extra_ops_config=config)
    finally:
        member.close()
    rows = cycles.client.query(
        f"SELECT mirror_stalled, sync_status FROM {metrics.TABLE} WHERE group_id = {{g:String}} ORDER BY cycle_time",
        parameters={"g": group},
    ).result_rows
    assert rows == [(False, "Lagging"), (True, "Lagging")]  # no history yet; then grown on idc1 only
