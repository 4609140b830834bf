"""The local stack's JVM settings (devstack/paths.py): each broker's heap and the Spark Connect
driver's, from the environment or their defaults, and the extra options of the Kafka JVMs; a value
Java would not take is refused with the variable and the value named, before any JVM starts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from devstack.cluster import ClusterSpec
from devstack.errors import DevStackError
from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import MirrorMaker2, MirrorMaker2Config
from devstack.paths import broker_heap, jvm_options, spark_connect_driver_memory
from devstack.spark_connect import SparkConnectServer


@pytest.mark.parametrize(("env", "heap", "driver"), [
    ({}, "1g", "4g"),
    ({"OFFSET_PIPELINE_BROKER_HEAP": "512m"}, "512m", "4g"),
    ({"OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY": "1G"}, "1g", "1G"),
    ({"OFFSET_PIPELINE_BROKER_HEAP": " 768M ", "OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY": "2048m"}, "768M", "2048m"),
    ({"OFFSET_PIPELINE_BROKER_HEAP": ""}, "1g", "4g"),  # empty is unset
])
def test_sizes_come_from_the_environment_or_the_defaults(env, heap, driver):
    assert (broker_heap(env), spark_connect_driver_memory(env)) == (heap, driver)


@pytest.mark.parametrize("value", ["lots", "512", "0g", "1.5g", "-1g", "512mb", "1 g"])
def test_a_size_java_would_not_take_is_refused_naming_variable_and_value(value):
    with pytest.raises(DevStackError, match=f"OFFSET_PIPELINE_BROKER_HEAP={value.strip()!r}"):
        broker_heap({"OFFSET_PIPELINE_BROKER_HEAP": value})
    with pytest.raises(DevStackError, match="OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY"):
        spark_connect_driver_memory({"OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY": value})


def test_the_broker_and_the_spark_connect_server_take_the_setting_of_their_process(monkeypatch):
    monkeypatch.setenv("OFFSET_PIPELINE_BROKER_HEAP", "640m")
    monkeypatch.setenv("OFFSET_PIPELINE_SPARK_CONNECT_DRIVER_MEMORY", "3g")
    spec = ClusterSpec("idc1", 1, 2, Path("/nowhere"))
    assert spec.heap == "640m"
    assert SparkConnectServer(1, Path("/nowhere")).driver_memory == "3g"
    assert ClusterSpec("idc1", 1, 2, Path("/nowhere"), heap="2g").heap == "2g"  # an explicit size wins


@pytest.mark.parametrize(("value", "options"), [
    ("", []),
    ("  ", []),
    ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]),
    ("-Dname='two words'", ["-Dname=two words"]),  # split as a shell would
])
def test_jvm_options_are_split_as_a_shell_would(value, options):
    assert jvm_options({"OFFSET_PIPELINE_JVM_OPTIONS": value}) == options
    assert jvm_options({}) == []


@pytest.mark.parametrize(("value", "named"), [("XX:+UseSerialGC", "'XX:+UseSerialGC'"),
                                              ("-Xss1m 512m", "'512m'"), ("-Dx='open", "cannot be split")])
def test_a_word_that_is_not_a_jvm_option_is_refused(value, named):
    with pytest.raises(DevStackError, match=f"OFFSET_PIPELINE_JVM_OPTIONS=.*{re.escape(named)}"):
        jvm_options({"OFFSET_PIPELINE_JVM_OPTIONS": value})


def test_the_brokers_mirrormaker2_and_spark_connect_put_the_options_after_their_own(monkeypatch, tmp_path):
    monkeypatch.setenv("OFFSET_PIPELINE_JVM_OPTIONS", "-XX:-UseG1GC -XX:+UseSerialGC -XX:-AlwaysPreTouch")
    from devstack.cluster import KafkaCluster
    broker = KafkaCluster(ClusterSpec("idc1", 1, 2, tmp_path / "idc1"), tmp_path / "jars")
    command = broker._java_command("java", "kafka.Kafka", "server.properties", broker=True)
    # HotSpot takes the last of two settings of one flag: the extra options come after the defaults
    assert command.index("-XX:+UseG1GC") < command.index("-XX:-UseG1GC") < command.index("-cp")
    import devstack.mirrormaker2 as module
    monkeypatch.setattr(module, "mm2_jars", lambda: tmp_path / "mm2-jars")  # no jar fetched for this
    monkeypatch.setattr(module, "transform_jar", lambda: tmp_path / "transform.jar")
    config = MirrorMaker2Config((MirrorEndpoint("idc1", "127.0.0.1:1"), MirrorEndpoint("idc2", "127.0.0.1:2")),
                                tmp_path / "mm2", rest_port=8083)
    command = MirrorMaker2(config).command()
    assert command.index("-XX:+UseG1GC") < command.index("-XX:-UseG1GC") < command.index("-cp")
    # the Spark Connect server's driver: spark-submit hands these words to its JVM in this order
    args = SparkConnectServer(1, tmp_path / "spark", driver_memory="1g").process().args
    driver = shlex.split(args[args.index("--driver-java-options") + 1])
    assert driver == ["-Xms1g", "-XX:+AlwaysPreTouch", "-XX:-UseG1GC", "-XX:+UseSerialGC", "-XX:-AlwaysPreTouch"]
    monkeypatch.delenv("OFFSET_PIPELINE_JVM_OPTIONS")
    assert ClusterSpec("idc1", 1, 2, tmp_path).jvm_options == ()
