"""Topic shape: one-way ("100:0", producers on one cluster only) or two-way ("50:50").

See docs/concepts/strategies.md (topic shapes).

The shape decides which strategies may run: the timestamp search is safe only on a one-way topic
translated from its producing side (Lemma 3: every standby record is then a copy of an active
record, in the active order). Header anchors are safe on every shape (Lemma 1), so an unknown shape
is treated as two-way: header strategy only.

A configured shape always wins. Otherwise the shape is detected from observed origin headers,
conservatively: one-way ``X -> Y`` only when there is enough evidence on both clusters, every
observed record of Y is a copy of X, and X's records carry no origin header. Any record produced on
Y (no origin header, or a header the mirror would never write, since the mirror always writes a
valid ``IDC=<source>``) makes Y a producing side: two producing sides make the topic two-way. Too
little evidence gives "unknown". Observations must describe the recent records of both clusters;
a topic whose producers moved (a planned switchover, docs/operating/runbook.md) changes shape, and a one-way
verdict should only be trusted for records produced after the move.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from .headers import CopiedFrom, LocalRecord, MalformedHeader, Origin

DEFAULT_MIN_EVIDENCE = 20  # records observed on each cluster before a one-way verdict


class ShapeKind(str, Enum):
    ONE_WAY = "one_way"
    TWO_WAY = "two_way"
    UNKNOWN = "unknown"


class ShapeSource(str, Enum):
    CONFIGURED = "configured"
    DETECTED = "detected"
    DEFAULT = "default"


@dataclass(frozen=True)
class TopicShape:
    kind: ShapeKind
    producer: str | None = None  # ONE_WAY: the only cluster producers write to
    source: ShapeSource = ShapeSource.DEFAULT
    reason: str = ""

    def __post_init__(self) -> None:
        if (self.kind is ShapeKind.ONE_WAY) != (self.producer is not None):
            raise ValueError("a one-way shape names its producing cluster, and only a one-way shape does")

    @classmethod
    def one_way(cls, producer: str, *, source: ShapeSource = ShapeSource.CONFIGURED, reason: str = "") -> TopicShape:
        return cls(ShapeKind.ONE_WAY, producer, source, reason)

    @classmethod
    def two_way(cls, *, source: ShapeSource = ShapeSource.CONFIGURED, reason: str = "") -> TopicShape:
        return cls(ShapeKind.TWO_WAY, None, source, reason)

    @classmethod
    def unknown(cls, reason: str = "no configured shape and too little evidence") -> TopicShape:
        return cls(ShapeKind.UNKNOWN, None, ShapeSource.DEFAULT, reason)

    @property
    def value(self) -> str:
        """A stable string for storage: ``one_way:idc1``, ``two_way``, ``unknown``."""
        return f"one_way:{self.producer}" if self.kind is ShapeKind.ONE_WAY else self.kind.value

    def allows_timestamp_search(self, active: str) -> bool:
        """Timestamp search only on a one-way topic translated from its producing side."""
        return self.kind is ShapeKind.ONE_WAY and self.producer == active

    def produced_only_on(self, cluster: str) -> bool:
        return self.kind is ShapeKind.ONE_WAY and self.producer == cluster


def parse_shape(text: str | None) -> TopicShape | None:
    """A configured shape: ``two_way`` (or ``50:50``), ``one_way:<producing cluster>``, or empty."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    if value in ("two_way", "50:50"):
        return TopicShape.two_way()
    kind, sep, producer = value.partition(":")
    if kind == "one_way" and sep and producer:
        return TopicShape.one_way(producer)
    raise ValueError(f"unknown topic shape {text!r}: expected 'two_way', '50:50' or 'one_way:<cluster>'")


@dataclass(frozen=True)
class HeaderObservation:
    """Counts of origin kinds among records observed on one cluster."""

    cluster: str
    local: int = 0  # no origin header
    copies_from_peer: int = 0  # valid IDC=<other cluster>
    malformed: int = 0  # any other header: never written by the mirror, so produced here

    @property
    def total(self) -> int:
        return self.local + self.copies_from_peer + self.malformed

    @property
    def produced_here(self) -> int:
        return self.local + self.malformed

    @classmethod
    def from_origins(cls, cluster: str, origins: Iterable[Origin]) -> HeaderObservation:
        local = copies = malformed = 0
        for origin in origins:
            if isinstance(origin, LocalRecord):
                local += 1
            elif isinstance(origin, CopiedFrom):
                copies += 1
            elif isinstance(origin, MalformedHeader):
                malformed += 1
            else:  # pragma: no cover - defensive
                raise TypeError(f"not an origin: {origin!r}")
        return cls(cluster, local, copies, malformed)

    def __add__(self, other: HeaderObservation) -> HeaderObservation:
        if other.cluster != self.cluster:
            raise ValueError("observations of different clusters")
        return HeaderObservation(
            self.cluster, self.local + other.local, self.copies_from_peer + other.copies_from_peer,
            self.malformed + other.malformed,
        )


def decide_shape(
    first: HeaderObservation,
    second: HeaderObservation,
    configured: TopicShape | None = None,
    *,
    min_evidence: int = DEFAULT_MIN_EVIDENCE,
) -> TopicShape:
    """Configured wins; else detect conservatively (see the module docstring)."""
    if configured is not None:
        return TopicShape(configured.kind, configured.producer, ShapeSource.CONFIGURED, configured.reason or "configured")
    if first.cluster == second.cluster:
        raise ValueError("observations of one cluster twice")
    producing = [
        obs.cluster
        for obs, other in ((first, second), (second, first))
        if obs.produced_here > 0 or other.copies_from_peer > 0
    ]
    counts = f"{first.cluster}: {first.local} local/{first.copies_from_peer} copies/{first.malformed} malformed, " \
             f"{second.cluster}: {second.local} local/{second.copies_from_peer} copies/{second.malformed} malformed"
    if len(producing) == 2:
        return TopicShape.two_way(source=ShapeSource.DETECTED, reason=f"records produced on both clusters ({counts})")
    if first.total < min_evidence or second.total < min_evidence:
        return TopicShape.unknown(f"too little evidence: fewer than {min_evidence} records on a cluster ({counts})")
    if len(producing) == 1:
        producer = producing[0]
        return TopicShape.one_way(
            producer, source=ShapeSource.DETECTED,
            reason=f"every observed record on the other cluster is a copy of {producer} ({counts})",
        )
    return TopicShape.unknown(f"no records produced anywhere ({counts})")  # pragma: no cover - needs total 0
