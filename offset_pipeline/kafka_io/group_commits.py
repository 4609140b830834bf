"""Write a standby group's offsets: ONE synchronous ``Consumer.commit`` per group, then re-read them.

The consumer has the group's id and never subscribes (it never joins the group). Kafka handles one
OffsetCommit request as one batch, so whatever happens every partition ends at its old offset or
at the new one (DESIGN.md §5). The broker itself refuses a non-member commit to a group that has
live members (``UNKNOWN_MEMBER_ID``): that comes back as an error, never as a crash.

What was applied is read back, not assumed: confluent-kafka raises for the whole call when one
partition fails (say a topic missing on the standby) even though the broker applied the others.
So after the call the group's committed offsets are re-read, and a partition counts as applied
when the re-read shows the requested offset (when the re-read itself fails, the commit response
decides).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from offset_pipeline.kafka_io.standby_groups import TP, group_client_config, read_committed_offsets


@dataclass(frozen=True)
class PartitionWrite:
    """One partition of a group commit: what was asked, whether it landed, why not."""

    topic: str
    partition: int
    requested: int
    applied: bool
    error: str | None  # the broker's or the call's error for this partition, None when it succeeded
    committed_after: int | None  # re-read after the call (None: no committed offset, or the re-read failed)


@dataclass(frozen=True)
class GroupCommitWrite:
    """What one commit call did to one group on one cluster."""

    cluster: str
    group_id: str
    partitions: tuple[PartitionWrite, ...]
    committed_after: dict[TP, int]  # every re-read partition with a committed offset
    call_error: str | None = None  # the commit call raised (some partitions may still have landed)
    reread_error: str | None = None  # the re-read after the call failed

    @property
    def applied(self) -> dict[TP, int]:
        return {(w.topic, w.partition): w.requested for w in self.partitions if w.applied}

    @property
    def errors(self) -> dict[TP, str]:
        return {(w.topic, w.partition): w.error for w in self.partitions if w.error is not None}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
        error = exc.args[0]
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


def commit_group_offsets(
    cluster,
    group_id: str,
    offsets: Mapping[TP, int],
    *,
    reread: Iterable[TP] = (),
    timeout_s: float = 10.0,
) -> GroupCommitWrite:
    """Commit ``offsets`` for ``group_id`` on ``cluster`` (a :class:`KafkaClusterResource`) in ONE
    synchronous call, then re-read the committed offsets of those partitions and of ``reread``.

    Never raises for Kafka errors: they come back per partition (``error``) and as ``call_error`` /
    ``reread_error``. Raises ValueError when ``offsets`` is empty (a caller bug: nothing to write).
    """
    if not offsets:
        raise ValueError(f"nothing to commit for group {group_id!r}")
    requested = dict(sorted(offsets.items()))
    consumer = Consumer(group_client_config(cluster, group_id, timeout_s))
    response: dict[TP, str | None] = {}
    call_error = reread_error = None
    after: dict[TP, int] | None = None
    try:
        try:
            answer = consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in requested.items()], asynchronous=False
            )
            for tp in answer or ():
                response[(tp.topic, tp.partition)] = None if tp.error is None else _describe(KafkaException(tp.error))
        except KafkaException as exc:
            call_error = _describe(exc)
        try:
            after = read_committed_offsets(consumer, set(requested) | set(reread), timeout_s=timeout_s)
        except (KafkaException, TimeoutError) as exc:
            reread_error = _describe(exc)
    finally:
        consumer.close()

    writes = []
    for (topic, partition), offset in requested.items():
        reported = response.get((topic, partition)) or call_error
        if after is not None:  # the re-read is the truth
            committed = after.get((topic, partition))
            applied = committed == offset
            error = None if applied else reported or f"re-read shows {committed} after committing {offset}"
        else:
            committed = None
            applied = reported is None
            error = reported
        writes.append(PartitionWrite(topic, partition, offset, applied, error, committed))
    return GroupCommitWrite(
        cluster=cluster.cluster_name, group_id=group_id, partitions=tuple(writes), committed_after=dict(after or {}),
        call_error=call_error, reread_error=reread_error,
    )
