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
        "  config:\n    max_concurrent_runs: 9\n"
        "telemetry:\n  enabled: false\n"
    )
    (home / "dagster.yaml").write_text(older)
    added = ensure_instance_config(home)
    assert added == ["retention", "run_monitoring"]
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(older)  # nothing of the operator's changed, comments included
    merged = yaml.safe_load(text)
    assert merged["run_coordinator"]["config"]["max_concurrent_runs"] == 9
    assert ensure_instance_config(home) == []  # idempotent
    with dg.DagsterInstance.from_config(str(home)) as instance:  # Dagster reads the result
        assert instance.run_monitoring_enabled
