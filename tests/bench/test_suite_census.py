"""bench.suite_census: a process's kind by its command line, and a census of a real short command."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from bench.suite_census import census, folder_of, kind_of, program_of, totals_by


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
    code, seconds, processes = census([sys.executable, "-c", busy], interval_s=0.1)
    totals, counts = totals_by(processes, 0)
    assert code == 0 and seconds >= 1.0 and counts["other"] >= 1
    assert totals["other"] >= 0.9  # the python -c process itself, seen while it ran
    # not what the processes already running (this test's own) had spent before the command started
    assert sum(totals.values()) <= seconds * psutil.cpu_count() + 0.5


@pytest.mark.parametrize("command_line, folder", [
    ("java -cp /x/* kafka.Kafka /tmp/pytest-of-root/pytest-17/popen-gw1/ui_stack0/idc1/server.properties", "ui_stack"),
    ("java -Dkafka.logs.dir=/tmp/pytest-of-root/pytest-3/popen-gw0/faults12/idc2/logs kafka.Kafka x", "faults"),
    ("java -cp /x/* kafka.Kafka /tmp/offset-pipeline/idc1/server.properties", "-"),
    ("java -cp /x/* kafka.Kafka /tmp/offset-pipeline-session-pair-fstnl31i/idc2/server.properties", "session pair"),
])
def test_a_process_is_placed_in_the_test_folder_it_works_in(command_line, folder):
    assert folder_of(command_line) == folder


def test_totals_add_cpu_and_count_processes_per_kind_and_folder():
    processes = [("Kafka broker", "ui_stack", 10.0, "java"), ("Kafka broker", "faults", 4.0, "java"),
                 ("other", "faults", 1.5, "python3 -m devstack")]
    assert totals_by(processes, 0) == ({"Kafka broker": 14.0, "other": 1.5}, {"Kafka broker": 2, "other": 1})
    assert totals_by(processes, 1) == ({"ui_stack": 10.0, "faults": 5.5}, {"ui_stack": 1, "faults": 2})
    assert totals_by(processes, 3) == ({"java": 14.0, "python3 -m devstack": 1.5}, {"java": 2, "python3 -m devstack": 1})


@pytest.mark.parametrize("command_line, program", [
    ("/v/bin/python3 -u -m devstack traffic --rate 10", "python3 -m devstack"),
    ("/v/bin/python -B -c import sys", "python -c"),
    ("/usr/bin/bash /repo/bin/up", "bash up"),
    ("/usr/bin/mvn -q -B verify", "mvn"),
    ("", "(no command line)"),
])
def test_a_process_of_no_kind_is_named_by_its_program(command_line, program):
    assert program_of(command_line) == program


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopped_census_stops_its_command(signum):
    # started with SIGINT ignored, as a background job or a worker that ignores it would start it: the
    # census stops on it all the same
    census_proc = subprocess.Popen([sys.executable, "-m", "bench.suite_census", "--interval-s", "0.2", "--",
                                    sys.executable, "-c", "import time; time.sleep(120)"],
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        while not (children := psutil.Process(census_proc.pid).children()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert children, "the census never started its command"
        time.sleep(1)  # in the sampling loop, its handlers set
        census_proc.send_signal(signum)
        census_proc.wait(timeout=90)
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, f"the command outlived its census after {signum.name}"
    finally:
        if census_proc.poll() is None:
            census_proc.kill()
