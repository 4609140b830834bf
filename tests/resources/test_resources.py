"""The Dagster resources against the real engines: embedded ClickHouse (chdb), local Spark, and
librdkafka's own behaviour on an unreachable cluster. Running Kafka clusters are tested elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import dagster as dg
import pytest
from pydantic import ValidationError

from offset_pipeline.resources import (
    ClickHouseResource,
    KafkaClusterResource,
    KafkaClusterUnreachable,
    SparkResource,
    close_embedded_clients,
    get_spark_session,
    spark_conf,
)
from offset_pipeline.resources.clickhouse import embedded_client
from offset_pipeline.resources.spark import pin_python_interpreter

# --- Kafka ---------------------------------------------------------------------------------------


def kafka(**fields) -> KafkaClusterResource:
    return KafkaClusterResource(**{"cluster_name": "idc1", "bootstrap_servers": "127.0.0.1:1", **fields})


@pytest.mark.parametrize("protocol", ["PLAINTEXT_", "TLS", "SASL", "", "SCRAM-SHA-512"])
def test_unknown_security_protocol_is_rejected_naming_the_choices(protocol):
    with pytest.raises(ValidationError) as error:
        kafka(security_protocol=protocol)
    message = str(error.value)
    assert repr(protocol) in message
    assert "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in message


@pytest.mark.parametrize(
    "given, expected",
    [("PLAINTEXT", "PLAINTEXT"), ("sasl_ssl", "SASL_SSL"), (" Ssl ", "SSL"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT")],
)
def test_security_protocol_is_normalized(given, expected):
    assert kafka(security_protocol=given).client_config()["security.protocol"] == expected


def test_client_config_sets_sasl_keys_only_when_given():
    plain = kafka().client_config()
    assert not [key for key in plain if key.startswith("sasl.")]
    assert plain["bootstrap.servers"] == "127.0.0.1:1"
    assert plain["log_level"] <= 3

    sasl = kafka(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="sync", sasl_password="pw"
    ).client_config()
    assert {k: v for k, v in sasl.items() if k.startswith("sasl.")} == {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "sync",
        "sasl.password": "pw",
    }


def test_consumer_defaults_never_autocommit_and_read_committed_and_can_be_overridden():
    config = kafka().consumer_config("grp")
    assert (config["group.id"], config["enable.auto.commit"], config["isolation.level"]) == (
        "grp",
        False,
        "read_committed",
    )
    overridden = kafka().consumer_config("grp", **{"isolation.level": "read_uncommitted"})
    assert overridden["isolation.level"] == "read_uncommitted"


def test_clients_accept_the_generated_config():
    # librdkafka validates every key at construction, so a typo in a key fails here.
    resource = kafka(client_id="cfg-check")
    resource.consumer("grp", **{"auto.offset.reset": "earliest"}).close()
    resource.producer().flush(0)
    resource.admin()


def test_describe_unreachable_cluster_names_cluster_and_servers():
    started = time.monotonic()
    with pytest.raises(KafkaClusterUnreachable) as error:
        kafka(cluster_name="idc2").describe(timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert "'idc2'" in str(error.value)
    assert "127.0.0.1:1" in str(error.value)


# --- ClickHouse (embedded chdb engine) -----------------------------------------------------------


@pytest.mark.parametrize(
    "group_id",
    ["grp 'quoted' ü", "a\\b", 'dq"', "{g:String}", "%(g)s", "tab\tnl\n", "한국어-그룹", ""],
)
def test_parameterized_query_round_trips_group_ids(chdb_dsn, group_id):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    assert client.query("SELECT {g:String}", parameters={"g": group_id}).result_rows == [(group_id,)]


def test_mergetree_create_insert_select(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    client.command(
        "CREATE TABLE committed (group_id String, partition UInt32, offset Int64) "
        "ENGINE = MergeTree ORDER BY (group_id, partition)"
    )
    rows = [["grp 'a' ü", 0, 41], ["grp 'a' ü", 1, 7], ["other", 0, 3]]
    client.insert("committed", rows, column_names=["group_id", "partition", "offset"])
    result = client.query(
        "SELECT partition, offset FROM committed WHERE group_id = {g:String} ORDER BY partition",
        parameters={"g": "grp 'a' ü"},
    )
    assert result.result_rows == [(0, 41), (1, 7)]


def test_embedded_data_persists_across_reopen(chdb_dsn):
    resource = ClickHouseResource(dsn=chdb_dsn)
    resource.get_client().command("CREATE TABLE kept (x UInt8) ENGINE = MergeTree ORDER BY x")
    resource.get_client().insert("kept", [[5]], column_names=["x"])
    close_embedded_clients()
    assert resource.get_client().query("SELECT sum(x) FROM kept").result_rows == [(5,)]


def test_embedded_client_is_shared_per_dsn(chdb_dsn):
    assert ClickHouseResource(dsn=chdb_dsn).get_client() is ClickHouseResource(dsn=chdb_dsn).get_client()


def test_run_teardown_releases_the_engine_path(tmp_path):
    """After a Dagster run the engine path is free, so another path (or process) can open one."""

    @dg.asset
    def written(clickhouse: ClickHouseResource) -> int:
        client = clickhouse.get_client()
        client.command("CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x")
        client.insert("t", [[1], [2]], column_names=["x"])
        return client.query("SELECT count() FROM t").result_rows[0][0]

    first = ClickHouseResource(dsn=f"chdb://{tmp_path / 'first'}")
    result = dg.materialize([written], resources={"clickhouse": first})
    assert result.output_for_node("written") == 2
    try:
        other = ClickHouseResource(dsn=f"chdb://{tmp_path / 'second'}").get_client()
        assert other.query("SELECT 1").result_rows == [(1,)]
    finally:
        close_embedded_clients()


def test_sensor_tick_releases_the_engine_path(tmp_path):
    """Sensors run in the long-lived code server; holding the path there would lock runs out."""

    @dg.sensor(target=[], minimum_interval_seconds=30)
    def probe(clickhouse: ClickHouseResource):
        return dg.SkipReason(str(clickhouse.get_client().query("SELECT 41 + 1").result_rows[0][0]))

    with dg.build_sensor_context(resources={"clickhouse": ClickHouseResource(dsn=f"chdb://{tmp_path / 'a'}")}) as ctx:
        assert probe(ctx).skip_message == "42"
    try:
        other = ClickHouseResource(dsn=f"chdb://{tmp_path / 'b'}").get_client()
        assert other.query("SELECT 1").result_rows == [(1,)]
    finally:
        close_embedded_clients()

def test_default_dsn_is_embedded_under_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OFFSET_PIPELINE_DATA_DIR", str(tmp_path))
    assert ClickHouseResource().dsn == f"chdb://{tmp_path.resolve() / 'clickhouse'}"


def test_unknown_dsn_scheme_is_rejected():
    with pytest.raises(ValueError, match="chdb://, http:// or https://"):
        ClickHouseResource(dsn="clickhouse://host:9000").get_client()


# --- Spark ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    saved = {name: os.environ.pop(name, None) for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    session = get_spark_session()
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_local_session_runs_a_groupby(spark):
    rows = [("idc1", "g1"), ("idc1", "g2"), ("idc2", "g1"), ("idc1", "g3")]
    counts = spark.createDataFrame(rows, ["cluster", "group_id"]).groupBy("cluster").count().collect()
    assert {row["cluster"]: row["count"] for row in counts} == {"idc1": 3, "idc2": 1}


def test_session_uses_small_machine_defaults(spark):
    assert spark.sparkContext.master == "local[*]"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.sparkContext.uiWebUrl is None


def test_python_workers_run_this_interpreter(spark):
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable
    # The worker reports which Python ran it: proves the setting reached Spark, not just os.environ.
    worker_pythons = spark.sparkContext.parallelize(range(2), 2).map(lambda _: sys.executable).collect()
    assert set(worker_pythons) == {sys.executable}


def test_an_explicit_python_choice_is_kept(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/python3")
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    pin_python_interpreter()
    assert os.environ["PYSPARK_PYTHON"] == "/opt/other/python3"
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable


def test_spark_resource_in_a_dagster_run(spark):
    @dg.asset
    def partitions_per_topic(spark: SparkResource) -> dict:
        frame = spark.spark_session.createDataFrame([("t.a", 0), ("t.a", 1), ("t.b", 0)], ["topic", "partition"])
        return {row["topic"]: row["count"] for row in frame.groupBy("topic").count().collect()}

    result = dg.materialize([partitions_per_topic], resources={"spark": SparkResource()})
    assert result.output_for_node("partitions_per_topic") == {"t.a": 2, "t.b": 1}


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, {"spark.master": "local[*]", "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1"}),
        ({"master": "spark://spark-master:7077"}, {"spark.master": "spark://spark-master:7077"}),
        ({"connect_url": "sc://spark-connect:15002"}, {"spark.remote": "sc://spark-connect:15002"}),
        ({"spark_config": {"spark.sql.shuffle.partitions": 16}}, {"spark.sql.shuffle.partitions": "16"}),
    ],
)
def test_spark_conf(kwargs, expected):
    conf = spark_conf(**kwargs)
    assert {key: conf.get(key) for key in expected} == expected


def test_spark_conf_cluster_targets_drop_local_only_settings():
    assert "spark.driver.host" not in spark_conf(master="spark://spark-master:7077")
    connect = spark_conf(connect_url="sc://spark-connect:15002")
    # The Connect server owns master, UI and driver memory; the client must not pretend to set them.
    assert not {"spark.master", "spark.ui.enabled", "spark.driver.memory"} & connect.keys()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"master": "spark://h:7077", "connect_url": "sc://h:15002"}, "not both"),
        ({"connect_url": "http://h:15002"}, "must start with sc://"),
    ],
)
def test_spark_target_mistakes_fail_when_the_resource_is_built(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        SparkResource(**kwargs)


def test_opening_waits_while_another_process_holds_the_engine(tmp_path):
    """A run starting while a sensor tick (another process) holds the data path takes its turn."""
    path = tmp_path / "shared"
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time, clickhouse_connect\n"
            f"c = clickhouse_connect.get_client(dsn='chdb://{path}')\n"
            "c.command('CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x')\n"
            "c.insert('t', [[7]], column_names=['x'])\n"
            "print('held', flush=True)\n"
            "time.sleep(3)\n"
            "c.close()\n"
        )],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Exception, match="Unable to open the chdb engine"):
            embedded_client(f"chdb://{path}", wait_s=0)
        started = time.monotonic()
        client = embedded_client(f"chdb://{path}", wait_s=60)
        assert time.monotonic() - started > 0.5  # it waited for the holder
        assert client.query("SELECT x FROM t").result_rows == [(7,)]
    finally:
        holder.wait(timeout=30)
        close_embedded_clients()


def test_run_bounded_returns_raises_and_gives_up_at_its_bound():
    import threading

    from offset_pipeline.resources.spark import SparkUnavailable, run_bounded

    assert run_bounded(lambda: 42, 5.0, "a quick job") == 42
    with pytest.raises(SparkUnavailable, match=r"a failing job failed: ValueError: bad input"):
        run_bounded(lambda: (_ for _ in ()).throw(ValueError("bad input\nmore lines")), 5.0, "a failing job")
    release, interrupted = threading.Event(), threading.Event()
    with pytest.raises(SparkUnavailable, match=r"a stuck job did not finish within 0.5s"):
        run_bounded(lambda: release.wait(30), 0.5, "a stuck job", on_timeout=interrupted.set)
    assert interrupted.wait(5)  # the job was asked to stop
    release.set()
