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
    if "concurrency" in missing and _queue_settings(current):
        return _moved_queue_settings(target, current, wanted, missing)
    if missing:
        text = target.read_text()
        added = yaml.safe_dump({key: wanted[key] for key in missing}, sort_keys=False)
        target.write_text(text.rstrip("\n") + f"\n# added from {template.name} by bin/up\n" + added)
    return missing


#: Run-queue settings Dagster takes from ``run_coordinator.config`` or ``concurrency.runs``, never both.
QUEUE_KEYS = ("max_concurrent_runs", "tag_concurrency_limits", "dequeue_interval_seconds", "dequeue_use_threads",
              "dequeue_num_workers", "max_user_code_failure_retries", "user_code_failure_retry_delay",
              "block_op_concurrency_limited_runs")


def _queue_settings(current: dict) -> dict:
    coordinator = current.get("run_coordinator") or {}
    config = coordinator.get("config") or {} if isinstance(coordinator, dict) else {}
    return {k: v for k, v in config.items() if k in QUEUE_KEYS}


def _moved_queue_settings(target: Path, current: dict, wanted: dict, missing: list[str]) -> list[str]:
    """A home from before the ``concurrency`` block: its run-queue settings move from
    ``run_coordinator.config`` to ``concurrency.runs`` (Dagster refuses them in both places), with the
    template's pools added; the file is written again (its values kept, its comments not)."""
    queue = _queue_settings(current)
    coordinator = dict(current["run_coordinator"])
    rest = {k: v for k, v in (coordinator.get("config") or {}).items() if k not in QUEUE_KEYS}
    if rest:
        coordinator["config"] = rest
    else:
        coordinator.pop("config", None)
    merged = {**current, "run_coordinator": coordinator}
    for key in missing:
        merged[key] = wanted[key]
    merged["concurrency"] = {**wanted["concurrency"], "runs": queue}
    target.write_text(f"# rewritten by bin/up: run-queue settings moved from run_coordinator.config to "
                      f"concurrency.runs\n{yaml.safe_dump(merged, sort_keys=False)}")
    return missing
