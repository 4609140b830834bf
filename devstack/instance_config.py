"""``$DAGSTER_HOME/dagster.yaml`` for the local stack, from ``deploy/dagster.yaml``.

A new ``DAGSTER_HOME`` gets the template as it is. An existing one keeps every setting it has (a
PostgreSQL storage block, a changed run queue) and gains the template's top-level blocks it lacks,
so a stack started by an older version gets run retention and run monitoring on its next ``bin/up``
(bounded, unattended operation) without losing what someone configured.

``storage``: a ``storage:`` block to have as well, e.g. :func:`postgres_storage` (``bin/up`` with
``OFFSET_PIPELINE_DAGSTER_STORAGE=postgres``). Without one, Dagster keeps SQLite files in the home.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from devstack.errors import DevStackError
from devstack.paths import REPO_ROOT

TEMPLATE = REPO_ROOT / "deploy" / "dagster.yaml"

#: The variable holding the URL of the local stack's PostgreSQL (devstack/postgres.py): dagster.yaml
#: names it, so the file holds neither an address nor a secret.
PG_URL_ENV = "OFFSET_PIPELINE_DAGSTER_PG_URL"


def postgres_storage(url_env: str = PG_URL_ENV) -> dict:
    """Dagster's runs, event logs and schedules on PostgreSQL, at the URL in ``url_env``."""
    return {"postgres": {"postgres_url": {"env": url_env}}}


def ensure_instance_config(dagster_home: Path, template: Path = TEMPLATE, storage: dict | None = None) -> list[str]:
    """Write or complete ``dagster_home/dagster.yaml``; returns the top-level blocks added."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    target = dagster_home / "dagster.yaml"
    wanted = yaml.safe_load(template.read_text()) or {}
    if storage is not None:
        wanted["storage"] = storage
    if not target.exists():
        text = template.read_text()
        if storage is not None:
            text = text.rstrip("\n") + "\n" + _storage_text(storage)
        target.write_text(text)
        return sorted(wanted)
    current = yaml.safe_load(target.read_text()) or {}
    if not isinstance(current, dict):
        raise ValueError(f"{target} is not a mapping of settings; fix or remove it")
    if storage is not None and current.get("storage", storage) != storage:
        # Someone's own storage (another server, SQLite by name) is never replaced behind their back.
        raise DevStackError(
            f"{target} has another storage block ({yaml.safe_dump(current['storage'], default_flow_style=True).strip()}) "
            f"than the one asked for ({yaml.safe_dump(storage, default_flow_style=True).strip()}): remove it, or "
            "use another DAGSTER_HOME")
    missing = [key for key in wanted if key not in current]
    if "concurrency" in missing and _queue_settings(current):
        return _moved_queue_settings(target, current, wanted, missing)
    if missing:
        text = target.read_text()
        added = yaml.safe_dump({key: wanted[key] for key in missing if key != "storage"}, sort_keys=False)
        if added.strip() != "{}":
            text = text.rstrip("\n") + f"\n# added from {template.name} by bin/up\n" + added
        if "storage" in missing:
            text = text.rstrip("\n") + "\n" + _storage_text(wanted["storage"])
        target.write_text(text)
    return missing


def _storage_text(storage: dict) -> str:
    return ("# Dagster's storage, written by `python -m devstack instance-config` (bin/up: "
            "OFFSET_PIPELINE_DAGSTER_STORAGE)\n" + yaml.safe_dump({"storage": storage}, sort_keys=False))


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
