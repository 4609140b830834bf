"""The local stack's JVM memory settings (devstack/paths.py): each broker's heap and the Spark
Connect driver's, from the environment or their defaults; a value Java would not take is refused
with the variable and the value named, before any JVM starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.cluster import ClusterSpec
from devstack.errors import DevStackError
from devstack.paths import broker_heap, spark_connect_driver_memory
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
