"""record_identity: equal exactly for equal content, blind to the origin headers a mirror adds."""

from __future__ import annotations

import pytest

from offset_pipeline.kafka_io.record_identity import record_identity
from offset_pipeline.translation.headers import origin_headers

BASE = (b"k", b"v", 1000, [("trace", b"1")])


def test_a_copy_with_origin_headers_has_its_originals_identity():
    key, value, ts, headers = BASE
    copy_headers = headers + list(origin_headers("idc1", 42))
    assert record_identity(key, value, ts, copy_headers) == record_identity(*BASE)
    assert len(record_identity(*BASE)) == 16


@pytest.mark.parametrize("changed", [
    (b"k2", b"v", 1000, [("trace", b"1")]),
    (b"k", b"v2", 1000, [("trace", b"1")]),
    (b"k", b"v", 1001, [("trace", b"1")]),
    (b"k", b"v", 1000, [("trace", b"2")]),
    (b"k", b"v", 1000, []),
    (None, b"v", 1000, [("trace", b"1")]),
    (b"", b"v", 1000, [("trace", b"1")]),
    (b"kv", b"", 1000, [("trace", b"1")]),  # parts are length-prefixed: "k"+"v" is not "kv"+""
    (b"k", b"v", 1000, [("trace", None)]),
])
def test_any_other_content_has_another_identity(changed):
    assert record_identity(*changed) != record_identity(*BASE)
