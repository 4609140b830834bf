"""docs/operating/configuration.md documents every environment setting the code reads, and names
no setting the code does not read.

The settings are taken from the code, never from a list kept here:

* the product's (``offset_pipeline/``): every string constant that is a whole ``OFFSET_PIPELINE_*``
  name (a variable read by ``settings.py``, ``housekeeping/``, ``sensors/``, ``storage/retention.py``
  ...), every variable a module reads by a constant name through ``os.environ`` / ``os.getenv``
  (``resources/spark.py`` keeps ``PYSPARK_PYTHON`` when set), and each cluster's variables, one per
  suffix of ``settings.CLUSTER_VARIABLE_SUFFIXES``, documented as ``OFFSET_PIPELINE_<CLUSTER>_<SUFFIX>``;
* the local stack's (``devstack/``, ``bin/``, Grafana's provisioning): the same constants, and the
  variables the shell scripts and provisioning files expand (``${OFFSET_PIPELINE_...}``);
* the test run's: variables ``tests/`` reads through ``os.environ.get`` by a constant name.

Invariants: every product and stack setting has a row of its own in a table of the page (a cell
holding the name in backticks); every ``OFFSET_PIPELINE_*`` name the page shows is read by the code
(a concrete per-cluster name counts when its cluster is a default name or one the page configures
in an ``OFFSET_PIPELINE_CLUSTERS=`` example).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from offset_pipeline.settings import CLUSTER_VARIABLE_SUFFIXES, DEFAULT_CLUSTER_NAMES, cluster_env_prefix

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "operating" / "configuration.md"
PREFIX = "OFFSET_PIPELINE_"
WHOLE_NAME = re.compile(r"OFFSET_PIPELINE_[A-Z0-9_]*[A-Z0-9]")
CLUSTER_TEMPLATE = "OFFSET_PIPELINE_<CLUSTER>_"
#: A name as the page writes it: a whole variable, or a per-cluster template.
NAME_ON_PAGE = re.compile(r"OFFSET_PIPELINE_(?:<CLUSTER>_)?[A-Z0-9_]*[A-Z0-9]")
SHELL_EXPANSION = re.compile(r"\$\{?(OFFSET_PIPELINE_[A-Z0-9_]*[A-Z0-9])")
CLUSTERS_EXAMPLE = re.compile(r"OFFSET_PIPELINE_CLUSTERS=[\"']?([A-Za-z0-9_-]+,[A-Za-z0-9_-]+)")
ENVIRON_READS = ("get", "setdefault", "getenv", "pop")


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` (or ``environ`` imported from os)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id == "environ")


def whole_name_constants(source: str) -> set[str]:
    """Every string constant of ``source`` that is exactly an ``OFFSET_PIPELINE_*`` variable name
    (docstrings and messages hold more than a name and do not count; nor does an f-string's prefix)."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and WHOLE_NAME.fullmatch(node.value)}


def environ_reads(source: str) -> set[str]:
    """Variables ``source`` reads by a constant name: ``os.environ.get("X")``, ``.setdefault``,
    ``os.getenv("X")``, ``os.environ["X"]`` in a load."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENVIRON_READS \
                and (_is_environ(node.func.value) or node.func.attr == "getenv") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            names.add(node.slice.value)
    return names


@functools.cache
def product_settings() -> frozenset[str]:
    """What the code location (``offset_pipeline/``) reads; per-cluster variables as templates."""
    names: set[str] = set()
    for path in _python_files(REPO / "offset_pipeline"):
        source = path.read_text()
        names |= whole_name_constants(source) | environ_reads(source)
    return frozenset(names | {CLUSTER_TEMPLATE + suffix for suffix in CLUSTER_VARIABLE_SUFFIXES})


@functools.cache
def stack_settings() -> frozenset[str]:
    """What the local stack reads (``devstack/``, ``bin/``, Grafana's provisioning), beyond the product's."""
    names: set[str] = set()
    for path in _python_files(REPO / "devstack"):
        source = path.read_text()
        names |= whole_name_constants(source) | {n for n in environ_reads(source) if n.startswith(PREFIX)}
    for path in [*sorted((REPO / "bin").iterdir()), *sorted((REPO / "grafana" / "provisioning").rglob("*.yaml"))]:
        names |= set(SHELL_EXPANSION.findall(path.read_text()))
    return frozenset(names - product_settings())


@functools.cache
def settings_of_test_runs() -> frozenset[str]:
    """What the tests read from the environment by name (the browser tests' Chromium, their artifacts)."""
    names: set[str] = set()
    for path in _python_files(REPO / "tests"):
        names |= {n for n in environ_reads(path.read_text()) if n.startswith(PREFIX)}
    return names


def documented_in_tables(page: str) -> set[str]:
    """The names a table row of ``page`` holds in backticks."""
    names = set()
    for line in page.splitlines():
        if line.lstrip().startswith("|"):
            names |= set(re.findall(r"`((?:OFFSET_PIPELINE_(?:<CLUSTER>_)?|PYSPARK_)[A-Z0-9_]*[A-Z0-9])`", line))
    return names


def missing_from_page(page: str, settings: set[str]) -> set[str]:
    return settings - documented_in_tables(page)


def unknown_on_page(page: str, known: set[str]) -> set[str]:
    """Names the page shows that no code reads."""
    clusters = set(DEFAULT_CLUSTER_NAMES)
    for pair in CLUSTERS_EXAMPLE.findall(page):
        clusters |= set(pair.split(","))
    concrete = {cluster_env_prefix(name) + suffix for name in clusters for suffix in CLUSTER_VARIABLE_SUFFIXES}
    return {name for name in NAME_ON_PAGE.findall(page) if name not in known and name not in concrete}


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text()


def test_the_code_reads_settings_the_scan_finds():
    # The scan itself must see the settings it is meant to see, or the checks below prove nothing.
    product = product_settings()
    assert {"OFFSET_PIPELINE_CLUSTERS", "OFFSET_PIPELINE_KAFKA_TIMEOUT_S", "OFFSET_PIPELINE_RUN_RETENTION_AUDIT_DAYS",
            "OFFSET_PIPELINE_SYNC_INTERVAL_S", "OFFSET_PIPELINE_<CLUSTER>_BOOTSTRAP", "PYSPARK_PYTHON"} <= product
    assert {"OFFSET_PIPELINE_UI_PORT", "OFFSET_PIPELINE_DEVSTACK_MIRROR", "OFFSET_PIPELINE_GRAFANA_CLICKHOUSE_HOST"} \
        <= stack_settings()
    assert len(product) > 40


def test_every_product_setting_is_documented(page):
    missing = missing_from_page(page, product_settings())
    assert not missing, f"{PAGE.relative_to(REPO)} has no table row for: {', '.join(sorted(missing))}"


def test_every_local_stack_setting_is_documented(page):
    missing = missing_from_page(page, stack_settings())
    assert not missing, f"{PAGE.relative_to(REPO)} has no table row for: {', '.join(sorted(missing))}"


def test_the_page_names_no_setting_the_code_does_not_read(page):
    unknown = unknown_on_page(page, product_settings() | stack_settings() | settings_of_test_runs())
    assert not unknown, f"{PAGE.relative_to(REPO)} names settings no code reads: {', '.join(sorted(unknown))}"


def test_the_checks_catch_a_dropped_row_and_an_invented_name(page):
    # The page with one setting's rows removed and an invented name added fails both checks.
    dropped = "OFFSET_PIPELINE_STALE_WINDOW_S"
    edited = "\n".join(line for line in page.splitlines() if dropped not in line)
    edited += "\n| `OFFSET_PIPELINE_NO_SUCH_SETTING` | 1 | invented |\n"
    assert dropped in missing_from_page(edited, product_settings())
    known = product_settings() | stack_settings() | settings_of_test_runs()
    assert unknown_on_page(edited, known) == {"OFFSET_PIPELINE_NO_SUCH_SETTING"}
