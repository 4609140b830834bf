"""A record's content identity: what a mirror keeps when it copies a record (key, value, CreateTime,
headers), as one short digest (``RecordFact.identity``).

The timestamp search refines by it when the mirror writes no origin headers (MirrorMaker 2,
``translation/timestamp_search.py``): the copy of a record has the record's identity. The origin
headers this project's mirror adds (``IDC``, ``Offset``) are left out, so a copy by either mirror
has its original's identity. Headers are taken in order (mirrors keep it); each part is
length-prefixed so that no two different records give the same bytes to hash.
"""

from __future__ import annotations

import hashlib
import struct

from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER

_ORIGIN_HEADERS = {ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER}
_ABSENT = struct.pack(">q", -1)


def _part(data: bytes | str | None) -> bytes:
    if data is None:
        return _ABSENT  # a null key or value differs from an empty one
    if isinstance(data, str):
        data = data.encode()
    return struct.pack(">q", len(data)) + data


def record_identity(key: bytes | None, value: bytes | None, timestamp: int,
                    headers: list[tuple[str, bytes | None]] | None) -> bytes:
    """16 bytes that equal another record's exactly when key, value, timestamp and non-origin headers do."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_part(key))
    digest.update(_part(value))
    digest.update(struct.pack(">q", timestamp))
    for name, data in headers or ():
        if name in _ORIGIN_HEADERS:
            continue
        digest.update(_part(name))
        digest.update(_part(data))
    return digest.digest()
