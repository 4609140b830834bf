"""What a fast-forward run records after ``fast_forward/step.py`` has decided and committed.

``assets/fast_forward.py`` (``offset_fast_forwards``) calls :func:`record_outcome` with the group's
outcome: one ``offset_fast_forwards`` row per partition (``storage/fast_forwards.py``), then one
monitoring row (``offset_sync_metrics``, strategy ``caught_up``) per partition the run left synced
(:func:`monitoring_facts`), so Grafana and the sync age show the fast-forward.

No Dagster here: the asset logs, turns the rows into metadata and evaluates the check.
"""

from __future__ import annotations

from offset_pipeline.fast_forward.step import FastForwardOutcome
from offset_pipeline.monitoring.metric_rules import CycleFacts, metric_rows
from offset_pipeline.storage import fast_forwards, metrics

#: Outcomes that leave the standby at the standby log end: synced, for the monitoring rows.
LEFT_SYNCED = (fast_forwards.FAST_FORWARDED, fast_forwards.UNCHANGED)


def monitoring_facts(outcome: FastForwardOutcome) -> list[CycleFacts]:
    """One :class:`CycleFacts` per partition left synced, with the log ends the run re-read."""
    live = outcome.live.partitions if outcome.live else {}
    return [
        CycleFacts(
            r.group_id, r.topic, r.partition, r.active, r.standby, r.committed, r.new_offset, "caught_up",
            "caught_up", r.decision, r.applied, r.committed_after,
            active_log_end=live[(r.topic, r.partition)].active_log_end,
            standby_log_end=live[(r.topic, r.partition)].standby_log_end,
        )
        for r in outcome.rows if r.outcome in LEFT_SYNCED
    ]


def record_outcome(client, outcome: FastForwardOutcome, group_id: str, now_ms: int, lagging_after_s: float) -> int:
    """Writes the run's ``offset_fast_forwards`` rows, then its monitoring rows; returns how many
    monitoring rows were written. Raises what ClickHouse raises."""
    fast_forwards.ensure_table(client)
    metrics.ensure_tables(client)
    fast_forwards.insert_rows(client, outcome.rows)

    # Monitoring rows for the partitions this run left synced: the sync age restarts here.
    facts = monitoring_facts(outcome)
    if not facts:
        return 0
    previous_d, last_synced = metrics.previous_state(client, [group_id], now_ms, keys=[f.key for f in facts])
    return metrics.insert_rows(
        client, metric_rows(now_ms, facts, previous_d, last_synced, lagging_after_s=lagging_after_s))
