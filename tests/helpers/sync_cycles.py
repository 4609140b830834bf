"""Sync cycles run in this process (the assets materialized as the sync's job runs them), their asset
checks, and the lines the decisions logger writes meanwhile."""

from __future__ import annotations

import contextlib
import logging
import re

import dagster as dg

from offset_pipeline.assets import all_assets
from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.assets.snapshot import offset_snapshot
from offset_pipeline.assets.translation import offset_translations
from offset_pipeline.monitoring.decision_log import decision_logger
from tests.helpers import pairs
from tests.helpers.groups import committed

#: Every asset of the ``offset_sync`` group: one sync cycle, as the interval mode's job runs it.
SYNC_ASSETS = [
    a for a in all_assets
    if isinstance(a, dg.AssetsDefinition) and set(a.group_names_by_key.values()) == {"offset_sync"}
]


def checks(result) -> dict[str, dg.AssetCheckEvaluation]:
    """check name -> its evaluation in the run."""
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


@contextlib.contextmanager
def decision_lines():
    """Every line the decisions logger writes meanwhile (monitoring/decision_log.py), routine ones included (as
    with OFFSET_PIPELINE_DECISION_LOG=all), in order."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.extend(record.getMessage().split("\n"))

    logger = decision_logger()
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class Cycles:
    """Runs sync cycles (the three assets in one run, like the offset_sync_cycle job) for one group."""

    def __init__(self, kafka_pair, chdb_dsn, group: str, topic: str):
        self.kafka_pair, self.group, self.topic = kafka_pair, group, topic
        self.resources = pairs.resources(pairs.bootstraps(kafka_pair), chdb_dsn)
        self.instance = dg.DagsterInstance.ephemeral()
        self.decision_lines: dict[str, list[str]] = {}  # run id -> lines of the decisions logger

    @property
    def client(self):
        # a fresh handle each time: the resource closes the embedded engine's client after each run
        return self.resources["clickhouse"].get_client()

    def run(self, *, dry_run: bool = False, extra_assets=(), extra_ops_config=None) -> dg.ExecuteInProcessResult:
        with decision_lines() as lines:
            result = self._materialize(dry_run, extra_assets, extra_ops_config or {})
        self.decision_lines[result.run_id] = lines
        assert result.success
        return result

    def _materialize(self, dry_run: bool, extra_assets, extra_ops_config: dict) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [offset_snapshot, offset_translations, offset_standby_commits, *extra_assets],
            resources=self.resources,
            instance=self.instance,
            run_config={"ops": {
                "offset_snapshot": {"config": {"group_include": f"^{re.escape(self.group)}$"}},
                "offset_translations": {"config": {"topic_shapes": {self.topic: "two_way"}}},
                "offset_standby_commits": {"config": {"dry_run": dry_run}},
                **extra_ops_config,
            }},
        )

    def commits(self, result) -> dict[int, dict]:
        """partition -> this run's offset_commits row."""
        names = ["partition", "active", "standby", "previous_offset", "new_offset", "safe_bound", "decision", "reason",
                 "dry_run", "applied", "error", "committed_after"]
        rows = self.client.query(
            f"SELECT {', '.join(names)} FROM offset_commits "
            "WHERE snapshot_id = {s:String} AND group_id = {g:String}",
            parameters={"s": result.run_id, "g": self.group},
        ).result_rows
        return {r[0]: dict(zip(names, r)) for r in rows}

    def translations(self, result) -> dict[int, tuple]:
        """partition -> (standby_offset, safe_bound, status) of this run's translation."""
        rows = self.client.query(
            "SELECT partition, standby_offset, safe_bound, status FROM offset_translations "
            "WHERE snapshot_id = {s:String} AND group_id = {g:String}",
            parameters={"s": result.run_id, "g": self.group},
        ).result_rows
        return {r[0]: r[1:] for r in rows}

    def log_lines(self, result, prefix: str) -> list[str]:
        return [line for line in self.decision_lines[result.run_id] if line.startswith(prefix)]

    def standby_committed(self, cluster: str = "idc2") -> dict[int, int]:
        return committed(self.kafka_pair.bootstrap(cluster), self.group, self.topic)
