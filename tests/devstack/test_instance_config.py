"""bin/up's DAGSTER_HOME/dagster.yaml: the template for a new home, the missing blocks for an old one,
and the PostgreSQL storage block (``OFFSET_PIPELINE_DAGSTER_STORAGE=postgres``), read by Dagster against
a real server (devstack/postgres.py)."""

from __future__ import annotations

import dagster as dg
import psycopg2
import pytest
import yaml

from devstack.__main__ import main as devstack_main
from devstack.errors import DevStackError
from devstack.instance_config import (
    PG_URL_ENV,
    TEMPLATE,
    ensure_instance_config,
    postgres_storage,
)
from devstack.postgres import LocalPostgres, connection_url


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    server = LocalPostgres(tmp_path_factory.mktemp("pg"))
    with server.running():
        yield server


def test_a_new_home_gets_the_template(tmp_path):
    added = ensure_instance_config(tmp_path / "home")
    assert (tmp_path / "home" / "dagster.yaml").read_text() == TEMPLATE.read_text()
    assert {"run_coordinator", "retention", "run_monitoring"} <= set(added)


def test_an_older_home_keeps_its_settings_and_gains_retention_and_monitoring(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    older = (
        "# an operator's note\n"
        "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: QueuedRunCoordinator\n"
        "concurrency:\n  runs:\n    max_concurrent_runs: 9\n"
        "telemetry:\n  enabled: false\n"
    )
    (home / "dagster.yaml").write_text(older)
    added = ensure_instance_config(home)
    assert added == ["retention", "run_monitoring"]
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(older)  # nothing of the operator's changed, comments included
    merged = yaml.safe_load(text)
    assert merged["concurrency"]["runs"]["max_concurrent_runs"] == 9
    assert ensure_instance_config(home) == []  # idempotent
    with dg.DagsterInstance.from_config(str(home)) as instance:  # Dagster reads the result
        assert instance.run_monitoring_enabled


def test_a_home_from_before_the_pools_moves_its_run_queue_settings_and_gains_the_pools(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: QueuedRunCoordinator\n"
        "  config:\n    max_concurrent_runs: 9\n    tag_concurrency_limits:\n"
        "      - key: offset_pipeline/sync\n        limit: 1\n"
        "retention:\n  schedule:\n    purge_after_days: 7\n"
    )
    assert "concurrency" in ensure_instance_config(home)
    merged = yaml.safe_load((home / "dagster.yaml").read_text())
    assert "config" not in merged["run_coordinator"]
    assert merged["concurrency"]["runs"] == {"max_concurrent_runs": 9, "tag_concurrency_limits": [
        {"key": "offset_pipeline/sync", "limit": 1}]}
    assert merged["concurrency"]["pools"] == {"granularity": "run", "default_limit": 1}
    assert merged["retention"]["schedule"]["purge_after_days"] == 7  # kept
    assert ensure_instance_config(home) == []  # idempotent
    with dg.DagsterInstance.from_config(str(home)) as instance:  # valid for Dagster
        config = instance.get_concurrency_config()
        assert config.run_queue_config.max_concurrent_runs == 9
        assert config.pool_config.default_pool_limit == 1


def test_a_new_home_on_postgres_keeps_the_templates_blocks_and_dagster_stores_its_runs_there(
        tmp_path, postgres, monkeypatch):
    home = tmp_path / "home"
    assert devstack_main(["instance-config", str(home), "--postgres"]) == 0  # as bin/up runs it
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(TEMPLATE.read_text().rstrip("\n"))  # the template as it is, comments included
    config = yaml.safe_load(text)
    assert config["storage"] == {"postgres": {"postgres_url": {"env": PG_URL_ENV}}}
    assert set(yaml.safe_load(TEMPLATE.read_text())) | {"storage"} == set(config)
    assert "postgresql" not in text  # the file names the variable, never the address

    monkeypatch.setenv(PG_URL_ENV, postgres.url)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
        run = instance.add_run(dg.DagsterRun(job_name="probe_on_postgres"))
        assert instance.run_monitoring_enabled  # the template's other blocks hold
        queue = instance.get_concurrency_config()
        assert queue.run_queue_config.max_concurrent_runs == 4 and queue.pool_config.default_pool_limit == 1
    with psycopg2.connect(connection_url(postgres.socket_dir, scheme="postgresql")) as connection, \
            connection.cursor() as cursor:
        cursor.execute("SELECT pipeline_name FROM runs WHERE run_id = %s", (run.run_id,))
        assert cursor.fetchall() == [("probe_on_postgres",)]
    assert not list(home.rglob("*.db"))  # no SQLite storage beside it


def test_an_existing_home_gains_the_postgres_block_and_another_storage_is_refused(tmp_path):
    home = tmp_path / "home"
    ensure_instance_config(home)  # as a stack on SQLite left it
    before = (home / "dagster.yaml").read_text()
    assert ensure_instance_config(home, storage=postgres_storage()) == ["storage"]
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(before.rstrip("\n"))
    assert yaml.safe_load(text)["storage"] == postgres_storage()
    assert ensure_instance_config(home, storage=postgres_storage()) == []  # idempotent
    assert ensure_instance_config(home) == []  # a run without --postgres keeps what the file has

    other = tmp_path / "other"
    other.mkdir()
    (other / "dagster.yaml").write_text("storage:\n  sqlite:\n    base_dir: /var/dagster\n")
    with pytest.raises(DevStackError, match="another storage block"):
        ensure_instance_config(other, storage=postgres_storage())
    assert (other / "dagster.yaml").read_text() == "storage:\n  sqlite:\n    base_dir: /var/dagster\n"
