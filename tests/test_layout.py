"""The package's layout rules (ARCHITECTURE.md), read from the code's own imports: dependencies
point one way (Dagster layer -> capabilities -> I/O -> rules), no SQL outside storage/, no private
names imported across modules, the dev harness never imported by the product, a few flat modules;
and the tests' own rule: a test module is imported by nothing (shared helpers live in tests/helpers/,
shared fixtures in a conftest.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "offset_pipeline"

#: Room -> layer; a room may import rooms of a lower layer only (and itself). ARCHITECTURE.md.
LAYERS = {
    "translation": 0,
    "settings": 1, "run_targets": 1,
    "kafka_io": 2, "storage": 2,
    "sync": 3, "audit": 3, "monitoring": 3, "housekeeping": 3, "readiness": 3, "mirror_check": 3,
    "fast_forward": 4,  # builds on the sync cycle's commit step
    "continuous": 4,  # the sync cycle's steps, back to back, with monitoring rows at checkpoints
    "resources": 5,
    "assets": 6, "sensors": 6, "cli": 6,
    "definitions": 7,
}
PURE_ROOMS = {"translation"}
THIRD_PARTY_IO = ("confluent_kafka", "pyspark", "dagster", "clickhouse_connect", "chdb", "pandas")
SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT INTO|ALTER TABLE|CREATE TABLE|DROP TABLE|OPTIMIZE TABLE)\b", re.S)


def modules() -> list[tuple[str, Path, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        out.append((name, path, ast.parse(path.read_text(), filename=str(path))))
    return out


def room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "offset_pipeline" or len(parts) < 2:
        return None
    return parts[1]


def imported(module: str, tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module imported, names taken) for every import; relative imports resolved."""
    out = []
    package = module.rsplit(".", 1)[0] if not module.endswith("__init__") else module.removesuffix(".__init__")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base == "__future__":
                continue
            names = [a.name for a in node.names]
            out.append((base, names))
            # `from offset_pipeline import cycle_carry`-style: the names are modules
            out += [(f"{base}.{n}", []) for n in names if room(f"{base}.{n}") and base.count(".") < 1]
    return out


def test_every_room_has_a_layer():
    rooms = {room(name) for name, _, _ in modules()} - {"__init__"}
    assert rooms <= set(LAYERS), f"rooms without a layer (add them to LAYERS and ARCHITECTURE.md): {rooms - set(LAYERS)}"


def test_dependencies_point_one_way():
    wrong = []
    for name, _, tree in modules():
        source = room(name)
        if source in (None, "__init__"):
            continue
        for target_module, _ in imported(name, tree):
            target = room(target_module)
            if target is None or target == source or target == "__init__":
                continue
            if LAYERS[target] >= LAYERS[source]:
                wrong.append(f"{name} -> {target_module} ({source} layer {LAYERS[source]}, {target} {LAYERS[target]})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_product_never_imports_the_harness_or_the_tests():
    wrong = [f"{name} -> {target}" for name, _, tree in modules() for target, _ in imported(name, tree)
             if target.split(".")[0] in ("devstack", "bench", "tests")]
    assert not wrong, wrong


def test_the_rules_import_no_io_library():
    wrong = [f"{name} -> {target}" for name, _, tree in modules() if room(name) in PURE_ROOMS
             for target, _ in imported(name, tree) if target.split(".")[0] in THIRD_PARTY_IO]
    assert not wrong, wrong


def test_no_sql_outside_storage():
    wrong = []
    for name, path, tree in modules():
        if room(name) == "storage":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("query", "command", "insert") and isinstance(node.func.value, ast.Name) and \
                    node.func.value.id in ("client", "clickhouse"):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.func.value.id}.{node.func.attr}(...)")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: SQL text {node.value[:60]!r}")
    assert not wrong, "SQL outside storage/:\n" + "\n".join(wrong)


def imported_test_modules(module: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, test module) for every import of a test module (a module of ``tests/`` named ``test_*``):
    ``import tests.a.test_b``, ``from tests.a.test_b import x``, ``from tests.a import test_b`` and
    their relative forms."""
    def is_test_module(name: str) -> bool:
        parts = name.split(".")
        return parts[0] == "tests" and len(parts) > 1 and parts[-1].startswith("test_")

    package = module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if is_test_module(base):
                out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if is_test_module(f"{base}.{a.name}")]
    return out


@pytest.mark.parametrize("folder", ["tests", "devstack", "bench"])
def test_no_module_imports_a_test_module(folder):
    # A helper two test modules share lives in tests/helpers/ and a shared fixture in the nearest
    # conftest.py: a test module that imports another ties the two (and their fixtures, their
    # module-scoped brokers) together, so a change to one breaks the other folder's tests.
    wrong = []
    for path in sorted((REPO / folder).rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for line, target in imported_test_modules(module, ast.parse(path.read_text(), filename=str(path))):
            wrong.append(f"{path.relative_to(REPO)}:{line}: imports {target}")
    assert not wrong, "test modules imported (move the helper to tests/helpers/, the fixture to a conftest.py):\n" + \
        "\n".join(wrong)


def test_the_test_module_import_check_can_fail():
    found = imported_test_modules("tests.readiness.test_switchover", ast.parse(
        "from tests.assets.test_commit_asset import Cycles\n"
        "import tests.kafka_io.test_standby_group_io\n"
        "from tests.assets import test_outages, conftest\n"
        "from .test_readiness_outage import cycle\n"
        "from tests.helpers.groups import Member\n"
        "from tests.conftest import wait_for\n"
        "from tests import helpers\n"
    ))
    assert found == [(1, "tests.assets.test_commit_asset"), (2, "tests.kafka_io.test_standby_group_io"),
                     (3, "tests.assets.test_outages"), (4, "tests.readiness.test_readiness_outage")]


@pytest.mark.parametrize("folder", ["offset_pipeline", "devstack", "bench", "tests"])
def test_no_private_name_is_imported_across_modules(folder):
    wrong = []
    for path in sorted((REPO / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module} {private}")
    assert not wrong, wrong


def test_few_flat_modules():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 5, flat


def test_the_sql_check_can_fail(tmp_path):
    # the checks above read real code; make sure the detectors see what they are meant to see
    tree = ast.parse('Q = "SELECT a FROM t WHERE x = 1"\nclient.query(Q)\n')
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert calls and calls[0].func.attr == "query"
    assert SQL.search("SELECT a FROM t")
    assert imported("offset_pipeline.sync.x", ast.parse("from ..storage import snapshots")) == \
        [("offset_pipeline.storage", ["snapshots"])]


def test_the_wheel_holds_the_product_only():
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(where=str(REPO), include=config["include"])
    assert "offset_pipeline" in packages
    assert not [p for p in packages if not p.startswith("offset_pipeline")], packages
    assert "package-data" not in config and "devstack" not in str(config)
