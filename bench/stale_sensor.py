"""What one stale_partition_sensor tick costs on the ClickHouse side at scale. Prints
figures; asserts nothing.

    .venv/bin/python -m bench.stale_sensor [--group-partitions 10000 --window 600 --repeat 5]

An embedded ClickHouse (chdb) in a temporary folder gets the project's tables and the history a
sensor reads: one ``offset_translations`` row per group-partition and 30-second cycle, and one
``offset_snapshots`` row per cluster, group-partition and cycle, for the window plus the sensor's
look-back (generated inside the engine: INSERT ... SELECT FROM numbers()). A tenth of the
partitions are quiet (log ends unchanged), the rest grow every cycle; a third of the groups lag.
Then the tick's fixed part -- ``storage/stale_history.read_stale_history`` with ``partition_histories`` and
``stale_candidates.classify`` for every group-partition -- runs ``--repeat`` times; the median and
max are printed, with the verdict counts. (Kafka reads happen only for the partitions passing
every other condition; those are measured by the real-cluster tests, not here.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from offset_pipeline.fast_forward.stale_candidates import classify, partition_histories
from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.sensors.stale_partitions import HISTORY_LOOKBACK_S
from offset_pipeline.storage import snapshots, translations
from offset_pipeline.storage.stale_history import read_stale_history

CYCLE_S = 30
PARTITIONS_PER_TOPIC = 20


def fill(client, group_partitions: int, cycles: int, now_s: int) -> None:
    per = group_partitions
    # group g reads topic-(g // 5 ... ) : 5 groups per topic, 20 partitions per topic
    common = {"per": per, "cycles": cycles, "now": now_s, "pt": PARTITIONS_PER_TOPIC}
    client.command(
        f"INSERT INTO {translations.TRANSLATIONS_TABLE} (snapshot_id, cycle_time, group_id, topic, partition, active, "
        "standby, committed, standby_committed, strategy, status, reason) SELECT "
        "concat('cycle-', toString(intDiv(number, {per:UInt32}))), "
        "toDateTime64({now:Int64} - ({cycles:UInt32} - intDiv(number, {per:UInt32})) * 30, 3, 'UTC'), "
        "concat('group-', toString(intDiv(number % {per:UInt32}, {pt:UInt32}))), "
        "concat('topic-', toString(intDiv(number % {per:UInt32}, {pt:UInt32} * 5))), "
        "toUInt32(number % {pt:UInt32}), 'idc1', 'idc2', "
        # quiet partitions (every tenth) sit at their log end 1000; others grow 5 a cycle; a third lag
        "toInt64(if((number % {per:UInt32}) % 10 = 0, 1000, 1000 + intDiv(number, {per:UInt32}) * 5 "
        "  - if(intDiv(number % {per:UInt32}, {pt:UInt32}) % 3 = 0, 7, 0))), "
        "toInt64(900), 'none', 'no_anchor', 'bench' FROM numbers({n:UInt64})",
        parameters={**common, "n": per * cycles},
    )
    for cluster, end_offset in (("idc1", 1000), ("idc2", 950)):
        client.command(
            f"INSERT INTO {snapshots.TABLE} (snapshot_id, snapshot_time, cluster, group_id, group_state, member_count, "
            "topic, partition, committed_offset, topic_present, log_start, log_end, last_stable) SELECT "
            "concat('cycle-', toString(intDiv(number, {per:UInt32}))), "
            "toDateTime64({now:Int64} - ({cycles:UInt32} - intDiv(number, {per:UInt32})) * 30, 3, 'UTC'), "
            "{cluster:String}, concat('group-', toString(intDiv(number % {per:UInt32}, {pt:UInt32}))), 'STABLE', 1, "
            "concat('topic-', toString(intDiv(number % {per:UInt32}, {pt:UInt32} * 5))), "
            "toUInt32(number % {pt:UInt32}), toInt64(0), true, toInt64(0), "
            "toInt64(if((number % {per:UInt32}) % 10 = 0, {end:Int64}, {end:Int64} + intDiv(number, {per:UInt32}) * 5)) "
            "AS e, e FROM numbers({n:UInt64})",
            parameters={**common, "n": per * cycles, "cluster": cluster, "end": end_offset},
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group-partitions", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=600.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        client = ClickHouseResource(dsn=f"chdb://{Path(tmp) / 'ch'}").get_client()
        snapshots.ensure_table(client)
        translations.ensure_tables(client)
        now_s = int(time.time())
        cycles = int((args.window + max(HISTORY_LOOKBACK_S, args.window)) // CYCLE_S) + 2
        started = time.monotonic()
        fill(client, args.group_partitions, cycles, now_s)
        print(f"history: {args.group_partitions} group-partitions x {cycles} cycles x 2 clusters "
              f"({args.group_partitions * cycles * 3:,} rows) filled in {time.monotonic() - started:.1f}s")
        since_ms = int((now_s - args.window - max(HISTORY_LOOKBACK_S, args.window)) * 1000)
        read_s, classify_s, verdicts = [], [], []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            histories = partition_histories(*read_stale_history(client, since_ms))
            t1 = time.monotonic()
            verdicts = [classify(h, now_s * 1000, window_s=args.window) for h in histories]
            t2 = time.monotonic()
            read_s.append(t1 - t0)
            classify_s.append(t2 - t1)
        counts = Counter(v.rejection.value if v.rejection else "candidate (before mirrors)" for v in verdicts)
        print(f"read history : median {statistics.median(read_s):.3f}s  max {max(read_s):.3f}s")
        print(f"classify     : median {statistics.median(classify_s):.3f}s  max {max(classify_s):.3f}s")
        total = [a + b for a, b in zip(read_s, classify_s)]
        print(f"tick (fixed) : median {statistics.median(total):.3f}s  max {max(total):.3f}s "
              f"for {len(verdicts)} group-partitions")
        print("verdicts     : " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
