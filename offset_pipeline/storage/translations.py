"""The ``offset_translations`` and ``offset_anchors`` tables.

``offset_translations``: append-only, one row per group-partition and sync cycle (translated or
not), keyed by the cycle's ``snapshot_id``; ``safe_bound`` is the largest standby offset the facts
proved loss-free (``translation.safe_standby_bound``), NULL when nothing was proven or no facts
were read. ``offset_anchors``: the standby-origin anchor each group-partition keeps for
the next cycle (docs/concepts/strategies.md, kept anchors); rows are appended and the newest row
per key wins (``argMax`` by ``kept_at``). A row with NULL offsets records that the anchor was dropped.

``offset_anchors_current``: the same rows, one per key once merged (``ReplacingMergeTree`` by
``kept_at``), filled by the materialized view ``ANCHORS_CURRENT_VIEW`` on every insert into
``offset_anchors`` (spooled inserts replayed late included). The cycle reads its kept anchors here
(``FINAL``): about one row per key, however long the history, where ``offset_anchors`` gains a row
per active partition and cycle and an ``argMax`` over it grew with every day kept. A table created
next to an older ``offset_anchors`` is filled from it once (:func:`ensure_tables`; the table's comment
records that it was).

Retention (``storage/retention.py``): translations are kept ``OFFSET_PIPELINE_CLICKHOUSE_TTL_DAYS``
(the failover audit reads them; new tables are partitioned by day). Anchors are state: an anchor
unchanged for longer than the TTL is still the current one, so their TTL rolls a key's expired
rows up into its newest row (dropped or not) instead of deleting them: superseded anchors go, the
current one per key stays. ``offset_anchors_current`` has no TTL: its replacing merges already keep
one row per key, the current one, and that row must stay however old it is. Not even a drop may
expire: deleting it while an older anchor of its key waits in a part not merged yet (or is replayed
late) would bring back an anchor dropped because its topic was recreated, an unsafe one. Both anchor
tables are bounded by the number of keys, not by time.

Inserts go through clickhouse-connect's column binding, never through SQL text: group ids may hold
any character.
"""

from __future__ import annotations

from datetime import datetime, timezone
from operator import itemgetter

from offset_pipeline.storage.retention import clickhouse_retention, delete_ttl, ensure_ttl, rollup_ttl
from offset_pipeline.storage.upkeep import ensure_upkeep
from offset_pipeline.translation.result import Anchor

TRANSLATIONS_TABLE = "offset_translations"
ANCHORS_TABLE = "offset_anchors"
ANCHORS_CURRENT_TABLE = "offset_anchors_current"
ANCHORS_CURRENT_VIEW = "offset_anchors_current_mv_v1"
# Written on the current table once it holds every older anchor (see ensure_tables).
ANCHORS_CURRENT_FILLED = "filled from offset_anchors"

TRANSLATIONS_DDL = f"""
CREATE TABLE IF NOT EXISTS {TRANSLATIONS_TABLE}
(
    snapshot_id           String,
    cycle_time            DateTime64(3, 'UTC'),
    group_id              String,
    topic                 String,
    partition             UInt32,
    active                LowCardinality(String),
    standby               LowCardinality(String),
    committed             Nullable(Int64),
    standby_committed     Nullable(Int64),
    strategy              LowCardinality(String),
    standby_offset        Nullable(Int64),
    status                LowCardinality(String),
    reason                String,
    expected_duplicates   Nullable(Int64),
    timestamp_inversion   Bool,
    anchor_active_offset  Nullable(Int64),
    anchor_standby_offset Nullable(Int64),
    safe_bound            Nullable(Int64)
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(cycle_time)
ORDER BY (group_id, topic, partition, cycle_time)
"""

# Columns added after the table's first release: CREATE TABLE IF NOT EXISTS leaves an existing
# table as it is, so ensure_tables adds them (idempotent).
TRANSLATIONS_ADDED_COLUMNS = (
    f"ALTER TABLE {TRANSLATIONS_TABLE} ADD COLUMN IF NOT EXISTS safe_bound Nullable(Int64) AFTER anchor_standby_offset",
)

# The anchor tables' columns: the history and its current state hold the same rows.
_ANCHOR_COLUMNS_DDL = """(
    group_id       String,
    topic          String,
    partition      UInt32,
    active         LowCardinality(String),
    standby        LowCardinality(String),
    active_offset  Nullable(Int64),
    standby_offset Nullable(Int64),
    snapshot_id    String,
    kept_at        DateTime64(3, 'UTC')
)"""

ANCHORS_DDL = f"""
CREATE TABLE IF NOT EXISTS {ANCHORS_TABLE}
{_ANCHOR_COLUMNS_DDL}
ENGINE = MergeTree
ORDER BY (group_id, topic, partition, active, standby, kept_at)
"""

ANCHORS_CURRENT_DDL = f"""
CREATE TABLE IF NOT EXISTS {ANCHORS_CURRENT_TABLE}
{_ANCHOR_COLUMNS_DDL}
ENGINE = ReplacingMergeTree(kept_at)
ORDER BY (group_id, topic, partition, active, standby)
"""

ANCHORS_CURRENT_VIEW_DDL = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {ANCHORS_CURRENT_VIEW} TO {ANCHORS_CURRENT_TABLE} AS
SELECT group_id, topic, partition, active, standby, active_offset, standby_offset, snapshot_id, kept_at
FROM {ANCHORS_TABLE}
"""

# The newest row of every key of offset_anchors, NULL offsets (drops) included: aggregates skip NULL
# arguments, so the offsets go through a tuple, or a drop would resurrect the anchor before it.
_FILL_CURRENT = f"""
INSERT INTO {ANCHORS_CURRENT_TABLE}
SELECT group_id, topic, partition, active, standby, newest.1, newest.2, newest.3, max_kept_at
FROM (
    SELECT group_id, topic, partition, active, standby,
           argMax(tuple(active_offset, standby_offset, snapshot_id), kept_at) AS newest, max(kept_at) AS max_kept_at
    FROM {ANCHORS_TABLE} GROUP BY group_id, topic, partition, active, standby
)
"""

#: Column order of a translation row (also the Spark output schema's order).
TRANSLATION_COLUMNS = [
    "snapshot_id", "cycle_time", "group_id", "topic", "partition", "active", "standby", "committed",
    "standby_committed", "strategy", "standby_offset", "status", "reason", "expected_duplicates",
    "timestamp_inversion", "anchor_active_offset", "anchor_standby_offset", "safe_bound",
]
ANCHOR_COLUMNS = [
    "group_id", "topic", "partition", "active", "standby", "active_offset", "standby_offset", "snapshot_id", "kept_at",
]

AnchorKey = tuple[str, str, int, str, str]  # group, topic, partition, active, standby


ANCHOR_KEY = ["group_id", "topic", "partition", "active", "standby"]  # the sorting key's prefix before kept_at


def ensure_tables(client) -> None:
    days = clickhouse_retention().history_days
    client.command(TRANSLATIONS_DDL)
    for statement in TRANSLATIONS_ADDED_COLUMNS:
        client.command(statement)
    ensure_ttl(client, TRANSLATIONS_TABLE, delete_ttl("cycle_time", days))
    client.command(ANCHORS_DDL)
    ensure_ttl(client, ANCHORS_TABLE, rollup_ttl("kept_at", days, ANCHOR_KEY,
                                                 ["active_offset", "standby_offset", "snapshot_id"]))
    client.command(ANCHORS_CURRENT_DDL)
    client.command(ANCHORS_CURRENT_VIEW_DDL)
    _fill_current_anchors_once(client)
    for table in (TRANSLATIONS_TABLE, ANCHORS_TABLE, ANCHORS_CURRENT_TABLE):
        ensure_upkeep(client, table)


def _fill_current_anchors_once(client) -> None:
    """Copy the current anchor of every key from ``offset_anchors`` into a new current table.

    The view exists before the copy, so an insert racing with it reaches the table by the view, the
    copy or both (a duplicate of one row, which the replacing merge and ``FINAL`` collapse). The
    comment is set only after the copy: a process stopped in between copies again next time, which
    is harmless for the same reason."""
    comment = client.query(
        "SELECT comment FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        parameters={"t": ANCHORS_CURRENT_TABLE},
    ).result_rows
    if comment and comment[0][0] == ANCHORS_CURRENT_FILLED:
        return
    client.command(_FILL_CURRENT)
    client.command(f"ALTER TABLE {ANCHORS_CURRENT_TABLE} MODIFY COMMENT '{ANCHORS_CURRENT_FILLED}'")


def _ms(value) -> int:
    """A time as epoch milliseconds (a ``DateTime64(3)`` column's ticks): from a datetime (naive: UTC)
    or as given."""
    if isinstance(value, datetime):
        return round((value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp() * 1000)
    return int(value)


def _insert_dicts(client, table: str, rows: list[dict], columns: list[str], time_column: str) -> int:
    """Column-oriented (no per-row list, no datetime per row: storage/row_inserts.py says why)."""
    if not rows:
        return 0
    data = [list(map(itemgetter(c), rows)) for c in columns]
    times = columns.index(time_column)
    data[times] = [_ms(v) for v in data[times]]
    client.insert(table, data, column_names=columns, column_oriented=True)
    return len(rows)


def insert_translations(client, rows: list[dict]) -> int:
    """``rows``: dicts with every name of :data:`TRANSLATION_COLUMNS` (``cycle_time`` as a datetime
    or epoch milliseconds)."""
    return _insert_dicts(client, TRANSLATIONS_TABLE, rows, TRANSLATION_COLUMNS, TRANSLATION_COLUMNS[1])


def insert_anchors(client, rows: list[dict]) -> int:
    """``rows``: dicts with every name of :data:`ANCHOR_COLUMNS`; ``active_offset``/``standby_offset``
    None records a dropped anchor."""
    return _insert_dicts(client, ANCHORS_TABLE, rows, ANCHOR_COLUMNS, ANCHOR_COLUMNS[-1])


def latest_anchors(client) -> dict[AnchorKey, Anchor]:
    """The anchor each (group, topic, partition, active, standby) keeps now: its newest row, unless
    that row dropped it. Read from the current-state table, whose size is the number of keys, not
    the history's (``FINAL`` settles the rows of a key not merged yet: the one with the newest
    ``kept_at`` wins)."""
    result = client.query(
        f"SELECT group_id, topic, partition, active, standby, active_offset, standby_offset "
        f"FROM {ANCHORS_CURRENT_TABLE} FINAL"
    )
    out: dict[AnchorKey, Anchor] = {}
    for group_id, topic, partition, active, standby, a, s in result.result_rows:
        if a is None or s is None:
            continue
        out[(group_id, topic, int(partition), active, standby)] = Anchor(active, standby, int(a), int(s))
    return out
