"""The translation step as DataFrame-to-DataFrame functions on one Spark session.

:func:`translate_groups` takes one row per group-partition whose direction is decided, groups the
rows by ``(topic, partition, active, standby)`` and, per group of rows, inside a Spark task, reads
the Kafka partition once with :func:`read_translation_facts` (for all its groups) and translates
every group with :func:`translate_partition`, and computes each group's
:func:`safe_standby_bound` from the same facts (column ``safe_bound``, NULL for rows whose facts
were never read or proved nothing: the commit step refuses to write those). Kafka errors or
timeouts inside a task become ``cluster_unavailable`` rows for that partition's groups: one
partition never fails the others.

Everything the task needs travels in the closure as plain data (librdkafka config dicts, numbers),
never Dagster resources or clients.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from typing import Any

from offset_pipeline.sync.offset_sync_stamps import offset_syncs_from_column
from offset_pipeline.translation import (
    Anchor,
    CaughtUpPoint,
    ShapeKind,
    ShapeSource,
    TimestampType,
    TopicShape,
    TranslationResult,
    TranslationStatus,
    decision_log_line,
    parse_shape,
    safe_standby_bound,
    translate_partition,
    untranslatable,
)

#: Input columns of :func:`translate_groups` (one row per group-partition, direction decided).
WORK_SCHEMA = (
    "group_id string, topic string, partition int, active string, standby string, "
    "committed long, standby_committed long, "
    "active_log_start long, active_log_end long, standby_log_start long, standby_log_end long, "
    "anchor_active_offset long, anchor_standby_offset long, shape string, standby_timestamp_type string, "
    "shape_source string, ff_active_offset long, ff_standby_offset long, offset_syncs string"
)

#: Output columns: the ``offset_translations`` columns, plus the anchor to keep and the decision line.
RESULT_SCHEMA = (
    "snapshot_id string, cycle_time long, group_id string, topic string, partition int, active string, "
    "standby string, committed long, standby_committed long, strategy string, standby_offset long, "
    "status string, reason string, expected_duplicates long, timestamp_inversion boolean, "
    "anchor_active_offset long, anchor_standby_offset long, safe_bound long, keep_active_offset long, "
    "keep_standby_offset long, decision string"
)
RESULT_COLUMNS = [part.strip().split(" ")[0] for part in RESULT_SCHEMA.split(",")]

#: A Spark task's input: its work rows (:data:`WORK_SCHEMA`) as one Arrow IPC payload (:func:`work_tasks`).
TASKS_SCHEMA = "work binary"
#: A Spark task's output: result rows (:data:`RESULT_SCHEMA`) as Arrow IPC payloads, a few thousand rows each.
RESULTS_SCHEMA = "results binary"


def _int(value) -> int | None:
    """A nullable long from pandas (None, NaN, numpy or pandas NA) as a Python int or None."""
    if value is None:
        return None
    try:
        if math.isnan(value):
            return None
    except TypeError:
        if str(value) == "<NA>":
            return None
    return int(value)


def result_row(
    result: TranslationResult, snapshot_id: str, cycle_time_ms: int, safe_bound: int | None = None
) -> dict[str, Any]:
    """One output row (a dict of :data:`RESULT_COLUMNS`) for a result; ``safe_bound`` is
    :func:`safe_standby_bound` of the facts the result came from (None: no facts, or nothing proven)."""
    used, keep = result.anchor_used, result.anchor_to_keep
    return {
        "snapshot_id": snapshot_id,
        "cycle_time": cycle_time_ms,
        "group_id": result.group_id,
        "topic": result.topic,
        "partition": result.partition,
        "active": result.active or "",
        "standby": result.standby or "",
        "committed": result.committed,
        "standby_committed": result.standby_committed,
        "strategy": result.strategy.value if result.strategy is not None else "none",
        "standby_offset": result.standby_offset,
        "status": result.status.value,
        "reason": result.reason,
        "expected_duplicates": result.expected_duplicates,
        "timestamp_inversion": bool(result.timestamp_inversion),
        "anchor_active_offset": used.active_offset if used else None,
        "anchor_standby_offset": used.standby_offset if used else None,
        "safe_bound": safe_bound,
        "keep_active_offset": keep.active_offset if keep else None,
        "keep_standby_offset": keep.standby_offset if keep else None,
        "decision": decision_log_line(result),
    }


def translate_partition_rows(
    rows: list[dict[str, Any]],
    active_confs: dict[str, dict],
    *,
    snapshot_id: str,
    cycle_time_ms: int,
    window: int = 50,
    refine_window: int = 200,
    timeout_s: float = 10.0,
    mirror_writes_headers: bool = True,
) -> list[dict[str, Any]]:
    """The work of one task: rows of ONE (topic, partition, active, standby), read once, translated
    per group. Plain Python (no Spark), so it can run and be tested outside a Spark task."""
    from offset_pipeline.kafka_io.partition_records import read_translation_facts

    reads = partition_reads(rows, active_confs, snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms, window=window,
                            refine_window=refine_window, timeout_s=timeout_s,
                            mirror_writes_headers=mirror_writes_headers)
    if isinstance(reads, list):
        return reads
    try:
        facts = read_translation_facts(*reads.args, **reads.kwargs)
    except Exception as exc:  # noqa: BLE001 - any read failure is this partition's status, not the job's
        return read_failed_rows(rows, exc, snapshot_id, cycle_time_ms, active_confs)
    return translated_rows(rows, facts, snapshot_id, cycle_time_ms)


@dataclasses.dataclass(frozen=True)
class PartitionReads:
    """The arguments of ``partition_records.read_translation_facts`` for one key's rows."""

    args: tuple
    kwargs: dict[str, Any]


def partition_reads(
    rows: list[dict[str, Any]], active_confs: dict[str, dict], *, snapshot_id: str, cycle_time_ms: int,
    window: int = 50, refine_window: int = 200, timeout_s: float = 10.0, mirror_writes_headers: bool = True,
) -> PartitionReads | list[dict[str, Any]]:
    """What to read for one key's rows, or, when the rows cannot be read at all (no log range, no
    client configuration, an unknown timestamp type), their result rows saying why."""
    from offset_pipeline.kafka_io.partition_records import (
        GroupPartitionInput,
        PartitionLogs,
    )

    if not rows:
        return []
    first = rows[0]
    topic, partition = first["topic"], int(first["partition"])
    active, standby = first["active"], first["standby"]

    def failed(status: TranslationStatus, reason: str) -> list[dict[str, Any]]:
        return untranslated_rows(rows, status, reason, snapshot_id, cycle_time_ms)

    a_start, a_end = _int(first["active_log_start"]), _int(first["active_log_end"])
    if a_start is None or a_end is None:
        return failed(TranslationStatus.INCONSISTENT_FACTS, f"the snapshot has no log range of {topic}[{partition}] on {active}")
    if active not in active_confs or standby not in active_confs:
        return failed(TranslationStatus.CLUSTER_UNAVAILABLE, f"no client configuration for {active} or {standby}")
    try:
        shape = parse_shape(first["shape"]) or TopicShape.unknown()
    except ValueError as exc:
        shape = TopicShape.unknown(str(exc))
    if first.get("shape_source") == "detected" and shape.kind is not ShapeKind.UNKNOWN:
        shape = dataclasses.replace(shape, source=ShapeSource.DETECTED, reason="detected from origin headers")
    # The standby topic's message.timestamp.type from the snapshot; unknown (NULL) reads as the
    # broker default, CreateTime: the safe bound never relies on timestamps either way.
    timestamp_type = first.get("standby_timestamp_type") or TimestampType.CREATE_TIME.value
    if timestamp_type not in {t.value for t in TimestampType}:
        return failed(TranslationStatus.INCONSISTENT_FACTS,
                      f"unknown message.timestamp.type {timestamp_type!r} of {topic} on {standby}")
    logs = PartitionLogs(
        active_log_start=a_start, active_log_end=a_end,
        standby_log_start=_int(first["standby_log_start"]), standby_log_end=_int(first["standby_log_end"]),
    )
    inputs = [
        GroupPartitionInput(
            group_id=r["group_id"], committed=_int(r["committed"]), standby_committed=_int(r["standby_committed"]),
            kept_anchor=_kept_anchor(r, active, standby), kept_caught_up=_kept_point(r, active, standby),
        )
        for r in rows
    ]
    options = {"shape": shape, "standby_timestamp_type": timestamp_type, "window": window,
               "refine_window": refine_window, "timeout_s": timeout_s, "mirror_writes_headers": mirror_writes_headers}
    # MirrorMaker 2's stamped pairs of the partition (every row of the key carries the same)
    syncs = offset_syncs_from_column(first.get("offset_syncs"))
    if syncs is not None:
        options["offset_syncs"] = syncs
    return PartitionReads(
        (active, standby, active_confs[active], active_confs[standby], topic, partition, logs, inputs), options,
    )


def read_failed_rows(rows: list[dict[str, Any]], exc: BaseException, snapshot_id: str, cycle_time_ms: int,
                     active_confs: dict[str, dict]) -> list[dict[str, Any]]:
    """The rows of a key whose reads failed: the failure is that partition's status, not the job's
    (``not_authorized`` when the cluster refused a right, else ``cluster_unavailable``)."""
    from offset_pipeline.kafka_io.read_refusals import refused_read_reason

    refused = refused_read_reason(exc, rows[0], active_confs)  # a missing ACL: named, not an outage
    if refused:
        return untranslated_rows(rows, TranslationStatus.NOT_AUTHORIZED, refused, snapshot_id, cycle_time_ms)
    first = rows[0]
    topic, partition, active, standby = first["topic"], int(first["partition"]), first["active"], first["standby"]
    return untranslated_rows(
        rows, TranslationStatus.CLUSTER_UNAVAILABLE,
        f"reading {topic}[{partition}] ({active} -> {standby}) failed: {type(exc).__name__}: {exc}",
        snapshot_id, cycle_time_ms,
    )


def translated_rows(rows: list[dict[str, Any]], facts, snapshot_id: str, cycle_time_ms: int) -> list[dict[str, Any]]:
    """One result row per group of the key's read ``facts`` (in the rows' order)."""
    first = rows[0]
    topic, partition, active, standby = first["topic"], int(first["partition"]), first["active"], first["standby"]
    out = []
    for fact in facts:
        bound = None
        try:
            result = translate_partition(fact)
            bound = safe_standby_bound(fact)
        except Exception as exc:  # noqa: BLE001 - neither should ever raise; if one does, say so
            result = untranslatable(
                fact.group_id, topic, partition, TranslationStatus.INCONSISTENT_FACTS,
                f"translation raised {type(exc).__name__}: {exc}", active=active, standby=standby,
                committed=fact.committed, standby_committed=fact.standby_committed, anchor_to_keep=fact.kept_anchor,
            )
        out.append(result_row(result, snapshot_id, cycle_time_ms, safe_bound=bound))
    return out


def untranslated_rows(
    rows: list[dict[str, Any]], status: TranslationStatus, reason: str, snapshot_id: str, cycle_time_ms: int
) -> list[dict[str, Any]]:
    """Work rows that were not translated (their partition unreadable, Spark unavailable): one
    result row each with ``status`` and ``reason``, no standby offset, and the anchor kept so far
    still kept (an outage never costs a group-partition its anchor)."""
    return [
        result_row(
            untranslatable(
                r["group_id"], r["topic"], int(r["partition"]), status, reason, active=r["active"],
                standby=r["standby"], committed=_int(r["committed"]), standby_committed=_int(r["standby_committed"]),
                anchor_to_keep=_kept_anchor(r, r["active"], r["standby"]),
            ),
            snapshot_id, cycle_time_ms,
        )
        for r in rows
    ]


def _kept_point(row: dict[str, Any], active: str, standby: str) -> CaughtUpPoint | None:
    a, s = _int(row.get("ff_active_offset")), _int(row.get("ff_standby_offset"))
    return CaughtUpPoint(active, standby, a, s) if a is not None and s is not None else None


def _kept_anchor(row: dict[str, Any], active: str, standby: str) -> Anchor | None:
    a, s = _int(row.get("anchor_active_offset")), _int(row.get("anchor_standby_offset"))
    return Anchor(active, standby, a, s) if a is not None and s is not None else None


def translate_groups(
    tasks_df,
    active_confs: dict[str, dict],
    *,
    snapshot_id: str,
    cycle_time_ms: int,
    window: int = 50,
    refine_window: int = 200,
    timeout_s: float = 10.0,
    mirror_writes_headers: bool = True,
    read_until: float | None = None,
    first_keys: Iterable[tuple] = (),
    read_threads: int = 1,
    batch_keys: int = 1,
):
    """``tasks_df`` (:data:`TASKS_SCHEMA`, from :func:`work_tasks`: each row one task's work rows,
    whole Kafka partitions) to a DataFrame of :data:`RESULTS_SCHEMA` (result rows of
    :data:`RESULT_SCHEMA`, one per work row, in Arrow IPC payloads; :func:`collected_rows` opens
    them). ``active_confs``: librdkafka client config per cluster name (plain dicts).

    Each task translates its keys one after another in plain Python (:func:`translate_keyed_rows`),
    one ``mapInArrow`` over the task rows: no shuffle. The rows were grouped by key and spread over
    the tasks on the driver, which holds them anyway: the repartition by key this replaced cost the
    JVM 0.7 to 1.2 CPU-s of a 10,000-row cycle and 1.5 to 3.2 of a 100,000-row one to move rows that
    only Python reads (measured alternated without Kafka, 2026-11-27; docs/results/scale-curve.md).
    A payload cell is opaque to Spark, but nothing queries it there: the results are collected whole.

    ``read_until`` (epoch seconds): no Kafka partition is read after it; the rest are
    ``translation_deferred``. ``first_keys`` are read first in their task (the keys deferred last
    cycle; :func:`work_tasks` puts them first and spreads them over the tasks).
    ``read_threads``, ``batch_keys``: how a task reads its keys (:func:`translate_keyed_rows`).
    """
    confs = {name: dict(conf) for name, conf in active_confs.items()}  # plain data for the closure
    first = frozenset(tuple(k) for k in first_keys)

    settings = dict(snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms, window=window, refine_window=refine_window,
                    timeout_s=timeout_s, mirror_writes_headers=mirror_writes_headers, read_until=read_until,
                    first_keys=first, threads=read_threads, batch_keys=batch_keys)

    def task(batches):
        from offset_pipeline.sync.gc_pause import cyclic_gc_paused

        # The records, facts and rows of a task form no reference cycles (as the driver's steps'):
        # PySpark's worker runs a full collection after every task anyway.
        with cyclic_gc_paused():
            for batch in batches:
                for payload in batch.column("work").to_pylist():
                    yield from translated_payloads(ipc_table(payload).to_pylist(), confs, **settings)

    return tasks_df.mapInArrow(task, schema=RESULTS_SCHEMA)


def translated_payloads(rows: list[dict[str, Any]], active_confs: dict[str, dict], **settings: Any):
    """One task's work rows (whole keys) translated (:func:`translate_keyed_rows`, ``settings``), as
    record batches of :data:`RESULTS_SCHEMA`: a payload of result rows every few thousand rows."""
    import pyarrow as pa

    schema, out_schema = result_arrow_schema(), results_arrow_schema()
    key_of = itemgetter(*PARTITION_KEY)  # one C call per row, not a generator
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(key_of(row), []).append(row)

    def batch(out: list[dict[str, Any]]):
        return pa.RecordBatch.from_pydict({"results": [ipc_payload(pa.Table.from_pylist(out, schema))]}, schema=out_schema)

    out: list[dict[str, Any]] = []
    for key_rows in translate_keyed_rows(by_key, active_confs, **settings):
        out += key_rows
        if len(out) >= _OUTPUT_BATCH_ROWS:
            yield batch(out)
            out = []
    if out:
        yield batch(out)


def translate_keyed_rows(
    by_key: dict[tuple, list[dict[str, Any]]],
    active_confs: dict[str, dict],
    *,
    snapshot_id: str,
    cycle_time_ms: int,
    read_until: float | None = None,
    first_keys: frozenset = frozenset(),
    clock: Callable[[], float] = time.time,
    threads: int = 1,
    batch_keys: int = 1,
    **reading: Any,
) -> Iterator[list[dict[str, Any]]]:
    """One task's work: the result rows of each key (:data:`PARTITION_KEY`) of ``by_key``, the
    ``first_keys`` first, the others in their given order; results come back in that order.
    ``reading``: the read settings of :func:`translate_partition_rows` (window, refine_window,
    timeout_s, mirror_writes_headers).

    ``batch_keys`` > 1: the keys are read in batches of that many, each batch's reads together
    (``kafka_io/batched_reads.py``: per round, one fetch per cluster for all the batch's passes and
    one ``offsets_for_times`` call for all its lookups) instead of a round trip per pass and
    lookup. ``threads`` > 1: that many batches (or single keys) are read at once, each by a thread
    with consumers of its own (the pool's).

    Invariants: every input row gives exactly one result row; a key is admitted (``clock()`` asked
    once) when its batch starts, and none is admitted once ``clock()`` passes ``read_until``: the
    rows of every key not admitted are ``translation_deferred`` with their anchors kept (no commit,
    nothing lost: the next cycle reads them first). A batch admitted before ``read_until`` is read
    whole, so the budget is overrun by at most one batch's reads.
    """
    ordered = [k for k in by_key if k in first_keys] + [k for k in by_key if k not in first_keys]

    def admitted(key: tuple) -> bool:
        return read_until is None or clock() < read_until

    def deferred(key: tuple) -> list[dict[str, Any]]:
        topic, partition, active, standby = key
        return untranslated_rows(
            by_key[key], TranslationStatus.TRANSLATION_DEFERRED,
            f"the cycle's read budget ran out before {topic}[{partition}] ({active} -> {standby}) was read; "
            "it is read first next cycle (OFFSET_PIPELINE_TRANSLATION_BUDGET_S)",
            snapshot_id, cycle_time_ms,
        )

    def one(key: tuple) -> list[dict[str, Any]]:
        if not admitted(key):
            return deferred(key)
        return translate_partition_rows(by_key[key], active_confs, snapshot_id=snapshot_id, cycle_time_ms=cycle_time_ms,
                                        **reading)

    def batch(keys: list[tuple]) -> list[list[dict[str, Any]]]:
        from offset_pipeline.kafka_io.batched_reads import run_batched
        from offset_pipeline.kafka_io.partition_records import translation_fact_steps

        out: dict[tuple, list[dict[str, Any]]] = {}
        reads: dict[tuple, PartitionReads] = {}
        for key in keys:
            if not admitted(key):
                out[key] = deferred(key)
                continue
            planned = partition_reads(by_key[key], active_confs, snapshot_id=snapshot_id,
                                      cycle_time_ms=cycle_time_ms, **reading)
            if isinstance(planned, list):
                out[key] = planned
            else:
                reads[key] = planned
        if reads:
            results = run_batched([translation_fact_steps(*r.args, **r.kwargs) for r in reads.values()],
                                  timeout_s=reading.get("timeout_s", 10.0))
            for key, result in zip(reads, results):
                rows = by_key[key]
                out[key] = (read_failed_rows(rows, result, snapshot_id, cycle_time_ms, active_confs)
                            if isinstance(result, BaseException) else
                            translated_rows(rows, result, snapshot_id, cycle_time_ms))
        return [out[key] for key in keys]

    if batch_keys > 1:
        batches = [ordered[i:i + batch_keys] for i in range(0, len(ordered), batch_keys)]
        if threads <= 1 or len(batches) <= 1:
            for keys in batches:
                yield from batch(keys)
            return
        with ThreadPoolExecutor(max_workers=min(threads, len(batches)), thread_name_prefix="translate-batch") as pool:
            for rows_per_key in pool.map(batch, batches):
                yield from rows_per_key
        return
    if threads <= 1 or len(ordered) <= 1:
        for key in ordered:
            yield one(key)
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(ordered)), thread_name_prefix="translate-key") as pool:
        yield from pool.map(one, ordered)


#: One task reads one Kafka partition for all its groups: rows with the same key go to one task.
PARTITION_KEY = ("topic", "partition", "active", "standby")
_OUTPUT_BATCH_ROWS = 5000
_ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "boolean": "bool_"}


def _arrow_schema(ddl: str):
    import pyarrow as pa

    fields = [part.strip().split(" ") for part in ddl.split(",")]
    return pa.schema([(name, getattr(pa, _ARROW_TYPES[kind])()) for name, kind in fields])


def result_arrow_schema():
    """:data:`RESULT_SCHEMA` as a pyarrow schema (built where it is used: inside the Spark task)."""
    return _arrow_schema(RESULT_SCHEMA)


def results_arrow_schema():
    """:data:`RESULTS_SCHEMA` as a pyarrow schema."""
    import pyarrow as pa

    return pa.schema([("results", pa.binary())])


def task_rows(rows: list[dict[str, Any]], tasks: int, *, salt: str = "",
              first_keys: Iterable[tuple] = ()) -> list[list[dict[str, Any]]]:
    """``rows`` split into at most ``tasks`` lists for the Spark tasks, on the driver.

    Invariants: every row is in exactly one list; the rows of one key (:data:`PARTITION_KEY`: one
    Kafka partition and direction) are in one list, in their given order; in each list the keys of
    ``first_keys`` come first; each key goes to the list with the fewest rows so far, the
    ``first_keys`` first, then the others in an order ``salt`` (the cycle's id) reshuffles from
    cycle to cycle (a key never sits at the end of a task, where the read budget defers, every
    cycle). No empty list."""
    if tasks < 1:
        raise ValueError(f"tasks must be positive, got {tasks}")
    key_of = itemgetter(*PARTITION_KEY)
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(key_of(row), []).append(row)
    first = {tuple(k) for k in first_keys}

    def order(key: tuple) -> tuple[bool, int, str]:
        text = repr(key)
        return key not in first, zlib.crc32(f"{salt}\x00{text}".encode()), text

    loads = [(0, i) for i in range(min(tasks, len(by_key)))]  # (rows so far, task): a min-heap
    out: list[list[dict[str, Any]]] = [[] for _ in loads]
    for key in sorted(by_key, key=order):
        size, i = heapq.heappop(loads)
        out[i] += by_key[key]
        heapq.heappush(loads, (size + len(by_key[key]), i))
    return out


def work_tasks(spark, rows: list[dict[str, Any]], tasks: int, *, salt: str = "", first_keys: Iterable[tuple] = ()):
    """A :data:`TASKS_SCHEMA` DataFrame: :func:`task_rows` of ``rows``, each list one row, its work
    rows as one Arrow IPC payload of :data:`WORK_SCHEMA` (column-wise: pickled row tuples cost the
    driver seconds at 100,000 rows, and the job as much again to unpickle). Spark spreads the rows
    over its default parallelism; a Spark task with more than one reads them one after another."""
    import pyarrow as pa

    schema = _arrow_schema(WORK_SCHEMA)
    payloads = [ipc_payload(pa.table({name: [r.get(name) for r in part] for name in schema.names}, schema=schema))
                for part in task_rows(rows, tasks, salt=salt, first_keys=first_keys)]
    return spark.createDataFrame(pa.table({"work": pa.array(payloads, pa.binary())}))


def collected_rows(df) -> list[dict[str, Any]]:
    """The result rows of :func:`translate_groups`' DataFrame as plain dicts of :data:`RESULT_COLUMNS`,
    its payloads fetched as Arrow (``DataFrame.toArrow``) and opened here."""
    import pyarrow as pa

    tables = [ipc_table(payload) for payload in df.toArrow().column("results").to_pylist()]
    return pa.concat_tables(tables).to_pylist() if tables else []


def ipc_payload(table) -> bytes:
    """An Arrow table as one Arrow IPC stream (a payload cell)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def ipc_table(payload: bytes):
    """The Arrow table of one :func:`ipc_payload`."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
