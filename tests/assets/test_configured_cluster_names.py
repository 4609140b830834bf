"""A sync cycle under configured cluster names (``OFFSET_PIPELINE_CLUSTERS=us-east,dc-a``), against real
brokers: the session's two brokers are called ``us-east`` and ``dc-a`` here, and a data mirror of the
test's own copies between them under those names (it writes them verbatim as ``IDC``). The resources
come from the environment through the settings, as the code location builds them; every row, commit,
decision line, metadata entry and Grafana panel carries the configured names, the standby offset is
committed, and a record whose ``IDC`` is the old default name ``idc1`` is a third cluster's."""

from __future__ import annotations

import re
import threading
import uuid
from datetime import datetime, timezone

import dagster as dg
import pytest
from confluent_kafka import Producer

from devstack.mirror import DataMirror, MirrorConfig, MirrorEndpoint
from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.assets.metrics import offset_sync_metrics
from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations
from offset_pipeline.definitions import build_resources
from offset_pipeline.resources import CLUSTER_RESOURCE_KEYS
from offset_pipeline.settings import read_settings, topic_shapes
from offset_pipeline.storage import dashboards
from offset_pipeline.sync.commit_rules import parse_commit_log_line
from tests.conftest import wait_for
from tests.helpers.dashboards import check_every_panel
from tests.helpers.groups import Member, committed
from tests.helpers.records import read_values, records_in
from tests.helpers.sync_cycles import checks, decision_lines
from devstack.grafana_sql import expand

pytestmark = pytest.mark.kafka

ACTIVE, STANDBY = "us-east", "dc-a"
BROKER = {ACTIVE: "idc1", STANDBY: "idc2"}  # which of the session's brokers plays which cluster
ROUNDS, PER_ROUND = 4, 5
SYNCED, THIRD = 0, 1  # partition 0: two-way traffic; partition 1: one record with IDC=idc1


@pytest.fixture
def named_mirrors(kafka_pair):
    """A topic of the test's own, mirrored both ways by data mirrors whose endpoints are named
    ``us-east`` and ``dc-a`` (the session mirrors copy only ``t.*`` topics and name the brokers
    idc1/idc2). Yields (topic, cluster name -> bootstrap)."""
    topic = f"named.{uuid.uuid4().hex[:10]}"
    bootstrap = {name: kafka_pair.bootstrap(broker) for name, broker in BROKER.items()}
    kafka_pair.create_topic(topic, partitions=2)
    stop, threads = threading.Event(), []
    for source, target in ((ACTIVE, STANDBY), (STANDBY, ACTIVE)):
        mirror = DataMirror(MirrorConfig(MirrorEndpoint(source, bootstrap[source]), MirrorEndpoint(target, bootstrap[target]),
                                         topic_pattern=rf"^{re.escape(topic)}$", metadata_refresh_s=0.5))
        thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True, name=f"mirror-{source}")
        thread.start()
        threads.append(thread)
    try:
        yield topic, bootstrap
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


def _produce(bootstrap: dict[str, str], topic: str) -> int:
    """Partition 0: both clusters produce, interleaved (each side holds copies of the other's
    records). Partition 1: one record on us-east carrying ``IDC=idc1`` as a producer wrote it: under
    the configured names, a third cluster's header. Returns the records per cluster of partition 0."""
    for round_ in range(ROUNDS):
        for cluster in (ACTIVE, STANDBY):
            producer = Producer({"bootstrap.servers": bootstrap[cluster], "log_level": 3})
            for i in range(PER_ROUND):
                producer.produce(topic, value=f"{cluster}-{round_}-{i}".encode(), partition=SYNCED)
            producer.flush(30)
    producer = Producer({"bootstrap.servers": bootstrap[ACTIVE], "log_level": 3})
    producer.produce(topic, value=b"third", partition=THIRD, headers=[("IDC", b"idc1"), ("Offset", b"3")])
    producer.flush(30)
    per_partition = 2 * ROUNDS * PER_ROUND
    for cluster in (ACTIVE, STANDBY):
        wait_for(lambda: records_in(bootstrap[cluster], topic, SYNCED) >= per_partition, timeout=60,
                 what=f"mirrored {topic}[{SYNCED}] on {cluster}")
    wait_for(lambda: records_in(bootstrap[STANDBY], topic, THIRD) >= 1, timeout=60, what=f"mirrored {topic}[{THIRD}]")
    return per_partition


def _env(bootstrap: dict[str, str], chdb_dsn: str, **more: str) -> dict[str, str]:
    """The code location's environment for the two brokers under the configured names."""
    return {"OFFSET_PIPELINE_CLUSTERS": f"{ACTIVE},{STANDBY}", "OFFSET_PIPELINE_US_EAST_BOOTSTRAP": bootstrap[ACTIVE],
            "OFFSET_PIPELINE_DC_A_BOOTSTRAP": bootstrap[STANDBY], "OFFSET_PIPELINE_CLICKHOUSE_DSN": chdb_dsn, **more}


def _rows(client, sql: str, **parameters) -> list[tuple]:
    return client.query(sql, parameters=parameters).result_rows


def _metadata(result, node: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(node)[0].metadata.items()}


def test_a_sync_cycle_under_configured_names_commits_and_names_them_everywhere(kafka_pair, chdb_dsn, named_mirrors):
    topic, bootstrap = named_mirrors
    per_partition = _produce(bootstrap, topic)
    group = f"named {uuid.uuid4().hex[:8]} ü"
    resources = build_resources(read_settings(_env(bootstrap, chdb_dsn)))
    assert [resources[key].cluster_name for key in CLUSTER_RESOURCE_KEYS] == [ACTIVE, STANDBY]

    c = {SYNCED: per_partition - 7, THIRD: 1}
    member = Member(bootstrap[ACTIVE], group, topic)  # the group runs on us-east: its active cluster
    try:
        member.commit(topic, c)
        with decision_lines() as lines:
            result = dg.materialize(
                [offset_snapshot, offset_translations, offset_standby_commits, offset_sync_metrics],
                resources=resources,
                run_config={"ops": {
                    "offset_snapshot": {"config": {"group_include": f"^{re.escape(group)}$"}},
                    "offset_translations": {"config": {"topic_shapes": {topic: "two_way"}}},
                }},
            )
    finally:
        member.close()
    assert result.success
    client = resources["clickhouse"].get_client()
    run = {"s": result.run_id, "g": group}

    # the snapshot read both clusters under their configured names
    snapshot = _rows(client, "SELECT DISTINCT cluster FROM offset_snapshots WHERE snapshot_id = {s:String} "
                             "AND group_id = {g:String}", **run)
    assert sorted(r[0] for r in snapshot) == sorted([ACTIVE, STANDBY])

    # translations: us-east -> dc-a; partition 1's idc1 header is a third cluster's, never an anchor
    translations = {r[0]: r[1:] for r in _rows(
        client, "SELECT partition, active, standby, standby_offset, status, reason FROM offset_translations "
                "WHERE snapshot_id = {s:String} AND group_id = {g:String}", **run)}
    assert {p: t[:2] for p, t in translations.items()} == {SYNCED: (ACTIVE, STANDBY), THIRD: (ACTIVE, STANDBY)}
    t = translations[SYNCED][2]
    assert t is not None and t > 0, translations[SYNCED]
    assert translations[THIRD][2:4] == (None, "third_cluster_header")
    assert "'idc1'" in translations[THIRD][4] and ACTIVE in translations[THIRD][4], translations[THIRD][4]

    # commits: the standby offset is on dc-a, recorded under the names; nothing for partition 1
    commits = {r[0]: r[1:] for r in _rows(
        client, "SELECT partition, active, standby, decision, applied, new_offset, committed_after "
                "FROM offset_commits WHERE snapshot_id = {s:String} AND group_id = {g:String}", **run)}
    assert commits[SYNCED] == (ACTIVE, STANDBY, "commit", True, t, t)
    assert commits[THIRD][:2] == (ACTIVE, STANDBY) and not commits[THIRD][3], commits[THIRD]
    assert committed(bootstrap[STANDBY], group, topic) == {SYNCED: t}
    # NO-LOSS against the real data: every dc-a record below t is a us-east record below c
    active_offset = {v: o for o, v in read_values(bootstrap[ACTIVE], topic, SYNCED, per_partition).items()}
    standby_values = read_values(bootstrap[STANDBY], topic, SYNCED, per_partition)
    assert all(active_offset[v] < c[SYNCED] for o, v in standby_values.items() if o < t)

    # decision lines name the clusters as configured
    commit_lines = [parse_commit_log_line(line) for line in lines if line.startswith("offset-sync commit ")]
    mine = [line for line in commit_lines if line["group"] == group]
    assert sorted((line["partition"], line["standby"], line["decision"], line["translation_status"]) for line in mine) \
        == [(SYNCED, STANDBY, "commit", translations[SYNCED][3]), (THIRD, STANDBY, commits[THIRD][2], "third_cluster_header")]
    assert any(f'active="{ACTIVE}" standby="{STANDBY}"' in line for line in lines
               if line.startswith("offset-sync decision ") and topic in line)

    # metadata and checks: per-cluster entries under the names, nothing unavailable
    snap = _metadata(result, "offset_snapshot")
    assert (snap[f"groups_{ACTIVE}"], snap[f"groups_{STANDBY}"], snap["unavailable_clusters"]) == (1, 0, "none")
    assert not any(key.endswith(("_idc1", "_idc2")) for key in snap)
    done = _metadata(result, "offset_standby_commits")
    assert (done["decision_commit"], done["partitions_written"], done["unreachable_clusters"]) == (1, 1, "none")
    assert _metadata(result, "offset_translations")["status_third_cluster_header"] == 1
    readiness = _metadata(result, "offset_sync_metrics")["readiness"]  # the direction, under the names
    assert ACTIVE in readiness and STANDBY in readiness and "idc2" not in readiness, readiness
    assert checks(result)["clusters_readable"].passed and checks(result)["no_loss"].passed

    # monitoring rows and Grafana: the cluster variable offers the data's names, every panel runs on them
    metrics = _rows(client, "SELECT partition, active, standby, status FROM offset_sync_metrics "
                            "WHERE group_id = {g:String} ORDER BY partition", g=group)
    assert [r[1:3] for r in metrics] == [(ACTIVE, STANDBY)] * 2 and metrics[THIRD][3] == "third_cluster_header"
    (name, _, variable_sql), = [v for v in dashboards.VARIABLES if v[0] == "cluster"]
    now = datetime.now(timezone.utc)
    offered = [r[0] for r in client.query(expand(variable_sql, time_from=now, time_to=now, interval_s=60,
                                                 variables={})).result_rows]
    assert offered == [ACTIVE]  # the active clusters that have rows: us-east only
    panels = check_every_panel(client, group, topic, clusters=(ACTIVE, STANDBY))
    status = panels["Status per group and topic (newest cycle)"]
    assert {(row[2], row[3]) for row in status} == {(ACTIVE, STANDBY)}


def test_a_continuous_run_under_configured_names_syncs_a_one_way_topic_named_by_its_producer(
        kafka_pair, chdb_dsn, named_mirrors):
    """The default mode: ``offset_continuous_sync`` with the shape ``one_way:us-east`` from the
    environment (the timestamp search runs from the producing side only: the name must match), its
    checkpoints written under the names."""
    topic, bootstrap = named_mirrors
    records = 30
    producer = Producer({"bootstrap.servers": bootstrap[ACTIVE], "log_level": 3})
    for p in (0, 1):
        for i in range(records):
            producer.produce(topic, value=f"one-way-{p}-{i}".encode(), partition=p)
    producer.flush(30)
    for p in (0, 1):
        wait_for(lambda: records_in(bootstrap[STANDBY], topic, p) >= records, timeout=60, what=f"mirrored {topic}[{p}]")
    env = _env(bootstrap, chdb_dsn, OFFSET_PIPELINE_TOPIC_SHAPES=f"{topic}=one_way:{ACTIVE}")
    resources = build_resources(read_settings(env))
    group = f"named-continuous {uuid.uuid4().hex[:8]}"
    c = {0: 20, 1: 11}
    member = Member(bootstrap[ACTIVE], group, topic)
    try:
        member.commit(topic, c)
        result = dg.materialize([offset_continuous_sync], resources=resources, run_config={"ops": {
            "offset_continuous_sync": {"config": {
                "run_for_s": 12, "checkpoint_s": 4,
                "snapshot": {"group_include": f"^{re.escape(group)}$"},
                "translation": {"topic_shapes": topic_shapes(env)},
            }}}})
    finally:
        member.close()
    assert result.success
    # one-way, mirrored in order: the copy of the record at c is at c on dc-a, and that is the commit
    assert committed(bootstrap[STANDBY], group, topic) == c
    for p in (0, 1):
        values = read_values(bootstrap[STANDBY], topic, p, records)
        assert all(values[o] == f"one-way-{p}-{o}".encode() for o in range(c[p]))  # NO-LOSS on the records

    client = resources["clickhouse"].get_client()
    translations = _rows(client, "SELECT DISTINCT active, standby, strategy FROM offset_translations "
                                 "WHERE group_id = {g:String}", g=group)
    assert {(a, s) for a, s, _ in translations} == {(ACTIVE, STANDBY)}
    assert "timestamp_search" in {strategy for *_, strategy in translations}  # the shape's producer matched
    snapshot = _rows(client, "SELECT DISTINCT cluster FROM offset_snapshots WHERE group_id = {g:String}", g=group)
    assert sorted(r[0] for r in snapshot) == sorted([ACTIVE, STANDBY])
    commits = _rows(client, "SELECT DISTINCT active, standby FROM offset_commits WHERE group_id = {g:String} "
                            "AND applied", g=group)
    assert commits == [(ACTIVE, STANDBY)]
    evaluations = checks(result)
    assert evaluations["clusters_readable"].passed and evaluations["no_loss"].passed
    assert evaluations["checkpoints_written"].passed
    meta = _metadata(result, "offset_continuous_sync")
    # At least one checkpoint under the configured names (a loaded machine's first cycle can take most
    # of the 12 s; the checkpoints' period is tests/continuous/test_continuous_run.py's)
    assert meta["checkpoints"] >= 1 and not any("idc" in key for key in meta)
    panels = check_every_panel(client, group, topic, with_rows={"Switch readiness per group (newest)"},
                               clusters=(ACTIVE, STANDBY))
    [readiness_row] = panels["Switch readiness per group (newest)"]
    assert readiness_row[:3] == (group, ACTIVE, STANDBY)
