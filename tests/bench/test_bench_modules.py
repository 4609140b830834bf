"""The benchmarks are not run by the suite (they take minutes and print figures), so this keeps them
runnable: every module of the bench package imports as ``bench.<name>`` with the repository root on
the path as ``bin/setup`` puts it, and none edits ``sys.path`` itself."""

from __future__ import annotations

import importlib

import pytest

from devstack.paths import REPO_ROOT

BENCH = REPO_ROOT / "bench"
MODULES = sorted(
    ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
    for path in BENCH.rglob("*.py")
    if "results" not in path.relative_to(BENCH).parts and path.name != "__main__.py"
)


def test_the_benchmarks_are_found():
    assert {"bench.scale_curve", "bench.soak.run", "bench.compare_mm2", "bench.clusters"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_from_the_package(module):
    importlib.import_module(module)


@pytest.mark.parametrize("module", MODULES)
def test_no_module_edits_sys_path(module):
    source = (REPO_ROOT / (module.replace(".", "/") + ".py")).read_text()
    assert "sys.path.insert" not in source and "sys.path.append" not in source
