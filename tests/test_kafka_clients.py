"""Kafka clients are made in kafka_io/ and by the Dagster resource resources/kafka.py, nowhere else in
the product (ARCHITECTURE.md, "What may import what"): read from the code, every call that constructs
a ``Consumer``, ``Producer`` or ``AdminClient`` (by name or as ``confluent_kafka.X``), and every class
that extends one."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "offset_pipeline"
CLIENTS = {"Consumer", "Producer", "AdminClient"}
ALLOWED = ("offset_pipeline/kafka_io/", "offset_pipeline/resources/kafka.py")


def client_constructions(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, client class) for every construction of a Kafka client and every subclass of one."""
    def client_name(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and node.id in CLIENTS:
            return node.id
        if isinstance(node, ast.Attribute) and node.attr in CLIENTS:
            return node.attr
        return None

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := client_name(node.func)):
            out.append((node.lineno, name))
        elif isinstance(node, ast.ClassDef):
            out += [(node.lineno, name) for base in node.bases if (name := client_name(base))]
    return sorted(out)


def test_clients_are_made_in_kafka_io_and_the_resource_only():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(REPO).as_posix()
        if where.startswith(ALLOWED):
            continue
        for line, name in client_constructions(ast.parse(path.read_text(), filename=str(path))):
            wrong.append(f"{where}:{line}: {name}")
    assert not wrong, "Kafka clients made outside kafka_io/ and resources/kafka.py:\n" + "\n".join(wrong)


def test_the_client_check_can_fail():
    found = client_constructions(ast.parse(
        "from confluent_kafka import Consumer\n"
        "import confluent_kafka\n"
        "c = Consumer({})\n"
        "p = confluent_kafka.Producer({})\n"
        "class Mine(confluent_kafka.admin.AdminClient):\n"
        "    pass\n"
        "admin = cluster.admin()\n"
    ))
    assert found == [(3, "Consumer"), (4, "Producer"), (5, "AdminClient")]


def test_the_allowed_places_do_make_clients():
    # Were the allowed places renamed, the check above would pass over nothing they excuse.
    made = {where for where in ALLOWED for path in sorted(REPO.glob(where + ("**/*.py" if where.endswith("/") else "")))
            if client_constructions(ast.parse(path.read_text()))}
    assert made == set(ALLOWED)
