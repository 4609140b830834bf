"""A missing right on one topic or group (docs/operating/security.md): that group's rows get the named status
``not_authorized``, the reason names the cluster, the topic or group and the ``kafka-acls.sh`` right,
and every other group is synced in the same cycle. One interval cycle on the secure pair, run as the
``sync`` principal with the rights of devstack/sync_acls.py, less one right per group, taken away by
a DENY ACL (a DENY wins over the granted prefixes):

* ``topic``: no Read on its topic on idc1 (the active): the records cannot be read to translate;
* ``commit``: no Read on the group on idc2 (the standby): the commit is refused;
* ``hidden``: no Describe on the group on idc1: the listing hides it and its offsets cannot be read
  (the group is known from idc2, where an earlier sync left its offsets);
* ``ok``: nothing taken: committed.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack

import dagster as dg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from devstack.secure_cluster import SYNC_USER
from offset_pipeline.definitions import build_resources
from offset_pipeline.settings import read_settings
from tests.helpers.secure_sync import (
    COMMITTED,
    GROUPS,
    PARTITIONS,
    TOPICS,
    committed,
    grant_sync_rights,
    live_member,
    mirrored_one_way,
    sync_environment,
)
from tests.helpers.sync_cycles import SYNC_ASSETS

pytestmark = pytest.mark.kafka

SUFFIX = uuid.uuid4().hex[:8]
TOPIC_OK, TOPIC_DENIED = f"{TOPICS}ok-{SUFFIX}", f"{TOPICS}denied-{SUFFIX}"
GROUP = {case: f"{GROUPS}{case}-{SUFFIX}" for case in ("ok", "topic", "commit", "hidden")}
HIDDEN_STANDBY_OFFSET = 5  # where an earlier sync left the hidden group on idc2


def deny(pair, cluster: str, resource: ResourceType, name: str, operation: AclOperation) -> None:
    binding = AclBinding(resource, name, ResourcePatternType.LITERAL, f"User:{SYNC_USER}", "*", operation,
                         AclPermissionType.DENY)
    admin = pair.admin(cluster)  # held until the answer: a client collected early fails its futures
    for future in admin.create_acls([binding], request_timeout=30).values():
        future.result(timeout=30)


def commit_as_admin(pair, cluster: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({**pair.admin_config(cluster), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, offset) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()


class Cycle:
    def __init__(self, resources: dict, result: dg.ExecuteInProcessResult):
        self.resources, self.result = resources, result
        client = resources["clickhouse"].get_client()
        parameters = {"s": result.run_id}
        self.translations = {(g, int(p)): (status, reason) for g, p, status, reason in client.query(
            "SELECT group_id, partition, status, reason FROM offset_translations WHERE snapshot_id = {s:String}",
            parameters=parameters).result_rows}
        self.commits = {(g, int(p)): (decision, bool(applied), reason) for g, p, decision, applied, reason in client.query(
            "SELECT group_id, partition, decision, applied, reason FROM offset_commits WHERE snapshot_id = {s:String}",
            parameters=parameters).result_rows}

    def of(self, table: dict, case: str) -> dict[int, tuple]:
        return {p: row for (g, p), row in table.items() if g == GROUP[case]}


@pytest.fixture(scope="module")
def cycle(secure_pair, tmp_path_factory) -> Cycle:
    pair = secure_pair
    monkeypatch = pytest.MonkeyPatch()
    try:
        for topic in (TOPIC_OK, TOPIC_DENIED):
            mirrored_one_way(pair, topic)
        grant_sync_rights(pair)
        deny(pair, "idc1", ResourceType.TOPIC, TOPIC_DENIED, AclOperation.READ)
        deny(pair, "idc2", ResourceType.GROUP, GROUP["commit"], AclOperation.READ)
        deny(pair, "idc1", ResourceType.GROUP, GROUP["hidden"], AclOperation.DESCRIBE)
        commit_as_admin(pair, "idc1", GROUP["hidden"], TOPIC_OK, COMMITTED)
        commit_as_admin(pair, "idc2", GROUP["hidden"], TOPIC_OK, HIDDEN_STANDBY_OFFSET)

        sync_environment(pair, monkeypatch)
        monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", f"chdb://{tmp_path_factory.mktemp('unauthorized')}/ch")
        # As in test_secure_sync: rights, not speed (local Spark's start on a loaded machine).
        monkeypatch.setenv("OFFSET_PIPELINE_TRANSLATION_BUDGET_S", "180")
        monkeypatch.setenv("OFFSET_PIPELINE_SPARK_TIMEOUT_S", "240")
        resources = build_resources(read_settings())
        timeout = {"kafka_timeout_s": 10.0}
        with ExitStack() as members:
            for case, topic in (("ok", TOPIC_OK), ("topic", TOPIC_DENIED), ("commit", TOPIC_OK)):
                members.enter_context(live_member(pair.admin_config("idc1"), GROUP[case], topic, COMMITTED))
            result = dg.materialize(SYNC_ASSETS, resources=resources, instance=dg.DagsterInstance.ephemeral(),
                                    run_config={"ops": {
                "offset_snapshot": {"config": {"group_include": "^(" + "|".join(GROUP.values()) + ")$", **timeout}},
                "offset_translations": {"config": {"topic_shapes": {TOPIC_OK: "one_way:idc1",
                                                                    TOPIC_DENIED: "one_way:idc1"}, **timeout}},
                "offset_standby_commits": {"config": timeout},
            }})
        yield Cycle(resources, result)
    finally:
        monkeypatch.undo()
        from offset_pipeline.resources.clickhouse import close_embedded_clients

        close_embedded_clients()


def test_the_cycle_succeeds_and_the_group_with_all_its_rights_is_committed(cycle, secure_pair):
    assert cycle.result.success
    assert cycle.of(cycle.commits, "ok") == {p: ("commit", True, cycle.commits[(GROUP["ok"], p)][2])
                                            for p in range(PARTITIONS)}
    # read back as admin, independently of the sync: the copy of record 10 on idc2 (one-way, exact)
    assert committed(secure_pair.admin_config("idc2"), GROUP["ok"], TOPIC_OK) == {p: COMMITTED for p in range(PARTITIONS)}


def test_no_read_on_a_topic_gives_its_groups_not_authorized_naming_topic_cluster_and_right(cycle):
    rows = cycle.of(cycle.translations, "topic")
    assert {p: status for p, (status, _) in rows.items()} == {p: "not_authorized" for p in range(PARTITIONS)}
    for _, reason in rows.values():
        assert "not authorized on idc1" in reason and f"may not read topic '{TOPIC_DENIED}'" in reason
        assert f"--allow-principal User:{SYNC_USER} --operation Read --operation DescribeConfigs --topic " \
               f"'{TOPIC_DENIED}'" in reason
    assert {decision for decision, applied, _ in cycle.of(cycle.commits, "topic").values()} == {"skipped_untranslated"}


def test_a_commit_refused_on_the_standby_is_not_authorized_and_nothing_is_written(cycle, secure_pair):
    assert {p: status for p, (status, _) in cycle.of(cycle.translations, "commit").items()} == \
        {p: "timestamp_exact" for p in range(PARTITIONS)}  # translated: only the write is refused
    rows = cycle.of(cycle.commits, "commit")
    assert {p: (decision, applied) for p, (decision, applied, _) in rows.items()} == \
        {p: ("not_authorized", False) for p in range(PARTITIONS)}
    for _, _, reason in rows.values():
        assert "not authorized on idc2 while committing" in reason
        assert f"--operation Read --group '{GROUP['commit']}'" in reason
    assert committed(secure_pair.admin_config("idc2"), GROUP["commit"], TOPIC_OK) == {}


def test_a_group_hidden_on_the_active_is_not_authorized_not_absent(cycle, secure_pair):
    rows = cycle.of(cycle.translations, "hidden")
    assert {p: status for p, (status, _) in rows.items()} == {p: "not_authorized" for p in range(PARTITIONS)}
    for _, reason in rows.values():
        assert "not authorized on idc1" in reason and f"may not read group '{GROUP['hidden']}'" in reason
    checks = {c.check_name: c for c in cycle.result.get_asset_check_evaluations()}
    assert not checks["clusters_readable"].passed  # its facts on idc1 are missing, and said so
    assert committed(secure_pair.admin_config("idc2"), GROUP["hidden"], TOPIC_OK) == \
        {p: HIDDEN_STANDBY_OFFSET for p in range(PARTITIONS)}  # left where it was
