"""``offset_fast_forwards``: fast-forward a quiet low-traffic group's standby offsets (docs/operating/fast-forward.md).

Launched by ``stale_partition_sensor`` (one run per group, its run key from the group-partitions and
the log ends the sensor saw) or by hand from the launchpad with the same config. The sensor's view
may be old, so ``fast_forward/step.py`` re-reads everything live, re-checks each condition
(``fast_forward/recheck.py``), translates with the caught-up rule and commits through the sync cycle's
commit step (the commit rules: no live standby group, never backwards, the safe bound, dry run, ONE
commit call). Every partition gets a row in ``offset_fast_forwards`` with its outcome and reason
(left alone ones name the failed condition); partitions left synced also get a monitoring row in
``offset_sync_metrics`` (strategy ``caught_up``), so Grafana and the sync age show the fast-forward
(both written by ``fast_forward/run.py``). The sync cycle then keeps the point
(``storage/fast_forwards.latest_points``).

Runs carry the sync concurrency tag: they never overlap a sync cycle (commits, embedded ClickHouse).
"""

import time
from collections import Counter

import dagster as dg
from pydantic import Field

from offset_pipeline.fast_forward.recheck import RequestedPartition
from offset_pipeline.fast_forward.run import record_outcome
from offset_pipeline.fast_forward.step import FastForwardRequest, fast_forward_group
from offset_pipeline.monitoring.decision_log import write_decision_lines
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.resources.mirrors import MirrorsResource
from offset_pipeline.run_targets import SYNC_POOL
from offset_pipeline.settings import dry_run_default, kafka_timeout_s, stale_window_s
from offset_pipeline.storage import fast_forwards
from offset_pipeline.sync.commit_checks import NO_LOSS_CHECK, evaluate_no_loss
from offset_pipeline.sync.commit_rules import commit_log_line
from offset_pipeline.sync.commit_step import CycleContext
from offset_pipeline.translation.log_line import PREFIX, Token, log_line

FAST_FORWARD_KIND = "fast-forward"
FAST_FORWARD_LOG_PREFIX = f"{PREFIX} {FAST_FORWARD_KIND}"


class RequestedPartitionConfig(dg.Config):
    topic: str
    partition: int = Field(ge=0)
    active_end: int = Field(ge=0, description="the active log end the sensor saw")
    standby_end: int = Field(ge=0, description="the standby log end the sensor saw")
    stable_since_ms: int = Field(description="since when (epoch ms) the sensor saw both log ends unmoved")


class FastForwardConfig(dg.Config):
    group_id: str
    active: str
    standby: str
    partitions: list[RequestedPartitionConfig]
    window_s: float = Field(default_factory=stale_window_s, gt=0)
    marker_slack: int = Field(default=1, ge=0, le=10)
    # Default from OFFSET_PIPELINE_DRY_RUN, as the sync cycle's commit step.
    dry_run: bool = Field(default_factory=dry_run_default)
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)  # OFFSET_PIPELINE_KAFKA_TIMEOUT_S
    lagging_after_s: float = Field(default=120.0, gt=0)  # for the monitoring rows' status


def decision_line(row: fast_forwards.FastForwardRow) -> str:
    """One line per partition, in the decision lines' format (translation/log_line.py)."""
    return log_line(FAST_FORWARD_KIND, [
        ("group", row.group_id), ("topic", row.topic), ("partition", row.partition), ("active", row.active),
        ("standby", row.standby), ("outcome", Token(row.outcome)), ("rejection", Token(row.rejection or "-")),
        ("c", row.committed), ("previous", row.previous_offset), ("new", row.new_offset), ("reason", row.reason),
    ])


@dg.asset(
    pool=SYNC_POOL,
    group_name="stale_partitions",
    kinds={"kafka", "clickhouse"},
    check_specs=[
        dg.AssetCheckSpec(
            NO_LOSS_CHECK, asset="offset_fast_forwards",
            description="Every standby offset this fast-forward wrote, read back, is at or below its proven safe bound.",
        ),
    ],
)
def offset_fast_forwards(
    context: dg.AssetExecutionContext,
    config: FastForwardConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
    mirrors: MirrorsResource,
) -> dg.MaterializeResult:
    """Standby offsets of quiet, caught-up group-partitions moved to the standby log end, re-checked live."""
    started = time.monotonic()
    now_ms = int(time.time() * 1000)
    request = _request(config)
    clusters = {resource.cluster_name: resource for resource in (idc1, idc2)}
    cycle = CycleContext(context.run.run_id, now_ms, config.dry_run, config.kafka_timeout_s)
    outcome = fast_forward_group(request, clusters, mirrors, cycle)

    write_decision_lines([commit_log_line(c) for c in outcome.plan] + [decision_line(r) for r in outcome.rows])
    # The run's offset_fast_forwards rows, then monitoring rows for the partitions it left synced.
    metric_count = record_outcome(clickhouse.get_client(), outcome, config.group_id, now_ms, config.lagging_after_s)
    _log_outcome(context.log, config, outcome.rows)
    return dg.MaterializeResult(
        metadata=_metadata(config, outcome.rows, metric_count, started),
        check_results=[evaluate_no_loss(outcome.commit_rows).to_result()],
    )


def _request(config: FastForwardConfig) -> FastForwardRequest:
    return FastForwardRequest(
        config.group_id, config.active, config.standby,
        tuple(RequestedPartition(p.topic, p.partition, p.active_end, p.standby_end, p.stable_since_ms)
              for p in config.partitions),
        window_s=config.window_s, marker_slack=config.marker_slack,
    )


def _log_outcome(log: dg.DagsterLogManager, config: FastForwardConfig,
                 rows: list[fast_forwards.FastForwardRow]) -> None:
    """A warning per partition not moved (left alone, refused, failed), then one summary."""
    for r in rows:
        if r.outcome in (fast_forwards.LEFT_ALONE, fast_forwards.REFUSED, fast_forwards.FAILED):
            log.warning(f"{config.group_id!r} {r.topic}[{r.partition}] {r.outcome}: {r.rejection or ''} {r.reason}")
    outcomes = Counter(r.outcome for r in rows)
    log.info(
        f"offset-sync fast-forward {config.group_id!r} {config.active}->{config.standby}: "
        + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items()))
    )


def _partitions_table(rows: list[fast_forwards.FastForwardRow]) -> str:
    """Markdown, one line per partition (``|`` escaped in topics and reasons)."""
    return "\n".join(
        ["| topic | partition | outcome | rejection | c | previous | new | quiet (s) | reason |",
         "|---|---|---|---|---|---|---|---|---|"]
        + [f"| {r.topic.replace('|', chr(92) + '|')} | {r.partition} | {r.outcome} | {r.rejection or '-'} | "
           f"{r.committed} | {r.previous_offset} | {r.new_offset} | "
           f"{'-' if r.stable_for_s is None else f'{r.stable_for_s:.0f}'} | {r.reason.replace('|', chr(92) + '|')} |"
           for r in rows]
    )


def _metadata(config: FastForwardConfig, rows: list[fast_forwards.FastForwardRow], metric_count: int,
              started: float) -> dict:
    """The materialization's metadata (``started``: the step's ``time.monotonic()`` at its start)."""
    outcomes = Counter(r.outcome for r in rows)
    rejections = Counter(r.rejection for r in rows if r.rejection)
    table = _partitions_table(rows)
    return {
        "group_id": config.group_id,
        "direction": f"{config.active}->{config.standby}",
        "dry_run": config.dry_run,
        "partitions": len(rows),
        **{f"outcome_{k}": v for k, v in sorted(outcomes.items())},
        **{f"rejection_{k}": v for k, v in sorted(rejections.items())},
        "monitoring_rows": metric_count,
        "partitions_table": dg.MetadataValue.md(table),
        "total_seconds": round(time.monotonic() - started, 3),
    }
