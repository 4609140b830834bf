"""The monitoring step of a sync cycle: this cycle's facts -> one metric row per group-partition,
written, and what the asset shows of them (docs/operating/monitoring.md).

``assets/metrics.py`` (``offset_sync_metrics``) takes this run's log ends and facts rows from the rows
its earlier steps carried (:func:`carried_cycle_rows`), or reads them back from ClickHouse from the
run's start on (:func:`run_rows_since`), then calls :func:`cycle_metrics`, which runs in order:

* :func:`read_log_ends`: this cycle's log ends beside those of the newest earlier snapshot in the
  mirror window (:class:`LogEnds`; its ``mirror_stalled`` says a data mirror looks stopped);
* :func:`cycle_facts`: one ``CycleFacts`` per facts row;
* :func:`write_metric_rows`: each key's previous ``d`` and last sync from ClickHouse, the rows of
  ``monitoring/metric_rules.py``, appended to ``offset_sync_metrics`` (spooled when the insert fails);
* :func:`status_table`, :func:`status_counts`, :func:`convergence_graph`: what the metadata shows.

No Dagster here: the asset logs, turns a :class:`CycleMetrics` into metadata and its check. A
ClickHouse read that fails raises (clickhouse-connect's errors, ``OSError``): the asset turns that
into its ClickHouse-down result, the cycle's commits stand.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from offset_pipeline.monitoring.convergence_plot import (
    as_markdown_image,
    convergence_png,
)
from offset_pipeline.monitoring.metric_rules import (
    CycleFacts,
    MetricRow,
    metric_rows,
    worst,
    worst_first,
)
from offset_pipeline.storage import cycle_rows, metrics
from offset_pipeline.storage.deferred_writes import SpoolingClient

#: How far before the run's start its rows are still looked for: the run's start is stamped by the
#: Dagster instance, the rows' times by the steps' clock, which may differ.
RUN_START_MARGIN_S = 3600.0
#: The bound when the run's start is unknown: none.
NO_BOUND = datetime(1970, 1, 1, tzinfo=timezone.utc)

STATUS_TABLE_ROWS = 50  # group-topics in the metadata's status table, the worst first

LogEndKey = tuple[str, str, int]  # cluster, topic, partition


def run_rows_since(context) -> datetime:
    """The earliest time a row of this run can carry: the run's start (Dagster's run record) less
    :data:`RUN_START_MARGIN_S`; 1970 (no bound) when the start is unknown."""
    try:
        record = context.instance.get_run_record_by_id(context.run.run_id)
    except Exception:  # noqa: BLE001 - without the bound the read is slower, not wrong
        record = None
    start = record.start_time if record is not None else None
    if start is None:
        return NO_BOUND
    return datetime.fromtimestamp(start - RUN_START_MARGIN_S, tz=timezone.utc)


def carried_cycle_rows(snapshot_rows, translation_rows, commit_rows) -> tuple[dict, list[tuple]]:
    """This run's log ends and facts rows from the rows its earlier steps carried (``SnapshotRow``,
    translation result dicts, ``CommitRow``), equal to what ``storage/cycle_rows.cycle_log_ends`` and ``cycle_facts``
    (with ``join_use_nulls``) read once they are inserted, types included (ints, None, enum members
    as their string values, bools):

    * log ends: (cluster, topic, partition) -> ``log_end`` of the snapshot rows whose topic is
      present (one value per key: a snapshot reads each partition's range once per cluster);
    * facts: one tuple per translation row and commit row of the same group, topic and partition
      (a LEFT JOIN: the commit step records one per translated row), with the commit's
      ``decision``, ``applied`` and ``committed_after``; a translation row without one comes once,
      with None for all three (``join_use_nulls``: NULL, not the columns' defaults)."""
    log_end = {
        (_text(r.cluster), _text(r.topic), int(r.partition)): _int(r.log_end) for r in snapshot_rows if r.topic_present
    }
    by_partition: dict[tuple, list] = defaultdict(list)
    for c in commit_rows:
        by_partition[(_text(c.group_id), _text(c.topic), int(c.partition))].append(
            (_text(c.decision), bool(c.applied), _int(c.committed_after)))
    facts = []
    for t in translation_rows:
        key = (_text(t["group_id"]), _text(t["topic"]), int(t["partition"]))
        translated = (*key, _text(t["active"]), _text(t["standby"]), _int(t["committed"]), _int(t["standby_offset"]),
                      _text(t["status"]), _text(t["strategy"]))
        for commit in by_partition.get(key) or [(None, None, None)]:
            facts.append((*translated, *commit, bool(t["timestamp_inversion"])))
    return log_end, facts


def _int(value) -> int | None:
    return None if value is None else int(value)


def _text(value):
    """A string column's value as ClickHouse gives it back: an enum member as its value."""
    if type(value) is str:  # the common case, 1.3 million calls per 100,000-row cycle
        return value
    return value.value if isinstance(value, Enum) else value


@dataclass(frozen=True)
class LogEnds:
    """Log ends by (cluster, topic, partition): this cycle's (``now``) and, where one was taken in
    the mirror window (:func:`earlier_window`), the newest earlier snapshot's (``earlier``)."""

    now: dict[LogEndKey, int | None]
    earlier: dict[LogEndKey, int]

    def mirror_stalled(self, active: str, standby: str, topic: str, partition: int) -> bool:
        """Over the window the active log grew and the standby log did not."""
        a, s = (active, topic, partition), (standby, topic, partition)
        if not all(k in self.now and k in self.earlier for k in (a, s)):
            return False  # no history yet: nothing to say
        return self.now[a] > self.earlier[a] and self.now[s] == self.earlier[s]


def earlier_window(cycle_time_ms: int, mirror_window_s: float) -> tuple[datetime, datetime]:
    """``(since, until)``: where the snapshot compared with this cycle's is looked for, the newest at
    least ``mirror_window_s`` old, taken within a further ``mirror_window_s`` or 10 minutes if longer."""
    window_ms = int(mirror_window_s * 1000)
    since = datetime.fromtimestamp((cycle_time_ms - window_ms - max(window_ms, 600_000)) / 1000, tz=timezone.utc)
    until = datetime.fromtimestamp((cycle_time_ms - window_ms) / 1000, tz=timezone.utc)
    return since, until


def read_log_ends(client, snapshot_id: str, log_end: dict[LogEndKey, int | None], cycle_time_ms: int,
                  mirror_window_s: float) -> LogEnds:
    """This cycle's ``log_end`` beside the earlier snapshot's log ends of the same topics."""
    since, until = earlier_window(cycle_time_ms, mirror_window_s)
    earlier = cycle_rows.earlier_log_ends(client, snapshot_id, since=since, until=until,
                                          topics={t for _, t, _ in log_end})
    return LogEnds(log_end, earlier)


def cycle_facts(fact_rows: Iterable[tuple], ends: LogEnds) -> list[CycleFacts]:
    """One ``CycleFacts`` per facts row (:func:`carried_cycle_rows`' order of values), with its log ends."""
    facts = []
    for g, t, p, active, standby, c, offset, status, strategy, decision, applied, after, inversion in fact_rows:
        facts.append(CycleFacts(
            g, t, int(p), active, standby, c, offset, status, strategy, decision or None, bool(applied), after,
            active_log_end=ends.now.get((active, t, int(p))), standby_log_end=ends.now.get((standby, t, int(p))),
            timestamp_inversion=bool(inversion),
            mirror_stalled=bool(active and standby) and ends.mirror_stalled(active, standby, t, int(p)),
        ))
    return facts


def write_metric_rows(writer: SpoolingClient, cycle_time_ms: int, facts: list[CycleFacts],
                      lagging_after_s: float) -> tuple[list[MetricRow], int]:
    """The cycle's metric rows (against each key's previous state, read with ``writer.client``) and
    how many were inserted (``writer`` spools them when the insert fails)."""
    previous_d, last_synced = metrics.previous_state(writer.client, sorted({f.group_id for f in facts}),
                                                     cycle_time_ms, keys=[f.key for f in facts])
    rows = metric_rows(cycle_time_ms, facts, previous_d, last_synced, lagging_after_s=lagging_after_s)
    return rows, metrics.insert_rows(writer, rows)


def status_table(rows: Iterable[MetricRow]) -> list[dict]:
    """One row per group and topic, sorted by them: its worst status, partitions, how many InSync,
    the largest sync age and the sum of ``d``."""
    by_group_topic: dict[tuple[str, str], list] = defaultdict(list)
    for row in rows:
        by_group_topic[(row.group_id, row.topic)].append(row)
    return [
        {
            "group": group, "topic": topic, "status": worst(r.sync_status for r in rs),
            "partitions": len(rs), "in_sync": sum(r.sync_status == "InSync" for r in rs),
            "max_sync_age_s": max((r.sync_age_s for r in rs if r.sync_age_s is not None), default=None),
            "d": sum(r.d for r in rs if r.d is not None),
        }
        for (group, topic), rs in sorted(by_group_topic.items())
    ]


def status_counts(rows: list[MetricRow]) -> tuple[Counter, Counter]:
    """(group-partitions per status, groups per worst status of their partitions)."""
    statuses = Counter(r.sync_status for r in rows)
    by_group: dict[str, list[str]] = defaultdict(list)  # one pass: per group, then rows (500 x 100k at 100k)
    for r in rows:
        by_group[r.group_id].append(r.sync_status)
    return statuses, Counter(worst(group_statuses) for group_statuses in by_group.values())


def status_markdown(table: list[dict]) -> str:
    """The worst :data:`STATUS_TABLE_ROWS` rows of :func:`status_table` as a markdown table."""
    return _markdown(worst_first(table, STATUS_TABLE_ROWS))


def status_rows_left_out(table: list[dict]) -> int:
    return max(len(table) - STATUS_TABLE_ROWS, 0)


def _markdown(table: list[dict]) -> str:
    if not table:
        return "(no group-partitions this cycle)"
    lines = ["| group | topic | status | partitions | InSync | max sync age (s) | d |", "|---|---|---|---|---|---|---|"]
    for row in table:
        age = "-" if row["max_sync_age_s"] is None else f"{row['max_sync_age_s']:.0f}"
        group = row["group"].replace("|", "\\|")
        topic = row["topic"].replace("|", "\\|")
        lines.append(f"| {group} | {topic} | {row['status']} | {row['partitions']} | {row['in_sync']} | {age} | {row['d']} |")
    return "\n".join(lines)


def convergence_graph(client, cycle_time_ms: int, graph_hours: float) -> str:
    """The convergence graph (dD and its 10-minute sum per cluster, the last ``graph_hours``) as a
    markdown image."""
    since = datetime.fromtimestamp(cycle_time_ms / 1000 - graph_hours * 3600, tz=timezone.utc)
    points = metrics.convergence_points(client, since)
    return as_markdown_image(convergence_png(points, f"convergence, last {graph_hours:g} h"))


@dataclass(frozen=True)
class CycleMetrics:
    """What one monitoring step wrote and what its metadata shows."""

    rows: list[MetricRow]
    written: int  # rows inserted or spooled
    table: list[dict]  # status_table(rows)
    partition_statuses: Counter  # status -> group-partitions
    group_statuses: Counter  # worst status -> groups
    graph: str  # convergence_graph, a markdown image


def cycle_metrics(writer: SpoolingClient, snapshot_id: str, cycle_time_ms: int, log_end: dict[LogEndKey, int | None],
                  fact_rows: Iterable[tuple], *, mirror_window_s: float, lagging_after_s: float,
                  graph_hours: float | None) -> CycleMetrics:
    """The monitoring step on this run's ``log_end`` and ``fact_rows`` (:func:`carried_cycle_rows`):
    rows computed and written, the status table and counts, the convergence graph (none when
    ``graph_hours`` is None: a continuous run's checkpoints draw it once, at the run's end). Reads and
    writes with ``writer`` (whose ``client`` is open)."""
    ends = read_log_ends(writer.client, snapshot_id, log_end, cycle_time_ms, mirror_window_s)
    rows, written = write_metric_rows(writer, cycle_time_ms, cycle_facts(fact_rows, ends), lagging_after_s)
    table = status_table(rows)
    statuses, group_status = status_counts(rows)
    graph = convergence_graph(writer.client, cycle_time_ms, graph_hours) if graph_hours is not None else ""
    return CycleMetrics(rows, written, table, statuses, group_status, graph)
