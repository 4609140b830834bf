"""This cycle's work: snapshot rows in, one Spark work row per group-partition to translate out.

Pure (no Kafka, Spark, Dagster or ClickHouse): the asset reads the rows and the history, this
module decides. Per group, :func:`~offset_pipeline.translation.decide_direction` picks the active
cluster from, in order, members, the group's own offset movement since the previous snapshot
(offsets this pipeline wrote to the standby do not count as movement), and the direction of the
group's previous cycle (docs/concepts/problem.md: active and standby clusters).

Invariants (tested in tests/sync/test_work.py):

* every group-partition of the snapshot gets exactly one work row or one undecided result;
* a work row's standby is a cluster where the group had no members in the snapshot;
* a group whose direction is undecided (split brain, undetermined, cluster unavailable) gets no
  work row, so nothing downstream can commit for it;
* without a previous snapshot no offset counts as moved (a first cycle cannot mistake a group's
  existing offsets for movement);
* facts that were not read are never guessed: a group whose state could not be read on a cluster
  (the cluster unavailable, the group unreadable) has no direction (``cluster_unavailable``), and a
  partition whose log range could not be read on its active or standby cluster gets
  ``cluster_unavailable`` instead of a work row, with the read error as its reason;
* a read the broker refused for want of an ACL (every unread fact of the group or partition) is
  ``not_authorized`` instead, its reason naming cluster, group or topic and the right to grant
  (``kafka_io/authorization.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from offset_pipeline.kafka_io.authorization import not_authorized_reason, refusal
from offset_pipeline.sync.offset_sync_stamps import offset_syncs_column
from offset_pipeline.translation import (
    DirectionHistory,
    Anchor,
    CaughtUpPoint,
    DirectionDecision,
    GroupSideFacts,
    OffsetSyncFacts,
    TranslationResult,
    TranslationStatus,
    decide_direction,
    untranslatable,
)


#: Column order of the snapshot rows :func:`build_work` takes (the asset's query returns these).
#: The last two may be left out (rows of a snapshot whose clusters were all read).
SNAPSHOT_COLUMNS = (
    "cluster", "group_id", "member_count", "topic", "partition", "committed_offset", "topic_present",
    "log_start", "log_end", "timestamp_type", "group_state", "read_error",
)
#: Group states of a snapshot row whose group facts are unknown (sync/snapshot_rows.py, group_offsets.py).
UNKNOWN_GROUP_STATES = frozenset({"UNAVAILABLE", "UNREADABLE"})


@dataclass(frozen=True)
class CycleWork:
    work: list[dict[str, Any]]  # rows for spark_translation.WORK_SCHEMA
    undecided: list[TranslationResult]  # one per group-partition of an undecided group
    directions: dict[str, DirectionDecision]  # per group

    def basis_counts(self) -> Counter:
        return Counter(d.basis.value for d in self.directions.values())


def build_work(
    snapshot_rows: Iterable[tuple],
    shapes: Mapping[str, str],
    anchors: Mapping[tuple[str, str, int, str, str], Anchor],
    clusters: tuple[str, str],
    history: DirectionHistory = DirectionHistory(),
    detected_shapes: Mapping[str, str] | None = None,
    caught_up_points: Mapping[tuple[str, str, int, str, str], CaughtUpPoint] | None = None,
    offset_syncs: Mapping[tuple[str, int, str, str], OffsetSyncFacts] | None = None,
    offset_syncs_default: Mapping[tuple[str, str], OffsetSyncFacts] | None = None,
) -> CycleWork:
    """``snapshot_rows``: tuples in :data:`SNAPSHOT_COLUMNS` order (one per cluster, group, partition).
    ``shapes``: configured shapes; ``detected_shapes``: shapes detected from origin headers, used for
    topics without a configured one (a configured shape always wins). ``caught_up_points``: the
    newest fast-forward applied per (group, topic, partition, active, standby). ``offset_syncs``:
    MirrorMaker 2's stamped pairs per (topic, partition, active, standby) (``offset_sync_stamps``),
    carried in the work rows of that direction (column ``offset_syncs``); ``offset_syncs_default``:
    per (active, standby) whose offset-syncs topic is read, the facts of a partition without pairs
    (none yet, or the topic's unreadable reason), so such rows name it."""
    detected_shapes = detected_shapes or {}
    caught_up_points = caught_up_points or {}
    offset_syncs = offset_syncs or {}
    offset_syncs_default = offset_syncs_default or {}
    by_group: dict[str, dict] = {}
    for row in snapshot_rows:
        cluster, group_id, members, topic, partition, committed, present, log_start, log_end, ts_type = row[:10]
        group_state, read_error = (tuple(row[10:12]) + ("", ""))[:2]
        if cluster not in clusters:
            raise ValueError(f"snapshot row of cluster {cluster!r}, expected one of {clusters}")
        entry = by_group.get(group_id)
        if entry is None:  # not setdefault: its default (a Counter and two dicts) was built for every row
            entry = by_group[group_id] = {"members": Counter(), "parts": {}, "unknown": {}}
        entry["members"][cluster] = max(entry["members"][cluster], int(members))
        if group_state in UNKNOWN_GROUP_STATES:
            entry["unknown"][cluster] = read_error or f"group state {group_state} on {cluster}"
        entry["parts"].setdefault((topic, int(partition)), {})[cluster] = {
            "committed": None if committed is None else int(committed),
            "present": bool(present), "log_start": log_start, "log_end": log_end,
            "timestamp_type": ts_type or None, "read_error": read_error or "",
        }

    work: list[dict[str, Any]] = []
    undecided: list[TranslationResult] = []
    directions: dict[str, DirectionDecision] = {}
    for group_id, entry in sorted(by_group.items()):
        sides = [
            GroupSideFacts(
                cluster,
                available=cluster not in entry["unknown"],
                members=entry["members"][cluster],
                committed_now={
                    tp: side[cluster]["committed"]
                    for tp, side in entry["parts"].items()
                    if cluster in side and side[cluster]["committed"] is not None
                },
                committed_before=history.before(cluster, group_id),
                written_by_sync=history.written_by_sync.get((cluster, group_id), {}),
            )
            for cluster in clusters
        ]
        decision = decide_direction(group_id, sides[0], sides[1], history.previous_active.get(group_id))
        if entry["unknown"] and not decision.decided:
            # The rule says which cluster; the read error says why.
            decision = replace(decision, reason=decision.reason + ": " + "; ".join(
                f"{c}: {why}" for c, why in sorted(entry["unknown"].items())))
        directions[group_id] = decision
        refused_group = (_refused(group_id, None, entry["unknown"].items())
                         if decision.status is TranslationStatus.CLUSTER_UNAVAILABLE else None)
        for (topic, partition), side in sorted(entry["parts"].items()):
            if not decision.decided:
                result = decision.result_for(topic, partition)
                if refused_group:
                    result = replace(result, status=TranslationStatus.NOT_AUTHORIZED, reason=refused_group)
                undecided.append(result)
                continue
            unread = [(c, side[c]["read_error"]) for c in (decision.active, decision.standby)
                      if side.get(c, {}).get("read_error")]
            if unread:
                refused_partition = _refused(group_id, topic, unread)
                undecided.append(untranslatable(
                    group_id, topic, partition,
                    TranslationStatus.NOT_AUTHORIZED if refused_partition else TranslationStatus.CLUSTER_UNAVAILABLE,
                    refused_partition or "facts not read: " + "; ".join(f"{c}: {why}" for c, why in unread),
                    active=decision.active, standby=decision.standby,
                    committed=side.get(decision.active, {}).get("committed"),
                    standby_committed=side.get(decision.standby, {}).get("committed"),
                    anchor_to_keep=anchors.get((group_id, topic, partition, decision.active, decision.standby)),
                ))
                continue
            work.append(_work_row(group_id, topic, partition, decision, side, shapes, detected_shapes, anchors,
                                  caught_up_points, offset_syncs, offset_syncs_default))
    return CycleWork(work, undecided, directions)


def _refused(group_id: str, topic: str | None, errors: Iterable[tuple[str, str]]) -> str | None:
    """The ``not_authorized`` reason when every read error (cluster, error) is a refusal by ACL."""
    errors = list(errors)
    if not errors or not all(refusal(why) for _, why in errors):
        return None
    return "; ".join(not_authorized_reason(why, cluster, topic=topic, group=group_id) for cluster, why in errors)


def _work_row(group_id, topic, partition, decision, side, shapes, detected_shapes, anchors,
              caught_up_points, offset_syncs, offset_syncs_default) -> dict[str, Any]:
    active, standby = decision.active, decision.standby
    a, s = side.get(active, {}), side.get(standby, {})
    anchor = anchors.get((group_id, topic, partition, active, standby))
    point = caught_up_points.get((group_id, topic, partition, active, standby))
    syncs = offset_syncs.get((topic, partition, active, standby))
    if syncs is None:
        syncs = offset_syncs_default.get((active, standby))

    def logged(facts: dict, key: str):
        return facts.get(key) if facts.get("present") else None

    return {
        "group_id": group_id, "topic": topic, "partition": partition, "active": active, "standby": standby,
        "committed": a.get("committed"), "standby_committed": s.get("committed"),
        "active_log_start": logged(a, "log_start"), "active_log_end": logged(a, "log_end"),
        "standby_log_start": logged(s, "log_start"), "standby_log_end": logged(s, "log_end"),
        "anchor_active_offset": anchor.active_offset if anchor else None,
        "anchor_standby_offset": anchor.standby_offset if anchor else None,
        "shape": shapes[topic] if topic in shapes else detected_shapes.get(topic, ""),
        "shape_source": "configured" if topic in shapes else ("detected" if topic in detected_shapes else ""),
        "standby_timestamp_type": logged(s, "timestamp_type"),
        "ff_active_offset": point.active_offset if point else None,
        "ff_standby_offset": point.standby_offset if point else None,
        "offset_syncs": offset_syncs_column(syncs),
    }
