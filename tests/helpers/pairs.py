"""A pair of clusters (tests/conftest.py's ``KafkaPair``) as tests address it: bootstrap servers by
cluster name, a partition's log end read through the admin client, the sync's resources for both."""

from __future__ import annotations

from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource, SparkResource


def bootstraps(pair) -> dict[str, str]:
    """cluster name -> bootstrap servers, for idc1 and idc2."""
    return {name: pair.bootstrap(name) for name in ("idc1", "idc2")}


def log_end(pair, cluster: str, topic: str, partition: int) -> int:
    """The partition's log end on ``cluster``, read as the sync's snapshot reads it."""
    (r,) = read_partition_ranges(pair.admin(cluster), cluster, [(topic, partition)])
    return r.log_end


def resources(bootstraps: dict[str, str], chdb_dsn: str) -> dict:
    """The sync's resources for idc1 and idc2 at ``bootstraps``, embedded ClickHouse and local Spark."""
    return {
        "idc1": KafkaClusterResource(cluster_name="idc1", bootstrap_servers=bootstraps["idc1"]),
        "idc2": KafkaClusterResource(cluster_name="idc2", bootstrap_servers=bootstraps["idc2"]),
        "clickhouse": ClickHouseResource(dsn=chdb_dsn),
        "spark": SparkResource(),
    }
