"""Which proof can the sync use to move a topic's groups from one cluster to the other? (pure)

The sync commits a standby offset only when the facts prove it loses nothing. Two kinds of mirror
evidence can give such a proof:

* **origin headers** -- every copy carries ``IDC=<source>`` and ``Offset=<upstream offset>``
  (the project's Kafka Connect transform in MirrorMaker 2, or the dev harness's mirror). Anchors
  from them hold on every topic shape, one-way and two-way;
* **offset syncs** -- plain MirrorMaker 2 writes pairs "upstream offset u was copied to downstream
  offset d" into its offset-syncs topic. They anchor one-way topics only, for the groups on the
  producing side: on a two-way topic the standby also holds records produced there, which no pair
  describes.

:func:`mirror_verdict` takes what was read for one topic, seen from a group that would move from
its ``active`` cluster to its ``standby``, and returns the proof the sync can use for that direction,
or none, always with a named status and a reason an operator can act on. It never raises.

* Origin headers serve the direction when the active cluster holds copies naming their originals
  on the standby (the header anchors, any shape), or when every recent record of the standby is a
  copy naming its original on the active cluster (a one-way topic produced on the active side).
* Offset syncs serve it when the active -> standby flow has pairs for the topic and the topic is
  configured one-way from the active side (without origin headers nothing read tells a copy from a
  record produced on the standby: the sync too takes the shape from the configuration).

Invariants (tests/mirror_check/test_rules.py, table-driven and with hypothesis):

* **A proof needs evidence.** ``origin_headers`` only when some sampled record is a valid copy
  (on the active cluster, or on a standby that holds nothing else); ``offset_syncs`` only when a
  pair of the active -> standby flow names the topic and its configured shape is one-way from the
  active cluster.
* **Headers first.** When both kinds of evidence serve, the verdict is ``origin_headers`` (the
  stronger proof: it holds on every shape).
* **Named, never generic.** A verdict without a proof has a status that is not a proof's, and a
  reason that names the topic and the direction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from offset_pipeline.translation.headers import CopiedFrom, HeaderProblem, LocalRecord, MalformedHeader, Origin
from offset_pipeline.translation.shape import TopicShape


class Proof(str, Enum):
    ORIGIN_HEADERS = "origin_headers"
    OFFSET_SYNCS = "offset_syncs"
    NONE = "none"


class MirrorStatus(str, Enum):
    """Why a direction has the proof it has. Values are shown to operators and stored: never rename."""

    ORIGIN_HEADERS = "origin_headers"  # copies carry valid origin headers
    OFFSET_SYNCS = "offset_syncs"  # plain MirrorMaker 2's pairs name the topic, the standby holds only copies
    CLUSTER_UNREADABLE = "cluster_unreadable"  # a cluster's topics or records could not be read
    TOPIC_MISSING_ON_STANDBY = "topic_missing_on_standby"
    RENAMED_REMOTE_TOPIC = "renamed_remote_topic"  # the mirror writes the topic under another name
    UNKNOWN_ORIGIN_NAME = "unknown_origin_name"  # IDC names neither configured cluster
    MALFORMED_ORIGIN_HEADERS = "malformed_origin_headers"
    TWO_WAY_WITHOUT_HEADERS = "two_way_without_headers"  # pairs exist, but the topic is not one-way from active
    SHAPE_NOT_CONFIGURED = "shape_not_configured"  # pairs exist; without headers only the configured shape says one-way
    COPIES_SIDE_WITHOUT_HEADERS = "copies_side_without_headers"  # pairs serve the producing side's groups only
    NO_OFFSET_SYNC_YET = "no_offset_sync_yet"  # offset syncs are read, none names this topic yet
    OFFSET_SYNCS_UNREADABLE = "offset_syncs_unreadable"
    NO_RECORDS = "no_records"  # nothing to judge by yet
    NOT_MIRRORED = "not_mirrored"  # records, none a copy with headers, no offset syncs


@dataclass(frozen=True)
class OriginCounts:
    """What the sampled recent records of one cluster say about their origin."""

    copies_from_peer: int = 0  # valid origin headers naming the other cluster
    local: int = 0  # no origin headers
    malformed: int = 0
    unknown_origins: tuple[str, ...] = ()  # origin names that are neither configured cluster
    unknown_origin_records: int = 0

    @property
    def total(self) -> int:
        return self.copies_from_peer + self.local + self.malformed + self.unknown_origin_records


@dataclass(frozen=True)
class OffsetSyncEvidence:
    """What the offset-syncs topics of this flow say about the topic."""

    readable: bool = True
    problem: str = ""  # why not readable
    syncs_topics: tuple[str, ...] = ()  # offset-syncs topics found for this flow
    pairs_for_topic: int = 0  # pairs that name this topic
    partitions_with_pairs: int = 0


@dataclass(frozen=True)
class ClusterTopic:
    """One cluster's side of a topic: whether it exists and what its recent records say."""

    exists: bool = True
    records: OriginCounts = field(default_factory=OriginCounts)
    renamed_copies: tuple[str, ...] = ()  # topics here that look like a renamed copy of it (<alias>.<topic>)


@dataclass(frozen=True)
class SwitchEvidence:
    """What was read for ``topic``, seen from a group that would move from ``active`` to ``standby``."""

    topic: str
    active: str
    standby: str
    on_active: ClusterTopic = field(default_factory=ClusterTopic)
    on_standby: ClusterTopic = field(default_factory=ClusterTopic)
    # pairs "upstream offset on active -> downstream offset on standby" (the active -> standby flow)
    offset_syncs: OffsetSyncEvidence = field(default_factory=OffsetSyncEvidence)
    unreadable_reason: str = ""  # set when a cluster's topics or records could not be read
    # the topic's configured shape (OFFSET_PIPELINE_TOPIC_SHAPES): without origin headers nothing
    # read tells a copy from a record produced on the standby, so only the configuration says one-way
    shape: TopicShape | None = None
    reverse_offset_syncs: OffsetSyncEvidence = field(default_factory=OffsetSyncEvidence)  # standby -> active


@dataclass(frozen=True)
class MirrorVerdict:
    topic: str
    active: str
    standby: str
    proof: Proof
    status: MirrorStatus
    reason: str

    @property
    def direction(self) -> str:
        return f"{self.active}->{self.standby}"


def mirror_verdict(evidence: SwitchEvidence) -> MirrorVerdict:
    """The proof the sync can use to move a group of ``evidence.topic`` from ``active`` to
    ``standby`` (module docstring)."""
    e = evidence
    where = f"{e.topic!r} {e.active}->{e.standby}"
    active, standby = e.on_active.records, e.on_standby.records

    def verdict(proof: Proof, status: MirrorStatus, reason: str) -> MirrorVerdict:
        return MirrorVerdict(e.topic, e.active, e.standby, proof, status, f"{where}: {reason}")

    if e.unreadable_reason:
        return verdict(Proof.NONE, MirrorStatus.CLUSTER_UNREADABLE, e.unreadable_reason)
    if not e.on_standby.exists:
        if e.on_standby.renamed_copies:
            return verdict(
                Proof.NONE, MirrorStatus.RENAMED_REMOTE_TOPIC,
                f"the mirror writes it to {e.standby} as {', '.join(map(repr, e.on_standby.renamed_copies))}; the "
                "sync translates a group's offsets between topics of the same name (MirrorMaker 2: "
                "replication.policy.class=org.apache.kafka.connect.mirror.IdentityReplicationPolicy)",
            )
        return verdict(Proof.NONE, MirrorStatus.TOPIC_MISSING_ON_STANDBY, f"no topic of that name on {e.standby}")

    if active.copies_from_peer:
        # Lemma 1 of the header rules: copies on the active cluster name their original on the standby
        return verdict(
            Proof.ORIGIN_HEADERS, MirrorStatus.ORIGIN_HEADERS,
            f"{active.copies_from_peer} of {active.total} recent records on {e.active} are copies with valid "
            f"origin headers naming {e.standby}" + _skipped(active),
        )
    if standby.copies_from_peer and not standby.local:
        # one-way from the active cluster: every record of the standby is a copy naming its original
        return verdict(
            Proof.ORIGIN_HEADERS, MirrorStatus.ORIGIN_HEADERS,
            f"{standby.copies_from_peer} of {standby.total} recent records on {e.standby} are copies with valid "
            f"origin headers naming {e.active}, none produced there (one-way)" + _skipped(standby),
        )
    unknown = sorted(set(active.unknown_origins) | set(standby.unknown_origins))
    if unknown:
        return verdict(
            Proof.NONE, MirrorStatus.UNKNOWN_ORIGIN_NAME,
            f"recent records name their origin {', '.join(map(repr, unknown))}, which is neither {e.active!r} nor "
            f"{e.standby!r}: the cluster names in the settings must equal the mirror's aliases",
        )
    if active.malformed or standby.malformed:
        return verdict(
            Proof.NONE, MirrorStatus.MALFORMED_ORIGIN_HEADERS,
            f"{active.malformed + standby.malformed} recent records carry origin headers the rules cannot read "
            "(IDC: the source cluster's name; Offset: a decimal offset)",
        )
    syncs = e.offset_syncs
    if syncs.pairs_for_topic:
        if e.shape is None:
            return verdict(
                Proof.NONE, MirrorStatus.SHAPE_NOT_CONFIGURED,
                f"{syncs.pairs_for_topic} offset syncs name the topic, but its records carry no origin headers, so "
                f"nothing read says it is one-way: configure it (OFFSET_PIPELINE_TOPIC_SHAPES={e.topic}=one_way:"
                f"{e.active}) if producers write it on {e.active} only",
            )
        if not e.shape.allows_timestamp_search(e.active):
            return verdict(
                Proof.NONE, MirrorStatus.TWO_WAY_WITHOUT_HEADERS,
                f"offset syncs name the topic, but its shape is {e.shape.value}: offset syncs anchor one-way "
                f"topics produced on the group's active cluster only; the project's transform in the mirror "
                "serves every shape",
            )
        return verdict(
            Proof.OFFSET_SYNCS, MirrorStatus.OFFSET_SYNCS,
            f"{syncs.pairs_for_topic} offset syncs over {syncs.partitions_with_pairs} partitions in "
            f"{', '.join(syncs.syncs_topics)}; the topic is configured one-way from {e.active}",
        )
    if e.reverse_offset_syncs.pairs_for_topic:
        return verdict(
            Proof.NONE, MirrorStatus.COPIES_SIDE_WITHOUT_HEADERS,
            f"offset syncs name the topic for {e.standby}->{e.active} only: they anchor the groups on the producing "
            f"side ({e.standby}); a group reading the copies on {e.active} needs the project's transform in the mirror",
        )
    if not syncs.readable:
        return verdict(Proof.NONE, MirrorStatus.OFFSET_SYNCS_UNREADABLE,
                       f"no origin headers, and the offset syncs could not be read: {syncs.problem}")
    if syncs.syncs_topics:
        return verdict(
            Proof.NONE, MirrorStatus.NO_OFFSET_SYNC_YET,
            f"no origin headers, and no pair in {', '.join(syncs.syncs_topics)} names the topic yet (MirrorMaker 2 "
            "writes one when it copies a partition's first record)",
        )
    if active.total == 0 and standby.total == 0:
        return verdict(Proof.NONE, MirrorStatus.NO_RECORDS,
                       "no records on either cluster to judge by, and no offset syncs topic for this direction")
    return verdict(
        Proof.NONE, MirrorStatus.NOT_MIRRORED,
        f"no recent record on {e.active} or {e.standby} is a copy with origin headers, and no offset syncs "
        "topic serves this direction",
    )


def _skipped(counts: OriginCounts) -> str:
    if not (counts.malformed or counts.unknown_origin_records):
        return ""
    return (f"; {counts.malformed} malformed and {counts.unknown_origin_records} of unknown origin are skipped "
            "by the rules")


ALL_PROVEN, UNPROVEN, NOTHING_TO_SHOW = 0, 1, 2
#: ``offset-pipeline mirror check``'s exit codes and what each means (its ``--help`` lists them).
EXIT_CODES = {
    ALL_PROVEN: "every direction shown has a proof",
    UNPROVEN: "a direction shown has no proof (its reason says what to change)",
    NOTHING_TO_SHOW: "nothing to show: no such topic on either cluster",
}


def exit_code(verdicts: list[MirrorVerdict]) -> int:
    """As ``readiness``: every direction shown has a proof, one has none, or nothing to show."""
    if not verdicts:
        return NOTHING_TO_SHOW
    return ALL_PROVEN if all(v.proof is not Proof.NONE for v in verdicts) else UNPROVEN


#: Topics that are never a mirrored workload: Kafka's and Connect's own, MirrorMaker 2's internal
#: topics and heartbeats, the project's own.
_INTERNAL_PREFIXES = ("__", "_", "mm2-", "connect-", "offset-pipeline.")
_INTERNAL_NAMES = frozenset({"heartbeats"})


def is_workload_topic(name: str) -> bool:
    return not (name.startswith(_INTERNAL_PREFIXES) or name.endswith(".internal") or name in _INTERNAL_NAMES
                or name.endswith(".heartbeats"))


OFFSET_SYNCS_PREFIX, OFFSET_SYNCS_SUFFIX = "mm2-offset-syncs.", ".internal"


def offset_syncs_flow(listed_on: str, topic: str, clusters: tuple[str, str]) -> tuple[str, str] | None:
    """The flow (source, target) whose pairs the offset-syncs ``topic`` listed on ``listed_on``
    holds, or None when it is no offset-syncs topic of these two clusters. MirrorMaker 2 names the
    topic after the flow's *target* alias and keeps it on the source cluster by default, on the
    target with ``offset-syncs.topic.location=target``: the name alone tells the two apart."""
    if not (topic.startswith(OFFSET_SYNCS_PREFIX) and topic.endswith(OFFSET_SYNCS_SUFFIX)):
        return None
    alias = topic[len(OFFSET_SYNCS_PREFIX):-len(OFFSET_SYNCS_SUFFIX)]
    if listed_on not in clusters or alias not in clusters:
        return None
    other = clusters[1] if listed_on == clusters[0] else clusters[0]
    return (listed_on, alias) if alias != listed_on else (other, listed_on)


def origin_counts(origins: Iterable[Origin], peer: str) -> OriginCounts:
    """Counts of parsed origins (``translation.headers``) read on one cluster whose peer is ``peer``."""
    copies = local = malformed = unknown = 0
    names: list[str] = []
    for origin in origins:
        if isinstance(origin, CopiedFrom) and origin.cluster == peer:
            copies += 1
        elif isinstance(origin, LocalRecord):
            local += 1
        elif isinstance(origin, MalformedHeader) and origin.problem is HeaderProblem.THIRD_CLUSTER:
            unknown += 1
            if origin.claimed_cluster not in names:
                names.append(origin.claimed_cluster)
        else:
            malformed += 1
    return OriginCounts(copies, local, malformed, tuple(names), unknown)
