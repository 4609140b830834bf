"""switch_point / verify / drained: where a stopped group resumes on its target, by record identity.

Table-driven on small logs, and property-based on logs built by a model of two clusters producing and
mirroring in order (each side's originals copied to the other side in their order, interleaved with
that side's own records at random)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.readiness.switch_point import (
    SourceView,
    drained,
    identity,
    switch_point,
    verify,
)
from offset_pipeline.translation.facts import RecordFact
from offset_pipeline.translation.headers import (
    CopiedFrom,
    HeaderProblem,
    MalformedHeader,
)

A, B = "idc1", "idc2"


def local(offset):
    return RecordFact(offset, 0)


def copy(offset, origin_cluster, origin_offset):
    return RecordFact(offset, 0, CopiedFrom(origin_cluster, origin_offset))


def one_way(n_a=10, mirrored=10):
    """A one-way topic: A holds ``n_a`` originals, B the copies of the first ``mirrored``."""
    a = [local(i) for i in range(n_a)]
    b = [copy(i, A, i) for i in range(mirrored)]
    return a, b


def test_identity():
    assert identity(local(4), A) == (A, 4)
    assert identity(copy(9, B, 2), A) == (B, 2)
    assert identity(RecordFact(1, 0, MalformedHeader(HeaderProblem.NOT_UTF8)), A) is None


def test_one_way_the_sync_offset_moves_to_the_copy_of_c():
    a, b = one_way()
    view = SourceView.of(a, A, B, committed=6, read_from=0)
    point = switch_point(b, start=4, view=view, read_to=10)
    assert (point.offset, point.skipped) == (6, 2)  # B 4, 5 are copies of A 4, 5: processed
    check = verify(b, point.offset, view, 0, 10)
    assert (check.lost, check.duplicates) == ([], [])
    assert drained(b, view, a[5])


def test_one_way_not_drained_until_the_copy_of_c_minus_1_is_there():
    a, b = one_way(mirrored=5)
    view = SourceView.of(a, A, B, committed=6, read_from=0)
    assert not drained(b, view, a[5])
    point = switch_point(b, start=4, view=view, read_to=5)
    assert point.offset == 5  # as far as was read: every record up to there was processed


def test_two_way_target_originals_count_by_their_copy_on_the_source():
    # A: a0 a1 [b0 copy] a2 [b1 copy] a3 ; B: b0 [a0] [a1] b1 [a2] b2 [a3]  (b2 not yet on A)
    a = [local(0), local(1), copy(2, B, 0), local(3), copy(4, B, 3), local(5)]
    b = [local(0), copy(1, A, 0), copy(2, A, 1), local(3), copy(4, A, 3), local(5), copy(6, A, 5)]
    view = SourceView.of(a, A, B, committed=5, read_from=0)  # the group processed A 0..4 (b1's copy at 4)
    point = switch_point(b, start=0, view=view, read_to=7)
    assert point.offset == 5  # b2 (B 5) was never on A: the group did not process it
    check = verify(b, 5, view, 0, 7)
    assert (check.lost, check.duplicates) == ([], [])
    # a resume one record later would lose b2; one earlier would read a2's copy again
    assert verify(b, 6, view, 0, 7).lost == [5]
    assert verify(b, 4, view, 0, 7).duplicates == [4]


def test_a_malformed_record_stops_the_walk():
    a, b = one_way()
    b[5] = RecordFact(5, 0, MalformedHeader(HeaderProblem.CONFLICTING_HEADERS))
    point = switch_point(b, start=0, view=SourceView.of(a, A, B, 8, 0), read_to=10)
    assert point.offset == 5


def test_a_target_original_older_than_the_source_window_was_processed():
    a = [local(10), copy(11, B, 7), local(12)]  # read from 10: b0..b6's copies lie below
    view = SourceView.of(a, A, B, committed=13, read_from=10)
    assert view.processed(local(3))  # b3 read from B: its copy is below A's offset 10
    assert not view.processed(local(9))  # b9: above every copy read, not on A yet
    assert view.processed(local(7))


# -- the property: a model of two clusters producing and mirroring in order ----------------------------

@st.composite
def two_clusters(draw, two_way: bool):
    """Both logs after random interleavings: each side appends its own originals and, in order, the
    copies of the other side's originals (some not copied yet)."""
    logs = {A: [], B: []}  # list of identities, offset = index
    pending = {A: [], B: []}  # identities waiting to be copied TO that cluster
    for _ in range(draw(st.integers(1, 40))):
        side = draw(st.sampled_from([A, B] if two_way else [A]))
        action = draw(st.sampled_from(["produce", "mirror"]))
        if action == "produce":
            ident = (side, len(logs[side]))
            logs[side].append(ident)
            pending[B if side == A else A].append(ident)
        else:
            to = draw(st.sampled_from([A, B]))
            if pending[to]:
                logs[to].append(pending[to].pop(0))
    return logs, pending


def records(log, cluster):
    return [local(i) if origin == cluster else copy(i, origin, o) for i, (origin, o) in enumerate(log)]


@given(data=st.data(), two_way=st.booleans())
def test_property_never_lost_and_exact_once_drained(data, two_way):
    logs, _pending = data.draw(two_clusters(two_way))
    a_log, b_log = logs[A], logs[B]
    c = data.draw(st.integers(0, len(a_log)))
    processed = set(a_log[:c])  # identities the group processed on A
    b = records(b_log, B)
    view = SourceView.of(records(a_log, A), A, B, c, read_from=0)
    # the sync's loss-free start: any offset below which every B record was processed
    safe = [t for t in range(len(b_log) + 1) if all(ident in processed for ident in b_log[:t])]
    t0 = data.draw(st.sampled_from(safe))
    point = switch_point(b, t0, view, read_to=len(b_log))
    assert point.offset >= t0
    assert all(b_log[i] in processed for i in range(t0, point.offset))  # never skips an unprocessed record
    check = verify(b, point.offset, view, 0, len(b_log))
    assert check.lost == []
    assert check.lost == [i for i in range(point.offset) if b_log[i] not in processed]
    assert check.duplicates == [i for i in range(point.offset, len(b_log)) if b_log[i] in processed]
    last = records(a_log, A)[c - 1] if c else None
    if not two_way and drained(b, view, last):
        assert check.duplicates == []  # one-way and drained: exact


def test_the_switchover_says_a_cluster_that_does_not_answer_and_commits_nothing():
    import socket

    from offset_pipeline.cli.switchover import FAILED, switchover
    from offset_pipeline.resources import KafkaClusterResource

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    dead = {name: KafkaClusterResource(cluster_name=name, bootstrap_servers=f"127.0.0.1:{port}",
                                       request_timeout_ms=2000, socket_timeout_ms=2000) for name in (A, B)}
    report, code = switchover("g", B, clusters=dead, timeout_s=2.0)
    assert code == FAILED and report.outcome == "failed"
    assert report.detail.startswith("a Kafka read failed, nothing committed") and report.source == A
