"""``offset_mirror_proofs`` on real brokers: the verdicts as metadata, rows in ClickHouse (the newest
per topic and direction), and a check that warns while a direction has no proof."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest
from confluent_kafka import Producer

from offset_pipeline.assets.mirror_check import EVERY_DIRECTION_PROVEN_CHECK, offset_mirror_proofs
from offset_pipeline.definitions import build_resources
from offset_pipeline.settings import read_settings
from devstack.grafana_sql import expand
from offset_pipeline.storage import dashboards, mirror_checks
from tests.conftest import wait_for

pytestmark = pytest.mark.kafka


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(count):
        producer.produce(topic, value=f"{i}".encode())
    assert producer.flush(30) == 0


def materialize(resources, topics):
    return dg.materialize([offset_mirror_proofs], resources=resources, raise_on_error=True,
                          run_config={"ops": {"offset_mirror_proofs": {"config": {"topics": topics}}}})


def test_the_mirror_proofs_asset_records_and_checks_every_direction(kafka_pair, session_mirrors, topic_name, chdb_dsn):
    mirrored = kafka_pair.create_topic(topic_name)
    produce(kafka_pair.bootstrap("idc1"), mirrored, 5)
    copies = lambda: kafka_pair.admin("idc2").list_topics(mirrored, timeout=10).topics[mirrored].partitions  # noqa: E731
    wait_for(copies, timeout=60, what="the topic on idc2")
    unmirrored = kafka_pair.create_topic(f"plain.{uuid.uuid4().hex[:8]}")
    produce(kafka_pair.bootstrap("idc2"), unmirrored, 3)
    resources = build_resources(read_settings({
        "OFFSET_PIPELINE_IDC1_BOOTSTRAP": kafka_pair.bootstrap("idc1"),
        "OFFSET_PIPELINE_IDC2_BOOTSTRAP": kafka_pair.bootstrap("idc2"), "OFFSET_PIPELINE_CLICKHOUSE_DSN": chdb_dsn,
    }))

    def proven_mirrored():
        result = materialize(resources, [mirrored])
        meta = {k: v.value for k, v in result.asset_materializations_for_node("offset_mirror_proofs")[0].metadata.items()}
        return (result, meta) if meta["proof_origin_headers"] == 2 else None

    result, meta = wait_for(proven_mirrored, timeout=90, what="both directions of the mirrored topic proven")
    assert (meta["directions"], meta["proof_none"]) == (2, 0)
    [check] = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed) == (EVERY_DIRECTION_PROVEN_CHECK, True)

    result = materialize(resources, [mirrored, unmirrored])
    meta = {k: v.value for k, v in result.asset_materializations_for_node("offset_mirror_proofs")[0].metadata.items()}
    assert (meta["proof_origin_headers"], meta["proof_none"]) == (2, 2)
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.severity is dg.AssetCheckSeverity.WARN
    assert f"'{unmirrored}'" in check.metadata["first"].value
    table = meta["verdicts"].records
    assert {(r.data["topic"], r.data["direction"], r.data["proof"]) for r in table} == {
        (mirrored, "idc1->idc2", "origin_headers"), (mirrored, "idc2->idc1", "origin_headers"),
        (unmirrored, "idc1->idc2", "none"), (unmirrored, "idc2->idc1", "none"),
    }

    newest = mirror_checks.newest(resources["clickhouse"].get_client(), [mirrored, unmirrored])
    assert {(r.topic, r.active, r.standby, r.proof, r.check_id) for r in newest} == {
        (mirrored, "idc1", "idc2", "origin_headers", result.run_id),
        (mirrored, "idc2", "idc1", "origin_headers", result.run_id),
        (unmirrored, "idc1", "idc2", "none", result.run_id),
        (unmirrored, "idc2", "idc1", "none", result.run_id),
    }

    # Grafana's panel shows the same newest verdicts
    panel = next(p for p in dashboards.OVERVIEW if p.title.startswith("Mirror proofs"))
    now = datetime.now(timezone.utc)
    sql = expand(panel.sql, time_from=now - timedelta(hours=1), time_to=now + timedelta(minutes=1), interval_s=60,
                 variables={"cluster": ["idc1", "idc2"], "group": [], "topic": []})
    shown = resources["clickhouse"].get_client().query(sql)
    assert tuple(shown.column_names) == panel.columns
    assert {(r[0], r[1], r[2], r[3]) for r in shown.result_rows if r[0] in (mirrored, unmirrored)} == {
        (r.topic, r.active, r.standby, r.proof) for r in newest}
