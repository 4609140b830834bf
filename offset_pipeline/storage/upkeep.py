"""How the project's tables sit on disk: column codecs chosen by type, and replaced parts deleted
promptly. Every ``ensure_table``/``ensure_tables`` calls :func:`ensure_upkeep` on its tables.

Codecs (measured on the rows of a real 10,000 group-partition run, ``bench/clickhouse_bytes.py``,
docs/results/storage.md: the tables took 70 % fewer bytes):

* offsets and times (``Int64``, ``DateTime64``, nullable or not): ``Delta, ZSTD(1)``. Rows are
  sorted by group-partition, then time, so neighbours differ by little; about 3.5x smaller than the
  default LZ4.
* free text and ids (``String``: group ids, topics, reasons, snapshot ids): ``ZSTD(3)``. Level 1
  came out larger than LZ4 on the sorted ids; level 3 about 5x smaller.
* ``LowCardinality`` labels (statuses, strategies, clusters): ``ZSTD(1)`` on their indexes.

A codec change is metadata only: parts written from then on, and merges, use the new codec, so an
upgrade rewrites nothing at once and older parts shrink as they merge or expire.

Replaced parts: after a merge, the parts it replaced stay on disk until the table's cleanup task
runs, by default every 30 s or so of an engine being open. The embedded engine (chdb) is open only
while a step runs (seconds), so the cleanup rarely ran and replaced parts piled up: at the end of a
15-minute run 63 % of the folder was parts already merged away. The tables ask for the cleanup
every second (``cleanup_delay_period``); ClickHouse still deletes a replaced part only after
``old_parts_lifetime`` (a server keeps them 8 minutes; chdb at once), so this changes when the task
looks, not what it keeps.

Invariant (``tests/storage/test_upkeep.py``): after :func:`ensure_upkeep`, every column of a type
above carries its codec and the table its cleanup settings; calling it again alters nothing.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

OFFSET_CODEC = "Delta, ZSTD(1)"
TEXT_CODEC = "ZSTD(3)"
LABEL_CODEC = "ZSTD(1)"

#: MergeTree settings every project table gets (see the module docstring).
CLEANUP_SETTINGS = {"cleanup_delay_period": 1, "cleanup_delay_period_random_add": 0}

_OFFSET_TYPES = re.compile(r"^(Nullable\()?(Int64|UInt64|DateTime64\(.*\)|DateTime(\(.*\))?)\)?$")
_TEXT_TYPES = ("String", "Nullable(String)")


def codec_for(column_type: str) -> str | None:
    """The codec a column of ``column_type`` gets (``None``: left at the default)."""
    if column_type in _TEXT_TYPES:
        return TEXT_CODEC
    if column_type.startswith("LowCardinality("):
        return LABEL_CODEC
    if _OFFSET_TYPES.match(column_type):
        return OFFSET_CODEC
    return None


def _canonical(codec: str) -> str:
    """A codec as comparable text: ``CODEC(Delta(8), ZSTD(1))`` and ``Delta, ZSTD(1)`` are the same
    (ClickHouse fills in the width of Delta from the type)."""
    inner = codec.strip()
    if inner.startswith("CODEC(") and inner.endswith(")"):
        inner = inner[len("CODEC("):-1]
    return re.sub(r"\b(Delta|DoubleDelta|T64|Gorilla)\(\d+\)", r"\1", inner).replace(" ", "")


def ensure_upkeep(client, table: str) -> list[str]:
    """Give ``table``'s columns their codecs and the table its cleanup settings, where they differ.
    Returns what was altered (empty when nothing was)."""
    altered = []
    columns = client.query(
        "SELECT name, type, compression_codec FROM system.columns "
        "WHERE database = currentDatabase() AND table = {t:String}",
        parameters={"t": table},
    ).result_rows
    for name, column_type, current in columns:
        wanted = codec_for(column_type)
        if wanted is not None and _canonical(current) != _canonical(wanted):
            try:
                client.command(f"ALTER TABLE {table} MODIFY COLUMN `{name}` CODEC({wanted})")
                altered.append(f"{name} CODEC({wanted})")
            except Exception as exc:  # noqa: BLE001 - a codec is about bytes: never a reason to stop writing
                log.warning("offset-sync clickhouse: %s.%s keeps codec %r: %s", table, name, current, exc)
    create = client.query(
        "SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        parameters={"t": table},
    ).result_rows
    settings = [f"{k} = {v}" for k, v in CLEANUP_SETTINGS.items()]
    if create and not all(s in create[0][0] for s in settings):
        try:
            client.command(f"ALTER TABLE {table} MODIFY SETTING {', '.join(settings)}")
            altered.append("cleanup settings")
        except Exception as exc:  # noqa: BLE001 - a server without these settings keeps its own cleanup
            log.warning("offset-sync clickhouse: %s keeps the default cleanup of replaced parts: %s", table, exc)
    return altered
