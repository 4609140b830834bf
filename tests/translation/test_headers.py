"""Origin header parsing: a typed origin, or a named problem (docs/concepts/statuses.md: absent, not a number,
negative, a third cluster's name, ...). Never raises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offset_pipeline.translation import (
    LOCAL,
    CopiedFrom,
    HeaderProblem,
    MalformedHeader,
    RecordFact,
    TranslationStatus,
    origin_headers,
    parse_origin,
)
from offset_pipeline.translation.headers import MAX_OFFSET, parse_origin_general

ME, PEER = "idc1", "idc2"


def parse(headers):
    return parse_origin(headers, read_from=ME, peer=PEER)


def test_copy_from_the_peer():
    assert parse([("IDC", b"idc2"), ("Offset", b"42")]) == CopiedFrom("idc2", 42)


def test_str_values_and_mappings_are_accepted():
    assert parse([("IDC", "idc2"), ("Offset", "7")]) == CopiedFrom("idc2", 7)
    assert parse({"IDC": b"idc2", "Offset": b"0"}) == CopiedFrom("idc2", 0)


@pytest.mark.parametrize(
    "headers",
    [None, [], {}, [("trace-id", b"abc")], [("idc", b"idc2"), ("offset", b"1")], [("IDC ", b"idc2")]],
    ids=["none", "empty-list", "empty-map", "other-headers", "lower-case-keys", "key-with-space"],
)
def test_absent_origin_headers_mean_a_local_record(headers):
    assert parse(headers) == LOCAL


def test_repeated_identical_headers_are_harmless():
    headers = [("IDC", b"idc2"), ("Offset", b"5"), ("IDC", b"idc2"), ("Offset", b"5")]
    assert parse(headers) == CopiedFrom("idc2", 5)


def test_leading_zeros_are_decimal_ascii():
    assert parse([("IDC", b"idc2"), ("Offset", b"007")]) == CopiedFrom("idc2", 7)


def test_largest_kafka_offset():
    assert parse([("IDC", b"idc2"), ("Offset", str(MAX_OFFSET).encode())]) == CopiedFrom("idc2", MAX_OFFSET)


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ([("Offset", b"5")], HeaderProblem.MISSING_IDC),
        ([("IDC", b"idc2")], HeaderProblem.MISSING_OFFSET),
        ([("IDC", b"idc2"), ("Offset", b"abc")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b" 42")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"42\n")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"+42")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"4_2")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"4.2")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", "٤٢".encode())], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"0x10")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"-")], HeaderProblem.OFFSET_NOT_A_NUMBER),
        ([("IDC", b"idc2"), ("Offset", b"-1")], HeaderProblem.OFFSET_NEGATIVE),
        ([("IDC", b"idc2"), ("Offset", str(MAX_OFFSET + 1).encode())], HeaderProblem.OFFSET_TOO_LARGE),
        ([("IDC", b"idc2"), ("Offset", b"9" * 40)], HeaderProblem.OFFSET_TOO_LARGE),
        ([("IDC", b"idc9"), ("Offset", b"1")], HeaderProblem.THIRD_CLUSTER),
        ([("IDC", b"IDC2"), ("Offset", b"1")], HeaderProblem.THIRD_CLUSTER),
        ([("IDC", b""), ("Offset", b"1")], HeaderProblem.THIRD_CLUSTER),
        ([("IDC", b"idc1"), ("Offset", b"1")], HeaderProblem.SELF_ORIGIN),
        ([("IDC", b"idc2"), ("IDC", b"idc9"), ("Offset", b"1")], HeaderProblem.CONFLICTING_HEADERS),
        ([("IDC", b"idc2"), ("Offset", b"1"), ("Offset", b"2")], HeaderProblem.CONFLICTING_HEADERS),
        ([("IDC", b"\xff\xfe"), ("Offset", b"1")], HeaderProblem.NOT_UTF8),
        ([("IDC", None), ("Offset", b"1")], HeaderProblem.NULL_VALUE),
        ([("IDC", b"idc2"), ("Offset", None)], HeaderProblem.NULL_VALUE),
    ],
)
def test_malformed_headers_get_a_named_problem(headers, problem):
    origin = parse(headers)
    assert isinstance(origin, MalformedHeader)
    assert origin.problem is problem
    assert origin.detail


def test_problem_statuses():
    assert HeaderProblem.THIRD_CLUSTER.status is TranslationStatus.THIRD_CLUSTER_HEADER
    for problem in HeaderProblem:
        if problem is not HeaderProblem.THIRD_CLUSTER:
            assert problem.status is TranslationStatus.MALFORMED_HEADER


def test_third_cluster_keeps_the_claimed_name():
    origin = parse([("IDC", b"idc9"), ("Offset", b"1")])
    assert origin.claimed_cluster == "idc9"


def test_record_fact_from_headers():
    record = RecordFact.from_headers(10, 1234, [("IDC", b"idc2"), ("Offset", b"3")], read_from=ME, peer=PEER)
    assert record.copy_of("idc2") == 3
    assert record.copy_of("idc1") is None
    assert RecordFact(11, 0).copy_of("idc2") is None


@settings(database=None)
@given(st.integers(min_value=0, max_value=MAX_OFFSET))
def test_mirror_headers_round_trip(offset):
    assert parse(origin_headers(PEER, offset)) == CopiedFrom(PEER, offset)


_header_value = st.one_of(st.none(), st.binary(max_size=12), st.text(max_size=12))
_header_key = st.sampled_from(["IDC", "Offset", "idc", "x"])


@settings(max_examples=300, database=None)
@given(st.lists(st.tuples(_header_key, _header_value), max_size=5))
def test_parsing_never_raises_and_only_valid_peer_copies_are_copies(headers):
    origin = parse(headers)
    if isinstance(origin, CopiedFrom):
        assert origin.cluster == PEER
        assert 0 <= origin.offset <= MAX_OFFSET
        values = [v.encode() if isinstance(v, str) else v for k, v in headers if k == "Offset"]
        assert all(v == str(origin.offset).encode() or v.lstrip(b"0") == str(origin.offset).encode().lstrip(b"0")
                   for v in values)


_mirror_like = st.lists(
    st.tuples(st.sampled_from(["IDC", "Offset", "x"]),
              st.one_of(st.sampled_from([b"idc1", b"idc2", b"7", b"007", b"-1", str(MAX_OFFSET + 1).encode()]),
                        st.binary(max_size=4), st.text(max_size=4), st.none())),
    min_size=2, max_size=2,
)


@settings(max_examples=500, database=None)
@given(st.one_of(_mirror_like, st.lists(st.tuples(_header_key, _header_value), max_size=3)),
       st.sampled_from([(ME, PEER), (PEER, ME), (ME, ME)]))
def test_the_mirror_copy_shortcut_answers_as_the_general_parse(headers, sides):
    read_from, peer = sides
    assert parse_origin(headers, read_from=read_from, peer=peer) == parse_origin_general(headers, read_from=read_from, peer=peer)


def test_the_mirror_copy_shortcut_takes_the_mirror_headers():
    assert parse([("IDC", b"idc2"), ("Offset", b"0042")]) == CopiedFrom("idc2", 42)
    assert parse([("IDC", b"idc1"), ("Offset", b"42")]).problem is HeaderProblem.SELF_ORIGIN
