"""bin/up's DAGSTER_HOME/dagster.yaml: the template for a new home, the missing blocks for an old one."""

from __future__ import annotations

import dagster as dg
import yaml

from devstack.instance_config import TEMPLATE, ensure_instance_config


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
