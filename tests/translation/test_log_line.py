"""translation/log_line.py: the one format of every decision line, read back exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.translation import TranslationStatus
from offset_pipeline.translation.log_line import Token, log_line, parse_log_line

values = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text())


@given(st.lists(st.tuples(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), values), unique_by=lambda f: f[0]))
def test_any_fields_read_back_as_written_on_one_line(fields):
    line = log_line("decision", fields)
    assert len(line.splitlines()) == 1  # group ids and reasons may hold line breaks: still one line
    parsed = parse_log_line("decision", line)
    assert parsed == {key: value for key, value in fields}


@pytest.mark.parametrize(("value", "written"), [
    (None, "-"), (True, "true"), (False, "false"), (0, "0"), (-3, "-3"), ("a b", '"a b"'),
    ('say "hi"\n', '"say \\"hi\\"\\n"'), ("\u2028", '"\\u2028"'),
    (TranslationStatus.HEADER_ANCHOR, "header_anchor"), (Token("11->6"), "11->6"),
])
def test_each_kind_of_value_is_written_one_way(value, written):
    assert log_line("commit", [("k", value)]) == f"offset-sync commit k={written}"


def test_a_line_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="not an offset-sync decision line"):
        parse_log_line("decision", log_line("commit", [("k", 1)]))


def _json_quoted(text: str) -> str:
    """The quoting by definition: JSON with the Unicode line breaks escaped too."""
    import json

    quoted = json.dumps(text, ensure_ascii=False)
    for char in ("\u0085", "\u2028", "\u2029"):
        quoted = quoted.replace(char, f"\\u{ord(char):04x}")
    return quoted


@given(st.text() | st.sampled_from(['plain', 'a"b', "a\\b", "x\ny", "\t", "\x1f", "\x7f", "\u0085", "\u2028", "é", ""]))
def test_text_is_quoted_as_json_with_or_without_the_plain_text_shortcut(text):
    from offset_pipeline.translation.log_line import quote_log_text

    assert quote_log_text(text) == _json_quoted(text)
