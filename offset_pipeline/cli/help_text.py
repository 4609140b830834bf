"""What ``--help`` prints: plain text made from the commands' docstrings, and their exit codes.

The docstrings are written for readers of the code (reStructuredText: double backquotes, roles such
as :func:`x`, bold); a person at a terminal reads the same words without the markup. Each command
keeps its exit codes as named constants and an ``EXIT_CODES`` table (code -> meaning) beside them;
the help is built from that table, so what it says cannot drift from what the command returns.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Mapping

#: argparse's own exit code for a wrong command line; the commands use it for a wrong setting too.
USAGE_ERROR = 2
USAGE_ERROR_MEANING = "the command line or a setting is wrong (said on stderr)"
EPILOG_WIDTH = 100  # as wide as the docstrings the descriptions come from

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)\s*(?:<[^`>]*>)?`")  # :func:`~a.b.name` -> a.b.name
_LITERAL = re.compile(r"``(.+?)``", re.S)
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)
_INTERPRETED = re.compile(r"(?<![\w`])`([^`\n]+)`(?![\w`])")


def plain(text: str) -> str:
    """``text`` without reStructuredText markup: literals, roles (``~`` shortened to the last name),
    bold and interpreted text keep their words and lose their marks."""
    text = _ROLE.sub(lambda m: _short(m.group(0), m.group(1)), text)
    text = _LITERAL.sub(r"\1", text)
    text = _BOLD.sub(r"\1", text)
    return _INTERPRETED.sub(r"\1", text)


def _short(role: str, target: str) -> str:
    return target.rsplit(".", 1)[-1] if "`~" in role else target


def description(doc: str) -> str:
    """A command's docstring as its help text, without its exit-status paragraph (the epilog gives
    the codes from the command's constants)."""
    paragraphs = [p for p in doc.strip().split("\n\n") if not p.lstrip().lower().startswith("exit status")]
    return plain("\n\n".join(paragraphs))


def exit_status(codes: Mapping[int, str], title: str = "exit status") -> str:
    """The epilog: one line per exit code, in order, the usage error included."""
    merged = dict(codes)
    merged[USAGE_ERROR] = (f"{merged[USAGE_ERROR]}; or {USAGE_ERROR_MEANING}" if USAGE_ERROR in merged
                           else USAGE_ERROR_MEANING)
    return f"{title}:\n" + "\n".join(textwrap.fill(meaning, width=EPILOG_WIDTH, initial_indent=f"  {code}  ",
                                                     subsequent_indent="     ", break_on_hyphens=False)
                                       for code, meaning in sorted(merged.items()))


def command_parser(commands, name: str, *, summary: str, doc: str,
                   codes: Mapping[int, str]) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` is ``doc`` in plain text followed by its exit codes."""
    return commands.add_parser(name, help=summary, description=description(doc), epilog=exit_status(codes),
                               formatter_class=argparse.RawDescriptionHelpFormatter)
