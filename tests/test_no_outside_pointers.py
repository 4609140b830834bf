"""The repository explains itself: no tracked file points outside it or to tracker numbers.

Comments, docstrings and pages point to the docs site (``docs/...``), never to a design note kept
outside the repository (``../shared``, ``/work/shared``, ``DESIGN.md``) nor to a tracker number
("issue 17"): a reader of a fresh clone has neither, so the reasoning is written where it is used.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve().relative_to(REPO).as_posix()

OUTSIDE_POINTERS = (
    ("a path outside the repository", re.compile(re.escape("../shared"))),
    ("a path outside the repository", re.compile(re.escape("/work/shared"))),
    ("the design note kept outside the repository", re.compile(re.escape("DESIGN.md"))),
    ("a tracker number", re.compile(r"\bissues? #?\d+\b", re.IGNORECASE)),
)


def pointers_in(text: str) -> list[tuple[int, str, str]]:
    """(line number, what it is, the matched text) for every outside pointer in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for what, pattern in OUTSIDE_POINTERS:
            found += [(number, what, m.group(0)) for m in pattern.finditer(line)]
    return found


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
    return [name for name in listed.stdout.decode().split("\0") if name]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see /work/shared/DESIGN.md", ["/work/shared", "DESIGN.md"]),
        ("the note in ../shared/notes", ["../shared"]),
        ("(DESIGN.md §4.3)", ["DESIGN.md"]),
        ("fixed in issue 17", ["issue 17"]),
        ("Issue 14's soak", ["Issue 14"]),
        ("see issues #5 and #6", ["issues #5"]),
        ("ISSUE #18", ["ISSUE #18"]),
        ("see docs/concepts/no-loss.md (safe anchors)", []),
        ("the issue is that 17 groups lag", []),
        ("tissue 5", []),
        ("issue17", []),
    ],
)
def test_the_patterns_find_outside_pointers_and_nothing_else(text, expected):
    assert [matched for _, _, matched in pointers_in(text)] == expected


def test_a_pointer_is_named_by_its_line():
    assert pointers_in("fine\nfine too\nsee issue 3\n") == [(3, "a tracker number", "issue 3")]


def test_no_tracked_file_points_outside_the_repository_or_to_a_tracker_number():
    files = tracked_files()
    assert files, "git ls-files listed nothing: not a git checkout?"
    wrong = []
    for name in files:
        if name == THIS_FILE:
            continue
        path = REPO / name
        if not path.is_file():  # tracked but removed in this working tree (a rename in progress)
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary: images, archives
        text = data.decode("utf-8", errors="replace")
        wrong += [f"{name}:{number}: {what}: {matched!r}" for number, what, matched in pointers_in(text)]
    assert not wrong, ("write the reasoning here, or point to a docs/ page, instead of:\n" + "\n".join(wrong))
