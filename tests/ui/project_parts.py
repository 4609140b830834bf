"""What a data engineer must find in the Dagster UI: every asset (by group), asset check, sensor,
schedule and job of the project, written out by hand.

The list is the test's own, not read from the code location: removing an asset or sensor from the
project makes the browser test fail. ``test_project_parts.py`` keeps the list equal to
``offset_pipeline.definitions.defs``, so a new asset cannot go unchecked either.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProjectParts:
    assets_by_group: dict[str, frozenset[str]]
    checks_by_asset: dict[str, frozenset[str]]
    sensors: frozenset[str]
    schedules: frozenset[str]
    jobs: frozenset[str] = field(default_factory=frozenset)

    @property
    def assets(self) -> frozenset[str]:
        return frozenset().union(*self.assets_by_group.values())

    def names(self) -> set[str]:
        """Every part as ``kind name``, e.g. ``sensor offset_sync_sensor``, ``check offset_standby_commits:no_loss``."""
        return (
            {f"asset {a}" for a in self.assets}
            | {f"check {a}:{c}" for a, checks in self.checks_by_asset.items() for c in checks}
            | {f"sensor {s}" for s in self.sensors}
            | {f"schedule {s}" for s in self.schedules}
            | {f"job {j}" for j in self.jobs}
        )


PROJECT = ProjectParts(
    assets_by_group={
        "offset_sync": frozenset({"offset_snapshot", "offset_translations", "offset_standby_commits",
                                  "offset_sync_metrics"}),
        "offset_sync_continuous": frozenset({"offset_continuous_sync"}),
        "stale_partitions": frozenset({"offset_fast_forwards"}),
        "audits": frozenset({"offset_failover_audit"}),
        "mirror": frozenset({"offset_mirror_proofs"}),
    },
    checks_by_asset={
        "offset_snapshot": frozenset({"clusters_readable"}),
        "offset_translations": frozenset({"translation_engine_available", "translation_complete", "within_safe_bound"}),
        "offset_sync_metrics": frozenset({"metrics_written", "switch_readiness"}),
        "offset_standby_commits": frozenset({"no_loss", "sync_freshness"}),
        "offset_continuous_sync": frozenset({"no_loss", "sync_freshness", "clusters_readable", "switch_readiness",
                                             "checkpoints_written", "commit_log_followed"}),
        "offset_fast_forwards": frozenset({"no_loss"}),
        "offset_failover_audit": frozenset({"no_loss_in_window"}),
        "offset_mirror_proofs": frozenset({"every_direction_has_a_proof"}),
    },
    sensors=frozenset({"offset_continuous_sync_sensor", "offset_sync_sensor", "stale_partition_sensor",
                       "dagster_run_retention"}),
    schedules=frozenset({"offset_failover_audit_schedule", "offset_mirror_check_schedule"}),
    jobs=frozenset({"offset_sync_cycle", "offset_sync_continuous", "offset_fast_forward", "offset_failover_audit_job",
                    "offset_mirror_check"}),
)


def parts_of_definitions(defs) -> ProjectParts:
    """The same shape, read from a ``dg.Definitions`` (to keep :data:`PROJECT` honest)."""
    graph = defs.resolve_asset_graph()
    by_group: dict[str, set[str]] = {}
    for key in graph.get_all_asset_keys():
        by_group.setdefault(graph.get(key).group_name, set()).add(key.to_user_string())
    checks: dict[str, set[str]] = {}
    for check in graph.asset_check_keys:
        checks.setdefault(check.asset_key.to_user_string(), set()).add(check.name)
    return ProjectParts(
        assets_by_group={g: frozenset(a) for g, a in by_group.items()},
        checks_by_asset={a: frozenset(c) for a, c in checks.items()},
        sensors=frozenset(s.name for s in defs.sensors),
        schedules=frozenset(s.name for s in defs.schedules),
        jobs=frozenset(j.name for j in defs.jobs),
    )
