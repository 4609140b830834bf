"""How fast the Grafana panels answer over 30 days of 30-second history (target: <= 1 s
median per query for 1,000 group-partitions). Prints figures; asserts nothing.

    .venv/bin/python -m bench.dashboard_queries [--days 30 --groups 50 --topics-per-group 2 --partitions 10]

An embedded ClickHouse (chdb) in a temporary folder gets the project's monitoring tables
(``storage/metrics.py``: raw rows with TTL, per-minute rollup by materialized view), then one row per
group-partition and 30-second cycle for ``--days`` days, generated inside the engine (INSERT ...
SELECT FROM numbers(), a day at a time, so the materialized view fills the rollup as in production).
Every panel and variable query of ``grafana/dashboards`` is expanded as Grafana would
(``devstack/grafana_sql.py``) for the whole range -- all clusters, groups and topics, and one
group -- and run ``--repeat`` times; the median and max are printed per query.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

from devstack.grafana_sql import expand
from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.storage import dashboards
from offset_pipeline.storage import metrics

CYCLE_S = 30
STATUSES = "['InSync', 'Mirroring', 'Mirroring', 'Lagging', 'Stale', 'Broken', 'InSync', 'Mirroring']"


def fill(client, *, days: int, groups: int, topics: int, partitions: int, end: datetime) -> int:
    """Insert ``days`` of rows, a day per statement. Returns the number of raw rows."""
    per_cycle = groups * topics * partitions
    cycles_per_day = 86400 // CYCLE_S
    start = int((end - timedelta(days=days)).timestamp())
    total = 0
    for day in range(days):
        n = cycles_per_day * per_cycle
        client.command(
            f"INSERT INTO {metrics.TABLE} SELECT "
            # cycle k of the whole range, group-partition j
            "toDateTime64({start:Int64} + (intDiv(number, {per:UInt32}) + {day:UInt32} * {cpd:UInt32}) * 30, 3, 'UTC'),"
            "concat('group-', toString(intDiv(number % {per:UInt32}, {tp:UInt32}))),"
            "concat('topic-', toString(intDiv(number % {tp:UInt32}, {p:UInt32}))),"
            "toUInt32(number % {p:UInt32}),"
            "if(intDiv(number % {per:UInt32}, {tp:UInt32}) % 2 = 0, 'idc1', 'idc2'),"
            "if(intDiv(number % {per:UInt32}, {tp:UInt32}) % 2 = 0, 'idc2', 'idc1'),"
            "toInt64(intDiv(number, {per:UInt32}) * 7 + 1000) AS f,"
            "toInt64(f - (intDiv(number, {per:UInt32}) % 2) * 7) AS g,"
            "f - g AS d,"
            "toInt64(if(intDiv(number, {per:UInt32}) % 2 = 0, -7, 7)),"
            "intDiv(number, {per:UInt32}) % 2 = 0,"
            "toDateTime64({start:Int64} + (intDiv(number, {per:UInt32}) + {day:UInt32} * {cpd:UInt32}) * 30, 3, 'UTC'),"
            "toFloat64((intDiv(number, {per:UInt32}) % 2) * 30),"
            "true, number % 3 = 0, number % 2 = 0,"
            "if(number % 3 = 0, 'header_exact', 'header_anchor'),"
            "if(number % 5 = 0, 'timestamp_search', 'header_anchor'),"
            f"arrayElement({STATUSES}, toUInt8(number % 8 + 1)),"
            "number % 97 = 0, toInt64(number % 11), toInt64(number % 13), number % 89 = 0 "
            "FROM numbers({n:UInt64})",
            parameters={"start": start, "per": per_cycle, "day": day, "cpd": cycles_per_day,
                        "tp": topics * partitions, "p": partitions, "n": n},
        )
        total += n
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--topics-per-group", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--interval-s", type=int, default=1800, help="Grafana's $__interval for 30 days at ~1,400 px")
    args = parser.parse_args(argv)

    end = datetime.now(timezone.utc).replace(microsecond=0)
    with tempfile.TemporaryDirectory(prefix="offset-pipeline-dashboard-bench-") as tmp:
        client = ClickHouseResource(dsn=f"chdb://{tmp}/clickhouse").get_client()
        metrics.ensure_tables(client)
        t = time.monotonic()
        rows = fill(client, days=args.days, groups=args.groups, topics=args.topics_per_group,
                    partitions=args.partitions, end=end)
        fill_s = time.monotonic() - t
        client.command(f"OPTIMIZE TABLE {metrics.ROLLUP} FINAL")  # as background merges would, given time
        rollup_rows = client.query(f"SELECT count() FROM {metrics.ROLLUP}").result_rows[0][0]
        gp = args.groups * args.topics_per_group * args.partitions
        print(f"history: {args.days} days x {86400 // CYCLE_S} cycles x {gp} group-partitions = {rows:,} raw rows "
              f"({fill_s:.0f} s to insert), {rollup_rows:,} rollup rows")

        groups = [f"group-{i}" for i in range(args.groups)]
        topics = [f"topic-{i}" for i in range(args.topics_per_group)]
        selections = {
            "all": {"cluster": ["idc1", "idc2"], "group": groups, "topic": topics},
            "one group": {"cluster": ["idc1", "idc2"], "group": [groups[0]], "topic": topics},
        }
        queries = [(p.title, p.sql) for _, (_, panels) in dashboards.DASHBOARDS.items() for p in panels]
        queries += [(f"variable {name}", sql) for name, _, sql in dashboards.VARIABLES]
        print(f"\n{'query':58} {'selection':10} {'rows':>6} {'median s':>9} {'max s':>7}")
        medians = []
        for title, sql in queries:
            for label, variables in selections.items():
                expanded = expand(sql, time_from=end - timedelta(days=args.days), time_to=end,
                                  interval_s=args.interval_s, variables=variables)
                times, n = [], 0
                for _ in range(args.repeat):
                    t = time.monotonic()
                    n = len(client.query(expanded).result_rows)
                    times.append(time.monotonic() - t)
                median = statistics.median(times)
                medians.append(median)
                print(f"{title[:58]:58} {label:10} {n:6d} {median:9.3f} {max(times):7.3f}")
        print(f"\nslowest median {max(medians):.3f} s (target <= 1 s); median of medians {statistics.median(medians):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
