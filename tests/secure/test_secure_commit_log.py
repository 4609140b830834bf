"""Following the commit logs on secure clusters (docs/operating/security.md): a continuous run as the
``sync`` principal with the sync's rights only polls (every cycle lists the groups), names why
(``commit_log_not_authorized``) in its metadata and check, and still commits; with ``Read`` on
``__consumer_offsets`` added (devstack/sync_acls.py ``commit_log_rights``) the same run follows both logs."""

from __future__ import annotations

import uuid

import dagster as dg
import pytest

from devstack.sync_acls import commit_log_rights, grant
from devstack.secure_cluster import SYNC_USER
from offset_pipeline.assets.continuous import offset_continuous_sync
from offset_pipeline.definitions import build_resources
from offset_pipeline.settings import read_settings
from tests.helpers.secure_sync import (
    CLUSTERS,
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

pytestmark = pytest.mark.kafka


def continuous_run(resources: dict, group: str, topic: str) -> dict:
    result = dg.materialize([offset_continuous_sync], resources=resources, instance=dg.DagsterInstance.ephemeral(),
                            run_config={"ops": {"offset_continuous_sync": {"config": {
                                "run_for_s": 12, "checkpoint_s": 5,
                                "snapshot": {"group_include": f"^{group}$", "kafka_timeout_s": 10.0},
                                "translation": {"topic_shapes": {topic: "one_way:idc1"}},
                            }}}})
    assert result.success
    [materialization] = result.asset_materializations_for_node("offset_continuous_sync")
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    return {"meta": {k: v.value for k, v in materialization.metadata.items()}, "check": checks["commit_log_followed"]}


def test_without_read_on_the_commit_log_the_run_polls_and_says_why_and_with_it_follows(secure_pair, chdb_dsn,
                                                                                       monkeypatch):
    topic, group = f"{TOPICS}{uuid.uuid4().hex[:8]}", f"{GROUPS}{uuid.uuid4().hex[:8]}"
    mirrored_one_way(secure_pair, topic)
    grant_sync_rights(secure_pair)
    sync_environment(secure_pair, monkeypatch)
    monkeypatch.setenv("OFFSET_PIPELINE_CLICKHOUSE_DSN", chdb_dsn)
    resources = build_resources(read_settings())
    with live_member(secure_pair.admin_config("idc1"), group, topic, COMMITTED):
        polled = continuous_run(resources, group, topic)
        for name in CLUSTERS:
            grant(secure_pair.admin_config(name), f"User:{SYNC_USER}", commit_log_rights())
        followed = continuous_run(resources, group, topic)

    meta, check = polled["meta"], polled["check"]
    assert (meta["commit_log_idc1"], meta["commit_log_idc2"]) == ("commit_log_not_authorized",) * 2, meta
    assert "authorization" in meta["commit_log_reason_idc1"].lower(), meta
    # every cycle after the first listed the groups (a loaded machine may fit only the first in the run)
    assert meta.get("reads_listed_commit_log_not_authorized", 0) == meta["cycles"] - 1, meta
    assert "reads_followed" not in meta, meta
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "idc1 polled (commit_log_not_authorized)" in check.description
    # polling, the sync committed all the same
    assert committed(secure_pair.admin_config("idc2"), group, topic) == {p: COMMITTED for p in range(PARTITIONS)}

    meta, check = followed["meta"], followed["check"]
    assert (meta["commit_log_idc1"], meta["commit_log_idc2"]) == ("following", "following"), meta
    assert check.passed, check.description
