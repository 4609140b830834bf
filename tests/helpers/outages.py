"""One sync cycle with a part down (a cluster, Spark, ClickHouse), and when a restarted cluster
serves the outage topic again (``outage_topic``, ``own_idc2`` in tests/conftest.py)."""

from __future__ import annotations

import dagster as dg
from confluent_kafka import KafkaException

from offset_pipeline.resources import SparkResource
from tests.helpers import pairs
from tests.helpers.records import log_end
from tests.helpers.sync_cycles import SYNC_ASSETS
from tests.helpers.topics import OUTAGE_RECORDS, PARTITIONS


def resources(chdb_dsn, idc1: str, idc2: str, spark: SparkResource | None = None) -> dict:
    """:func:`tests.helpers.pairs.resources` for the clusters at ``idc1`` and ``idc2``, with ``spark``
    instead of local Spark when given."""
    res = pairs.resources({"idc1": idc1, "idc2": idc2}, chdb_dsn)
    return {**res, "spark": spark} if spark is not None else res


def cycle(res: dict, group: str, topic: str, instance, **translation) -> dg.ExecuteInProcessResult:
    """One sync cycle (every asset of the offset_sync group, as the sensor's job) for one group;
    ``translation``: more config of offset_translations."""
    timeout = {"kafka_timeout_s": 3.0}
    result = dg.materialize(SYNC_ASSETS, resources=res, instance=instance, run_config={"ops": {
        "offset_snapshot": {"config": {"group_include": f"^{group}$", **timeout}},
        "offset_translations": {"config": {"topic_shapes": {topic: "one_way:idc1"}, **timeout, **translation}},
        "offset_standby_commits": {"config": timeout},
    }})
    assert result.success, "a cycle with a part down must still succeed"
    return result


def serves(bootstrap: str, topic: str) -> bool:
    """Whether the cluster at ``bootstrap`` serves every partition of the outage topic again, whole."""
    try:
        return all(log_end(bootstrap, topic, p) >= OUTAGE_RECORDS for p in range(PARTITIONS))
    except KafkaException:
        return False
