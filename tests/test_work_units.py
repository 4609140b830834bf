"""How bin/test's two pytest-xdist workers share the suite (tests/conftest.py): a module is run
whole by one worker, and the modules that start a whole stack are one unit, run one after the other."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import WHOLE_STACK_MODULES, xdist_work_unit

REPO = Path(__file__).resolve().parents[1]


def test_every_whole_stack_module_exists_and_carries_the_marker():
    for module in WHOLE_STACK_MODULES:
        source = (REPO / module).read_text()
        assert "pytest.mark.whole_stack" in source, module


def test_tests_of_one_module_are_one_unit_and_whole_stacks_share_one():
    assert xdist_work_unit("tests/sync/test_commit_step.py::test_a[x-1]") == "tests/sync/test_commit_step.py"
    assert xdist_work_unit("tests/sync/test_commit_step.py::TestC::test_b") == "tests/sync/test_commit_step.py"
    units = {xdist_work_unit(f"{module}::test_x") for module in WHOLE_STACK_MODULES}
    assert units == {"whole stacks"}
    assert xdist_work_unit("tests/devstack/test_stack_census.py::test_x") != "whole stacks"  # by path, not by prefix
