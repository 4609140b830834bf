"""Sync cycles and the failover audit for one group on the session clusters."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import dagster as dg

from offset_pipeline.assets import offset_failover_audit, offset_snapshot, offset_standby_commits, offset_translations
from tests.helpers import pairs
from tests.helpers.groups import Member


class AuditStack:
    """Sync cycles (two-way topic) and the failover audit of today's moments for one group, with the
    audit's rows read back."""

    def __init__(self, kafka_pair, chdb_dsn, group: str, topic: str):
        self.group, self.topic = group, topic
        self.resources = pairs.resources(pairs.bootstraps(kafka_pair), chdb_dsn)
        self.instance = dg.DagsterInstance.ephemeral()

    @property
    def client(self):
        return self.resources["clickhouse"].get_client()

    def cycle(self) -> None:
        result = dg.materialize(
            [offset_snapshot, offset_translations, offset_standby_commits], resources=self.resources,
            instance=self.instance, run_config={"ops": {
                "offset_snapshot": {"config": {"group_include": f"^{re.escape(self.group)}$"}},
                "offset_translations": {"config": {"topic_shapes": {self.topic: "two_way"}, "detect_shapes": False}},
            }},
        )
        assert result.success

    def audit(self) -> dg.ExecuteInProcessResult:
        day = datetime.now(timezone.utc).date().isoformat()
        result = dg.materialize(
            [offset_failover_audit], resources=self.resources, instance=self.instance, partition_key=day,
            run_config={"ops": {"offset_failover_audit": {"config": {
                "exactly_once_mirror": True, "topic_shapes": {self.topic: "two_way"}}}}},
            raise_on_error=False,
        )
        assert result.success
        return result

    def rows(self) -> list[dict]:
        names = ["snapshot_time", "committed", "standby_committed", "standby_end_at", "status", "lost", "duplicated",
                 "lost_offsets", "duplicated_offsets", "strategy", "reason"]
        rows = self.client.query(
            f"SELECT {', '.join(names)} FROM offset_failover_audits WHERE group_id = {{g:String}} ORDER BY snapshot_time",
            parameters={"g": self.group},
        ).result_rows
        return [dict(zip(names, r)) for r in rows]


def processed_up_to(kafka_pair, stack: "AuditStack", c: int, cycles: int = 2) -> None:
    """The group, live on idc1, has processed everything below ``c``; ``cycles`` sync cycles run
    meanwhile; then it stops."""
    member = Member(kafka_pair.bootstrap("idc1"), stack.group, stack.topic)
    try:
        member.commit(stack.topic, {0: c})
        for _ in range(cycles):
            stack.cycle()
    finally:
        member.close()

