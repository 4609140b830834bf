"""tests/helpers/timeline.py: the CPU each test costs its worker, recorded per test and summed per
module, on a real worker process (this one)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.helpers.timeline import Timeline, module_cpu

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass"


def test_cpu_is_summed_per_module_own_and_children_apart():
    rows = [("gw0", 0.0, 1.0, 2.0, 10.0, "tests/a/test_x.py::test_one"),
            ("gw1", 0.0, 1.0, 0.5, 0.0, "tests/a/test_x.py::test_two[p-1]"),
            ("gw0", 1.0, 2.0, 1.0, 0.25, "tests/b/test_y.py::test_three")]
    assert module_cpu(rows) == ({"tests/a/test_x.py": 2.5, "tests/b/test_y.py": 1.0},
                                {"tests/a/test_x.py": 10.0, "tests/b/test_y.py": 0.25})


def test_a_test_line_carries_the_cpu_its_worker_and_a_reaped_child_spent(tmp_path):
    timeline = Timeline(tmp_path, unit_of=lambda nodeid: nodeid)
    run = timeline.pytest_runtest_protocol(SimpleNamespace(nodeid="tests/a/test_x.py::test_one"), None)
    next(run)  # the test runs here: a child that spins 0.3 s, then 0.2 s in this process
    subprocess.run([sys.executable, "-c", SPIN.format(0.3)], check=True)
    exec(SPIN.format(0.2))
    with pytest.raises(StopIteration):
        next(run)
    [line] = (tmp_path / f"{timeline.worker}.tsv").read_text().splitlines()
    start, end, own, children, nodeid = line.split("\t")
    assert nodeid == "tests/a/test_x.py::test_one" and float(end) >= float(start)
    assert float(own) >= 0.15 and float(children) >= 0.25
