"""How bin/test's pytest-xdist workers share the suite (tests/conftest.py): a module is run whole by
one worker; the modules that start a whole stack are one unit, those that start clusters of their
own another, each run one after the other; the secure tests share one worker; the chains are taken
first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import (
    CHAINS,
    OWN_CLUSTER_MODULES,
    SECURE_PAIR_UNIT,
    UI_STACK_MODULES,
    WHOLE_STACK_MODULES,
    xdist_work_order,
    xdist_work_unit,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("unit", list(CHAINS))
def test_every_chained_module_exists_and_carries_its_marker(unit):
    marker, modules = CHAINS[unit]
    assert modules
    for module in modules:
        source = (REPO / module).read_text()
        assert f"pytest.mark.{marker}" in source, module


def test_no_module_is_in_two_chains():
    modules = [m for _, chained in CHAINS.values() for m in chained]
    assert len(modules) == len(set(modules))


def test_tests_of_one_module_are_one_unit_and_each_chain_shares_one():
    assert xdist_work_unit("tests/sync/test_commit_step.py::test_a[x-1]") == "tests/sync/test_commit_step.py"
    assert xdist_work_unit("tests/sync/test_commit_step.py::TestC::test_b") == "tests/sync/test_commit_step.py"
    assert {xdist_work_unit(f"{module}::test_x") for module in WHOLE_STACK_MODULES} == {"whole stacks"}
    assert {xdist_work_unit(f"{module}::test_x") for module in OWN_CLUSTER_MODULES} == {"own clusters"}
    assert {xdist_work_unit(f"{module}::test_x") for module in UI_STACK_MODULES} == {"ui stack"}
    assert xdist_work_unit("tests/devstack/test_stack_census.py::test_x") != "whole stacks"  # by path, not by prefix
    assert {xdist_work_unit(f"tests/secure/{m}::t") for m in ("test_secure_sync.py", "test_secure_jobs.py")} == {
        SECURE_PAIR_UNIT}
    assert xdist_work_unit("tests/test_secure_words.py::t") == "tests/test_secure_words.py"


def test_the_chains_come_first_then_the_units_with_most_tests_and_each_unit_keeps_its_order():
    stack, own = sorted(WHOLE_STACK_MODULES)[:2], sorted(OWN_CLUSTER_MODULES)[0]
    collected = [
        "tests/a/test_small.py::t1",
        f"{own}::o1",
        "tests/a/test_big.py::b1",
        f"{stack[1]}::s2",
        "tests/a/test_big.py::b2",
        f"{own}::o2",
        f"{stack[0]}::s1",
        "tests/secure/test_x.py::x1",
        "tests/a/test_big.py::b3",
        "tests/secure/test_y.py::y1",
    ]
    assert xdist_work_order(collected) == [
        f"{stack[1]}::s2", f"{stack[0]}::s1",  # the whole stacks, in the order collected
        f"{own}::o1", f"{own}::o2",
        "tests/a/test_big.py::b1", "tests/a/test_big.py::b2", "tests/a/test_big.py::b3",
        "tests/secure/test_x.py::x1", "tests/secure/test_y.py::y1",  # one unit of two tests
        "tests/a/test_small.py::t1",
    ]
    assert sorted(xdist_work_order(collected)) == sorted(collected)  # nothing lost or doubled


def test_a_collected_session_runs_the_chains_first(request):
    # this session's own collection went through pytest_collection_modifyitems
    units = [xdist_work_unit(item.nodeid) for item in request.session.items]
    present = [u for u in CHAINS if u in units]
    firsts = list(dict.fromkeys(units))
    assert firsts[:len(present)] == present
    # each unit's tests are together
    assert len(firsts) == len([u for i, u in enumerate(units) if i == 0 or units[i - 1] != u])
