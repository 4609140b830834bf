"""A translation read the broker refused for want of an ACL: on which cluster, and the reason of the
partition's ``not_authorized`` rows (``kafka_io/authorization.py``).

The record reads of one partition touch both clusters (the active's records at the group's offset,
the standby's copies), and the error librdkafka raises (``TOPIC_AUTHORIZATION_FAILED``: "Fetch from
broker 1 failed") does not say which. So, only on this failure path, each cluster is asked what the
principal may do: one topic description with its authorized operations, or one description of the
readers' group; each bounded by a short timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from offset_pipeline.kafka_io.authorization import not_authorized_reason, refusal

#: A bound of its own for the check (the reads' bound may be spent already).
CHECK_TIMEOUT_S = 5.0
_READER_GROUP = "offset-pipeline-reads-authorization-check"


def _may_read_topic(config: dict[str, Any], topic: str, timeout_s: float) -> bool | None:
    """Whether the principal may read ``topic`` (None: the check itself failed)."""
    admin = AdminClient(config)
    try:
        future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout_s,
                                       include_authorized_operations=True)[topic]
        described = future.result(timeout=timeout_s + 1.0)
    except KafkaException as exc:
        return False if refusal(exc) else None
    except Exception:  # noqa: BLE001 - no answer: unknown, the reason names both clusters
        return None
    operations = set(described.authorized_operations or ())
    return AclOperation.READ in operations or AclOperation.ALL in operations


def _may_use_reader_groups(config: dict[str, Any], timeout_s: float) -> bool | None:
    admin = AdminClient(config)
    try:
        admin.describe_consumer_groups([_READER_GROUP], request_timeout=timeout_s)[_READER_GROUP].result(
            timeout=timeout_s + 1.0)
    except KafkaException as exc:
        return False if refusal(exc) else None
    except Exception:  # noqa: BLE001 - no answer: unknown
        return None
    return True


def refused_read_reason(exc: BaseException, first_row: Mapping[str, Any], confs: Mapping[str, dict[str, Any]],
                        timeout_s: float = CHECK_TIMEOUT_S) -> str | None:
    """The ``not_authorized`` reason of a partition whose reads raised ``exc``, or None when ``exc``
    is no refusal by ACL. ``first_row``: a work row of the partition (topic, partition, active,
    standby); ``confs``: cluster -> client configuration."""
    refused = refusal(exc)
    if refused is None:
        return None
    topic, partition = first_row["topic"], int(first_row["partition"])
    sides = [c for c in (first_row["active"], first_row["standby"]) if c in confs]
    if refused.resource == "topic":
        answers = {c: _may_read_topic(confs[c], topic, timeout_s) for c in sides}
    else:  # the readers' own group (reads assign, never join, but librdkafka looks up its coordinator)
        answers = {c: _may_use_reader_groups(confs[c], timeout_s) for c in sides}
    where = [c for c, may in answers.items() if may is False] or [" or ".join(sides)]
    doing = f"reading {topic}[{partition}] ({first_row['active']} -> {first_row['standby']})"
    return "; ".join(
        not_authorized_reason(exc, cluster, topic=topic, user=confs.get(cluster, {}).get("sasl.username"), doing=doing)
        for cluster in where
    )
