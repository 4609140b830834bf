"""RecordFact.of and CopiedFrom.of (the readers' hot path) make exactly what the dataclasses'
own constructors make: equal, same hash, same fields, printed the same, and still frozen."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.translation.facts import RecordFact
from offset_pipeline.translation.headers import LOCAL, CopiedFrom, HeaderProblem, MalformedHeader

offsets = st.integers(0, 2**63 - 1)
clusters = st.text(min_size=1, max_size=6)
origins = st.one_of(
    st.just(LOCAL),
    st.builds(CopiedFrom, clusters, offsets),
    st.builds(MalformedHeader, st.sampled_from(list(HeaderProblem)), st.text(max_size=10)),
)


def same(made, built) -> None:
    assert type(made) is type(built)
    assert made == built and built == made
    assert hash(made) == hash(built)
    assert repr(made) == repr(built) and str(made) == str(built)
    assert dataclasses.astuple(made) == dataclasses.astuple(built)
    assert dataclasses.replace(made) == built
    assert list(vars(made)) == [f.name for f in dataclasses.fields(built)]


@given(offsets, st.integers(-1, 2**62), origins, st.one_of(st.none(), st.binary(max_size=8)))
def test_record_fact_of_is_the_dataclass_instance(offset, timestamp, origin, identity):
    same(RecordFact.of(offset, timestamp, origin, identity), RecordFact(offset, timestamp, origin, identity))
    same(RecordFact.of(offset, timestamp), RecordFact(offset, timestamp))


@given(clusters, offsets)
def test_copied_from_of_is_the_dataclass_instance(cluster, offset):
    made = CopiedFrom.of(cluster, offset)
    same(made, CopiedFrom(cluster, offset))
    assert RecordFact.of(1, 2, made).copy_of(cluster) == offset


def test_made_instances_stay_frozen():
    for made, name in ((RecordFact.of(1, 2), "offset"), (CopiedFrom.of("idc1", 3), "cluster")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(made, name, 9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        RecordFact.of(1, 2).__dict__ = {}  # noqa: B010 - the way around update() is closed too
