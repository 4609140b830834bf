"""The mirror check's verdict rule: table-driven cases and the module's invariants under hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.translation.shape import TopicShape
from offset_pipeline.mirror_check.rules import (
    ClusterTopic,
    MirrorStatus,
    OffsetSyncEvidence,
    OriginCounts,
    Proof,
    SwitchEvidence,
    exit_code,
    mirror_verdict,
)

COPIES = OriginCounts(copies_from_peer=20)
LOCAL = OriginCounts(local=20)
SYNCS = OffsetSyncEvidence(syncs_topics=("mm2-offset-syncs.b.internal",), pairs_for_topic=3, partitions_with_pairs=3)
SYNCS_TOPIC_ONLY = OffsetSyncEvidence(syncs_topics=("mm2-offset-syncs.b.internal",))


ONE_WAY_A = TopicShape.one_way("a")


def evidence(active=LOCAL, standby=COPIES, syncs=OffsetSyncEvidence(), reverse_syncs=OffsetSyncEvidence(),
             **kw) -> SwitchEvidence:
    return SwitchEvidence("orders", "a", "b", ClusterTopic(records=active), ClusterTopic(records=standby), syncs,
                          reverse_offset_syncs=reverse_syncs, **kw)


CASES = [
    # (name, evidence, proof, status)
    ("one-way from active, copies with headers", evidence(), Proof.ORIGIN_HEADERS, MirrorStatus.ORIGIN_HEADERS),
    ("one-way from standby, active holds copies", evidence(active=COPIES, standby=LOCAL), Proof.ORIGIN_HEADERS,
     MirrorStatus.ORIGIN_HEADERS),
    ("two-way with headers", evidence(active=OriginCounts(copies_from_peer=9, local=11),
                                      standby=OriginCounts(copies_from_peer=11, local=9)),
     Proof.ORIGIN_HEADERS, MirrorStatus.ORIGIN_HEADERS),
    ("headers win over syncs", evidence(syncs=SYNCS, shape=ONE_WAY_A), Proof.ORIGIN_HEADERS,
     MirrorStatus.ORIGIN_HEADERS),
    # plain MirrorMaker 2: copies without headers look local, only the configured shape says one-way
    ("plain MirrorMaker 2, configured one-way from active", evidence(standby=LOCAL, syncs=SYNCS, shape=ONE_WAY_A),
     Proof.OFFSET_SYNCS, MirrorStatus.OFFSET_SYNCS),
    ("plain MirrorMaker 2, no configured shape", evidence(standby=LOCAL, syncs=SYNCS),
     Proof.NONE, MirrorStatus.SHAPE_NOT_CONFIGURED),
    ("plain MirrorMaker 2, configured two-way", evidence(standby=LOCAL, syncs=SYNCS, shape=TopicShape.two_way()),
     Proof.NONE, MirrorStatus.TWO_WAY_WITHOUT_HEADERS),
    ("plain MirrorMaker 2, configured one-way from the standby", evidence(standby=LOCAL, syncs=SYNCS,
                                                                         shape=TopicShape.one_way("b")),
     Proof.NONE, MirrorStatus.TWO_WAY_WITHOUT_HEADERS),
    ("plain MirrorMaker 2, group on the copies' side", evidence(standby=LOCAL, reverse_syncs=SYNCS,
                                                               shape=TopicShape.one_way("b")),
     Proof.NONE, MirrorStatus.COPIES_SIDE_WITHOUT_HEADERS),
    ("standby copies but also local records, active none", evidence(standby=OriginCounts(copies_from_peer=5, local=5)),
     Proof.NONE, MirrorStatus.NOT_MIRRORED),
    ("syncs topic without a pair for the topic", evidence(standby=OriginCounts(), syncs=SYNCS_TOPIC_ONLY),
     Proof.NONE, MirrorStatus.NO_OFFSET_SYNC_YET),
    ("syncs unreadable", evidence(standby=LOCAL, syncs=OffsetSyncEvidence(readable=False, problem="not authorized")),
     Proof.NONE, MirrorStatus.OFFSET_SYNCS_UNREADABLE),
    ("nothing at all", evidence(active=OriginCounts(), standby=OriginCounts()), Proof.NONE, MirrorStatus.NO_RECORDS),
    ("local on both, no syncs", evidence(standby=LOCAL), Proof.NONE, MirrorStatus.NOT_MIRRORED),
    ("third cluster's name", evidence(standby=OriginCounts(unknown_origins=("us-east",), unknown_origin_records=20)),
     Proof.NONE, MirrorStatus.UNKNOWN_ORIGIN_NAME),
    ("malformed headers", evidence(standby=OriginCounts(malformed=3)), Proof.NONE,
     MirrorStatus.MALFORMED_ORIGIN_HEADERS),
    ("unreadable cluster", evidence(unreadable_reason="b: brokers not reachable"), Proof.NONE,
     MirrorStatus.CLUSTER_UNREADABLE),
]


@pytest.mark.parametrize("name,ev,proof,status", CASES, ids=[c[0] for c in CASES])
def test_verdicts(name, ev, proof, status):
    verdict = mirror_verdict(ev)
    assert (verdict.proof, verdict.status) == (proof, status), verdict.reason
    assert verdict.reason.startswith("'orders' a->b: ")


def test_a_renamed_remote_topic_is_named():
    ev = SwitchEvidence("orders", "a", "b", ClusterTopic(records=LOCAL), ClusterTopic(exists=False, renamed_copies=("a.orders",)),
                        SYNCS)
    verdict = mirror_verdict(ev)
    assert verdict.status is MirrorStatus.RENAMED_REMOTE_TOPIC and verdict.proof is Proof.NONE
    assert "'a.orders'" in verdict.reason and "IdentityReplicationPolicy" in verdict.reason


def test_a_topic_missing_on_the_standby():
    ev = SwitchEvidence("orders", "a", "b", ClusterTopic(records=LOCAL), ClusterTopic(exists=False))
    assert mirror_verdict(ev).status is MirrorStatus.TOPIC_MISSING_ON_STANDBY


def test_exit_codes():
    ok = mirror_verdict(evidence())
    bad = mirror_verdict(evidence(standby=LOCAL))
    assert (exit_code([]), exit_code([ok]), exit_code([ok, bad])) == (2, 0, 1)


counts = st.builds(
    OriginCounts,
    copies_from_peer=st.integers(0, 3), local=st.integers(0, 3), malformed=st.integers(0, 2),
    unknown_origins=st.sampled_from([(), ("x",)]),
).map(lambda c: OriginCounts(c.copies_from_peer, c.local, c.malformed, c.unknown_origins, len(c.unknown_origins)))
syncs = st.builds(OffsetSyncEvidence, readable=st.booleans(), problem=st.just("refused"),
                  syncs_topics=st.sampled_from([(), ("mm2-offset-syncs.b.internal",)]),
                  pairs_for_topic=st.integers(0, 2), partitions_with_pairs=st.integers(0, 2))
evidences = st.builds(
    SwitchEvidence, topic=st.just("t"), active=st.just("a"), standby=st.just("b"),
    on_active=st.builds(ClusterTopic, exists=st.just(True), records=counts),
    on_standby=st.builds(ClusterTopic, exists=st.booleans(), records=counts,
                         renamed_copies=st.sampled_from([(), ("a.t",)])),
    offset_syncs=syncs, unreadable_reason=st.sampled_from(["", "down"]),
    shape=st.sampled_from([None, TopicShape.two_way(), TopicShape.one_way("a"), TopicShape.one_way("b")]),
    reverse_offset_syncs=syncs,
)


@given(evidences)
def test_invariants(ev):
    verdict = mirror_verdict(ev)
    active, standby = ev.on_active.records, ev.on_standby.records
    # a proof needs evidence
    if verdict.proof is Proof.ORIGIN_HEADERS:
        assert active.copies_from_peer or (standby.copies_from_peer and not standby.local)
    if verdict.proof is Proof.OFFSET_SYNCS:
        assert ev.offset_syncs.pairs_for_topic and ev.shape == TopicShape.one_way("a")
    # headers first
    headers_serve = active.copies_from_peer or (standby.copies_from_peer and not standby.local)
    if headers_serve and ev.on_standby.exists and not ev.unreadable_reason:
        assert verdict.proof is Proof.ORIGIN_HEADERS
    # named, never generic
    proof_statuses = {MirrorStatus.ORIGIN_HEADERS, MirrorStatus.OFFSET_SYNCS}
    assert (verdict.proof is Proof.NONE) == (verdict.status not in proof_statuses)
    assert verdict.reason.startswith("'t' a->b: ") and len(verdict.reason) > len("'t' a->b: ")
