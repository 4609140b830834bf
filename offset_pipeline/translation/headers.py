"""The origin headers the data mirror writes on every copy (docs/concepts/problem.md): ``IDC`` and ``Offset``.

:func:`parse_origin` turns a record's headers, as read from one cluster, into one of:

* :class:`LocalRecord` -- no origin headers: the record was produced on the cluster it was read from;
* :class:`CopiedFrom` -- ``IDC`` names the *other* cluster and ``Offset`` is a valid offset: the
  record is a copy of the record at that offset on that cluster;
* :class:`MalformedHeader` -- anything else, with a named :class:`HeaderProblem`.

Only :class:`CopiedFrom` may ever justify an offset. A malformed header is never "repaired" into an
anchor: the rules skip the record and report the problem (docs/concepts/statuses.md). Header keys are matched
exactly (Kafka header keys are case-sensitive); ``IDC`` values are matched exactly against the
cluster names (the mirror writes the name verbatim); ``Offset`` must be plain decimal ASCII digits
(the mirror writes ``str(offset)``): no sign, no spaces, no underscores, no other scripts' digits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping, Union

from .result import TranslationStatus

ORIGIN_CLUSTER_HEADER = "IDC"
ORIGIN_OFFSET_HEADER = "Offset"
MAX_OFFSET = 2**63 - 1  # Kafka offsets are signed 64-bit

_DIGITS = re.compile(rb"[0-9]+")
_new = object.__new__


class HeaderProblem(str, Enum):
    MISSING_OFFSET = "missing_offset"  # IDC present, Offset absent
    MISSING_IDC = "missing_idc"  # Offset present, IDC absent
    OFFSET_NOT_A_NUMBER = "offset_not_a_number"
    OFFSET_NEGATIVE = "offset_negative"
    OFFSET_TOO_LARGE = "offset_too_large"
    THIRD_CLUSTER = "third_cluster"  # IDC names neither cluster
    SELF_ORIGIN = "self_origin"  # IDC names the cluster the record was read from
    CONFLICTING_HEADERS = "conflicting_headers"  # IDC or Offset repeated with different values
    NOT_UTF8 = "not_utf8"
    NULL_VALUE = "null_value"

    @property
    def status(self) -> TranslationStatus:
        if self is HeaderProblem.THIRD_CLUSTER:
            return TranslationStatus.THIRD_CLUSTER_HEADER
        return TranslationStatus.MALFORMED_HEADER


@dataclass(frozen=True)
class LocalRecord:
    """No origin headers: produced on the cluster it was read from."""

    def __str__(self) -> str:
        return "local"


@dataclass(frozen=True)
class CopiedFrom:
    """A copy of the record at ``offset`` on ``cluster`` (the other cluster)."""

    cluster: str
    offset: int

    def __str__(self) -> str:
        return f"{self.cluster}@{self.offset}"

    @classmethod
    def of(cls, cluster: str, offset: int) -> CopiedFrom:
        """``CopiedFrom(cluster, offset)`` made without the frozen dataclass's ``__init__``, whose
        ``object.__setattr__`` per field costs three times the rest: the header parse makes one per
        mirrored record read, hundreds of thousands per cycle. Equal, hashed, frozen and printed as
        the instance ``__init__`` makes (tests/translation/test_fact_constructors.py)."""
        copied = _new(cls)
        copied.__dict__.update(cluster=cluster, offset=offset)
        return copied


@dataclass(frozen=True)
class MalformedHeader:
    problem: HeaderProblem
    detail: str = ""
    claimed_cluster: str | None = None

    @property
    def status(self) -> TranslationStatus:
        return self.problem.status

    def __str__(self) -> str:
        return f"malformed({self.problem.value}: {self.detail})"


Origin = Union[LocalRecord, CopiedFrom, MalformedHeader]
LOCAL = LocalRecord()

HeaderValue = Union[bytes, bytearray, str, None]
Headers = Union[Iterable[tuple[str, HeaderValue]], Mapping[str, HeaderValue], None]


def _values(headers: Headers, key: str) -> list[HeaderValue]:
    if headers is None:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [value for k, value in items if k == key]


def _single(values: list[HeaderValue], name: str) -> tuple[bytes | None, MalformedHeader | None]:
    """The one value of a header that may be repeated (Kafka allows repeats): identical repeats
    are harmless, different ones are a conflict."""
    distinct: list[bytes | None] = []
    for value in values:
        raw = value.encode("utf-8") if isinstance(value, str) else (bytes(value) if value is not None else None)
        if raw not in distinct:
            distinct.append(raw)
    if len(distinct) > 1:
        return None, MalformedHeader(HeaderProblem.CONFLICTING_HEADERS, f"{name} has {len(distinct)} different values")
    if distinct[0] is None:
        return None, MalformedHeader(HeaderProblem.NULL_VALUE, f"{name} has a null value")
    return distinct[0], None


def parse_origin(headers: Headers, *, read_from: str, peer: str) -> Origin:
    """Classify a record read from ``read_from`` whose only legitimate origin header is ``peer``.

    Never raises: every shape of bad input maps to a :class:`MalformedHeader`.
    """
    copied = _mirror_copy(headers, read_from, peer)
    if copied is not None:
        return copied
    return parse_origin_general(headers, read_from=read_from, peer=peer)


def _mirror_copy(headers: Headers, read_from: str, peer: str) -> CopiedFrom | None:
    """The common case, decided without the general parse: exactly the two headers the mirror writes
    (:func:`origin_headers`: ``IDC`` naming ``peer``, then a decimal ``Offset`` in range), as the
    Kafka client hands them over (a list of (key, bytes) tuples). None for anything else, which the
    general parse decides; where this answers, the general parse answers the same (tested)."""
    if type(headers) is not list or len(headers) != 2 or peer == read_from:
        return None
    idc, offset = headers
    if not (type(idc) is tuple and type(offset) is tuple and len(idc) == 2 and len(offset) == 2):
        return None
    if idc[0] != ORIGIN_CLUSTER_HEADER or offset[0] != ORIGIN_OFFSET_HEADER:
        return None
    raw_idc, raw_offset = idc[1], offset[1]
    # bytes.isdigit: ASCII 0-9 only and not empty, as _DIGITS.fullmatch, at a quarter of its cost
    if type(raw_idc) is not bytes or type(raw_offset) is not bytes or not raw_offset.isdigit():
        return None
    if raw_idc != peer.encode("utf-8"):
        return None
    value = int(raw_offset)
    return CopiedFrom.of(peer, value) if value <= MAX_OFFSET else None


def parse_origin_general(headers: Headers, *, read_from: str, peer: str) -> Origin:
    """:func:`parse_origin` for any input, without the shortcut (what the shortcut is tested against)."""
    idc_values = _values(headers, ORIGIN_CLUSTER_HEADER)
    offset_values = _values(headers, ORIGIN_OFFSET_HEADER)
    if not idc_values and not offset_values:
        return LOCAL
    if not idc_values:
        return MalformedHeader(HeaderProblem.MISSING_IDC, "Offset header without IDC header")

    raw_idc, problem = _single(idc_values, ORIGIN_CLUSTER_HEADER)
    if problem is not None:
        return problem
    try:
        cluster = raw_idc.decode("utf-8")
    except UnicodeDecodeError:
        return MalformedHeader(HeaderProblem.NOT_UTF8, f"IDC={raw_idc!r}")
    if cluster == read_from:
        return MalformedHeader(HeaderProblem.SELF_ORIGIN, f"IDC={cluster!r} names the cluster it was read from", cluster)
    if cluster != peer:
        return MalformedHeader(HeaderProblem.THIRD_CLUSTER, f"IDC={cluster!r} is neither {read_from!r} nor {peer!r}", cluster)

    if not offset_values:
        return MalformedHeader(HeaderProblem.MISSING_OFFSET, f"IDC={cluster!r} without Offset header", cluster)
    raw_offset, problem = _single(offset_values, ORIGIN_OFFSET_HEADER)
    if problem is not None:
        return MalformedHeader(problem.problem, problem.detail, cluster)
    if raw_offset.startswith(b"-") and _DIGITS.fullmatch(raw_offset[1:]):
        return MalformedHeader(HeaderProblem.OFFSET_NEGATIVE, f"Offset={raw_offset.decode()}", cluster)
    if not _DIGITS.fullmatch(raw_offset):
        return MalformedHeader(HeaderProblem.OFFSET_NOT_A_NUMBER, f"Offset={raw_offset[:40]!r}", cluster)
    offset = int(raw_offset)
    if offset > MAX_OFFSET:
        return MalformedHeader(HeaderProblem.OFFSET_TOO_LARGE, f"Offset={raw_offset[:40].decode()}...", cluster)
    return CopiedFrom(cluster, offset)


def origin_headers(cluster: str, offset: int) -> tuple[tuple[str, bytes], ...]:
    """The headers the mirror writes on a copy of the record at ``offset`` on ``cluster``."""
    return ((ORIGIN_CLUSTER_HEADER, cluster.encode("utf-8")), (ORIGIN_OFFSET_HEADER, str(offset).encode("ascii")))
