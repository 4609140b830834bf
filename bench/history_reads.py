"""How long the ClickHouse reads of one sync cycle (and of one sensor tick) take after days of
history. Prints figures; asserts nothing.

    .venv/bin/python -m bench.history_reads [--days 1 --group-partitions 10000 --cadence-s 30 --json out.json]

Every 30-second cycle appends rows to the history tables, kept 35 days (``storage/retention.py``):
at 10,000 group-partitions that is about a billion rows a table. A per-cycle read that looks at the
whole table (or at whole days of it) gets slower day after day; one bounded by the primary key or
by a few recent parts does not. Run it at ``--days 1`` and ``--days 7`` (or more) and compare: a
read whose median grows with the days grows with retained history.

Set-up (not timed as a read): ClickHouse -- the embedded engine (chdb) in a temporary folder by
default, or ``--dsn`` (an EMPTY database: the benchmark refuses one whose tables hold rows) -- gets
the project's own tables from their ``ensure_table``/``ensure_tables`` (the real DDL, TTLs and the
monitoring rollup's materialized view), then ``--days`` of history at ``--cadence-s``, generated
inside the engine (INSERT ... SELECT FROM numbers(), a few million rows a statement), for
``--group-partitions`` group-partitions (20 partitions a topic, 5 groups a topic: groups ``g000``,
topics ``t000``; even groups active on idc1, odd ones on idc2; one group in 50 is undecided -- a
long split brain -- so the readers' look-ups for keys without a recent row are exercised too):

* ``offset_snapshots``: 2 rows per group-partition and cycle (both clusters), one uuid
  ``snapshot_id`` and one ``snapshot_time`` per cycle; every tenth partition is quiet (offsets and
  log ends unchanged), the others move every cycle;
* ``offset_translations``, ``offset_commits``, ``offset_sync_metrics`` (which fills
  ``offset_sync_metrics_1m``): 1 row per group-partition and cycle, a few seconds after the snapshot;
* ``offset_anchors``: a new anchor every ``--anchor-every`` cycles for moving partitions (the best
  anchor moves with ``c``), one at the start for quiet ones (kept unchanged since);
* ``offset_fast_forwards``: a kept point per quiet partition every hour;
* ``offset_translation_deferrals``: 5 partitions per cycle for the last day (its TTL);
* ``topic_shape_observations``: 20 topics x 2 clusters sampled per cycle.

Then every read the cycle's steps and the stale-partition sensor make is run for the newest
cycle, once untimed (its queries are recorded) and ``--repeat`` times timed, by calling the
product's own functions and query constants with the arguments the assets pass
(``assets/translation.py``, ``assets/commit.py``, ``assets/metrics.py``,
``sensors/stale_partitions.py``; optional arguments are found by name, so the benchmark runs
against versions with and without them). Where a reader also has a whole-history form (no groups
or partitions given), it is run both ways: ``whole`` and ``as called``; ``same`` says whether both
returned the same. Printed per read: the step, the function, the rows of the tables it reads, the
rows ClickHouse plans to read for its queries after partition pruning and the primary index
(``EXPLAIN ESTIMATE``: the figure that shows growth with history even at a small size), the
median and max seconds, the size of its result.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.storage import (
    commits,
    cycle_rows,
    deferrals,
    fast_forwards,
    history,
    metrics,
    shape_observations,
    snapshots,
    stale_history,
    translations,
)
from offset_pipeline.sync.commit_step import TRANSLATED_COLUMNS
from offset_pipeline.sync.work import SNAPSHOT_COLUMNS

PARTITIONS_PER_TOPIC = 20
GROUPS_PER_TOPIC = 5
UNDECIDED_EVERY = 50  # one group in 50 never has a direction (split brain all along)
DEFERRED_PER_CYCLE = 5
SHAPE_TOPICS_PER_CYCLE = 20
CHUNK_ROWS = 4_000_000  # rows per INSERT ... SELECT
STALE_WINDOW_S = 600.0  # settings.stale_window_s default
SHAPE_HORIZON_S = 24 * 3600.0  # TranslationConfig.shape_evidence_hours default
MIRROR_WINDOW_S = 180.0  # MetricsConfig.mirror_window_s default
GRAPH_HOURS = 2.0  # MetricsConfig.graph_hours default

# Offsets, times and ids of row j of cycle k, shared by every table's generator. Only constants
# and bound parameters: no value is written into the SQL text.
_BASE = (
    "SELECT toInt64(intDiv(number, {r:UInt64})) AS k, toInt64(number % {r:UInt64}) AS j, "
    "intDiv(j, {d:UInt64}) AS gp, j % {d:UInt64} AS sd, "
    "intDiv(gp, {pt:UInt64}) AS grp, intDiv(gp, {pt:UInt64} * {gpt:UInt64}) AS tpc, "
    "toUInt32(gp % {pt:UInt64}) AS pn, "
    "concat('g', leftPad(toString(grp), {gw:UInt64}, '0')) AS grp_id, "
    "concat('t', leftPad(toString(tpc), {tw:UInt64}, '0')) AS tpc_id, "
    "grp % 2 = 0 AS idc1_active, if(idc1_active, 'idc1', 'idc2') AS act, if(idc1_active, 'idc2', 'idc1') AS sby, "
    "(sd = 0) = idc1_active AS on_active, "
    "grp % {und:UInt64} = {und:UInt64} - 1 AS undecided, gp % 10 = 0 AS quiet, "
    "{end_ms:Int64} - ({last:Int64} - k) * {cad_ms:Int64} AS t_ms, "
    "UUIDNumToString(MD5(concat('cycle-', toString(k)))) AS sid, "
    "if(quiet, toInt64(1000), 1000 + k * 10 + toInt64(gp % 7)) AS c_off, "
    "if(quiet, toInt64(1000), 1000 + k * 10 + 20) AS le "
    "FROM numbers({start:UInt64}, {n:UInt64})"
)


def _at(ms_expr: str) -> str:
    return f"fromUnixTimestamp64Milli(toInt64({ms_expr}), 'UTC')"


def _topic_expr(index_expr: str) -> str:
    return f"concat('t', leftPad(toString(({index_expr}) % {{topics:Int64}}), {{tw:UInt64}}, '0'))"


# table -> (rows per cycle as a function of the group-partitions, rows per group-partition,
#           [(column, expression)], WHERE over the generated rows or "")
def _generators(group_partitions: int) -> dict[str, tuple[int, int, list[tuple[str, str]], str]]:
    n = group_partitions
    shape_rows = 2 * SHAPE_TOPICS_PER_CYCLE
    return {
        snapshots.TABLE: (2 * n, 2, [
            ("snapshot_id", "sid"), ("snapshot_time", _at("t_ms")),
            ("cluster", "if(sd = 0, 'idc1', 'idc2')"), ("group_id", "grp_id"),
            ("group_state", "if(on_active, 'Stable', 'Empty')"), ("member_count", "toUInt32(on_active)"),
            ("topic", "tpc_id"), ("partition", "pn"), ("committed_offset", "if(on_active, c_off, c_off - 10)"),
            ("topic_present", "true"), ("log_start", "toInt64(0)"),
            ("log_end", "if(on_active, le, le - 5)"), ("last_stable", "if(on_active, le, le - 5)"),
            ("timestamp_type", "'CreateTime'"), ("read_error", "''"),
        ], ""),
        translations.TRANSLATIONS_TABLE: (n, 1, [
            ("snapshot_id", "sid"), ("cycle_time", _at("t_ms + 2000")), ("group_id", "grp_id"), ("topic", "tpc_id"),
            ("partition", "pn"), ("active", "if(undecided, '', act)"), ("standby", "if(undecided, '', sby)"),
            ("committed", "c_off"), ("standby_committed", "c_off - 10"),
            ("strategy", "multiIf(undecided, 'none', gp % 5 = 1, 'timestamp_search', 'header_anchor')"),
            ("standby_offset", "if(undecided, NULL, c_off - 3)"),
            ("status", "multiIf(undecided, 'split_brain', quiet, 'kept_anchor', gp % 5 = 1, 'timestamp_exact', "
                       "'header_anchor')"),
            ("reason", "''"), ("expected_duplicates", "if(undecided, NULL, toInt64(0))"), ("timestamp_inversion", "false"),
            ("anchor_active_offset", "if(undecided, NULL, c_off - 2)"),
            ("anchor_standby_offset", "if(undecided, NULL, c_off - 12)"), ("safe_bound", "if(undecided, NULL, c_off - 3)"),
        ], ""),
        commits.TABLE: (n, 1, [
            ("snapshot_id", "sid"), ("cycle_time", _at("t_ms + 5000")), ("group_id", "grp_id"), ("topic", "tpc_id"),
            ("partition", "pn"), ("active", "if(undecided, '', act)"), ("standby", "if(undecided, '', sby)"),
            ("previous_offset", "c_off - 10"), ("new_offset", "if(undecided, NULL, c_off - 3)"),
            ("safe_bound", "if(undecided, NULL, c_off - 3)"),
            ("decision", "multiIf(undecided, 'split_brain', quiet, 'unchanged', 'commit')"), ("reason", "''"),
            ("translation_status", "multiIf(undecided, 'split_brain', quiet, 'kept_anchor', 'header_anchor')"),
            ("strategy", "if(undecided, 'none', 'header_anchor')"), ("dry_run", "false"),
            ("applied", "NOT undecided AND NOT quiet"), ("error", "NULL"),
            ("committed_after", "if(undecided, NULL, c_off - 3)"),
        ], ""),
        metrics.TABLE: (n, 1, [
            ("cycle_time", _at("t_ms + 8000")), ("group_id", "grp_id"), ("topic", "tpc_id"), ("partition", "pn"),
            ("active", "if(undecided, '', act)"), ("standby", "if(undecided, '', sby)"),
            ("f", "if(undecided, NULL, c_off)"), ("g", "if(undecided, NULL, c_off - 3)"),
            ("d", "if(undecided, NULL, toInt64(3))"), ("dd", "if(undecided, NULL, toInt64(0))"),
            ("synced", "NOT undecided"), ("last_synced", f"if(undecided, NULL, {_at('t_ms + 8000')})"),
            ("sync_age_s", "if(undecided, NULL, toFloat64(0))"), ("translated", "NOT undecided"),
            ("exact", "gp % 3 = 0"), ("header_hit", "gp % 2 = 0"),
            ("status", "multiIf(undecided, 'split_brain', quiet, 'kept_anchor', 'header_anchor')"),
            ("strategy", "if(undecided, 'none', 'header_anchor')"),
            ("sync_status", "if(undecided, 'SplitBrain', 'InSync')"), ("timestamp_inversion", "false"),
            ("active_lag", "toInt64(gp % 11)"), ("standby_lag", "toInt64(gp % 13)"), ("mirror_stalled", "false"),
        ], ""),
        translations.ANCHORS_TABLE: (n, 1, [
            ("group_id", "grp_id"), ("topic", "tpc_id"), ("partition", "pn"), ("active", "act"), ("standby", "sby"),
            ("active_offset", "c_off - 2"), ("standby_offset", "c_off - 12"), ("snapshot_id", "sid"),
            ("kept_at", _at("t_ms + 2000")),
        ], "WHERE NOT undecided AND (k = 0 OR (NOT quiet AND k % {anchor_every:Int64} = 0))"),
        fast_forwards.TABLE: (n, 1, [
            ("run_id", "UUIDNumToString(MD5(concat('fast-forward-', toString(k), '-', grp_id)))"),
            ("checked_at", _at("t_ms + 15000")), ("group_id", "grp_id"), ("topic", "tpc_id"), ("partition", "pn"),
            ("active", "act"), ("standby", "sby"), ("outcome", "'unchanged'"), ("rejection", "''"),
            ("decision", "'unchanged'"), ("reason", "''"), ("committed", "toInt64(1000)"),
            ("expected_active_end", "toInt64(1000)"), ("expected_standby_end", "toInt64(995)"),
            ("active_log_end", "toInt64(1000)"), ("standby_log_end", "toInt64(995)"),
            ("standby_mirror_position", "toInt64(995)"), ("active_mirror_position", "toInt64(1000)"),
            ("stable_for_s", "toFloat64(600)"), ("previous_offset", "toInt64(995)"), ("new_offset", "toInt64(995)"),
            ("committed_after", "toInt64(995)"), ("dry_run", "false"), ("applied", "true"), ("error", "NULL"),
        ], "WHERE quiet AND NOT undecided AND k % {per_hour:Int64} = 0"),
        deferrals.TABLE: (DEFERRED_PER_CYCLE, 1, [
            ("snapshot_id", "sid"), ("cycle_time", _at("t_ms + 20000")), ("topic", _topic_expr("k * 5 + j")),
            ("partition", "toUInt32(j % {pt:UInt64})"), ("active", "'idc1'"), ("standby", "'idc2'"),
        ], ""),
        shape_observations.TABLE: (shape_rows, 1, [
            ("snapshot_id", "sid"), ("observed_at", _at("t_ms + 3000")),
            ("topic", _topic_expr(f"k * {SHAPE_TOPICS_PER_CYCLE} + intDiv(j, 2)")),
            ("partition", "toUInt32(k % {pt:UInt64})"), ("cluster", "if(j % 2 = 0, 'idc1', 'idc2')"),
            ("local", "toUInt32(30)"), ("copies", "toUInt32(20)"), ("malformed", "toUInt32(0)"),
        ], ""),
    }


def _bound(sql: str, values: dict) -> dict:
    """The parameters ``sql`` names, from ``values`` (KeyError for one that is not there)."""
    return {name: values[name] for name in dict.fromkeys(re.findall(r"\{(\w+):", sql))}


def ensure_all(client) -> None:
    """Every table the cycle's steps ensure (their open_writer calls), with the real DDL."""
    snapshots.ensure_table(client)
    translations.ensure_tables(client)
    fast_forwards.ensure_table(client)
    deferrals.ensure_table(client)
    commits.ensure_table(client)
    metrics.ensure_tables(client)
    shape_observations.ensure_table(client)


def table_rows(client) -> dict[str, dict[str, int]]:
    """table -> {"rows": ..., "parts": ...} of the active parts."""
    rows = client.query(
        "SELECT table, sum(rows), count() FROM system.parts WHERE active AND database = currentDatabase() "
        "GROUP BY table"
    ).result_rows
    return {t: {"rows": int(r), "parts": int(p)} for t, r, p in rows}


class Layout:
    """The synthetic history's shape: cycles, names, times."""

    def __init__(self, days: float, group_partitions: int, cadence_s: float, end_ms: int):
        self.group_partitions = group_partitions
        self.cadence_ms = int(round(cadence_s * 1000))
        self.cycles = max(2, int(round(days * 86400 / cadence_s)))
        self.end_ms = end_ms  # snapshot time of the newest cycle
        self.groups = -(-group_partitions // PARTITIONS_PER_TOPIC)
        self.topics = -(-self.groups // GROUPS_PER_TOPIC)
        self.group_width = max(3, len(str(self.groups - 1)))
        self.topic_width = max(3, len(str(self.topics - 1)))

    def cycle_ms(self, k: int) -> int:
        return self.end_ms - (self.cycles - 1 - k) * self.cadence_ms

    def group_id(self, grp: int) -> str:
        return "g" + str(grp).rjust(self.group_width, "0")

    def topic(self, tpc: int) -> str:
        return "t" + str(tpc).rjust(self.topic_width, "0")

    def keys(self) -> list[tuple[str, str, int]]:
        """(group, topic, partition) of every group-partition, as the generator names them."""
        return [(self.group_id(gp // PARTITIONS_PER_TOPIC),
                 self.topic(gp // (PARTITIONS_PER_TOPIC * GROUPS_PER_TOPIC)), gp % PARTITIONS_PER_TOPIC)
                for gp in range(self.group_partitions)]


def fill(client, layout: Layout, anchor_every: int, log) -> dict[str, float]:
    """Insert the history, table by table, a chunk of whole cycles a statement. Returns seconds per table."""
    common = {
        "pt": PARTITIONS_PER_TOPIC, "gpt": GROUPS_PER_TOPIC, "gw": layout.group_width, "tw": layout.topic_width,
        "und": UNDECIDED_EVERY, "end_ms": layout.end_ms, "last": layout.cycles - 1, "cad_ms": layout.cadence_ms,
        "topics": layout.topics, "anchor_every": anchor_every,
        "per_hour": max(1, int(round(3600_000 / layout.cadence_ms))),
    }
    cycles_per_day = int(round(86400_000 / layout.cadence_ms))
    seconds = {}
    for table, (per_cycle, per_gp, columns, where) in _generators(layout.group_partitions).items():
        first = max(0, layout.cycles - cycles_per_day) if table == deferrals.TABLE else 0
        sql = (f"INSERT INTO {table} ({', '.join(c for c, _ in columns)}) "
               f"SELECT {', '.join(e for _, e in columns)} FROM ({_BASE}) {where}")
        chunk = max(1, CHUNK_ROWS // per_cycle)
        started = time.monotonic()
        for k0 in range(first, layout.cycles, chunk):
            k1 = min(layout.cycles, k0 + chunk)
            values = {**common, "r": per_cycle, "d": per_gp, "start": k0 * per_cycle, "n": (k1 - k0) * per_cycle}
            client.command(sql, parameters=_bound(sql, values))
        seconds[table] = time.monotonic() - started
        log(f"  {table:32s} filled in {seconds[table]:7.1f} s")
    return seconds


def _size(result) -> int | None:
    if result is None:
        return 0
    if isinstance(result, (str, int, float)):
        return 1
    if hasattr(result, "result_rows"):
        return len(result.result_rows)
    if isinstance(result, tuple) and all(hasattr(r, "__len__") for r in result):
        return sum(len(r) for r in result)
    if hasattr(result, "__dataclass_fields__"):
        parts = [getattr(result, f) for f in result.__dataclass_fields__]
        sized = [p for p in parts if hasattr(p, "__len__") and not isinstance(p, str)]
        return sum(len(p) for p in sized) if sized else 1
    if hasattr(result, "__len__"):
        return len(result)
    return None


def _comparable(result):
    return result.result_rows if hasattr(result, "result_rows") else result


class RecordingClient:
    """A clickhouse-connect client that remembers the SELECTs it ran (text and parameters), so
    their reads can be estimated afterwards (EXPLAIN ESTIMATE)."""

    def __init__(self, client):
        self._client = client
        self.selects: list[tuple[str, dict | None, dict | None]] = []

    def query(self, query, parameters=None, settings=None, **kwargs):
        if query.lstrip().upper().startswith(("SELECT", "WITH")):
            self.selects.append((query, parameters, settings))
        return self._client.query(query, parameters=parameters, settings=settings, **kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def estimated_rows(client, selects) -> int | None:
    """Rows ClickHouse plans to read for ``selects`` after partition pruning and the primary index
    (EXPLAIN ESTIMATE, summed over the queries and their tables); None when it cannot say."""
    total = 0
    try:
        for sql, parameters, settings in selects:
            for row in client.query(f"EXPLAIN ESTIMATE {sql}", parameters=parameters, settings=settings).named_results():
                total += int(row["rows"])
    except Exception:  # noqa: BLE001 - an estimate is a bonus
        return None
    return total


def narrowing_kwargs(fn, args: tuple, context: dict) -> dict:
    """The optional parameters of ``fn`` (not bound by ``args``) whose names ``context`` has: what
    the cycle passes to narrow a read (the groups or partitions it needs, its clusters, its time).
    Found by name, so the same benchmark runs against versions with and without them."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args).arguments
    except (TypeError, ValueError):
        return {}
    return {name: context[name] for name, p in sig.parameters.items()
            if name not in bound and name in context and p.default is not inspect.Parameter.empty}


def timed(call, repeat: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return times, result


class _Row:
    """What the commit step's by_group holds per group-partition, as far as the readers look."""

    __slots__ = ("topic", "partition")

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition


def _direction(grp: int) -> tuple[str, str]:
    """(active, standby) of group number ``grp`` in the generated rows (_BASE): even groups active on
    idc1, odd ones on idc2, undecided ones ('', '')."""
    if grp % UNDECIDED_EVERY == UNDECIDED_EVERY - 1:
        return "", ""
    return ("idc1", "idc2") if grp % 2 == 0 else ("idc2", "idc1")


def reads(client, layout: Layout) -> list[dict]:
    """Every per-cycle and per-tick read, with the arguments the assets and the sensor pass.

    Entry keys: ``fn`` (a function, or (module, name) of a function or query constant of a module
    importing Dagster), ``args`` (after the client), ``ctx`` (optional arguments the cycle passes,
    by name: used where the function has them), ``whole`` (None; "drop": the same call without the
    ctx arguments reads the whole table; or other args meaning the whole-history form)."""
    newest = layout.cycles - 1
    t_snap = layout.cycle_ms(newest)
    t_trans, t_commit, t_metrics, t_sensor = t_snap + 2000, t_snap + 5000, t_snap + 8000, t_snap + 25000
    sid = client.query("SELECT UUIDNumToString(MD5(concat('cycle-', toString({k:Int64}))))",
                       parameters={"k": newest}).result_rows[0][0]
    keys = layout.keys()
    groups = sorted({g for g, _, _ in keys})
    triples = set(keys)
    topics = sorted({t for _, t, _ in keys})
    by_group: dict[str, list[_Row]] = {}
    for g, t, p in keys:
        by_group.setdefault(g, []).append(_Row(t, p))
    clusters = ("idc1", "idc2")
    utc = timezone.utc

    # the monitoring rows' keys, as the generator writes them: (group, topic, partition, active, standby)
    metric_keys = [(g, t, p, *_direction(int(g[1:]))) for g, t, p in keys]

    def ctx(at_ms: int, wanted_keys=metric_keys) -> dict:
        # the names the product's functions use for "what the cycle needs" and "when it is"
        return {"group_ids": groups, "partitions": triples, "clusters": clusters, "at_ms": at_ms, "keys": wanted_keys}

    # the previous snapshot, as the translation step finds it (a SnapshotRef or an id, by version)
    find_previous = getattr(history, "previous_snapshot", None) or history.previous_snapshot_id
    previous = find_previous(client, sid)
    previous_id = getattr(previous, "snapshot_id", previous)
    snapshot_time = getattr(snapshots, "snapshot_time_ms", None) or getattr(history, "snapshot_time_ms", None)
    earlier_until = t_metrics - MIRROR_WINDOW_S * 1000
    metrics_values = {
        "sid": sid,
        "until": datetime.fromtimestamp(earlier_until / 1000, tz=utc),
        "since": datetime.fromtimestamp((earlier_until - max(MIRROR_WINDOW_S * 1000, 600_000)) / 1000, tz=utc),
        "topics": topics,
        # the run's rows are read from its start less an hour (monitoring/metrics_step.py RUN_START_MARGIN_S)
        "run_since": datetime.fromtimestamp((t_snap - 3600_000) / 1000, tz=utc),
    }
    S, T, A = snapshots.TABLE, translations.TRANSLATIONS_TABLE, translations.ANCHORS_TABLE
    C, M, F = commits.TABLE, metrics.TABLE, fast_forwards.TABLE
    sensor_since = int(t_sensor - (STALE_WINDOW_S + max(300.0, STALE_WINDOW_S)) * 1000)

    def e(step, name, tables, fn, args=(), context=None, whole=None):
        return {"step": step, "function": name, "tables": tables, "fn": fn, "args": args, "ctx": context or {},
                "whole": whole}

    return [
        e("every step", "ensure_table/ensure_tables (all tables)", [], ensure_all),
        e("translation", "translations.latest_anchors", [A], translations.latest_anchors, (), ctx(t_trans), "drop"),
        e("translation", "fast_forwards.latest_points", [F], fast_forwards.latest_points),
        *([e("translation", f"{snapshot_time.__module__.rsplit('.', 1)[-1]}.snapshot_time_ms", [S], snapshot_time,
             (sid,))] if snapshot_time else []),
        e("translation", f"history.{find_previous.__name__}", [S], find_previous, (sid,)),
        e("translation", "history.direction_history", [S, C, T], history.direction_history, (sid, previous),
          ctx(t_trans), "drop"),
        e("translation", "  history.committed_offsets", [S], history.committed_offsets, (previous,)),
        e("translation", "  history.sync_writes", [C], history.sync_writes, (previous,)),
        e("translation", "  history.previous_directions", [T], history.previous_directions, (sid,), ctx(t_trans),
          "drop"),
        e("translation", "deferrals.deferred_by", [deferrals.TABLE], deferrals.deferred_by, (previous_id,)),
        e("translation", "shape_observations.last_sampled", [shape_observations.TABLE],
          shape_observations.last_sampled, (topics,)),
        e("translation", "shape_observations.observations_since", [shape_observations.TABLE],
          shape_observations.observations_since, (topics, int(t_trans - SHAPE_HORIZON_S * 1000))),
        e("translation", "cycle_rows.snapshot_rows (not carried)", [S], cycle_rows.snapshot_rows,
          (sid, SNAPSHOT_COLUMNS)),
        e("commit", "cycle_rows.translation_rows (not carried)", [T], cycle_rows.translation_rows,
          (sid, TRANSLATED_COLUMNS)),
        e("commit", "snapshots.previous_committed_offsets", [S], snapshots.previous_committed_offsets,
          (sid, groups), ctx(t_commit)),
        e("commit", "commits.last_recorded_offsets", [C], commits.last_recorded_offsets, (by_group,), ctx(t_commit),
          (groups,)),
        e("commit", "commits.newest_synced_cycle_times", [C], commits.newest_synced_cycle_times, (by_group,),
          ctx(t_commit)),
        e("metrics", "cycle_rows.cycle_log_ends (not carried)", [S], cycle_rows.cycle_log_ends,
          (sid, metrics_values["run_since"])),
        e("metrics", "cycle_rows.earlier_log_ends", [S], cycle_rows.earlier_log_ends,
          (sid, metrics_values["since"], metrics_values["until"], topics)),
        e("metrics", "cycle_rows.cycle_facts (not carried)", [T, C], cycle_rows.cycle_facts,
          (sid, metrics_values["run_since"])),
        e("metrics", "metrics.previous_state", [M], metrics.previous_state, (groups, t_metrics), ctx(t_metrics),
          "drop"),
        e("metrics", "metrics.convergence_points", [metrics.ROLLUP], metrics.convergence_points,
          (datetime.fromtimestamp(t_metrics / 1000 - GRAPH_HOURS * 3600, tz=utc),)),
        e("stale sensor", "snapshots.newest_snapshot_ms", [S], snapshots.newest_snapshot_ms),
        e("stale sensor", "stale_history.read_stale_history", [S, T], stale_history.read_stale_history,
          (sensor_since,)),
        e("fast-forward run", "metrics.previous_state (one group)", [M], metrics.previous_state,
          ([groups[0]], t_sensor), ctx(t_sensor, [k for k in metric_keys if k[0] == groups[0]]), "drop"),
    ]


def _variants(entry: dict, client) -> list[tuple[str, object]]:
    """(variant, call(client)) pairs of an entry: "as called", and "whole" where it has one."""
    fn, args = entry["fn"], entry["args"]
    narrowing = narrowing_kwargs(fn, (client, *args), entry["ctx"])
    out = []
    if entry["whole"] == "drop" and narrowing:
        out.append(("whole", lambda c: fn(c, *args)))
    elif isinstance(entry["whole"], tuple):
        out.append(("whole", lambda c: fn(c, *entry["whole"])))
    out.append(("as called", lambda c: fn(c, *args, **narrowing)))
    return out


def measure(client, entries: list[dict], rows: dict, repeat: int, log) -> list[dict]:
    results = []
    for entry in entries:
        base = {"step": entry["step"], "function": entry["function"], "tables": entry["tables"],
                "rows": sum(rows.get(t, {}).get("rows", 0) for t in entry["tables"])}
        try:
            variants = _variants(entry, client)
        except Exception as exc:  # noqa: BLE001 - reported in the table, the others still run
            results.append({**base, "variant": "-", "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            continue
        outcomes = {}
        for variant, call in variants:
            row = {**base, "variant": variant}
            recorder = RecordingClient(client)
            try:
                call(recorder)  # once to record its queries (also warms the caches, as the cycle before did)
                times, result = timed(lambda: call(client), repeat)
                outcomes[variant] = _comparable(result)
                row.update(median_s=statistics.median(times), max_s=max(times), times_s=times,
                           result_size=_size(result), queries=len(recorder.selects),
                           estimated_rows=estimated_rows(client, recorder.selects))
            except Exception as exc:  # noqa: BLE001
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            results.append(row)
        if len(outcomes) == 2:
            same = outcomes["whole"] == outcomes["as called"]
            for row in results[-2:]:
                row["same_as_whole"] = same
        for row in results[-len(variants):]:
            log(_line(row))
    return results


HEADER = (f"{'step':16s} {'function':50s} {'variant':9s} {'table rows':>13s} {'est. read':>13s} "
          f"{'median s':>9s} {'max s':>8s} {'result':>7s} {'same':>4s}")


def _line(r: dict) -> str:
    head = f"{r['step']:16s} {r['function'][:50]:50s} {r['variant']:9s} {r['rows']:>13,}"
    if "error" in r:
        return f"{head} ERROR {r['error'][:100]}"
    same = "" if "same_as_whole" not in r else ("yes" if r["same_as_whole"] else "NO")
    size = "-" if r["result_size"] is None else f"{r['result_size']:,}"
    estimate = "-" if r.get("estimated_rows") is None else f"{r['estimated_rows']:,}"
    return f"{head} {estimate:>13s} {r['median_s']:9.3f} {r['max_s']:8.3f} {size:>7s} {same:>4s}"


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=1.0, help="days of history to generate")
    parser.add_argument("--group-partitions", type=int, default=10000)
    parser.add_argument("--cadence-s", type=float, default=30.0, help="seconds between cycles")
    parser.add_argument("--dsn", default=None,
                        help="ClickHouse DSN of an EMPTY database (default: chdb:// in a temporary folder)")
    parser.add_argument("--anchor-every", type=int, default=1,
                        help="a moving partition stores a new anchor every this many cycles")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", dest="json_out", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.days <= 0 or args.group_partitions <= 0 or args.cadence_s <= 0 or args.anchor_every <= 0:
        parser.error("--days, --group-partitions, --cadence-s and --anchor-every must be positive")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(line: str) -> None:
        print(line, flush=True)

    tmp = None
    dsn = args.dsn
    if dsn is None:
        tmp = Path(tempfile.mkdtemp(prefix="offset-pipeline-history-reads-"))
        dsn = f"chdb://{tmp}/clickhouse"
    try:
        client = ClickHouseResource(dsn=dsn).get_client()
        ensure_all(client)
        filled = {t: v for t, v in table_rows(client).items() if v["rows"]}
        if filled:
            log(f"refusing: the tables of {dsn.split('@')[-1]} hold rows already ({', '.join(sorted(filled))}); "
                "point --dsn at an empty database")
            return 2
        layout = Layout(args.days, args.group_partitions, args.cadence_s,
                        end_ms=int(time.time() * 1000) - 30_000)
        log(f"history: {args.days:g} days = {layout.cycles:,} cycles every {args.cadence_s:g} s, "
            f"{args.group_partitions:,} group-partitions ({layout.groups} groups, {layout.topics} topics), "
            f"newest cycle at {datetime.fromtimestamp(layout.end_ms / 1000, tz=timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
        started = time.monotonic()
        fill_s = fill(client, layout, args.anchor_every, log)
        total_fill_s = time.monotonic() - started
        rows = table_rows(client)
        for table, counts in sorted(rows.items()):
            log(f"  {table:32s} {counts['rows']:>14,} rows in {counts['parts']} parts")
        data_bytes = du(tmp) if tmp else None
        log(f"filled in {total_fill_s:.0f} s" + (f"; data folder {data_bytes / 1024 / 1024:,.0f} MB" if tmp else ""))
        log(f"\nreads of the newest cycle: median and max of {args.repeat} runs after one untimed run; table rows: "
            "rows of the tables it reads; est. read: rows ClickHouse plans to read for its queries (EXPLAIN ESTIMATE)")
        log(HEADER)
        results = measure(client, reads(client, layout), rows, args.repeat, log)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({
                "args": vars(args), "dsn": dsn.split("@")[-1], "cycles": layout.cycles,
                "groups": layout.groups, "topics": layout.topics, "tables": rows,
                "fill_seconds": {**fill_s, "total": total_fill_s}, "data_bytes": data_bytes,
                "reads": [{k: v for k, v in r.items()} for r in results],
            }, indent=2, default=str))
            log(f"\nwrote {args.json_out}")
    finally:
        if tmp is not None:
            from offset_pipeline.resources.clickhouse import close_embedded_clients

            close_embedded_clients(dsn)
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
