"""The commit step's Kafka calls for one group (member count on the active cluster, live state on
the standby, the one commit), in this process (:class:`DirectGroupIO`) or in a child process per
cluster (:class:`IsolatedGroupIO`, the sync cycle's choice).

Why a child: librdkafka can abort the whole process when requests time out around a broker restart
(confluentinc/librdkafka#4605, see ``kafka_io/isolated.py``). In the run worker that cost the
run; in a child it is one cluster's error on the groups in flight, recorded as ``failed`` rows, and
the cluster counts as unreachable for the rest of the cycle. A child that dies during a commit
leaves the group at its old or its new offsets (one OffsetCommit request is applied whole); the
next cycle re-reads the group and repairs.

Both raise :class:`GroupIOError` for a failed call, saying whether the cluster (not the group) did
not answer; the results are the same plain data either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from offset_pipeline.kafka_io.cluster_client import ClusterClient
from offset_pipeline.kafka_io.isolated import IsolatedCalls, KafkaCallFailed, KafkaClientDied
from offset_pipeline.kafka_io.standby_groups import (
    TP,
    LiveGroupState,
    cluster_unreachable,
    read_group_members,
    read_live_group_state,
)
from offset_pipeline.kafka_io.group_commits import GroupCommitWrite, commit_group_offsets

#: Beyond the Kafka bound of a call: a child process may have to start first.
CHILD_START_S = 30.0


class GroupIOError(RuntimeError):
    """A group call failed; ``unreachable``: the cluster did not answer (or its client died)."""

    def __init__(self, message: str, unreachable: bool):
        super().__init__(message)
        self.unreachable = unreachable


@dataclass(frozen=True)
class _Failure:
    description: str
    unreachable: bool


def _guarded(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - classified here, raised in the parent
        return _Failure(f"{type(exc).__name__}: {exc}", cluster_unreachable(exc))


# -- run in the child (module-level, called by name) ----------------------------------------------

def member_count_call(client: ClusterClient, group_id: str, timeout_s: float):
    return _guarded(lambda: read_group_members(client, group_id, timeout_s=timeout_s, admin=client.admin()).member_count)


# In the child, offsets are read and written with its one admin client (one request per group, no
# consumer started per group); librdkafka#5040 can abort the child there, which costs this cycle's
# calls in flight on the cluster (standby_groups.read_group_offsets).

def live_state_call(client: ClusterClient, group_id: str, partitions: list[TP], timeout_s: float):
    return _guarded(lambda: read_live_group_state(client, group_id, partitions, timeout_s=timeout_s,
                                                  admin=client.admin(), offsets_via_admin=True))


def commit_call(client: ClusterClient, group_id: str, offsets: dict[TP, int], reread: list[TP], timeout_s: float):
    return _guarded(lambda: commit_group_offsets(client, group_id, offsets, reread=reread, timeout_s=timeout_s,
                                                 admin=client.admin()))


# -- the two ways -----------------------------------------------------------------------------------

class DirectGroupIO:
    """The calls in this process. ``clusters``: name -> KafkaClusterResource (or ClusterClient);
    ``admins``: an AdminClient per cluster to reuse."""

    def __init__(self, clusters: Mapping[str, Any], admins: Mapping[str, Any] | None = None):
        self.clusters, self.admins = clusters, dict(admins or {})

    def _run(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - one shape of error for the caller
            raise GroupIOError(f"{type(exc).__name__}: {exc}", cluster_unreachable(exc)) from exc

    def member_count(self, cluster: str, group_id: str, timeout_s: float) -> int:
        return self._run(lambda: read_group_members(self.clusters[cluster], group_id, timeout_s=timeout_s,
                                                    admin=self.admins.get(cluster)).member_count)

    def live_state(self, cluster: str, group_id: str, partitions: Iterable[TP], timeout_s: float) -> LiveGroupState:
        return self._run(lambda: read_live_group_state(self.clusters[cluster], group_id, partitions,
                                                       timeout_s=timeout_s, admin=self.admins.get(cluster)))

    def commit(self, cluster: str, group_id: str, offsets: Mapping[TP, int], reread: Iterable[TP],
               timeout_s: float) -> GroupCommitWrite:
        return self._run(lambda: commit_group_offsets(self.clusters[cluster], group_id, offsets, reread=reread,
                                                      timeout_s=timeout_s))

    def close(self) -> None:
        pass


class IsolatedGroupIO:
    """The calls in one child process per cluster, shared by the cycle's groups (thread-safe)."""

    def __init__(self, clients: Mapping[str, ClusterClient], calls: Mapping[str, IsolatedCalls] | None = None):
        """``calls``: children started earlier (the snapshot step's, so a sync run starts one per
        cluster, not two); a cluster without one gets its own."""
        self.clients = dict(clients)
        given = dict(calls or {})
        self.calls = {name: given.get(name) or IsolatedCalls(name) for name in self.clients}

    def _run(self, cluster: str, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        try:
            out = self.calls[cluster].call(fn, self.clients[cluster], *args, timeout_s=3 * timeout_s + CHILD_START_S)
        except KafkaCallFailed as exc:
            raise GroupIOError(str(exc), unreachable=False) from exc
        except (TimeoutError, KafkaClientDied) as exc:
            raise GroupIOError(str(exc), unreachable=True) from exc
        if isinstance(out, _Failure):
            raise GroupIOError(out.description, out.unreachable)
        return out

    def member_count(self, cluster: str, group_id: str, timeout_s: float) -> int:
        return self._run(cluster, member_count_call, group_id, timeout_s, timeout_s=timeout_s)

    def live_state(self, cluster: str, group_id: str, partitions: Iterable[TP], timeout_s: float) -> LiveGroupState:
        return self._run(cluster, live_state_call, group_id, sorted(partitions), timeout_s, timeout_s=timeout_s)

    def commit(self, cluster: str, group_id: str, offsets: Mapping[TP, int], reread: Iterable[TP],
               timeout_s: float) -> GroupCommitWrite:
        return self._run(cluster, commit_call, group_id, dict(offsets), sorted(reread), timeout_s, timeout_s=timeout_s)

    def discard(self, cluster: str, why: str) -> None:
        """A new child (and client) for ``cluster`` at the next call (``IsolatedCalls.discard``)."""
        self.calls[cluster].discard(why)

    def close(self) -> None:
        for calls in self.calls.values():
            calls.close()
