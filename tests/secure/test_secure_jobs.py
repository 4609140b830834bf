"""The jobs beside the interval cycle on secure clusters (docs/operating/security.md): the stale fast-forward, the
failover audit and the continuous mode, each run as the ``sync`` principal holding only the rights
devstack/sync_acls.py names for it, its settings from the environment (``OFFSET_PIPELINE_<CLUSTER>_...``,
the password through dg.EnvVar). Outcomes are read back as ``admin``; nothing here mocks Kafka.

The snapshots the sensor and the audit read are written by a short continuous run (the default mode,
which needs the sync's rights); the rights are then narrowed to the job's own before it runs."""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from devstack.mirror import DataMirror, MirrorConfig
from devstack.secure_cluster import SYNC_USER
from devstack.sync_acls import (
    OWN_GROUPS,
    Right,
    audit_rights,
    fast_forward_rights,
    grant,
    kafka_acls_commands,
    revoke_all,
    sync_rights,
)
from offset_pipeline.assets import offset_failover_audit, offset_fast_forwards
from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.audit.spark_audit import audit_partition_rows
from offset_pipeline.definitions import build_resources
from offset_pipeline.kafka_io.mirror_positions import read_mirror_positions
from offset_pipeline.sensors.stale_partitions import stale_partition_sensor
from offset_pipeline.settings import read_settings
from tests.conftest import wait_for
from tests.helpers.run_logs import request_stop
from tests.helpers.secure_sync import (
    CLUSTERS,
    GROUPS,
    PARTITIONS,
    RECORDS,
    TOPICS,
    committed,
    log_end,
    mirrored_one_way,
    sync_environment,
)

pytestmark = pytest.mark.kafka

PRINCIPAL = f"User:{SYNC_USER}"
SECURITY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating" / "security.md"
STALE_WINDOW_S = 4


def position_group(source: str, target: str) -> str:
    """The devstack mirror's position group (on ``target``), the product's default for that direction."""
    return f"{OWN_GROUPS}mirror.{source}-to-{target}"


def only_rights(pair, rights_for) -> None:
    """``sync`` holds exactly ``rights_for(cluster, mirror position group kept there)`` on each cluster."""
    for name, other in zip(CLUSTERS, reversed(CLUSTERS)):
        revoke_all(pair.admin_config(name), PRINCIPAL)
        grant(pair.admin_config(name), PRINCIPAL, rights_for(name, position_group(other, name)))
    # This process's pooled readers, made under the previous rights, would not ask again.
    from offset_pipeline.kafka_io.partition_records import CONSUMERS

    CONSUMERS.close()


def environment(pair, monkeypatch, chdb_dsn: str, **settings: str) -> dict:
    """The product's resources from the environment only, as an operator would export it."""
    sync_environment(pair, monkeypatch)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    for key, value in settings.items():
        monkeypatch.setenv(f"OFFSET_PIPELINE_{key}", value)
    return build_resources(read_settings())


class LiveMember:
    """A member of ``group`` on its active cluster idc1 (logged in as admin: the application),
    polling in a thread as a consumer does; :meth:`commit` commits an offset on every partition."""

    def __init__(self, config: dict, group: str, topic: str):
        self.topic = topic
        self.consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "latest"})
        self.lock, self.stop = threading.Lock(), threading.Event()
        assigned = threading.Event()
        self.consumer.subscribe([topic], on_assign=lambda c, parts: assigned.set())
        wait_for(lambda: self.consumer.poll(0.2) is None and assigned.is_set(), timeout=30, what=f"{group} assigned")
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                self.consumer.poll(0.1)

    def commit(self, offset: int) -> None:
        deadline = time.monotonic() + 30
        while True:  # retried while the group coordinator of a fresh cluster still loads
            try:
                with self.lock:
                    self.consumer.commit(offsets=[TopicPartition(self.topic, p, offset) for p in range(PARTITIONS)],
                                         asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.consumer.close()


@contextmanager
def live_member(pair, group: str, topic: str, offset: int):
    member = LiveMember(pair.admin_config("idc1"), group, topic)
    try:
        member.commit(offset)
        yield member
    finally:
        member.close()


def continuous_run(resources: dict, group_include: str,
                   instance: dg.DagsterInstance | None = None) -> dg.ExecuteInProcessResult:
    """One continuous run as long as ``OFFSET_PIPELINE_CONTINUOUS_RUN_S`` says, or until a test that
    holds ``instance`` asks it to stop."""
    return dg.materialize([offset_continuous_sync], resources=resources,
                          instance=instance or dg.DagsterInstance.ephemeral(),
                          run_config={"ops": {"offset_continuous_sync": {"config": {
                              "snapshot": {"group_include": group_include}}}}}, raise_on_error=False)


def metadata(result: dg.ExecuteInProcessResult, node: str) -> dict:
    [materialization] = result.asset_materializations_for_node(node)
    return {k: v.value for k, v in materialization.metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def mirrored_back(pair, topic: str) -> None:
    """The idc2 -> idc1 mirror (as admin) runs until its position on idc1 is at idc2's log end (or
    the transaction marker before it) on every partition, then stops: the reverse mirror has
    copied everything, which the fast-forward requires."""
    stop = threading.Event()
    mirror = DataMirror(MirrorConfig(pair.admin_endpoint("idc2"), pair.admin_endpoint("idc1"),
                                     topic_pattern=rf"^{topic.replace('.', '[.]')}$", metadata_refresh_s=0.5))
    thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True)
    thread.start()
    partitions = [(topic, p) for p in range(PARTITIONS)]

    def caught_up() -> bool:
        positions = read_mirror_positions(pair.admin_config("idc1"), position_group("idc2", "idc1"), partitions,
                                          timeout_s=10)
        return all(positions.get(tp, -1) >= log_end(pair.admin_config("idc2"), topic, tp[1]) - 1 for tp in partitions)

    try:
        wait_for(caught_up, timeout=60, what=f"the idc2->idc1 mirror at idc2's log end of {topic}")
    finally:
        stop.set()
        thread.join(timeout=30)


def test_a_stale_partition_is_fast_forwarded_as_the_principal_with_the_fast_forward_rights(
        secure_pair, chdb_dsn, monkeypatch):
    """Every record produced on idc1 (two-way: no anchor, the sync cannot translate it), the group
    at its log end, both mirrors caught up and stopped: the stale sensor requests a fast-forward and
    the job commits the standby log end, both as ``sync`` with only fast_forward_rights."""
    topic, group = f"{TOPICS}{uuid.uuid4().hex[:8]}", f"{GROUPS}{uuid.uuid4().hex[:8]}"
    only_rights(secure_pair, lambda cluster, positions: sync_rights(TOPICS, GROUPS, positions))
    mirrored_one_way(secure_pair, topic)
    mirrored_back(secure_pair, topic)
    resources = environment(secure_pair, monkeypatch, chdb_dsn, TOPIC_SHAPES=f"{topic}=two_way",
                            CONTINUOUS_RUN_S="2", CHECKPOINT_S="1", STALE_WINDOW_S=str(STALE_WINDOW_S))
    standby_ends = {p: log_end(secure_pair.admin_config("idc2"), topic, p) for p in range(PARTITIONS)}
    instance = dg.DagsterInstance.ephemeral()
    with live_member(secure_pair, group, topic, RECORDS):
        snapshots = continuous_run(resources, f"^{group}$")  # the history the sensor reads
        assert snapshots.success and metadata(snapshots, "offset_continuous_sync").get("status_no_anchor")
        assert committed(secure_pair.admin_config("idc2"), group, topic) == {}  # nothing the sync could do

        only_rights(secure_pair, lambda cluster, positions: fast_forward_rights(TOPICS, GROUPS, positions))
        skipped = []

        def requested():
            with dg.build_sensor_context(instance=instance, resources=resources) as context:
                tick = stale_partition_sensor(context)
            if isinstance(tick, dg.SensorResult) and tick.run_requests:
                return tick.run_requests
            skipped.append(tick.skip_reason.skip_message if isinstance(tick, dg.SensorResult) else tick.skip_message)
            time.sleep(0.5)
            return None

        [request] = wait_for(requested, timeout=STALE_WINDOW_S + 30, what=f"a fast-forward request ({skipped[-1:]})")
        config = request.run_config["ops"]["offset_fast_forwards"]["config"]
        assert (config["group_id"], config["active"], config["standby"]) == (group, "idc1", "idc2")
        run = dg.materialize([offset_fast_forwards], resources=resources, instance=instance,
                             run_config=request.run_config)

    assert run.success and checks(run) == {"no_loss": True}
    rows = resources["clickhouse"].get_client().query(
        "SELECT partition, outcome, applied, new_offset FROM offset_fast_forwards WHERE run_id = {r:String}",
        parameters={"r": run.run_id}).result_rows
    assert sorted(rows) == [(p, "fast_forwarded", True, standby_ends[p]) for p in range(PARTITIONS)]
    # the standby log end, read back independently as admin
    assert committed(secure_pair.admin_config("idc2"), group, topic) == standby_ends


def test_the_audit_as_the_principal_with_the_audit_rights_counts_what_a_failover_would_lose(
        secure_pair, chdb_dsn, monkeypatch):
    """A one-way topic; group ``good`` synced exactly, group ``bad`` with its standby offset set 5
    records too high by hand (the sync never moves it back). The day's audit, as ``sync`` with only
    audit_rights, finds ``good`` losing nothing and ``bad`` losing exactly those 5 records."""
    c, too_high = 10, 15
    topic = f"{TOPICS}{uuid.uuid4().hex[:8]}"
    good, bad = f"{GROUPS}good-{uuid.uuid4().hex[:6]}", f"{GROUPS}bad-{uuid.uuid4().hex[:6]}"
    only_rights(secure_pair, lambda cluster, positions: sync_rights(TOPICS, GROUPS, positions))
    mirrored_one_way(secure_pair, topic)
    by_hand = Consumer({**secure_pair.admin_config("idc2"), "group.id": bad, "enable.auto.commit": False})
    try:
        by_hand.commit(offsets=[TopicPartition(topic, p, too_high) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        by_hand.close()
    resources = environment(secure_pair, monkeypatch, chdb_dsn, TOPIC_SHAPES=f"{topic}=one_way:idc1",
                            MIRROR_EXACTLY_ONCE="1", CONTINUOUS_RUN_S="1", CHECKPOINT_S="1")
    with live_member(secure_pair, good, topic, c), live_member(secure_pair, bad, topic, c):
        # The moments the audit reads: two runs, as the sensor starts one after the other. The
        # first one's first checkpoint shows good before its commit, the second one's after it
        # (a run's first cycle may outlast a short run: one checkpoint each, whatever the load).
        for _ in range(2):
            assert continuous_run(resources, f"^({good}|{bad})$").success
    assert committed(secure_pair.admin_config("idc2"), good, topic) == {p: c for p in range(PARTITIONS)}
    assert committed(secure_pair.admin_config("idc2"), bad, topic) == {p: too_high for p in range(PARTITIONS)}

    only_rights(secure_pair, lambda cluster, positions: audit_rights(TOPICS))
    audit = dg.materialize([offset_failover_audit], resources=resources, instance=dg.DagsterInstance.ephemeral(),
                           partition_key=datetime.now(timezone.utc).date().isoformat(), raise_on_error=False)
    assert audit.success
    assert checks(audit) == {"no_loss_in_window": False}  # bad's moments lose records
    rows = resources["clickhouse"].get_client().query(
        "SELECT group_id, partition, standby_committed, status, lost, lost_offsets, duplicated "
        "FROM offset_failover_audits ORDER BY snapshot_time").result_rows
    by_group = {g: [r[1:] for r in rows if r[0] == g] for g in (good, bad)}
    # one-way, exact: from the first snapshot after the sync, no loss and no duplicate
    synced = [r for r in by_group[good] if r[1] is not None]
    assert synced and all(r[1:] == (c, "audited", 0, [], 0) for r in synced), by_group[good]
    assert all(r[2] == "no_standby_offset" for r in by_group[good] if r[1] is None)
    # the copies of idc1's records c..14 (one-way, exact: idc2 offsets c..14) lie below bad's offset
    assert by_group[bad] and all(r[1:] == (too_high, "audited", too_high - c, list(range(c, too_high)), 0)
                                 for r in by_group[bad]), by_group[bad]


def test_an_audit_refused_a_read_on_one_topic_says_so_for_its_moments(secure_pair):
    """A topic ``sync`` may describe but not read: its log ranges answer, its records are refused.
    That topic-partition's moments are ``cluster_unavailable`` with the refusal, not the audit's
    whole Spark job failed (audit_partition_rows runs in a Spark task; called here directly)."""
    topic = f"describe-only.{uuid.uuid4().hex[:8]}"
    mirrored_one_way(secure_pair, topic)
    only_rights(secure_pair, lambda cluster, positions: [
        Right("topic", topic, False, ("DESCRIBE",)), Right("group", OWN_GROUPS, True, ("DESCRIBE",))])
    confs = {name: {**secure_pair.access[name].client_config(SYNC_USER), "log_level": 3} for name in CLUSTERS}
    moment = {"window_date": "2026-11-26", "snapshot_id": "s", "snapshot_time": 1, "group_id": "g", "topic": topic,
              "partition": 0, "active": "idc1", "standby": "idc2", "committed": 10, "standby_committed": 10,
              "active_end_at": RECORDS, "standby_end_at": RECORDS + 1, "strategy": "timestamp", "shape": "one_way_from_active"}
    unsynced = {**moment, "snapshot_id": "s0", "snapshot_time": 0, "standby_committed": None}
    rows = audit_partition_rows([moment, unsynced], confs, exactly_once_mirror=True, timeout_s=10)
    by_snapshot = {r["snapshot_id"]: r for r in rows}
    assert by_snapshot["s"]["status"] == "cluster_unavailable"
    assert "TOPIC_AUTHORIZATION_FAILED" in by_snapshot["s"]["reason"], by_snapshot["s"]["reason"]
    assert by_snapshot["s0"]["status"] == "no_standby_offset"  # needs no record: still answered


def test_the_continuous_mode_as_the_sync_principal_commits_and_writes_checkpoints(secure_pair, chdb_dsn, monkeypatch):
    """One continuous run on the secure pair: the group's commit before the run and one during it
    reach the standby (read back as admin), and the checkpoints are in ClickHouse. The run's length
    is a bound, not the test's clock: once both commits have reached the standby the test ends the
    run through its instance, so a slow first cycle on a loaded machine cannot end it too early."""
    topic, group = f"{TOPICS}{uuid.uuid4().hex[:8]}", f"{GROUPS}{uuid.uuid4().hex[:8]}"
    only_rights(secure_pair, lambda cluster, positions: sync_rights(TOPICS, GROUPS, positions))
    mirrored_one_way(secure_pair, topic)
    resources = environment(secure_pair, monkeypatch, chdb_dsn, TOPIC_SHAPES=f"{topic}=one_way:idc1",
                            CONTINUOUS_RUN_S="180", CHECKPOINT_S="2")
    instance = dg.DagsterInstance.ephemeral()
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(
        result=continuous_run(resources, f"^{group}$", instance)))
    standby = secure_pair.admin_config("idc2")
    with live_member(secure_pair, group, topic, 10) as member:
        runner.start()
        try:
            # the first cycle starts the run's child processes and reads everything: on a loaded
            # machine it has taken more than 30 s
            wait_for(lambda: committed(standby, group, topic) == {p: 10 for p in range(PARTITIONS)}, timeout=150,
                     what="the first sync")
            member.commit(15)
            assert runner.is_alive(), "the run ended before the group's second commit"
            # one-way, exact: the copy of record 15 on idc2 is at 15
            wait_for(lambda: committed(standby, group, topic) == {p: 15 for p in range(PARTITIONS)}, timeout=60,
                     what="the second commit synced within the same run")
            request_stop(instance)
        finally:
            runner.join(timeout=240)
    assert not runner.is_alive()
    result = outcome["result"]
    assert result.success
    meta = metadata(result, "offset_continuous_sync")
    assert meta["stopped_by"] == "stop requested (run canceling)", meta  # by the test, not by the bound
    assert meta["checkpoints"] >= 2 and meta["commit_errors"] == 0, meta
    # the sync's rights alone, without Read on __consumer_offsets: the run polled, and says so
    assert {k: v for k, v in checks(result).items() if k != "switch_readiness"} == {
        "no_loss": True, "sync_freshness": True, "clusters_readable": True, "checkpoints_written": True,
        "commit_log_followed": False}
    assert meta["commit_log_idc1"] == meta["commit_log_idc2"] == "commit_log_not_authorized"
    client = resources["clickhouse"].get_client()
    written = client.query(
        "SELECT partition, max(new_offset) FROM offset_commits WHERE group_id = {g:String} AND applied "
        "GROUP BY partition ORDER BY partition", parameters={"g": group}).result_rows
    assert written == [(p, 15) for p in range(PARTITIONS)]
    snapshots = client.query("SELECT count(DISTINCT snapshot_id) FROM offset_snapshots").result_rows[0][0]
    assert snapshots >= 2


def test_the_security_page_gives_the_fast_forward_and_audit_rights_as_kafka_acls_commands():
    """The commands of "The fast-forward's and the audit's rights" are the rights these tests grant."""
    section = SECURITY_PAGE.read_text().split("### The fast-forward's and the audit's rights", 1)[1].split("\n### ", 1)[0]
    listed = [line for line in section.splitlines() if line.startswith("kafka-acls.sh")]
    assert listed == (kafka_acls_commands(PRINCIPAL, fast_forward_rights("orders.", "orders-"))
                      + kafka_acls_commands(PRINCIPAL, audit_rights("orders.")))
