"""One format for every decision line: ``offset-sync <kind> key=value key=value ...``.

The translation's decisions (``decision``), the commit plan (``commit``), each group's direction
(``direction``) and the fast-forward's outcomes (``fast-forward``) are all written by
:func:`log_line` and read back by :func:`parse_log_line`, in the spirit of MirrorMaker 2's
OffsetSyncStore debug lines: one line per decision, same keys in the same order every time.

Values: text JSON-quoted (group ids and reasons may hold any character, line breaks included, and
the line stays one line), integers bare, booleans ``true``/``false``, None ``-``, enums by value
(quoted when text), and :class:`Token` values (anchors like ``11->6``, warning lists) as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

PREFIX = "offset-sync"
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


class Token(str):
    """A value written as it is: no spaces, no quotes (an anchor ``11->6``, a list ``a,b``)."""


# Text that JSON-quoting leaves as it is (no quote, backslash, control character or Unicode line
# break): most group ids, topics and reasons. Quoted without json.dumps, which was a third of a
# 100,000-row cycle's decision lines.
_PLAIN_TEXT = re.compile('[^"\\\\\x00-\x1f\u0085\u2028\u2029]*')


def quote_log_text(text: str) -> str:
    if _PLAIN_TEXT.fullmatch(text):
        return f'"{text}"'
    quoted = json.dumps(text, ensure_ascii=False)  # escapes quotes, backslashes and control characters
    for char, escaped in _LINE_BREAKS.items():
        quoted = quoted.replace(char, escaped)
    return quoted


def log_value(value: object) -> str:
    kind = type(value)  # the common cases first, by exact type (a Token is a str, a bool an int)
    if kind is str:
        return quote_log_text(value)
    if kind is int:
        return str(value)
    if isinstance(value, Token):
        return str(value)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if hasattr(value, "value"):  # an enum
        return log_value(value.value) if not isinstance(value.value, str) else str(value.value)
    return quote_log_text(str(value))


def log_line(kind: str, fields: Sequence[tuple[str, object]]) -> str:
    """``offset-sync <kind> key=value ...`` with every value written by :func:`log_value`."""
    return f"{PREFIX} {kind} " + " ".join(f"{key}={log_value(value)}" for key, value in fields)


def parse_log_line(kind: str, line: str) -> dict[str, object]:
    """The fields of a :func:`log_line` line of ``kind``: quoted text decoded, ``-`` as None,
    integers and booleans typed, everything else (enum values, tokens) as text."""
    prefix = f"{PREFIX} {kind} "
    if not line.startswith(prefix):
        raise ValueError(f"not an {PREFIX} {kind} line")
    out: dict[str, object] = {}
    for key, raw in _FIELD.findall(line[len(prefix):]):
        if raw.startswith('"'):
            out[key] = json.loads(raw)
        elif raw == "-":
            out[key] = None
        elif raw in ("true", "false"):
            out[key] = raw == "true"
        elif re.fullmatch(r"-?[0-9]+", raw):
            out[key] = int(raw)
        else:
            out[key] = raw
    return out
