"""Hypothesis generators for trials of the pure two-cluster model (devstack/two_cluster_model.py):
random event sequences (both producers, both mirror directions, redelivery, retention, group resets)
and trial configs; the one settings profile of the property tests."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from devstack.two_cluster_model import CLUSTERS, SHAPES, TIMESTAMP_PATTERNS, TrialConfig

PROFILE = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


_produce = st.tuples(
    st.just("produce"), st.integers(0, 1), st.integers(1, 4), st.sampled_from([0, 0, 1, 2]),
    st.sampled_from([0] * 7 + [1, 2, 3]), st.integers(-5000, 2000),
)
_mirror = st.tuples(st.just("mirror"), st.integers(0, 1), st.integers(1, 5), st.integers(0, 2))
_redeliver = st.tuples(st.just("redeliver"), st.integers(0, 1), st.integers(1, 6))
_retain = st.tuples(st.just("retain"), st.integers(0, 1), st.integers(1, 4))
_consume = st.tuples(st.just("consume"), st.integers(0, 100))
_reset = st.tuples(st.just("reset"), st.integers(0, 100))
_quiet = st.just(("quiet",))
_sync = st.just(("sync",))


def events(*, redelivery=True, retention=True, gaps=True):
    choices = [_produce] * 4 + [_mirror] * 4 + [_consume, _consume, _sync, _sync, _reset, _quiet]
    if redelivery:
        choices.append(_redeliver)
    if retention:
        choices.append(_retain)
    strategy = st.lists(st.one_of(choices), min_size=20, max_size=80)
    if not gaps:
        strategy = strategy.map(lambda evs: [_without_gaps(e) for e in evs])
    return strategy


def _without_gaps(event):
    if event[0] == "produce":
        return event[:3] + (0,) + event[4:]
    if event[0] == "mirror":
        return event[:3] + (0,)
    return event


@st.composite
def configs(draw, **fixed):
    shape = fixed.get("shape") or draw(st.sampled_from(SHAPES))
    headers = fixed.get("mirror_headers", shape != "one_way_from_active" or draw(st.booleans()))
    values = dict(
        shape=shape,
        active=draw(st.sampled_from(CLUSTERS)),
        timestamp_pattern=draw(st.sampled_from(TIMESTAMP_PATTERNS)),
        shape_mode=draw(st.sampled_from(("configured", "configured", "detected", "unknown"))),
        mirror_headers=headers,
        log_append_time_on_standby=draw(st.booleans()) and draw(st.booleans()),
        window=draw(st.integers(1, 10)),
        refine_window=draw(st.integers(1, 40)),
        caught_up_facts=draw(st.booleans()),
        kind=draw(st.sampled_from(("disaster", "planned"))),
        identical_pairs=draw(st.booleans()),
    )
    values.update(fixed)
    return TrialConfig(**values)


def header_less_safe(config, evs):
    """A header-less mirror cannot verify the search against the standby's retention (documented
    limit of unrefined timestamp search): no retention on the standby in that setting."""
    if config.mirror_headers:
        return evs
    return [("retain", 0, e[2]) if e[0] == "retain" else e for e in evs]

