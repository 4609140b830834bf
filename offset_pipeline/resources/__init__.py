"""Dagster resources: the two Kafka clusters, ClickHouse and Spark."""

from offset_pipeline.resources.clickhouse import ClickHouseResource, close_embedded_clients
from offset_pipeline.resources.kafka import CLUSTER_RESOURCE_KEYS, KafkaClusterResource, KafkaClusterUnreachable
from offset_pipeline.resources.spark import SparkResource, get_spark_session, spark_conf

__all__ = [
    "CLUSTER_RESOURCE_KEYS",
    "ClickHouseResource",
    "KafkaClusterResource",
    "KafkaClusterUnreachable",
    "SparkResource",
    "close_embedded_clients",
    "get_spark_session",
    "spark_conf",
]
