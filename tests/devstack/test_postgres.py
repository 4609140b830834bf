"""The dev harness's PostgreSQL server (devstack/postgres.py), for Dagster's storage: a real server from
the ``pgserver`` wheel's binaries, started, answering, stopped without leaving a process behind,
restarted on its data after a crash, and failing with its log when it cannot start."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psycopg2
import pytest

from devstack.errors import DevStackError
from devstack.liveness import command_line, pid_alive
from devstack.postgres import (
    LocalPostgres,
    connection_url,
    dagster_storage,
    socket_dir_for,
)
from devstack.stack import DevStack, StackSettings


def libpq_url(server: LocalPostgres) -> str:
    return connection_url(server.socket_dir, scheme="postgresql")


def server_processes(data_dir: Path) -> list[int]:
    """Every process whose command line names the data folder: the postmaster (its backends are its
    children and end with it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and pid_alive(int(entry.name)):
            argv = command_line(int(entry.name)) or []
            if str(data_dir) in argv:
                found.append(int(entry.name))
    return found


def query(server: LocalPostgres, sql: str, params: tuple = ()) -> list[tuple]:
    with psycopg2.connect(libpq_url(server)) as connection, connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def test_a_started_server_answers_and_stops_without_leaving_a_process(tmp_path):
    server = LocalPostgres(tmp_path / "pg")
    assert server.pid() is None and not server.stop()
    try:
        pid = server.start()
        assert server.start() == pid  # idempotent: the running server is kept
        assert query(server, "SELECT current_database()") == [("dagster",)]
        assert "running pid" in server.status_line()
        assert server.url.startswith("postgresql+psycopg2://postgres@/dagster?host=")
        assert server_processes(server.data_dir) == [pid]
    finally:
        assert server.stop()
    assert server.pid() is None
    assert server_processes(server.data_dir) == []
    assert "fast shutdown" in server.log_path.read_text()  # a clean stop, not a kill


def test_a_killed_server_starts_again_on_its_data(tmp_path):
    server = LocalPostgres(tmp_path / "pg")
    with server.running():
        query(server, "CREATE TABLE kept (n integer)")
        query(server, "INSERT INTO kept VALUES (%s)", (7,))
        pid = server.pid()
        os.killpg(pid, signal.SIGKILL)  # a crash: postmaster.pid stays behind
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (server.data_dir / "postmaster.pid").exists() and server.pid() is None
        assert server.start() != pid
        assert query(server, "SELECT n FROM kept") == [(7,)]
    assert server_processes(server.data_dir) == []


def test_a_server_that_cannot_start_fails_with_its_log(tmp_path):
    server = LocalPostgres(tmp_path / "pg")
    with server.running():
        pass
    with open(server.data_dir / "postgresql.conf", "a") as conf:
        conf.write("shared_buffers = 'plenty'\n")
    with pytest.raises(DevStackError) as failure:
        server.start(timeout_s=30)
    assert "did not start" in str(failure.value) and "shared_buffers" in str(failure.value)
    assert server_processes(server.data_dir) == []


def test_a_deep_folder_gets_a_short_socket_of_its_own():
    deep = Path("/tmp") / ("d" * 120) / "postgres"
    assert socket_dir_for(deep) == socket_dir_for(deep)  # the URL is known before the server starts
    assert len(str(socket_dir_for(deep) / ".s.PGSQL.5432")) <= 100
    assert socket_dir_for(Path("/tmp/stack/postgres")) == Path("/tmp/stack/postgres/socket")


def test_the_storage_setting_is_sqlite_or_postgres():
    assert dagster_storage({}) == "sqlite"
    assert dagster_storage({"OFFSET_PIPELINE_DAGSTER_STORAGE": "postgres"}) == "postgres"
    with pytest.raises(DevStackError, match="OFFSET_PIPELINE_DAGSTER_STORAGE='postgress'"):
        dagster_storage({"OFFSET_PIPELINE_DAGSTER_STORAGE": "postgress"})


def test_the_stack_shows_its_postgres_and_down_stops_it(tmp_path):
    stack = DevStack(StackSettings(tmp_path / "stack", postgres=True))
    server = stack.postgres
    with server.running():
        assert any(line.startswith("postgres ") and "running pid" in line for line in stack.status_lines())
        said: list[str] = []
        stack.down(echo=said.append, leave_postgres=True)  # bin/up: Dagster ends first
        assert server.pid() is not None and "stopped postgres" not in said
        stack.down(echo=said.append)
        assert "stopped postgres" in said and server.pid() is None
    assert server_processes(server.data_dir) == []
