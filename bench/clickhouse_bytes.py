"""Where the ClickHouse bytes of offset_pipeline go, and how much column codecs would save.
Prints figures; asserts nothing.

    .venv/bin/python -m bench.clickhouse_bytes --dsn chdb:///path/to/clickhouse [--try-codecs] [--hold-s 60] [--json out.json]
    .venv/bin/python -m bench.clickhouse_bytes --synthetic-days 0.02 --group-partitions 1000 --try-codecs

The soak saw the embedded engine's folder grow ~400 MB/h at 10,000 group-partitions. This
reads a real folder (or a server) and reports:

* the folder: bytes per top-level directory and per table directory (chdb only; a table's directory
  also holds the parts merges have replaced, until ClickHouse's cleanup deletes them), and the parts
  per database, active and not;
* per table of the current database with active parts (``system.parts WHERE active``): rows,
  active parts (and how many are Compact: ``system.columns`` attributes no bytes to their columns),
  bytes on disk, compressed and uncompressed bytes, bytes per row; the time its rows span (min/max
  of the table's first DateTime/DateTime64 column), hence bytes per hour, what 35 days at that rate
  leave (fewer days where the table's TTL is shorter) and what a full TTL leaves (a state table --
  one row per key, replaced by merges -- is marked and not projected);
* the parts no longer active but still on disk, per table, with the merge tree settings that decide
  when they are deleted; ``--hold-s S`` keeps the copy open up to S seconds, until they are gone,
  and reports the folder then (the cleanup runs only while an engine has the folder open);
* the top columns over all tables by compressed bytes (``system.columns``), with type, current codec
  and compressed bytes per row.

``--try-codecs`` measures codecs on the same rows. For every table with rows, scratch copies
``<table>__codec_<n>`` are created with the same columns, engine, sort key and partitioning, but no
TTL (so no row expires) and Wide parts only (``min_bytes_for_wide_part = 0``: per-column bytes exist
for every part), filled by ``INSERT INTO copy SELECT ... FROM table`` and merged by ``OPTIMIZE
TABLE copy FINAL``; then ``system.columns`` gives each column's bytes. Rounds: ``current`` (the
codecs the table has: the baseline); one round per candidate codec, chosen by type: integers
``Delta+ZSTD(1)``, ``T64+ZSTD(1)``, ``ZSTD(1)``; DateTime/DateTime64 ``DoubleDelta+ZSTD(1)``,
``Delta+ZSTD(1)``; String ``ZSTD(3)``, ``ZSTD(1)``; LowCardinality, Bool/UInt8/Int8 ``ZSTD(1)``;
Float ``Gorilla+ZSTD(1)``, ``ZSTD(1)`` (Nullable and SimpleAggregateFunction columns by their nested
type; a codec ClickHouse refuses for a type is reported and skipped); ``best`` (every column with
its smallest codec, where that is more than 1 % smaller than the current one and saves at least
0.1 % of the table's bytes); ``lc`` (``LowCardinality(...) CODEC(ZSTD(1))`` for the ``snapshot_id``
/ ``run_id`` String columns -- one uuid per cycle -- and for String columns outside the sort key
with distinct values <= 25 % of the rows); ``recommended`` (best, and LowCardinality where it beats
best by the same margins). The originals are merged too (``OPTIMIZE ... FINAL``) so "merged" is
comparable -- on a chdb folder only, which is always a copy.

Safety: a ``chdb://`` folder is never opened in place: it is copied (``shutil.copytree``; symlinks
stay links and must stay inside the copy) into a temporary folder that is opened and deleted at the
end; the source's files (sizes and mtimes) are compared before and after. chdb allows one data path
per process, so the benchmark opens only the copy. With an ``http(s)://`` DSN the server's tables
are only read, except that ``--try-codecs`` creates (and drops) the scratch copies and a one-column
probe table (``__codec_probe``: is a codec allowed for a type?) in its current database; the
originals are not merged there (untested here: no server was available).

``--synthetic-days`` builds the input instead: a temporary chdb folder with the project's own tables
(``ensure_table``/``ensure_tables``) and synthetic history generated in the engine, as
``bench/history_reads.py`` does (``--group-partitions``, ``--cadence-s``); ``--keep-synthetic PATH``
keeps that folder (then pass it as ``--dsn chdb://PATH``).

Bytes per hour are the table's bytes divided by the span of its time column (max - min), which for
rows written every cycle is one cycle shorter than the time covered: a slight overestimate on a
short run. Tables kept by merges (ReplacingMergeTree, AggregatingMergeTree) shrink when merged, so
"merged" is the figure to project for them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from offset_pipeline.resources.clickhouse import ClickHouseResource, close_embedded_clients
from offset_pipeline.storage.retention import ttl_clause

PROJECTION_DAYS = 35
ID_COLUMNS = ("snapshot_id", "run_id")  # one uuid per cycle / per check: LowCardinality candidates
LC_CODEC = "CODEC(ZSTD(1))"
LC_MAX_SHARE = 0.25  # other String columns (not in the sort key) try LowCardinality when distinct <= 25 % of rows
MIN_GAIN = 0.01  # a candidate replaces the current codec when it is more than 1 % smaller ...
MIN_TABLE_SHARE = 0.001  # ... and saves at least 0.1 % of the table's column bytes (no churn for crumbs)
COPY_SUFFIX = "__codec_"
WIDE = "min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"

MB = 1024 * 1024


# -- type helpers ------------------------------------------------------------------------------------

def _strip(wrapper: str, type_: str) -> tuple[str, bool]:
    if type_.startswith(wrapper + "(") and type_.endswith(")"):
        return type_[len(wrapper) + 1:-1], True
    return type_, False


def nested_type(type_: str) -> tuple[str, bool]:
    """(the innermost type, whether it is LowCardinality): SimpleAggregateFunction(f, T), Nullable and
    LowCardinality wrappers removed."""
    m = re.fullmatch(r"SimpleAggregateFunction\(\w+, (.*)\)", type_)
    if m:
        type_ = m.group(1)
    type_, lc = _strip("LowCardinality", type_)
    type_, _ = _strip("Nullable", type_)
    return type_, lc


def is_time_type(type_: str) -> bool:
    return nested_type(type_)[0].startswith("DateTime")


def candidates(type_: str) -> list[str]:
    """Candidate codecs for a column of ``type_`` (best guesses first)."""
    inner, lc = nested_type(type_)
    if lc or inner in ("Bool", "UInt8", "Int8"):
        return ["CODEC(ZSTD(1))"]
    if re.fullmatch(r"U?Int(16|32|64|128|256)", inner):
        return ["CODEC(Delta, ZSTD(1))", "CODEC(T64, ZSTD(1))", "CODEC(ZSTD(1))"]
    if inner.startswith("DateTime"):  # DateTime, DateTime64(...)
        return ["CODEC(DoubleDelta, ZSTD(1))", "CODEC(Delta, ZSTD(1))"]
    if inner in ("Float64", "Float32"):
        return ["CODEC(Gorilla, ZSTD(1))", "CODEC(ZSTD(1))"]
    if inner == "String" or inner.startswith("FixedString"):
        return ["CODEC(ZSTD(3))", "CODEC(ZSTD(1))"]
    return ["CODEC(ZSTD(1))"]


def short_codec(codec: str) -> str:
    """``CODEC(Delta(8), ZSTD(1))`` -> ``Delta+ZSTD(1)``; '' -> ``default``."""
    if not codec:
        return "default"
    body = codec[len("CODEC("):-1] if codec.startswith("CODEC(") else codec
    return re.sub(r"(Delta|DoubleDelta|Gorilla)\(\d+\)", r"\1", body).replace(", ", "+")


# -- formatting ----------------------------------------------------------------------------------------

def human(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", 1024 ** 3), ("MB", MB), ("kB", 1024)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def ratio(before: float | None, after: float | None) -> str:
    return f"x{before / after:.2f}" if before and after else "-"


def q(name: str) -> str:
    return "`" + name.replace("`", "\\`") + "`"


# -- the folder (chdb) -------------------------------------------------------------------------------

def file_index(root: Path) -> dict[str, tuple[int, int]]:
    """relative path -> (size, mtime_ns) of every file under ``root`` (symlinks not followed)."""
    index = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except FileNotFoundError:
                continue
            index[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return index


def du(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except FileNotFoundError:
                pass
    return total


def copy_folder(src: Path, dst: Path) -> None:
    """Copy a chdb folder. Symlinks are copied as links (ClickHouse's are relative, inside the
    folder); one pointing outside the source would make the copy write into it, so it is refused."""
    shutil.copytree(src, dst, symlinks=True)
    for dirpath, dirnames, files in os.walk(dst):
        for name in dirnames + files:
            p = Path(dirpath) / name
            if p.is_symlink():
                target = os.readlink(p)
                resolved = (p.parent / target).resolve()  # an absolute target stays absolute
                if not resolved.is_relative_to(dst.resolve()):
                    raise RuntimeError(f"symlink {p} -> {target} leaves the copied folder; refusing to open the copy")


def folder_report(index: dict[str, tuple[int, int]], copy: Path, client) -> dict:
    """Bytes of the source folder (its file ``index``, taken before the copy was opened) per
    top-level entry and per table directory (the tables' data paths in ``copy``, mapped back)."""
    top: dict[str, int] = defaultdict(int)
    for rel, (size, _) in index.items():
        top[rel.split(os.sep, 1)[0]] += size
    tables = {}
    root = str(copy.resolve())
    for db, name, paths in client.query(
            "SELECT database, name, data_paths FROM system.tables WHERE database NOT IN "
            "('system', 'INFORMATION_SCHEMA', 'information_schema')").result_rows:
        prefixes = [str(Path(p).resolve()).removeprefix(root).strip(os.sep) + os.sep for p in paths]
        size = sum(sz for rel, (sz, _) in index.items() if any(rel.startswith(pre) for pre in prefixes))
        if size:
            tables[f"{db}.{name}"] = size
    return {"total": sum(top.values()), "top": dict(top), "tables": tables}


# -- the tables ----------------------------------------------------------------------------------------

def databases_report(client) -> list[dict]:
    rows = client.query(
        "SELECT database, active, count(), sum(rows), sum(bytes_on_disk) FROM system.parts "
        "GROUP BY database, active ORDER BY database, active DESC").result_rows
    return [{"database": d, "active": bool(a), "parts": int(n), "rows": int(r), "bytes_on_disk": int(b)}
            for d, a, n, r, b in rows]


def table_parts(client, tables: list[str] | None = None) -> dict[str, dict]:
    """table -> figures of its active parts in the current database."""
    where = " AND table IN {tables:Array(String)}" if tables else ""
    rows = client.query(
        "SELECT table, sum(rows), count(), sum(bytes_on_disk), sum(data_compressed_bytes), "
        "sum(data_uncompressed_bytes), sumIf(rows, part_type = 'Compact'), countIf(part_type = 'Compact') "
        f"FROM system.parts WHERE active AND database = currentDatabase(){where} GROUP BY table",
        parameters={"tables": tables} if tables else None).result_rows
    return {t: {"rows": int(r), "parts": int(p), "bytes_on_disk": int(b), "compressed": int(c),
                "uncompressed": int(u), "compact_rows": int(cr), "compact_parts": int(cp)}
            for t, r, p, b, c, u, cr, cp in rows}


def inactive_parts(client) -> dict[str, dict]:
    """table -> the parts of the current database that are no longer active (merged away, waiting
    for ClickHouse's cleanup to delete them from disk)."""
    rows = client.query(
        "SELECT table, count(), sum(rows), sum(bytes_on_disk), toString(min(modification_time)), "
        "toString(max(modification_time)) FROM system.parts WHERE NOT active AND database = currentDatabase() "
        "GROUP BY table ORDER BY sum(bytes_on_disk) DESC").result_rows
    return {t: {"parts": int(n), "rows": int(r), "bytes_on_disk": int(b), "oldest": mn, "newest": mx}
            for t, n, r, b, mn, mx in rows}


def cleanup_settings(client) -> dict[str, str]:
    names = ["old_parts_lifetime", "cleanup_delay_period", "merge_tree_clear_old_parts_interval_seconds",
             "min_bytes_for_wide_part"]
    rows = client.query("SELECT name, value FROM system.merge_tree_settings WHERE name IN {n:Array(String)}",
                        parameters={"n": names}).result_rows
    return dict(rows)


def table_info(client) -> dict[str, dict]:
    rows = client.query(
        "SELECT name, engine, engine_full FROM system.tables WHERE database = currentDatabase()").result_rows
    return {n: {"engine": e, "engine_full": ef} for n, e, ef in rows}


def columns_of(client, table: str) -> list[dict]:
    rows = client.query(
        "SELECT name, type, default_kind, default_expression, compression_codec, data_compressed_bytes, "
        "data_uncompressed_bytes, is_in_sorting_key FROM system.columns "
        "WHERE database = currentDatabase() AND table = {t:String} ORDER BY position",
        parameters={"t": table}).result_rows
    return [{"name": n, "type": t, "default_kind": dk, "default_expression": de, "codec": c,
             "compressed": int(cb), "uncompressed": int(ub), "in_key": bool(k)}
            for n, t, dk, de, c, cb, ub, k in rows]


def ttl_days(engine_full: str) -> int | None:
    """Days a row is kept by the table's TTL (the project's ``toDate(t) + toIntervalDay(n)``)."""
    m = re.search(r"toIntervalDay\((\d+)\)", ttl_clause(engine_full))
    return int(m.group(1)) if m else None


def is_state_table(info: dict) -> bool:
    """One row per key kept by merges or a roll-up TTL: growth stops once every key has its row
    (the roll-up TTL tables keep the history of the TTL first)."""
    return info["engine"].startswith(("Replacing", "Collapsing", "VersionedCollapsing"))


def time_span(client, table: str, columns: list[dict]) -> dict | None:
    col = next((c["name"] for c in columns if is_time_type(c["type"])), None)
    if col is None:
        return None
    mn, mx, seconds = client.query(
        f"SELECT toString(min({q(col)})), toString(max({q(col)})), "
        f"toFloat64(toDateTime64(max({q(col)}), 3)) - toFloat64(toDateTime64(min({q(col)}), 3)) "
        f"FROM {q(table)}").result_rows[0]
    return {"column": col, "min": mn, "max": mx, "seconds": float(seconds or 0.0)}


def per_hour(bytes_: int | None, span: dict | None) -> float | None:
    if not bytes_ or not span or span["seconds"] < 60:
        return None
    return bytes_ * 3600.0 / span["seconds"]


# -- codec trials --------------------------------------------------------------------------------------

class CodecTrials:
    def __init__(self, client, log):
        self.client = client
        self.log = log
        self._allowed: dict[tuple[str, str], str | None] = {}
        self.copies: list[str] = []

    def refused(self, type_: str, codec: str) -> str | None:
        """Why ClickHouse refuses ``type_ codec`` (None when it accepts it), from a probe table."""
        key = (type_, codec)
        if key not in self._allowed:
            probe = "__codec_probe"
            try:
                self.client.command(f"DROP TABLE IF EXISTS {probe}")
                self.client.command(f"CREATE TABLE {probe} (x {type_} {codec}) ENGINE = MergeTree ORDER BY tuple()")
                self._allowed[key] = None
            except Exception as exc:  # noqa: BLE001 - the refusal is the finding
                self._allowed[key] = str(exc).split("\n")[0][:300]
            finally:
                self.client.command(f"DROP TABLE IF EXISTS {probe}")
        return self._allowed[key]

    def copy_ddl(self, table: str, copy: str, engine_full: str, defs: list[tuple[str, str, str, dict]]) -> str:
        """CREATE of ``copy``: ``defs`` = (name, type, codec, column) per column; the engine of
        ``table`` without its TTL, with Wide parts only."""
        cols = []
        for name, type_, codec, col in defs:
            default = f" {col['default_kind']} {col['default_expression']}" if col["default_kind"] else ""
            cols.append(f"{q(name)} {type_}{default}{(' ' + codec) if codec else ''}")
        ttl = ttl_clause(engine_full)
        engine = engine_full.replace(f" TTL {ttl}", "") if ttl else engine_full
        engine = re.sub(r",?\s*min_(bytes|rows)_for_wide_part\s*=\s*\d+", "", engine)
        engine = engine.replace("SETTINGS ,", "SETTINGS").rstrip()
        if engine.endswith(" SETTINGS"):
            engine = engine[: -len(" SETTINGS")]
        engine += (", " if " SETTINGS " in engine else " SETTINGS ") + WIDE
        return f"CREATE TABLE {q(copy)} ({', '.join(cols)}) ENGINE = {engine}"

    def measure(self, table: str, copy: str, engine_full: str, defs, insert_cols: list[str]) -> dict:
        c = self.client
        c.command(f"DROP TABLE IF EXISTS {q(copy)}")
        c.command(self.copy_ddl(table, copy, engine_full, defs))
        self.copies.append(copy)
        names = ", ".join(q(n) for n in insert_cols)
        started = time.monotonic()
        c.command(f"INSERT INTO {q(copy)} ({names}) SELECT {names} FROM {q(table)}")
        c.command(f"OPTIMIZE TABLE {q(copy)} FINAL", settings={"optimize_throw_if_noop": 0})
        seconds = time.monotonic() - started
        parts = table_parts(c, [copy]).get(copy, {})
        cols = {col["name"]: {"compressed": col["compressed"], "uncompressed": col["uncompressed"]}
                for col in columns_of(c, copy)}
        c.command(f"DROP TABLE IF EXISTS {q(copy)}")
        self.copies.remove(copy)
        return {"parts": parts, "columns": cols, "seconds": round(seconds, 2),
                "codecs": {name: codec for name, _, codec, _ in defs},
                "types": {name: type_ for name, type_, _, _ in defs}}

    def drop_copies(self) -> None:
        for copy in list(self.copies):
            try:
                self.client.command(f"DROP TABLE IF EXISTS {q(copy)}")
            except Exception:  # noqa: BLE001
                pass

    def run_table(self, table: str, info: dict, columns: list[dict]) -> dict:
        engine_full = info["engine_full"]
        stored = [c for c in columns if c["default_kind"] not in ("MATERIALIZED", "ALIAS", "EPHEMERAL")]
        insert_cols = [c["name"] for c in stored]
        refusals: dict[str, dict[str, str]] = defaultdict(dict)
        cands: dict[str, list[str]] = {}
        for col in columns:
            ok = []
            for codec in candidates(col["type"]):
                why = self.refused(col["type"], codec)
                if why:
                    refusals[col["name"]][codec] = why
                else:
                    ok.append(codec)
            cands[col["name"]] = ok
        rounds: dict[str, dict] = {}

        def run(label: str, choose) -> None:
            defs = [(col["name"], *choose(col), col) for col in columns]
            try:
                rounds[label] = self.measure(table, f"{table}{COPY_SUFFIX}{len(rounds)}", engine_full, defs, insert_cols)
                rounds[label]["label"] = label
                p = rounds[label]["parts"]
                self.log(f"  {table:32s} {label:10s} {p.get('rows', 0):>12,} rows {human(p.get('bytes_on_disk')):>10s} "
                         f"on disk in {rounds[label]['seconds']:.1f} s")
            except Exception as exc:  # noqa: BLE001 - reported, the other rounds go on
                rounds[label] = {"label": label, "error": str(exc).split("\n")[0][:400]}
                self.log(f"  {table:32s} {label:10s} FAILED: {rounds[label]['error']}")

        run("current", lambda col: (col["type"], col["codec"]))
        n_rounds = max((len(v) for v in cands.values()), default=0)
        for i in range(n_rounds):
            run(f"cand{i + 1}", lambda col, i=i: (
                col["type"], cands[col["name"]][min(i, len(cands[col["name"]]) - 1)] if cands[col["name"]] else col["codec"]))

        # per column: bytes per codec measured, the best one
        per_column = {}
        cur_round = rounds.get("current", {})
        table_bytes = sum(v["compressed"] for v in cur_round.get("columns", {}).values())
        for col in columns:
            name = col["name"]
            measured: dict[str, int] = {}
            for r in rounds.values():
                if "error" in r or name not in r["columns"]:
                    continue
                codec = r["codecs"][name]
                measured.setdefault(codec, r["columns"][name]["compressed"])
            base = measured.get(col["codec"])
            best_codec, best_bytes = col["codec"], base
            smallest = min(measured, key=measured.get) if measured else col["codec"]
            for codec, b in measured.items():
                if base is not None and b < best_bytes and b < base * (1 - MIN_GAIN) \
                        and base - b >= MIN_TABLE_SHARE * table_bytes:
                    best_codec, best_bytes = codec, b
            uncompressed = next((r["columns"][name]["uncompressed"] for r in rounds.values()
                                 if "error" not in r and name in r["columns"]), None)
            per_column[name] = {"type": col["type"], "current_codec": col["codec"], "in_key": col["in_key"],
                                "measured": measured, "uncompressed": uncompressed,
                                "current_bytes": base, "best_codec": best_codec, "best_bytes": best_bytes,
                                "smallest_codec": smallest, "smallest_bytes": measured.get(smallest),
                                "refused": refusals.get(name, {})}

        run("best", lambda col: (col["type"], per_column[col["name"]]["best_codec"]))

        # LowCardinality: the id columns, and String columns with few distinct values
        rows = (cur_round.get("parts") or {}).get("rows") or 0
        strings = [c for c in columns if c["type"] in ("String", "Nullable(String)")]
        if strings and rows:
            stats = self.client.query(
                "SELECT " + ", ".join(f"uniq({q(c['name'])}), avg(length({q(c['name'])}))" for c in strings)
                + f" FROM {q(table)}").result_rows[0]
            for i, c in enumerate(strings):
                per_column[c["name"]].update({"distinct": int(stats[2 * i]), "avg_length": float(stats[2 * i + 1] or 0)})
        lc_cols = [c["name"] for c in strings
                   if (c["name"] in ID_COLUMNS and c["type"] == "String")
                   or (not c["in_key"] and per_column[c["name"]].get("distinct", rows + 1) <= LC_MAX_SHARE * rows)]
        lc_type = {c["name"]: f"LowCardinality({c['type']})" for c in columns}
        if lc_cols:
            run("lc", lambda col: (lc_type[col["name"]], LC_CODEC) if col["name"] in lc_cols
                else (col["type"], per_column[col["name"]]["best_codec"]))
            r = rounds["lc"]
            for name in lc_cols:
                if "error" not in r and name in r["columns"]:
                    c = per_column[name]
                    c["lc_bytes"] = r["columns"][name]["compressed"]
                    if c["best_bytes"] is not None and c["lc_bytes"] < c["best_bytes"] * (1 - MIN_GAIN) \
                            and c["best_bytes"] - c["lc_bytes"] >= MIN_TABLE_SHARE * table_bytes:
                        c["recommended"] = (lc_type[name], LC_CODEC)
        for name, c in per_column.items():
            c.setdefault("recommended", (c["type"], c["best_codec"]))
        if any(c["recommended"][0] != c["type"] for c in per_column.values()):
            run("recommended", lambda col: per_column[col["name"]]["recommended"])
        else:
            rounds["recommended"] = {**rounds["best"], "label": "recommended (= best)"}
        return {"rounds": rounds, "columns": per_column, "lc_columns": lc_cols}


def recommended(table_trial: dict) -> list[str]:
    """Column definitions (type + codec) to recommend, as measured in the ``recommended`` round."""
    lines = []
    for name, c in table_trial["columns"].items():
        type_, codec = c["recommended"]
        mark = "  -- changed" if (type_, codec) != (c["type"], c["current_codec"]) else ""
        lines.append(f"{name} {type_}{(' ' + codec) if codec else ''}{mark}")
    return lines


# -- synthetic input -----------------------------------------------------------------------------------

def synthetic_folder(folder: Path, days: float, group_partitions: int, cadence_s: float, log) -> None:
    """The project's tables with ``days`` of synthetic history (bench/history_reads.py's generator)."""
    from bench import history_reads

    dsn = f"chdb://{folder}"
    client = ClickHouseResource(dsn=dsn).get_client()
    try:
        history_reads.ensure_all(client)
        layout = history_reads.Layout(days, group_partitions, cadence_s, end_ms=int(time.time() * 1000) - 30_000)
        log(f"synthetic history: {days:g} days = {layout.cycles:,} cycles every {cadence_s:g} s, "
            f"{group_partitions:,} group-partitions, in {folder}")
        history_reads.fill(client, layout, 1, log)
    finally:
        close_embedded_clients(dsn)


# -- main ----------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=None, help="chdb:///path/to/folder (copied, never opened in place) "
                                                    "or http(s)://host:8123")
    parser.add_argument("--database", default=None, help="database to report (default: the DSN's current one)")
    parser.add_argument("--try-codecs", action="store_true", help="measure candidate codecs on scratch copies")
    parser.add_argument("--top", type=int, default=25, help="how many columns to list in the top columns")
    parser.add_argument("--hold-s", type=float, default=0.0,
                        help="chdb: keep the copy open up to this many seconds, until ClickHouse has deleted the "
                             "inactive parts, and report the folder then")
    parser.add_argument("--synthetic-days", type=float, default=None,
                        help="instead of --dsn: a temporary chdb folder with this many days of synthetic history")
    parser.add_argument("--group-partitions", type=int, default=1000, help="synthetic: group-partitions")
    parser.add_argument("--cadence-s", type=float, default=30.0, help="synthetic: seconds between cycles")
    parser.add_argument("--keep-synthetic", default=None, help="synthetic: build (and keep) the folder here")
    parser.add_argument("--json", dest="json_out", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if (args.dsn is None) == (args.synthetic_days is None):
        parser.error("give exactly one of --dsn and --synthetic-days")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(line: str = "") -> None:
        print(line, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="offset-pipeline-clickhouse-bytes-"))
    dsn = args.dsn
    source: Path | None = None
    source_index = None
    opened = None
    out: dict = {"args": vars(args)}
    try:
        if args.synthetic_days is not None:
            folder = Path(args.keep_synthetic) if args.keep_synthetic else tmp / "synthetic"
            if folder.exists() and any(folder.iterdir()):
                parser.error(f"{folder} is not empty")
            synthetic_folder(folder, args.synthetic_days, args.group_partitions, args.cadence_s, log)
            dsn = f"chdb://{folder}"
        if dsn.startswith("chdb:"):
            source = Path(dsn.removeprefix("chdb://")).resolve()
            if not (source / "metadata").is_dir():
                log(f"{source} is not a chdb folder (no metadata/)")
                return 2
            source_index = file_index(source)
            copy = tmp / "clickhouse"
            started = time.monotonic()
            copy_folder(source, copy)
            log(f"copied {source} ({human(sum(s for s, _ in source_index.values()))}, {len(source_index):,} files) "
                f"to {copy} in {time.monotonic() - started:.1f} s; the copy is what is opened")
            opened = f"chdb://{copy}"
        else:
            opened = dsn
        client = ClickHouseResource(dsn=opened, database=args.database).get_client()
        version, database = client.query("SELECT version(), currentDatabase()").result_rows[0]
        log(f"ClickHouse {version}, database {database}; source {dsn.split('@')[-1]}")
        out.update({"dsn": dsn.split("@")[-1], "clickhouse_version": version, "database": database})

        # -- where the bytes are: folder and databases
        if source is not None:
            folder = folder_report(source_index, tmp / "clickhouse", client)
            out["folder"] = folder
            log(f"\nsource folder: {human(folder['total'])} in {len(source_index):,} files")
            for name, size in sorted(folder["top"].items(), key=lambda kv: -kv[1]):
                log(f"  {name + '/':32s} {human(size):>10s}")
        dbs = databases_report(client)
        out["databases"] = dbs
        log("\nparts per database (system.parts)")
        for d in dbs:
            log(f"  {d['database']:20s} {'active' if d['active'] else 'inactive':8s} {d['parts']:>7,} parts "
                f"{d['rows']:>14,} rows {human(d['bytes_on_disk']):>10s}")

        # -- per table
        info = table_info(client)
        parts = table_parts(client)
        tables = sorted((t for t in parts if COPY_SUFFIX not in t), key=lambda t: -parts[t]["bytes_on_disk"])
        empty = sorted(t for t, i in info.items() if t not in parts and "MergeTree" in i["engine"])
        cols = {t: columns_of(client, t) for t in tables}
        spans = {t: time_span(client, t, cols[t]) for t in tables}
        folder_tables = out.get("folder", {}).get("tables", {})
        log(f"\ntables of {database} with active parts (on disk: active parts; folder: the table's directory, "
            f"inactive parts included): per hour = on disk / span of the time column; {PROJECTION_DAYS} d: "
            f"what {PROJECTION_DAYS} days at that rate leave (fewer when the TTL is shorter); at TTL: a full TTL")
        header = (f"{'table':32s} {'rows':>12s} {'parts':>5s} {'compact':>7s} {'on disk':>10s} {'folder':>10s} "
                  f"{'compr.':>10s} {'uncompr.':>10s} {'B/row':>6s} {'span':>7s} {'per hour':>10s} "
                  f"{f'{PROJECTION_DAYS} d':>10s} {'TTL':>4s} {'at TTL':>10s}  time column")
        log(header)
        table_out = {}
        totals = defaultdict(float)
        for t in tables:
            p, span = parts[t], spans[t]
            hour = per_hour(p["bytes_on_disk"], span)
            days = ttl_days(info[t]["engine_full"])
            state = is_state_table(info[t])
            proj = hour * 24 * min(PROJECTION_DAYS, days or PROJECTION_DAYS) if hour and not state else None
            at_ttl = hour * 24 * days if hour and days and not state else None
            span_min = f"{span['seconds'] / 60:.1f}m" if span else "-"
            table_out[t] = {**p, "engine": info[t]["engine"], "ttl_days": days, "state_table": state,
                            "folder_bytes": folder_tables.get(f"{database}.{t}"), "span": span,
                            "bytes_per_row": p["bytes_on_disk"] / p["rows"] if p["rows"] else None,
                            "compressed_per_row": p["compressed"] / p["rows"] if p["rows"] else None,
                            "bytes_per_hour": hour, f"bytes_{PROJECTION_DAYS}d": proj, "bytes_at_ttl": at_ttl}
            for k in ("rows", "parts", "bytes_on_disk", "compressed", "uncompressed"):
                totals[k] += p[k]
            totals["per_hour"] += hour or 0
            totals["proj"] += proj or 0
            totals["at_ttl"] += at_ttl or 0
            log(f"{t:32s} {p['rows']:>12,} {p['parts']:>5,} {p['compact_parts']:>7,} {human(p['bytes_on_disk']):>10s} "
                f"{human(folder_tables.get(f'{database}.{t}')):>10s} {human(p['compressed']):>10s} "
                f"{human(p['uncompressed']):>10s} "
                f"{(p['bytes_on_disk'] / p['rows'] if p['rows'] else 0):>6.1f} "
                f"{span_min:>7s} "
                f"{human(hour):>10s} {human(proj):>10s} {(str(days) if days else '-'):>4s} {human(at_ttl):>10s}  "
                f"{span['column'] if span else '-'}{'  (state table: bounded by keys)' if state else ''}")
        log(f"{'total':32s} {int(totals['rows']):>12,} {int(totals['parts']):>5,} {'':>7s} "
            f"{human(totals['bytes_on_disk']):>10s} {human(sum(folder_tables.values()) if folder_tables else None):>10s} "
            f"{human(totals['compressed']):>10s} {human(totals['uncompressed']):>10s} {'':>6s} {'':>7s} "
            f"{human(totals['per_hour']):>10s} {human(totals['proj']):>10s} {'':>4s} {human(totals['at_ttl']):>10s}")
        if empty:
            log(f"MergeTree tables without rows: {', '.join(empty)}")
        out["tables"] = table_out
        out["empty_tables"] = empty

        # -- parts merged away but still on disk
        inactive = inactive_parts(client)
        settings = cleanup_settings(client)
        newest = client.query("SELECT toString(max(modification_time)) FROM system.parts "
                              "WHERE database = currentDatabase()").result_rows[0][0]
        out["inactive_parts"] = inactive
        out["merge_tree_settings"] = settings
        if inactive:
            log(f"\nparts no longer active, still on disk (newest part written {newest}; merge tree settings: "
                + ", ".join(f"{k} = {v}" for k, v in settings.items()) + ")")
            for t, i in inactive.items():
                log(f"  {t:32s} {i['parts']:>5,} parts {i['rows']:>12,} rows {human(i['bytes_on_disk']):>10s}  "
                    f"written {i['oldest']} .. {i['newest']}")
            log(f"  {'total':32s} {sum(i['parts'] for i in inactive.values()):>5,} parts "
                f"{sum(i['rows'] for i in inactive.values()):>12,} rows "
                f"{human(sum(i['bytes_on_disk'] for i in inactive.values())):>10s}")
        if args.hold_s and source is not None:
            copy_root = tmp / "clickhouse"
            started = time.monotonic()
            left = None
            while time.monotonic() - started < args.hold_s:
                left = client.query("SELECT count() FROM system.parts WHERE NOT active").result_rows[0][0]
                if not left:
                    break
                time.sleep(1.0)
            held = time.monotonic() - started
            size = du(copy_root)
            out["hold"] = {"seconds": round(held, 1), "inactive_parts_left": int(left or 0), "folder_bytes": size}
            log(f"held the copy open {held:.0f} s: {int(left or 0)} inactive parts left, folder {human(size)} "
                f"(was {human(out['folder']['total'])})")

        # -- top columns now
        all_cols = [(t, c) for t in tables for c in cols[t]]
        all_cols.sort(key=lambda tc: -tc[1]["compressed"])
        compact_rows = sum(parts[t]["compact_rows"] for t in tables)
        log(f"\ntop {args.top} columns by compressed bytes now (system.columns; rows in Compact parts, "
            f"{compact_rows:,} of {int(totals['rows']):,}, are not attributed to columns)")
        log(f"{'table':32s} {'column':24s} {'type':32s} {'codec':18s} {'compr.':>10s} {'uncompr.':>10s} "
            f"{'ratio':>7s} {'B/row':>6s} {'share':>6s}")
        col_total = sum(c["compressed"] for _, c in all_cols) or 1
        out["columns"] = [{"table": t, **c} for t, c in all_cols]
        listed = [(t, c) for t, c in all_cols if c["compressed"]][: args.top]
        if not listed:
            log("(none: every active part is Compact; see the codec trials' top columns of the merged rows)")
        for t, c in listed:
            rows = parts[t]["rows"] - parts[t]["compact_rows"]
            log(f"{t:32s} {c['name']:24s} {c['type'][:32]:32s} {short_codec(c['codec']):18s} "
                f"{human(c['compressed']):>10s} {human(c['uncompressed']):>10s} {ratio(c['uncompressed'], c['compressed']):>7s} "
                f"{(c['compressed'] / rows if rows else 0):>6.2f} {100 * c['compressed'] / col_total:>5.1f}%")

        if args.try_codecs:
            out["codecs"] = try_codecs(client, tables, info, cols, parts, spans, source is not None, args.top, log)

        if source is not None:
            close_embedded_clients(opened)
            after = file_index(source)
            unchanged = after == source_index
            out["source_unchanged"] = unchanged
            log(f"\nsource folder {source} unchanged (file sizes and mtimes): {'yes' if unchanged else 'NO'}")
        if args.json_out:
            Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json_out).write_text(json.dumps(out, indent=2, default=str))
            log(f"\nwrote {args.json_out}")
    finally:
        if opened and opened.startswith("chdb:"):
            close_embedded_clients(opened)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def try_codecs(client, tables, info, cols, parts, spans, merge_originals: bool, top: int, log) -> dict:
    trials = CodecTrials(client, log)
    result: dict = {"tables": {}}
    try:
        log("\ncodec trials: scratch copies (no TTL, Wide parts), INSERT ... SELECT, OPTIMIZE FINAL")
        merged = {}
        if merge_originals:
            for t in tables:
                client.command(f"OPTIMIZE TABLE {q(t)} FINAL", settings={"optimize_throw_if_noop": 0})
            merged = table_parts(client, tables)
            log("  originals merged (OPTIMIZE FINAL, on the copied folder): " + ", ".join(
                f"{t} {m['parts']} parts ({m['compact_parts']} Compact)" for t, m in merged.items()))
        for t in tables:
            if not parts[t]["rows"]:
                continue
            result["tables"][t] = trials.run_table(t, info[t], cols[t])
            result["tables"][t]["merged"] = merged.get(t)
    finally:
        trials.drop_copies()

    # per column
    log("\nper column: compressed bytes of the merged rows (Wide parts) with the current codec and each "
        "candidate (ratio: current / candidate); -> best: the smallest codec, where it is >1 % smaller than the "
        "current one and saves >=0.1 % of the table's bytes, else the current codec; LowCardinality (String "
        f"columns: the ids, and others outside the sort key with distinct values <= {LC_MAX_SHARE:.0%} of the rows) "
        "is recommended where it beats best by the same margins")
    log(f"{'table':32s} {'column':24s} {'type':30s} {'current':>18s} {'B/row':>6s}  candidates -> recommended")
    rows_of = {}
    for t, tr in result["tables"].items():
        cur = tr["rounds"].get("current", {})
        rows_of[t] = cur.get("parts", {}).get("rows") or parts[t]["rows"]
        for name, c in tr["columns"].items():
            cands = "  ".join(f"{short_codec(k)} {human(v)} ({ratio(c['current_bytes'], v)})"
                              for k, v in c["measured"].items() if k != c["current_codec"])
            if "lc_bytes" in c:
                cands += f"  LowCardinality+ZSTD(1) {human(c['lc_bytes'])} ({ratio(c['current_bytes'], c['lc_bytes'])})"
            if "distinct" in c:
                cands += f"  [{c['distinct']:,} distinct, {c['avg_length']:.0f} chars]"
            for codec, why in c["refused"].items():
                cands += f"  {short_codec(codec)} refused: {why[:80]}"
            rec_type, rec_codec = c["recommended"]
            rec = short_codec(rec_codec) + (" as " + rec_type if rec_type != c["type"] else "")
            log(f"{t:32s} {name:24s} {c['type'][:30]:30s} "
                f"{(short_codec(c['current_codec']) + ' ' + human(c['current_bytes'])):>18s} "
                f"{(c['current_bytes'] or 0) / max(1, rows_of[t]):>6.2f}  {cands} -> {rec}")

    def rec_bytes(c):
        return c.get("lc_bytes") if c["recommended"][0] != c["type"] else c["best_bytes"]

    # top columns after merging (every row attributed)
    flat = [(t, n, c) for t, tr in result["tables"].items() for n, c in tr["columns"].items()]
    flat.sort(key=lambda x: -(x[2]["current_bytes"] or 0))
    total = sum(c["current_bytes"] or 0 for _, _, c in flat) or 1
    log(f"\ntop {top} columns of the merged rows (current codecs, Wide parts; share of all columns' bytes), "
        "with the recommended definition")
    log(f"{'table':32s} {'column':24s} {'type':30s} {'codec':10s} {'compr.':>10s} {'B/row':>6s} {'share':>6s} "
        f"{'recommended':>40s} {'bytes':>10s} {'B/row':>6s} {'ratio':>7s}")
    for t, n, c in flat[:top]:
        rec_type, rec_codec = c["recommended"]
        rec = short_codec(rec_codec) + (" as LowCardinality" if rec_type != c["type"] else "")
        rb = rec_bytes(c)
        log(f"{t:32s} {n:24s} {c['type'][:30]:30s} {short_codec(c['current_codec']):10s} {human(c['current_bytes']):>10s} "
            f"{(c['current_bytes'] or 0) / max(1, rows_of[t]):>6.2f} {100 * (c['current_bytes'] or 0) / total:>5.1f}% "
            f"{rec:>40s} {human(rb):>10s} {(rb or 0) / max(1, rows_of[t]):>6.2f} {ratio(c['current_bytes'], rb):>7s}")
    result["top_merged"] = [{"table": t, "column": n, **c} for t, n, c in flat[:top]]

    # summary
    log(f"\nsummary: bytes on disk of each table now (its active parts as found), merged (OPTIMIZE FINAL of the "
        f"original{'' if merge_originals else ': not done on a server'}), and of the scratch copies (merged, Wide): "
        f"current codecs, best codecs (types unchanged), recommended (best codecs + LowCardinality where it wins); "
        f"saving: recommended vs current; B/row, per hour and {PROJECTION_DAYS} d (fewer days where the TTL is "
        f"shorter) at the table's rate (span of its time column)")
    log(f"{'table':32s} {'rows':>10s} {'now':>10s} {'merged':>10s} {'current':>10s} {'best':>10s} {'recomm.':>10s} "
        f"{'saving':>7s} {'B/row':>6s} {'B/row r.':>8s} {'/h merged':>10s} {'/h recomm.':>10s} "
        f"{f'{PROJECTION_DAYS} d merged':>12s} {f'{PROJECTION_DAYS} d rec.':>10s}")
    sums = defaultdict(float)
    summary = {}
    for t, tr in result["tables"].items():
        r = tr["rounds"]

        def disk(label):
            x = r.get(label, {})
            return None if "error" in x or not x else x["parts"].get("bytes_on_disk")

        now = parts[t]["bytes_on_disk"]
        merged_b = (tr.get("merged") or {}).get("bytes_on_disk")
        cur, best, final = disk("current"), disk("best"), disk("recommended")
        state = is_state_table(info[t])
        span = spans[t]
        h_merged = per_hour(merged_b or cur, span)
        h_final = per_hour(final, span)
        keep_days = min(PROJECTION_DAYS, ttl_days(info[t]["engine_full"]) or PROJECTION_DAYS)
        p_merged = h_merged * 24 * keep_days if h_merged and not state else None
        p_final = h_final * 24 * keep_days if h_final and not state else None
        saving = 1 - final / cur if final and cur else None
        summary[t] = {"rows": rows_of[t], "now": now, "merged": merged_b, "current_codecs": cur, "best_codecs": best,
                      "recommended": final, "saving_vs_current": saving,
                      "bytes_per_row_current": (cur or 0) / max(1, rows_of[t]),
                      "bytes_per_row_recommended": (final or 0) / max(1, rows_of[t]),
                      "per_hour_merged": h_merged, "per_hour_recommended": h_final,
                      f"merged_{PROJECTION_DAYS}d": p_merged, f"recommended_{PROJECTION_DAYS}d": p_final,
                      "state_table": state, "recommended_columns": recommended(tr)}
        for k, v in (("rows", rows_of[t]), ("now", now), ("merged", merged_b), ("current", cur), ("best", best),
                     ("final", final), ("h_merged", h_merged), ("h_final", h_final), ("p_merged", p_merged),
                     ("p_final", p_final)):
            sums[k] += v or 0
        log(f"{t:32s} {rows_of[t]:>10,} {human(now):>10s} {human(merged_b):>10s} {human(cur):>10s} {human(best):>10s} "
            f"{human(final):>10s} {(f'{100 * saving:.0f}%' if saving is not None else '-'):>7s} "
            f"{(cur or 0) / max(1, rows_of[t]):>6.1f} {(final or 0) / max(1, rows_of[t]):>8.1f} "
            f"{human(h_merged):>10s} {human(h_final):>10s} {human(p_merged):>12s} {human(p_final):>10s}"
            f"{'  (state table)' if state else ''}")
    total_saving = 1 - sums["final"] / sums["current"] if sums["current"] else None
    log(f"{'total':32s} {int(sums['rows']):>10,} {human(sums['now']):>10s} {human(sums['merged'] or None):>10s} "
        f"{human(sums['current']):>10s} {human(sums['best']):>10s} {human(sums['final']):>10s} "
        f"{(f'{100 * total_saving:.0f}%' if total_saving is not None else '-'):>7s} {'':>6s} {'':>8s} "
        f"{human(sums['h_merged']):>10s} {human(sums['h_final']):>10s} {human(sums['p_merged']):>12s} "
        f"{human(sums['p_final']):>10s}")
    result["summary"] = summary
    result["totals"] = dict(sums)
    result["total_saving"] = total_saving

    log("\nrecommended column definitions (type + codec; '-- changed' where it differs from now)")
    for t in result["tables"]:
        log(f"{t}:")
        for line in summary[t]["recommended_columns"]:
            log(f"    {line}")
    return result

if __name__ == "__main__":
    sys.exit(main())
