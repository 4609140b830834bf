"""The README stays a front page: at most 200 lines, the two commands first, every link inside the
repository resolving to a file that exists (the docs site's strict build checks the docs' own links;
the README is not part of the site)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 200
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    """Targets of markdown links and images that are paths in the repository (no scheme, no bare
    anchor), without their ``#anchor``."""
    return [target.split("#", 1)[0] for target in LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


@pytest.mark.parametrize(("text", "expected"), [
    ("[a](docs/a.md) and ![p](docs/img/p.png)", ["docs/a.md", "docs/img/p.png"]),
    ("[site](https://dagster.io) [ui](http://127.0.0.1:3000) [top](#top)", []),
    ("[page](docs/b.md#a-section)", ["docs/b.md"]),
])
def test_relative_links_are_the_repository_paths(text, expected):
    assert relative_links(text) == expected


def test_the_readme_is_a_front_page_of_at_most_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_starts_with_the_two_commands():
    first_block = README.read_text().split("```", 2)[1]
    assert "bin/up" in first_block and "bin/test" in first_block


def test_every_link_of_the_readme_into_the_repository_exists():
    missing = [target for target in relative_links(README.read_text()) if not (REPO / target).exists()]
    assert missing == []
