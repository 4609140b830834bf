"""The code location loads, and the environment maps onto its resources as documented."""

from __future__ import annotations

import dagster as dg
import pytest

from offset_pipeline.definitions import build_resources, defs
from devstack.paths import REPO_ROOT
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource
from offset_pipeline.settings import data_dir, default_clickhouse_dsn, mirror_position_groups, read_settings, stale_window_s
from tests.helpers.settings_checks import lookup, validate_definitions

RESOURCE_KEYS = {"idc1", "idc2", "clickhouse", "spark", "mirrors"}


def test_definitions_are_loadable_with_the_five_resources():
    dg.Definitions.validate_loadable(defs)
    assert set(defs.resources) == RESOURCE_KEYS
    assert isinstance(defs.resources["idc1"], KafkaClusterResource)
    assert isinstance(defs.resources["idc2"], KafkaClusterResource)
    assert isinstance(defs.resources["clickhouse"], ClickHouseResource)
    assert isinstance(defs.resources["spark"], SparkResource)


def test_the_sync_cycle_job_runs_snapshot_translations_commits_and_metrics_with_their_checks():
    job = defs.resolve_job_def("offset_sync_cycle")
    keys = {key.to_user_string() for key in job.asset_layer.executable_asset_keys}
    assert keys == {"offset_snapshot", "offset_translations", "offset_standby_commits", "offset_sync_metrics"}
    checks = defs.resolve_assets_def("offset_standby_commits").check_keys
    assert {check.name for check in checks} == {"no_loss", "sync_freshness"}
    for asset, names in (("offset_snapshot", {"clusters_readable"}),
                         ("offset_translations", {"translation_engine_available", "translation_complete",
                                                  "within_safe_bound"}),
                         ("offset_sync_metrics", {"metrics_written", "switch_readiness"})):
        assert {c.name for c in defs.resolve_assets_def(asset).check_keys} == names


def test_the_continuous_job_runs_its_one_asset_with_checks_a_freshness_policy_and_the_sync_tag():
    job = defs.resolve_job_def("offset_sync_continuous")
    assert {key.to_user_string() for key in job.asset_layer.executable_asset_keys} == {"offset_continuous_sync"}
    assert job.tags.get("offset_pipeline/sync") == "continuous"
    # a hung continuous run is failed by run monitoring after its run length and a margin
    assert int(job.tags["dagster/max_runtime"]) == 900 + 600
    asset = defs.resolve_assets_def("offset_continuous_sync")
    assert {c.name for c in asset.check_keys} == {"no_loss", "sync_freshness", "clusters_readable", "switch_readiness",
                                                  "checkpoints_written", "commit_log_followed"}
    policy = asset.specs_by_key[asset.key].freshness_policy
    assert policy is not None and policy.fail_window.to_timedelta().total_seconds() == 2 * 900 + 300


def test_the_fast_forward_job_is_apart_from_the_cycle_and_shares_its_concurrency_tag():
    job = defs.resolve_job_def("offset_fast_forward")
    assert {key.to_user_string() for key in job.asset_layer.executable_asset_keys} == {"offset_fast_forwards"}
    assert job.tags.get("offset_pipeline/sync") == "fast_forward"
    assert {c.name for c in defs.resolve_assets_def("offset_fast_forwards").check_keys} == {"no_loss"}
    sensor = defs.resolve_sensor_def("stale_partition_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and sensor.job_name == "offset_fast_forward"
    groups = {(g.source, g.target, g.stored_on, g.group_id) for g in defs.resources["mirrors"].position_groups}
    assert ("idc1", "idc2", "idc2", "offset-pipeline-mirror.idc1-to-idc2") in groups


def test_a_run_whose_worker_died_is_ended_by_dagsters_run_monitoring(tmp_path):
    """The instance bin/up makes (deploy/dagster.yaml) monitors runs, and the sync and fast-forward
    runs carry a max runtime: a killed run worker cannot hold the sync sensor for ever."""
    (tmp_path / "dagster.yaml").write_text((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 180
    for name in ("offset_sync_cycle", "offset_fast_forward"):
        assert int(defs.resolve_job_def(name).tags["dagster/max_runtime"]) == 300
    assert "dagster/max_runtime" not in defs.resolve_job_def("offset_failover_audit_job").tags  # a day's audit may take long


def test_dagster_cli_validates_the_workspace_with_sasl_but_no_password_set(tmp_path):
    # SASL configured while the password variable is absent must still load (runs would then fail
    # at connect time, which is where the missing secret belongs).
    done = validate_definitions(
        {"OFFSET_PIPELINE_IDC1_SECURITY_PROTOCOL": "SASL_SSL", "OFFSET_PIPELINE_IDC1_SASL_USERNAME": "sync"},
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation successful for code location offset_pipeline" in done.stdout + done.stderr


def test_dagster_cli_rejects_a_bad_security_protocol(tmp_path):
    done = validate_definitions({"OFFSET_PIPELINE_IDC2_SECURITY_PROTOCOL": "TLS"}, tmp_path)
    assert done.returncode != 0
    assert "Unknown Kafka security_protocol 'TLS'" in done.stdout + done.stderr


# Table: environment -> (path into the settings, expected value).
SETTINGS_CASES = [
    ({}, "kafka.idc1.bootstrap_servers", "127.0.0.1:19092"),
    ({}, "kafka.idc2.bootstrap_servers", "127.0.0.1:29092"),
    ({}, "kafka.idc1.security_protocol", "PLAINTEXT"),
    ({}, "kafka.idc1.sasl_password_env", None),
    ({}, "spark.master", None),
    ({}, "spark.connect_url", None),
    ({}, "clickhouse.username", None),
    ({"OFFSET_PIPELINE_IDC1_BOOTSTRAP": "b1:9092,b2:9092"}, "kafka.idc1.bootstrap_servers", "b1:9092,b2:9092"),
    ({"OFFSET_PIPELINE_IDC1_BOOTSTRAP": "b1:9092"}, "kafka.idc2.bootstrap_servers", "127.0.0.1:29092"),
    ({"OFFSET_PIPELINE_IDC2_BOOTSTRAP": "c1:9092"}, "kafka.idc2.bootstrap_servers", "c1:9092"),
    ({"OFFSET_PIPELINE_IDC2_SECURITY_PROTOCOL": "SASL_SSL"}, "kafka.idc2.security_protocol", "SASL_SSL"),
    ({"OFFSET_PIPELINE_IDC2_SECURITY_PROTOCOL": "SASL_SSL"}, "kafka.idc1.security_protocol", "PLAINTEXT"),
    ({"OFFSET_PIPELINE_IDC1_SASL_MECHANISM": "SCRAM-SHA-512"}, "kafka.idc1.sasl_mechanism", "SCRAM-SHA-512"),
    ({"OFFSET_PIPELINE_IDC2_SASL_USERNAME": "sync"}, "kafka.idc2.sasl_username", "sync"),
    ({"OFFSET_PIPELINE_IDC1_SASL_PASSWORD": "s3cret"}, "kafka.idc1.sasl_password_env", "OFFSET_PIPELINE_IDC1_SASL_PASSWORD"),
    ({"OFFSET_PIPELINE_IDC1_SASL_PASSWORD": "s3cret"}, "kafka.idc2.sasl_password_env", None),
    ({"OFFSET_PIPELINE_IDC1_SASL_PASSWORD": ""}, "kafka.idc1.sasl_password_env", None),
    ({"OFFSET_PIPELINE_IDC1_BOOTSTRAP": "  "}, "kafka.idc1.bootstrap_servers", "127.0.0.1:19092"),
    ({"OFFSET_PIPELINE_CLICKHOUSE_DSN": "https://ch:8443/offsets"}, "clickhouse.dsn", "https://ch:8443/offsets"),
    ({"OFFSET_PIPELINE_CLICKHOUSE_USERNAME": "sync"}, "clickhouse.username", "sync"),
    ({"OFFSET_PIPELINE_CLICKHOUSE_DATABASE": "offsets"}, "clickhouse.database", "offsets"),
    ({"OFFSET_PIPELINE_CLICKHOUSE_PASSWORD": "pw"}, "clickhouse.password_env", "OFFSET_PIPELINE_CLICKHOUSE_PASSWORD"),
    ({"OFFSET_PIPELINE_DATA_DIR": "/srv/op"}, "clickhouse.dsn", "chdb:///srv/op/clickhouse"),
    # The local stack started elsewhere (bin/up with other ports or folder): the code location follows it.
    ({"OFFSET_PIPELINE_DEVSTACK_DIR": "/srv/stack"}, "clickhouse.dsn", "chdb:///srv/stack/data/clickhouse"),
    ({"OFFSET_PIPELINE_IDC1_PORT": "41092"}, "kafka.idc1.bootstrap_servers", "127.0.0.1:41092"),
    ({"OFFSET_PIPELINE_IDC2_PORT": "42092"}, "kafka.idc2.bootstrap_servers", "127.0.0.1:42092"),
    ({"OFFSET_PIPELINE_IDC2_PORT": "42092", "OFFSET_PIPELINE_IDC2_BOOTSTRAP": "k2:9092"},
     "kafka.idc2.bootstrap_servers", "k2:9092"),
    ({"OFFSET_PIPELINE_SPARK_MASTER": "spark://m:7077"}, "spark.master", "spark://m:7077"),
    ({"OFFSET_PIPELINE_SPARK_CONNECT_URL": "sc://c:15002"}, "spark.connect_url", "sc://c:15002"),
]


@pytest.mark.parametrize("env, path, expected", SETTINGS_CASES)
def test_read_settings(env, path, expected):
    assert lookup(read_settings(env), path) == expected


def test_default_data_dir_is_in_the_repo_devstack():
    assert data_dir({}) == (REPO_ROOT / ".devstack" / "data").resolve()
    assert default_clickhouse_dsn({}) == f"chdb://{REPO_ROOT.resolve()}/.devstack/data/clickhouse"


def test_passwords_are_wired_as_env_vars_not_values():
    env = {
        "OFFSET_PIPELINE_IDC1_SECURITY_PROTOCOL": "SASL_SSL",
        "OFFSET_PIPELINE_IDC1_SASL_MECHANISM": "PLAIN",
        "OFFSET_PIPELINE_IDC1_SASL_USERNAME": "sync",
        "OFFSET_PIPELINE_IDC1_SASL_PASSWORD": "s3cret",
        "OFFSET_PIPELINE_CLICKHOUSE_PASSWORD": "chpw",
    }
    resources = build_resources(read_settings(env))
    idc1_password = resources["idc1"].sasl_password
    assert isinstance(idc1_password, dg.EnvVar)
    assert idc1_password.env_var_name == "OFFSET_PIPELINE_IDC1_SASL_PASSWORD"
    assert resources["idc2"].sasl_password is None
    assert isinstance(resources["clickhouse"].password, dg.EnvVar)
    assert "s3cret" not in repr(resources) and "chpw" not in repr(resources)


def test_password_env_var_resolves_in_a_run(monkeypatch):
    env = {"OFFSET_PIPELINE_IDC1_SASL_USERNAME": "sync", "OFFSET_PIPELINE_IDC1_SASL_PASSWORD": "s3cret"}
    monkeypatch.setenv("OFFSET_PIPELINE_IDC1_SASL_PASSWORD", "s3cret-at-runtime")
    resources = build_resources(read_settings(env))

    @dg.asset
    def sasl_seen(idc1: KafkaClusterResource) -> dict:
        config = idc1.client_config()
        return {k: config[k] for k in ("sasl.username", "sasl.password")}

    result = dg.materialize([sasl_seen], resources={"idc1": resources["idc1"]})
    assert result.output_for_node("sasl_seen") == {"sasl.username": "sync", "sasl.password": "s3cret-at-runtime"}


def test_resources_follow_the_environment():
    env = {
        "OFFSET_PIPELINE_IDC2_BOOTSTRAP": "kafka-b:9092",
        "OFFSET_PIPELINE_CLICKHOUSE_DSN": "http://ch:8123",
        "OFFSET_PIPELINE_SPARK_CONNECT_URL": "sc://spark:15002",
    }
    resources = build_resources(read_settings(env))
    assert (resources["idc1"].cluster_name, resources["idc2"].cluster_name) == ("idc1", "idc2")
    assert resources["idc2"].bootstrap_servers == "kafka-b:9092"
    assert resources["clickhouse"].dsn == "http://ch:8123"
    assert resources["spark"].conf()["spark.remote"] == "sc://spark:15002"


def test_mirror_position_groups_from_the_environment():
    groups = mirror_position_groups({"OFFSET_PIPELINE_MIRROR_POSITIONS": "idc1->idc2=idc1:mm2:offsets, idc2->idc1=idc2:g"})
    assert groups == [{"source": "idc1", "target": "idc2", "stored_on": "idc1", "group_id": "mm2:offsets"},
                      {"source": "idc2", "target": "idc1", "stored_on": "idc2", "group_id": "g"}]
    assert len(mirror_position_groups({})) == 2
    for bad in ("idc1=idc2:g", "idc1->idc2=g", "idc1->idc2=idc2:"):
        with pytest.raises(ValueError, match="OFFSET_PIPELINE_MIRROR_POSITIONS entry"):
            mirror_position_groups({"OFFSET_PIPELINE_MIRROR_POSITIONS": bad})


def test_stale_window_from_the_environment():
    assert stale_window_s({}) == 600.0
    assert stale_window_s({"OFFSET_PIPELINE_STALE_WINDOW_S": "20"}) == 20.0
    for bad in ("0", "-5", "ten"):
        with pytest.raises(ValueError, match="OFFSET_PIPELINE_STALE_WINDOW_S"):
            stale_window_s({"OFFSET_PIPELINE_STALE_WINDOW_S": bad})


def test_the_stale_sensor_gets_its_resources_and_says_why_it_skips(chdb_dsn):
    """The decorated sensor, as the daemon calls it: resources injected, an empty history skipped."""
    resources = {
        "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers="127.0.0.1:1"),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers="127.0.0.1:2"),
        "mirrors": defs.resources["mirrors"],
    }
    sensor = defs.resolve_sensor_def("stale_partition_sensor")
    with dg.instance_for_test() as instance, dg.build_sensor_context(instance=instance, resources=resources) as context:
        result = sensor(context)
    assert isinstance(result, dg.SkipReason)
    assert "no snapshot yet" in result.skip_message


def test_the_audit_is_daily_with_a_single_run_backfill_policy_a_check_and_a_schedule():
    from datetime import datetime, timezone

    from offset_pipeline.definitions import latest_complete_day

    audit = defs.resolve_assets_def("offset_failover_audit")
    assert isinstance(audit.partitions_def, dg.DailyPartitionsDefinition)
    assert audit.backfill_policy == dg.BackfillPolicy.single_run()
    assert {c.name for c in audit.check_keys} == {"no_loss_in_window"}
    schedule = defs.resolve_schedule_def("offset_failover_audit_schedule")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING and schedule.cron_schedule == "20 0 * * *"
    assert latest_complete_day(datetime(2026, 11, 22, 0, 20, tzinfo=timezone.utc)) == "2026-11-21"
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(instance=instance, repository_def=defs.get_repository_def(),
                                            scheduled_execution_time=datetime(2026, 11, 22, 0, 20, tzinfo=timezone.utc))
        [request] = schedule.evaluate_tick(context).run_requests
    assert (request.partition_key, request.run_key) == ("2026-11-21", "audit-2026-11-21")


def test_audit_settings_from_the_environment():
    from offset_pipeline.settings import audit_start_date, mirror_exactly_once

    assert audit_start_date({}) == "2026-01-01"
    assert audit_start_date({"OFFSET_PIPELINE_AUDIT_START_DATE": "2025-06-30"}) == "2025-06-30"
    with pytest.raises(ValueError, match="OFFSET_PIPELINE_AUDIT_START_DATE"):
        audit_start_date({"OFFSET_PIPELINE_AUDIT_START_DATE": "yesterday"})
    assert mirror_exactly_once({}) is False
    assert mirror_exactly_once({"OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE": "yes"}) is True
    with pytest.raises(ValueError, match="OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE"):
        mirror_exactly_once({"OFFSET_PIPELINE_MIRROR_EXACTLY_ONCE": "maybe"})


@pytest.mark.parametrize("value, expected", [(None, True), ("", True), ("1", True), ("0", False), ("false", False)])
def test_mirror_writes_headers_setting(value, expected):
    from offset_pipeline.settings import mirror_writes_headers

    env = {} if value is None else {"OFFSET_PIPELINE_MIRROR_WRITES_HEADERS": value}
    assert mirror_writes_headers(env) is expected


def test_mirror_writes_headers_rejects_what_it_cannot_read():
    from offset_pipeline.settings import mirror_writes_headers

    with pytest.raises(ValueError, match="OFFSET_PIPELINE_MIRROR_WRITES_HEADERS='maybe'"):
        mirror_writes_headers({"OFFSET_PIPELINE_MIRROR_WRITES_HEADERS": "maybe"})
