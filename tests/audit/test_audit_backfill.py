"""Backfilling the failover audit over several days, through Dagster's own machinery: the
CLI's partition range (one run, the single-run backfill policy), with what it audited.

An asset backfill as the UI launches it, processed by a real ``dagster-daemon``, is tested where the
daemon already runs: on PostgreSQL storage (tests/sensors/test_dagster_on_postgres.py: one run for
the range) and launched from the UI of ``bin/up`` on SQLite (tests/ui/test_ui_runs.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest

from devstack.paths import REPO_ROOT
from offset_pipeline.resources import ClickHouseResource, close_embedded_clients
from tests.helpers.audit import AuditStack, processed_up_to
from tests.helpers.one_partition import mirrored, produce

pytestmark = pytest.mark.kafka

CONFIG = {"exactly_once_mirror": True}


def days_back(n: int) -> list[str]:
    today = datetime.now(timezone.utc).date()
    return [(today - timedelta(days=i)).isoformat() for i in range(n - 1, -1, -1)]


@pytest.fixture
def audited_world(kafka_pair, session_mirrors, chdb_dsn, topic_name, tmp_path):
    """Today's snapshots of one synced group, and the environment a Dagster process needs to audit them."""
    topic = kafka_pair.create_topic(topic_name, partitions=1)
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    produce(idc2, topic, ["b0", "b1"])
    produce(idc1, topic, ["a0", "a1", "a2"])
    mirrored(kafka_pair, topic)
    stack = AuditStack(kafka_pair, chdb_dsn, f"backfilled-{topic_name[-6:]}", topic)
    processed_up_to(kafka_pair, stack, 3)
    close_embedded_clients()  # the Dagster processes below open the engine's folder
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSET_PIPELINE_")}
    env.update(
        DAGSTER_HOME=str(home), OFFSET_PIPELINE_IDC1_BOOTSTRAP=idc1, OFFSET_PIPELINE_IDC2_BOOTSTRAP=idc2,
        OFFSET_PIPELINE_CLICKHOUSE_DSN=chdb_dsn, OFFSET_PIPELINE_TOPIC_SHAPES=f"{topic}=two_way",
        OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE="1", PYSPARK_PYTHON=sys.executable,
    )
    return stack, env, home


def audited_days(chdb_dsn: str) -> dict[str, int]:
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    try:
        rows = client.query("SELECT toString(window_date), count() FROM offset_failover_audits GROUP BY 1").result_rows
    finally:
        close_embedded_clients()
    return dict(rows)


def test_the_cli_audits_a_range_of_days_in_one_run(audited_world, chdb_dsn):
    _stack, env, home = audited_world
    days = days_back(3)
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run(
        [str(dagster), "asset", "materialize", "-m", "offset_pipeline.definitions", "--select", "offset_failover_audit",
         "--partition-range", f"{days[0]}...{days[-1]}",
         "--config-json", json.dumps({"ops": {"offset_failover_audit": {"config": CONFIG}}})],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        [run] = instance.get_runs()
        assert run.status is dg.DagsterRunStatus.SUCCESS
        assert (run.tags["dagster/asset_partition_range_start"], run.tags["dagster/asset_partition_range_end"]) == (
            days[0], days[-1])
    assert audited_days(chdb_dsn) == {days[-1]: 2}  # two snapshots today; the days before had none
