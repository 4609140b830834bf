"""``--help`` of every command: plain text (no reStructuredText marks) that lists the command's exit
codes, each value with its meaning, taken from the command's own constants."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from offset_pipeline.cli import build_parser, connections_check, readiness, switchover
from offset_pipeline.cli import main as cli_main
from offset_pipeline.cli.help_text import USAGE_ERROR, USAGE_ERROR_MEANING, exit_status, plain
from offset_pipeline.mirror_check import rules as mirror_rules

CLI = Path(__file__).resolve().parents[2] / "offset_pipeline" / "cli"

#: Every command path and the exit codes its help must list (the usage error is added to each).
COMMANDS = {
    (): {},
    ("readiness",): readiness.EXIT_CODES,
    ("switchover",): switchover.EXIT_CODES,
    ("connections",): connections_check.EXIT_CODES,
    ("mirror",): mirror_rules.EXIT_CODES,
    ("mirror", "check"): mirror_rules.EXIT_CODES,
}
RST = re.compile(r"``|:[a-z]+:`|\*\*|`|::\s*$", re.M)


def help_of(command: tuple[str, ...], capsys) -> str:
    with pytest.raises(SystemExit) as done:
        cli_main([*command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every command the parser offers, nested ones included (argparse keeps them in its actions)."""
    paths = {prefix}
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk of its subcommands
        if isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                paths |= command_paths(sub, (*prefix, name))
    return paths


def test_every_command_is_checked_here():
    assert command_paths(build_parser()) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS), ids=lambda c: " ".join(c) or "offset-pipeline")
def test_help_is_plain_text(command, capsys):
    text = help_of(command, capsys)
    assert not RST.findall(text), [line for line in text.splitlines() if RST.search(line)]


@pytest.mark.parametrize("command", sorted(COMMANDS), ids=lambda c: " ".join(c) or "offset-pipeline")
def test_help_lists_each_exit_code_with_its_meaning(command, capsys):
    text = help_of(command, capsys)
    epilog = " ".join(text[text.index("exit status"):].split())  # the meanings may wrap over lines
    codes = {**COMMANDS[command]}
    codes[USAGE_ERROR] = (f"{codes[USAGE_ERROR]}; or {USAGE_ERROR_MEANING}" if USAGE_ERROR in codes
                          else USAGE_ERROR_MEANING)
    for code, meaning in codes.items():
        assert f"{code} {meaning}" in epilog, (code, meaning, epilog)
    listed = [int(n) for n in re.findall(r"^  (\d+)  ", text[text.index("exit status"):], re.M)]
    assert listed == sorted(codes)


def test_the_exit_code_tables_name_distinct_codes_and_the_returns_use_them():
    assert set(switchover.EXIT_CODES) == {switchover.DONE, switchover.LOST, switchover.REFUSED,
                                          switchover.NOT_DRAINED, switchover.FAILED}
    assert set(readiness.EXIT_CODES) == {readiness.READY, readiness.NOT_READY, readiness.NOTHING_TO_SHOW}
    assert set(connections_check.EXIT_CODES) == {connections_check.CONNECTED, connections_check.NOT_CONNECTED}
    assert set(mirror_rules.EXIT_CODES) == {mirror_rules.ALL_PROVEN, mirror_rules.UNPROVEN,
                                            mirror_rules.NOTHING_TO_SHOW}
    # No command returns a bare number as its exit status: only the named constants the help lists.
    literal = []
    for path in [*sorted(CLI.glob("*.py")), CLI.parent / "mirror_check" / "rules.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value.elts[-1] if isinstance(node.value, ast.Tuple) else node.value
                if isinstance(value, ast.Constant) and type(value.value) is int:
                    literal.append(f"{path.name}:{node.lineno}")
    assert not literal, literal


@pytest.mark.parametrize(
    ("rst", "text"),
    [
        ("``offset-pipeline``: the commands", "offset-pipeline: the commands"),
        ("reads ``offset_group_readiness`` and ``readiness/current.py``", "reads offset_group_readiness and readiness/current.py"),
        (":func:`switch_point` starts", "switch_point starts"),
        (":class:`~offset_pipeline.translation.TranslationResult`", "TranslationResult"),
        (":data:`EXIT_CODES`", "EXIT_CODES"),
        (":meth:`DeferredWrites.replay`", "DeferredWrites.replay"),
        (":func:`the rule <offset_pipeline.translation.translate>`", "the rule"),
        ("1. **Refuses** while", "1. Refuses while"),
        ("the `interpreted` words", "the interpreted words"),
        ("plain text, 2 * 3 and a_b", "plain text, 2 * 3 and a_b"),
    ],
)
def test_plain_drops_the_marks_and_keeps_the_words(rst, text):
    assert plain(rst) == text


def test_the_rst_check_can_fail():
    assert RST.search("``offset-pipeline``") and RST.search(":func:`x`") and RST.search("**bold**")
    assert RST.search("Exit status::\n")
    assert not RST.search(exit_status({0: "done", 1: "not done"}))
