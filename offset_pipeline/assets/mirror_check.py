"""``offset_mirror_proofs``: what the mirror between the clusters lets the sync prove, per topic and
direction (``mirror_check/``), on a schedule (``OFFSET_PIPELINE_MIRROR_CHECK_CRON``).

The same verdicts as ``offset-pipeline mirror check``, kept in ``offset_mirror_checks`` for Grafana
and ``readiness``, shown here as a table, with a check that warns when a direction has no proof:
its groups' offsets are computed but never committed until the mirror writes origin headers or
offset syncs for it.
"""


import time
import uuid
from collections import Counter

import dagster as dg
from pydantic import Field

from offset_pipeline.mirror_check.probe import ClusterAccess, check_mirrors
from offset_pipeline.mirror_check.rules import MirrorVerdict, Proof
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.settings import kafka_timeout_s, offset_syncs_topics, parsed_topic_shapes
from offset_pipeline.storage import mirror_checks
from offset_pipeline.storage.deferred_writes import open_writer

EVERY_DIRECTION_PROVEN_CHECK = "every_direction_has_a_proof"


class MirrorCheckConfig(dg.Config):
    topics: list[str] = Field(default_factory=list, description="only these topics (default: every workload topic)")
    records_per_partition: int = Field(default=10, ge=1, le=1000, description="newest records read per partition")
    kafka_timeout_s: float = Field(default_factory=kafka_timeout_s, gt=0)


@dg.asset(
    group_name="mirror",
    kinds={"kafka", "clickhouse"},
    check_specs=[dg.AssetCheckSpec(
        EVERY_DIRECTION_PROVEN_CHECK, asset="offset_mirror_proofs",
        description="Every topic and direction has a proof the sync can commit by (origin headers or offset syncs).",
    )],
)
def offset_mirror_proofs(
    context: dg.AssetExecutionContext,
    config: MirrorCheckConfig,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    clickhouse: ClickHouseResource,
) -> dg.MaterializeResult:
    """Per topic and direction: origin headers, offset syncs or no proof, and why."""
    started = time.monotonic()
    clusters = tuple(ClusterAccess(r.cluster_name, r.admin_config(), r.client_config()) for r in (idc1, idc2))
    verdicts = check_mirrors(clusters, shapes=parsed_topic_shapes(), syncs_topics=offset_syncs_topics(),
                             topics=config.topics or None, per_partition=config.records_per_partition,
                             timeout_s=config.kafka_timeout_s)
    check_id, now_ms = context.run.run_id or uuid.uuid4().hex, int(time.time() * 1000)
    writer = open_writer(clickhouse, mirror_checks.ensure_table)
    written = mirror_checks.insert_rows(writer, [
        mirror_checks.MirrorCheckRow(check_id, now_ms, v.topic, v.active, v.standby, v.proof.value, v.status.value,
                                     v.reason) for v in verdicts
    ])
    unproven = [v for v in verdicts if v.proof is Proof.NONE]
    for verdict in unproven:
        context.log.warning(f"offset-sync mirror {verdict.status.value}: {verdict.reason}")
    return dg.MaterializeResult(
        metadata=mirror_metadata(verdicts, written, writer.outcome.deferred, time.monotonic() - started),
        check_results=[dg.AssetCheckResult(
            check_name=EVERY_DIRECTION_PROVEN_CHECK, passed=not unproven, severity=dg.AssetCheckSeverity.WARN,
            metadata={"directions_without_proof": len(unproven),
                      "first": unproven[0].reason if unproven else "none"},
        )],
    )


def mirror_metadata(verdicts: list[MirrorVerdict], written: int, spooled: int, seconds: float) -> dict:
    proofs = Counter(v.proof.value for v in verdicts)
    statuses = Counter(v.status.value for v in verdicts)
    return {
        "directions": len(verdicts),
        **{f"proof_{proof.value}": proofs.get(proof.value, 0) for proof in Proof},
        "statuses": dg.MetadataValue.json(dict(sorted(statuses.items()))),
        "verdicts": dg.MetadataValue.table(
            records=[dg.TableRecord({"topic": v.topic, "direction": v.direction, "proof": v.proof.value,
                                     "status": v.status.value, "reason": v.reason}) for v in verdicts[:500]],
            schema=dg.TableSchema(columns=[dg.TableColumn(name, "string") for name in
                                           ("topic", "direction", "proof", "status", "reason")]),
        ),
        "rows_written": written,
        "rows_spooled": spooled,
        "seconds": round(seconds, 3),
    }

