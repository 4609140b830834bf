"""The settings read back: a value found by its dotted path, and the real ``dagster definitions
validate`` run on the project's workspace under a given environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from devstack.paths import REPO_ROOT


def lookup(settings, path: str):
    """The value at ``path`` (``kafka.idc1.bootstrap_servers``): dict keys or attributes, part by part."""
    value = settings
    for part in path.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


def validate_definitions(env_overrides: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """``dagster definitions validate`` on workspace.yaml with ``env_overrides`` over an environment
    without a developer's own ``OFFSET_PIPELINE_*`` settings, DAGSTER_HOME in ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSET_PIPELINE_")}
    env.update(env_overrides, DAGSTER_HOME=str(tmp_path))
    dagster = Path(sys.executable).with_name("dagster")
    return subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
