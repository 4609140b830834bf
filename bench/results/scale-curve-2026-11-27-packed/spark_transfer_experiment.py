"""How the translation's rows should travel through Spark: measured 2026-11-27 before aace196.

No Kafka: N synthetic work rows (10 topics' worth of keys per 100 rows), a task that makes one
result row per work row (the real result columns, a 300-character decision line), on local[2].
Three ways, alternated, after a warm-up of each:

* ``shuffle``: as before aace196: the rows as one Arrow table, ``repartition(4, <key>, salt)``,
  ``mapInArrow`` over Arrow batches of rows, the results collected as rows (``toArrow``);
* ``payloads+shuffle``: the driver groups the rows by key into 4 Arrow IPC payloads, one row each,
  ``repartition(4, "task")``, results back as IPC payloads;
* ``payloads``: the same without the repartition (what aace196 ships).

Prints wall seconds and CPU-seconds of the driver, the JVM and the Python workers per run. Run from
the repository root: ``.venv/bin/python bench/results/scale-curve-2026-11-27-packed/spark_transfer_experiment.py 10000``.
Figures of that night: ``spark_transfer_experiment.txt``.
"""

from __future__ import annotations

import os
import random
import sys
import time
from operator import itemgetter

import psutil
import pyarrow as pa

os.environ["PYSPARK_PYTHON"] = sys.executable
sys.path.insert(0, os.getcwd())

from offset_pipeline.resources.spark import get_spark_session  # noqa: E402
from offset_pipeline.sync.spark_translation import (  # noqa: E402
    PARTITION_KEY,
    RESULT_COLUMNS,
    RESULT_SCHEMA,
    WORK_SCHEMA,
)

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
ARROW_TYPES = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "boolean": pa.bool_()}


def _arrow_schema(ddl: str) -> pa.Schema:
    fields = [part.strip().split(" ") for part in ddl.split(",")]
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in fields])


KEY = itemgetter(*PARTITION_KEY)


def work_rows(n: int) -> list[dict]:
    rnd = random.Random(1)
    return [{"group_id": f"g{(i // 100) % 10}-{i % 5}", "topic": f"topic-{i // 100}", "partition": (i // 5) % 20,
             "active": "idc1", "standby": "idc2", "committed": rnd.randrange(100), "standby_committed": 3,
             "active_log_start": 0, "active_log_end": 80, "standby_log_start": 0, "standby_log_end": 80,
             "anchor_active_offset": None, "anchor_standby_offset": None, "shape": "two_way",
             "standby_timestamp_type": "CreateTime", "shape_source": "configured", "ff_active_offset": None,
             "ff_standby_offset": None} for i in range(n)]


def results(rows: list[dict]) -> list[dict]:
    return [{"snapshot_id": "s", "cycle_time": 1, "group_id": r["group_id"], "topic": r["topic"],
             "partition": r["partition"], "active": r["active"], "standby": r["standby"], "committed": r["committed"],
             "standby_committed": 3, "strategy": "header_anchor", "standby_offset": 5, "status": "translated",
             "reason": "x" * 80, "expected_duplicates": 0, "timestamp_inversion": False, "anchor_active_offset": 1,
             "anchor_standby_offset": 2, "safe_bound": 9, "keep_active_offset": 1, "keep_standby_offset": 2,
             "decision": "d" * 300} for r in rows]


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def by_key(rows: list[dict]) -> dict:
    out: dict = {}
    for row in rows:
        out.setdefault(KEY(row), []).append(row)
    return out


def shuffled(spark, work: list[dict]) -> list[dict]:
    from pyspark.sql import functions as F

    def task(batches):
        rows = [row for batch in batches for row in batch.to_pylist()]
        out = [r for key_rows in by_key(rows).values() for r in results(key_rows)]
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=_arrow_schema(RESULT_SCHEMA))

    schema = _arrow_schema(WORK_SCHEMA)
    table = pa.table({name: [r.get(name) for r in work] for name in schema.names}, schema=schema)
    df = spark.createDataFrame(table).repartition(4, *PARTITION_KEY, F.lit("salt")).mapInArrow(task, RESULT_SCHEMA)
    return df.select(*RESULT_COLUMNS).toArrow().to_pylist()


def payloads(spark, work: list[dict], shuffle: bool) -> list[dict]:
    parts: list[list[dict]] = [[] for _ in range(4)]
    for i, rows in enumerate(by_key(work).values()):
        parts[i % 4] += rows
    schema = _arrow_schema(WORK_SCHEMA)
    blobs = [ipc(pa.Table.from_pylist(part, schema=schema)) for part in parts]

    def task(batches):
        out_schema = pa.schema([("payload", pa.binary())])
        for batch in batches:
            for blob in batch.column("payload").to_pylist():
                rows = pa.ipc.open_stream(blob).read_all().to_pylist()
                out = [r for key_rows in by_key(rows).values() for r in results(key_rows)]
                table = pa.Table.from_pylist(out, schema=_arrow_schema(RESULT_SCHEMA))
                yield pa.RecordBatch.from_pylist([{"payload": ipc(table)}], schema=out_schema)

    df = spark.createDataFrame(pa.table({"task": pa.array(range(4), pa.int32()), "payload": pa.array(blobs, pa.binary())}))
    if shuffle:
        df = df.repartition(4, "task")
    out: list[dict] = []
    for blob in df.mapInArrow(task, "payload binary").toArrow().column("payload").to_pylist():
        out += pa.ipc.open_stream(blob).read_all().to_pylist()
    return out


def usage(me: psutil.Process) -> tuple[float, float, float]:
    jvm = workers = 0.0
    for child in me.children(recursive=True):
        try:
            t = child.cpu_times()
            name = child.name()
        except psutil.Error:
            continue
        if name == "java":
            jvm += t.user + t.system
        else:
            workers += t.user + t.system
    t = me.cpu_times()
    return t.user + t.system, jvm, workers


def main() -> None:
    spark = get_spark_session("local[2]", None, {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g"})
    work = work_rows(N)
    ways = [("shuffle", lambda: shuffled(spark, work)), ("payloads+shuffle", lambda: payloads(spark, work, True)),
            ("payloads", lambda: payloads(spark, work, False))]
    for _, way in ways:
        way()
    me = psutil.Process()
    for _ in range(4):
        for name, way in ways:
            before, started = usage(me), time.monotonic()
            n = len(way())
            seconds, after = time.monotonic() - started, usage(me)
            print(f"{name:17s} rows {n} wall {seconds:.2f}s driver {after[0] - before[0]:.2f} "
                  f"jvm {after[1] - before[1]:.2f} workers {after[2] - before[2]:.2f} CPU-s", flush=True)


if __name__ == "__main__":
    main()
