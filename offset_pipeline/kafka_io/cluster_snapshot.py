"""One cluster's part of the snapshot, as two calls that run in a child process
(``kafka_io/isolated.py``): its groups, then the log ranges and timestamp types of the partitions
any group of either cluster involves. Each takes the cluster's client configuration and returns
plain data; the snapshot asset turns a call that failed, timed out or crashed into that cluster's
``UNAVAILABLE`` rows.

The admin client lives in the child for the child's life (one cycle): both calls of a cycle reuse it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from offset_pipeline.kafka_io.cluster_client import shared_admin, shared_admin_failure
from offset_pipeline.kafka_io.connection_probe import ClusterConnectionError
from offset_pipeline.kafka_io.group_offsets import (
    GroupFilter,
    GroupState,
    PartitionRange,
    describe_error,
    read_groups,
    read_named_groups,
    read_partition_ranges,
    refused_groups,
    topic_partition_counts,
    topic_timestamp_types,
)


@dataclass(frozen=True)
class ClusterRanges:
    """The log facts of one cluster; ``unavailable`` says why none could be read (then the rest is empty)."""

    ranges: list[PartitionRange] = field(default_factory=list)
    timestamp_types: dict[str, str] = field(default_factory=dict)
    errors: dict[tuple[str, int], str] = field(default_factory=dict)  # partition -> why its facts are missing
    unavailable: str = ""
    # group id -> error: groups listed on another cluster that this one refuses to describe (an ACL)
    refused_groups: dict[str, str] = field(default_factory=dict)


def cluster_groups(admin_config: dict[str, Any], cluster: str, group_filter: GroupFilter,
                   timeout_s: float) -> list[GroupState]:
    """Every matching group's state and committed offsets on ``cluster`` (raises when listing fails:
    :class:`ClusterConnectionError` naming the cause when the client reported why it cannot connect:
    a wrong CA, password or SASL mechanism, ...)."""
    return _diagnosed(admin_config, cluster,
                      lambda admin: read_groups(admin, cluster, group_filter, timeout_s=timeout_s))


def cluster_named_groups(admin_config: dict[str, Any], cluster: str, group_ids: list[str],
                         timeout_s: float) -> list[GroupState]:
    """The state and committed offsets of ``group_ids`` on ``cluster`` (those it has), without listing
    every group; raises as :func:`cluster_groups` does when the cluster cannot be reached."""
    return _diagnosed(admin_config, cluster,
                      lambda admin: read_named_groups(admin, cluster, group_ids, timeout_s=timeout_s))


def _diagnosed(admin_config: dict[str, Any], cluster: str, read):
    """``read(admin)``; a failure the client can explain (TLS, login) raised as :class:`ClusterConnectionError`."""
    admin = shared_admin(admin_config)
    try:
        return read(admin)
    except Exception as exc:
        diagnosis = shared_admin_failure(admin_config, cluster)
        if diagnosis is None:
            raise
        raise ClusterConnectionError(diagnosis) from exc


def cluster_ranges(admin_config: dict[str, Any], cluster: str, partitions: list[tuple[str, int]],
                   timeout_s: float, unlisted_groups: list[str] | None = None) -> ClusterRanges:
    """Log start/end/last stable offset of the ``partitions`` that exist on ``cluster``, and their
    topics' timestamp types; a partition (or a topic config) that cannot be read is in ``errors``.
    ``unlisted_groups``: groups another cluster listed and this one did not; those this cluster
    refuses to describe (the principal lacks Describe there) are in ``refused_groups``."""
    admin = shared_admin(admin_config)
    errors: dict[tuple[str, int], str] = {}
    refused = _refused_groups(admin, cluster, unlisted_groups or [], timeout_s)
    try:
        counts = topic_partition_counts(admin, timeout_s=timeout_s)
        present = [(t, p) for t, p in partitions if p < counts.get(t, 0)]
        ranges = read_partition_ranges(admin, cluster, present, timeout_s=timeout_s, errors=errors)
    except Exception as exc:  # noqa: BLE001 - no log range of this cluster is known
        # The client may have said why it cannot connect (a wrong CA, password, mechanism): that first.
        diagnosis = shared_admin_failure(admin_config, cluster)
        reason = diagnosis.message if diagnosis is not None else \
            f"reading topic metadata on {cluster} failed: {describe_error(exc)}"
        return ClusterRanges(unavailable=reason, refused_groups=refused)
    try:
        types = _timestamp_types(admin, cluster, sorted({t for t, _ in present}), timeout_s)
    except Exception as exc:  # noqa: BLE001 - unknown timestamp types: the partitions' facts are incomplete
        reason = f"reading topic configs on {cluster} failed: {describe_error(exc)}"
        errors.update({tp: reason for tp in present if tp not in errors})
        types = {}
    return ClusterRanges(ranges, types, errors, refused_groups=refused)


#: How long a group found absent (described, not refused) is not asked again. Such a group is listed
#: on one cluster only (never committed on the other, or a dry run): a continuous run would describe
#: it every cycle. A right taken away is seen within this time.
ABSENT_GROUP_TTL_S = 60.0
_absent_groups: dict[tuple[str, str], float] = {}


def _refused_groups(admin, cluster: str, group_ids: list[str], timeout_s: float) -> dict[str, str]:
    now = time.monotonic()
    wanted = [g for g in group_ids if now - _absent_groups.get((cluster, g), -ABSENT_GROUP_TTL_S) >= ABSENT_GROUP_TTL_S]
    try:
        refused = refused_groups(admin, wanted, timeout_s=timeout_s)
    except Exception:  # noqa: BLE001 - the describe request itself failed: the groups stay absent, as before
        return {}
    for gid in wanted:
        if gid not in refused:
            _absent_groups[(cluster, gid)] = now
    return refused


#: How long a topic's timestamp type is taken as read. A child process that lives for a continuous
#: run reads the snapshot about once a second; a topic's message.timestamp.type changes by an admin's
#: hand, and a minute late is the interval mode's grain anyway. (The interval mode's child lives one
#: cycle: it always asks.)
TIMESTAMP_TYPE_TTL_S = 60.0
_timestamp_type_cache: dict[tuple[str, str], tuple[str | None, float]] = {}


def _timestamp_types(admin, cluster: str, topics: list[str], timeout_s: float) -> dict[str, str]:
    """``topic_timestamp_types`` of the topics not read within :data:`TIMESTAMP_TYPE_TTL_S`, the rest
    from this process's cache (a topic that was missing is asked again)."""
    now = time.monotonic()
    fresh = {t: _timestamp_type_cache[(cluster, t)] for t in topics if (cluster, t) in _timestamp_type_cache}
    fresh = {t: kind for t, (kind, at) in fresh.items() if now - at < TIMESTAMP_TYPE_TTL_S and kind is not None}
    wanted = [t for t in topics if t not in fresh]
    read = topic_timestamp_types(admin, wanted, timeout_s=timeout_s) if wanted else {}
    for topic in wanted:
        _timestamp_type_cache[(cluster, topic)] = (read.get(topic), now)
    return {**fresh, **read}

