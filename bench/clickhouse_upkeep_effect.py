"""What the project's own codecs (storage/upkeep.py) do to a ClickHouse folder's bytes.

    .venv/bin/python -m bench.clickhouse_upkeep_effect --dsn chdb:///path/to/folder

Copies the folder (the given one is never opened), merges every table into Wide parts with its
current codecs (TTLs removed on the copy, so nothing expires while measuring), then applies
``ensure_upkeep`` to each table, merges again (a merge rewrites with the new codecs) and prints
bytes and bytes per row before and after, per table. ``bench/clickhouse_bytes.py`` tries other
codecs column by column; this measures the ones the product sets.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from offset_pipeline.resources.clickhouse import ClickHouseResource
from offset_pipeline.storage import upkeep


def _sizes(client) -> dict[str, tuple[int, int]]:
    rows = client.query(
        "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts "
        "WHERE database = currentDatabase() AND active GROUP BY table"
    ).result_rows
    return {t: (int(r), int(b)) for t, r, b in rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", required=True, help="chdb:///folder")
    args = p.parse_args(argv)
    source = Path(args.dsn.removeprefix("chdb://"))
    copy = Path(tempfile.mkdtemp(prefix="upkeep-effect-")) / "clickhouse"
    shutil.copytree(source, copy, symlinks=True)  # an Atomic database links its folders into store/
    client = ClickHouseResource(dsn=f"chdb://{copy}").get_client()
    tables = [t for (t,) in client.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree%'"
    ).result_rows]
    for table in tables:
        engine = client.query("SELECT engine_full FROM system.tables WHERE database = currentDatabase() "
                              "AND name = {t:String}", parameters={"t": table}).result_rows[0][0]
        if " TTL " in engine:
            client.command(f"ALTER TABLE {table} REMOVE TTL")
        client.command(f"ALTER TABLE {table} MODIFY SETTING min_bytes_for_wide_part = 0")
        client.command(f"OPTIMIZE TABLE {table} FINAL")
    before = _sizes(client)
    for table in tables:
        upkeep.ensure_upkeep(client, table)
        client.command(f"OPTIMIZE TABLE {table} FINAL")
    after = _sizes(client)
    print(f"{'table':32s} {'rows':>10s} {'before MB':>10s} {'B/row':>6s} {'after MB':>9s} {'B/row':>6s} {'smaller':>8s}")
    total_before = total_after = 0
    for table in sorted(before):
        rows, b = before[table]
        a = after.get(table, (rows, b))[1]
        total_before, total_after = total_before + b, total_after + a
        print(f"{table:32s} {rows:>10,} {b / 1e6:>10.2f} {b / max(rows, 1):>6.1f} {a / 1e6:>9.2f} "
              f"{a / max(rows, 1):>6.1f} {100 * (1 - a / b):>7.0f}%")
    print(f"{'all tables':32s} {'':>10s} {total_before / 1e6:>10.2f} {'':>6s} {total_after / 1e6:>9.2f} {'':>6s} "
          f"{100 * (1 - total_after / total_before):>7.0f}%")
    shutil.rmtree(copy.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
