"""bench.suite_census: a process's kind by its command line, and a census of a real short command."""

from __future__ import annotations

import sys

import psutil
import pytest

from bench.suite_census import census, kind_of


@pytest.mark.parametrize("command_line, kind", [
    ("/usr/bin/java -Xmx512m -cp /x/* kafka.Kafka /tmp/idc1/server.properties", "Kafka broker"),
    ("/usr/bin/java -cp /x/* org.apache.kafka.connect.mirror.MirrorMaker --clusters a b", "MirrorMaker 2"),
    ("/usr/lib/jvm/bin/java -cp /v/pyspark/jars/* org.apache.spark.deploy.SparkSubmit pyspark-shell", "Spark (JVM)"),
    ("/v/bin/python -m pyspark.daemon pyspark.worker", "Spark Python workers"),
    ("/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest workers"),
    ("/v/bin/python -m dagster api grpc --lazy-load-user-code", "Dagster code server"),
    ("bash bin/up", "other"),
])
def test_a_process_is_named_by_its_command_line(command_line, kind):
    assert kind_of(command_line) == kind


def test_a_census_counts_the_cpu_of_a_command_it_ran():
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
    code, seconds, totals = census([sys.executable, "-c", busy], interval_s=0.1)
    assert code == 0 and seconds >= 1.0
    assert totals["other"] >= 0.9  # the python -c process itself, seen while it ran
    # not what the processes already running (this test's own) had spent before the command started
    assert sum(totals.values()) <= seconds * psutil.cpu_count() + 0.5
