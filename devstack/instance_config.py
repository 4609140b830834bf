"""``$DAGSTER_HOME/dagster.yaml`` for the local stack, from ``deploy/dagster.yaml``.

A new ``DAGSTER_HOME`` gets the template as it is. An existing one keeps every setting it has (a
PostgreSQL storage block, a changed run queue) and gains the template's top-level blocks it lacks,
so a stack started by an older version gets run retention and run monitoring on its next ``bin/up``
(issue 14) without losing what someone configured.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from devstack.paths import REPO_ROOT

TEMPLATE = REPO_ROOT / "deploy" / "dagster.yaml"


def ensure_instance_config(dagster_home: Path, template: Path = TEMPLATE) -> list[str]:
    """Write or complete ``dagster_home/dagster.yaml``; returns the top-level blocks added."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    target = dagster_home / "dagster.yaml"
    wanted = yaml.safe_load(template.read_text()) or {}
    if not target.exists():
        target.write_text(template.read_text())
        return sorted(wanted)
    current = yaml.safe_load(target.read_text()) or {}
    if not isinstance(current, dict):
        raise ValueError(f"{target} is not a mapping of settings; fix or remove it")
    missing = [key for key in wanted if key not in current]
    if missing:
        text = target.read_text()
        added = yaml.safe_dump({key: wanted[key] for key in missing}, sort_keys=False)
        target.write_text(text.rstrip("\n") + f"\n# added from {template.name} by bin/up\n" + added)
    return missing
