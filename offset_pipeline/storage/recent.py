"""Per-cycle reads look at recent rows first, so a cycle costs the same on day 1 and on day 35.

The history tables gain a row per group-partition per cycle and keep 35 days
(``storage/retention.py``): at 10,000 group-partitions and a 30-second cadence that is about a
billion rows a table. A read of "the newest row of each key" over the whole table every 30 s would
slow each cycle a little more every day (``bench/history_reads.py`` measures it).

The rule that keeps those reads exact: the newest row of a key that has *any* row in the last
:data:`RECENT_HOURS` is among those rows. So a read first looks only at rows that recent, and only
the keys it wanted and did not find there are looked up again in the whole history, by their group
id: the first column of every sorting key, so the primary index finds their rows without a scan.

What it buys: the tables are partitioned by day, so ClickHouse skips every day before the window;
within a day each part is sorted by group, not time, so a read still goes through the day's
partition (or two, just after midnight). The cost stops growing with the retention, not yet with
the day. ``offset_anchors`` (not partitioned, time last in its key) gains nothing from a window and
is still read whole.

Invariant (``tests/storage/test_recent_reads.py``): every reader built on this returns exactly what it
returned when it read the whole table, for rows inside and outside the window alike.
"""

from __future__ import annotations

import time

#: How far back the first look goes. Cycles run every 30 s, so every key of a healthy cycle has a
#: row from the last minute; six hours leave room for outages without falling back often.
RECENT_HOURS = 6


def recent(column: str, at_param: str = "at_ms") -> str:
    """The SQL condition "``column`` is at most :data:`RECENT_HOURS` before the time bound to
    ``at_param`` (epoch milliseconds, an ``Int64`` parameter)"."""
    return f"{column} >= fromUnixTimestamp64Milli({{{at_param}:Int64}}, 'UTC') - toIntervalHour({RECENT_HOURS})"


def now_ms() -> int:
    return int(time.time() * 1000)
