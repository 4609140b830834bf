"""audit/failover_cost.py (pure): the cost of a failover at a past moment, table-driven and checked
against the two-cluster model's oracle (devstack/two_cluster_model.py count_loss / count_duplicates)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.audit.failover_cost import (
    CostStatus,
    Origin,
    ReadRegion,
    Shape,
    StandbyRecord,
    failover_cost,
)
from offset_pipeline.translation.headers import CopiedFrom, LocalRecord, parse_origin
from devstack.two_cluster_model import TwoClusterModel, count_duplicates, count_loss, run_trial
from tests.helpers.model_trials import PROFILE, configs, events

A, B = "idc1", "idc2"
SHAPES = {"two_way": Shape.TWO_WAY, "one_way_from_active": Shape.ONE_WAY_FROM_ACTIVE,
          "one_way_from_standby": Shape.ONE_WAY_FROM_STANDBY}


def region_from_model(model: TwoClusterModel, shape: Shape = Shape.UNKNOWN, *, b=None, a=None,
                      exactly_once: bool = True) -> ReadRegion:
    """What the audit's reader would return for B[b) and A[a) (default: both logs whole)."""
    active, standby = model.active, model.peer(model.active)
    A_log, B_log = model.logs[active], model.logs[standby]
    b_from, b_to = b or (B_log.log_start, B_log.end)
    a_from, a_to = a or (A_log.log_start, A_log.end)
    records = []
    for entry in B_log.retained_real(b_from, b_to):
        origin = parse_origin(entry.headers, read_from=standby, peer=active)
        if isinstance(origin, CopiedFrom):
            records.append(StandbyRecord(entry.offset, Origin.ACTIVE, origin.offset))
        elif isinstance(origin, LocalRecord):
            records.append(StandbyRecord(entry.offset, Origin.STANDBY))
        else:
            records.append(StandbyRecord(entry.offset, Origin.UNIDENTIFIED))
    copies: dict[int, int] = {}
    for entry in A_log.retained_real(a_from, a_to):
        origin = parse_origin(entry.headers, read_from=active, peer=standby)
        if isinstance(origin, CopiedFrom):
            copies.setdefault(origin.offset, entry.offset)
    return ReadRegion(records, max(b_from, B_log.log_start), b_to, B_log.log_start, copies,
                      max(a_from, A_log.log_start), a_to, shape, A_log.log_start, A_log.end, exactly_once)


def cost(model, c, t, **kw):
    return failover_cost(region_from_model(model, **kw), c, t, model.logs[model.peer(model.active)].end)


# -- table -------------------------------------------------------------------------------------------

LEMMA_2 = (["a1", "b1'"], ["b1", "a1'"])  # Lemma 2 (docs/concepts/no-loss.md): t = 2 with c = 1 loses b1


@pytest.mark.parametrize(
    ("name", "logs", "c", "t", "expected"),
    [
        ("exact: c=1 on A is b1' (offset 1); t=0 on B", LEMMA_2, 1, 0, (0, 1)),
        ("Lemma 2: t=2 loses b1", LEMMA_2, 1, 2, (1, 0)),
        ("all read, t at the end", LEMMA_2, 2, 2, (0, 0)),
        ("nothing read, t at the start: everything again", LEMMA_2, 2, 0, (0, 2)),
        ("one-way, a standby offset set too high by hand", (["a0", "a1", "a2", "a3"], ["a0'", "a1'", "a2'", "a3'"]),
         2, 4, (2, 0)),
        ("one-way, exact", (["a0", "a1", "a2", "a3"], ["a0'", "a1'", "a2'", "a3'"]), 2, 2, (0, 0)),
        ("a standby record not yet copied to A is lost below t", (["a0"], ["a0'", "b0"]), 1, 2, (1, 0)),
        ("markers are no records", (["a0", "_", "a1"], ["a0'", "_", "a1'", "_"]), 3, 1, (0, 1)),
    ],
)
def test_cost_table(name, logs, c, t, expected):
    model = TwoClusterModel.from_notation(*logs)
    result = cost(model, c, t)
    assert result.status is CostStatus.AUDITED, result.reason
    assert (result.lost, result.duplicated) == expected
    assert expected == (count_loss(model, c, t), count_duplicates(model, c, t))


def test_lost_offsets_are_listed():
    model = TwoClusterModel.from_notation(["a0", "a1", "a2", "a3"], ["a0'", "a1'", "a2'", "a3'"])
    assert cost(model, 1, 3).lost_offsets == (1, 2)
    assert cost(model, 3, 1).duplicated_offsets == (1, 2)


def test_named_statuses_instead_of_guesses():
    model = TwoClusterModel.from_notation(["b0'", "a0", "a1"], ["b0", "a0'", "a1'"])
    assert cost(model, None, 1).status is CostStatus.NO_COMMITTED_OFFSET
    assert cost(model, 2, None).status is CostStatus.NO_STANDBY_OFFSET
    # t outside the region read
    assert cost(model, 3, 3, b=(0, 2)).status is CostStatus.NEEDS_WIDER_READ
    # below t nothing proves the rest processed, and the region does not reach B's start
    assert cost(model, 3, 3, b=(2, 3)).status is CostStatus.NEEDS_WIDER_READ
    # ... but on a topic produced on A only, a processed copy proves it
    assert cost(model, 3, 3, b=(2, 3), shape=Shape.ONE_WAY_FROM_ACTIVE).status is CostStatus.AUDITED
    # the copy of b0 on A is outside A's region, and no other copy was found: cannot tell
    assert cost(model, 3, 3, a=(1, 3)).status is CostStatus.NEEDS_WIDER_READ


def test_records_deleted_by_retention_are_said():
    model = TwoClusterModel.from_notation(["a0", "a1", "a2"], ["a0'", "a1'", "a2'"])
    model.retain(B, 2)
    assert cost(model, 3, 1).status is CostStatus.RECORDS_DELETED  # t itself below the log start
    # t above it, but the records deciding the loss are gone (and no produced-on-B record proves it)
    assert cost(model, 3, 3).status is CostStatus.RECORDS_DELETED
    assert cost(model, 3, 3, shape=Shape.ONE_WAY_FROM_ACTIVE).status is CostStatus.AUDITED


def test_unidentified_records_are_named():
    model = TwoClusterModel.from_notation(["a0"], ["a0'"])
    model.produce(B, [model.clock], forged=1)  # a third cluster's header on B
    result = cost(model, 1, 1)
    assert result.status is CostStatus.UNIDENTIFIED_RECORDS and "no readable origin" in result.reason


# -- against the model's oracle ------------------------------------------------------------------------


def _moments(trial):
    model = trial.model
    B_log = model.logs[model.peer(model.active)]
    A_log = model.logs[model.active]
    cs = sorted({A_log.log_start, A_log.end, trial.c, *(o.facts.committed for o in trial.cycles
                                                        if o.facts.committed is not None)})
    ts = sorted({B_log.log_start, B_log.end, *(t for t in (trial.commit_t,) if t is not None)})
    ts += list(range(B_log.log_start, B_log.end + 1, max(1, (B_log.end - B_log.log_start) // 6 or 1)))
    return [(c, t) for c in cs if A_log.log_start <= c <= A_log.end for t in sorted(set(ts))]


def _plain(evs):
    return [e[:4] + (0,) + e[5:] if e[0] == "produce" else e for e in evs]  # no forged headers


@PROFILE
@given(configs(mirror_headers=True), events())
def test_whole_logs_give_the_oracle_counts_also_with_an_at_least_once_mirror(config, evs):
    evs = _plain(evs)
    if any(e[0] == "redeliver" for e in evs):  # the oracle's first copy may be gone from A there
        evs = [e for e in evs if not (e[0] == "retain" and e[1] == 0)]
    trial, _ = run_trial(config, evs)
    model = trial.model
    shape = SHAPES[config.shape]
    for c, t in _moments(trial):
        result = cost(model, c, t, shape=shape, exactly_once=not any(e[0] == "redeliver" for e in evs))
        if result.status is CostStatus.RECORDS_DELETED:
            continue  # retention on the standby: said, not counted
        assert result.status is CostStatus.AUDITED, (c, t, result.reason)
        assert (result.lost, result.duplicated) == (count_loss(model, c, t), count_duplicates(model, c, t)), (c, t)


@PROFILE
@given(configs(mirror_headers=True), events(redelivery=False), st.data())
def test_partial_regions_never_miscount(config, evs, data):
    """Whatever regions are read, an audited moment has the oracle's counts (the proofs are sound)."""
    evs = _plain(evs)
    trial, _ = run_trial(config, evs)
    model = trial.model
    B_log, A_log = model.logs[model.peer(model.active)], model.logs[model.active]
    shape = SHAPES[config.shape]
    for c, t in _moments(trial)[:12]:
        b_from = data.draw(st.integers(B_log.log_start, max(B_log.log_start, t)))
        a_from = data.draw(st.integers(A_log.log_start, A_log.end))
        a_to = data.draw(st.integers(a_from, A_log.end))
        result = cost(model, c, t, shape=shape, b=(b_from, B_log.end), a=(a_from, a_to))
        if result.status is CostStatus.AUDITED:
            assert (result.lost, result.duplicated) == (count_loss(model, c, t), count_duplicates(model, c, t)), (
                c, t, b_from, a_from, a_to, result.reason)


def test_widening_bounded_regions_decides_every_moment_and_all_agree():
    """Seeded trials; for each moment the reader's loop: B from a little below t and A from a little
    below c, widened (doubled) while the answer is needs_wider_read. Every moment ends decided or
    with retention named, and every decided one agrees with the oracle."""
    import random

    from devstack.two_cluster_model import TrialConfig, random_events

    rng = random.Random(20261122)
    statuses, reads = Counter(), []
    for _ in range(200):
        config = dataclasses.replace(TrialConfig.random(rng), mirror_headers=True)
        evs = _plain(random_events(rng, 60, retention=rng.random() < 0.3))
        trial, _ = run_trial(config, evs)
        model = trial.model
        B_log, A_log = model.logs[model.peer(model.active)], model.logs[model.active]
        for c, t in _moments(trial):
            margin = 4
            while True:
                result = cost(model, c, t, shape=SHAPES[config.shape],
                              b=(max(B_log.log_start, t - margin), B_log.end),
                              a=(max(A_log.log_start, c - margin), A_log.end))
                if result.status is not CostStatus.NEEDS_WIDER_READ:
                    break
                margin *= 2
            statuses[result.status] += 1
            reads.append(margin)
            if result.status is CostStatus.AUDITED:
                assert (result.lost, result.duplicated) == (count_loss(model, c, t), count_duplicates(model, c, t))
    print(dict(statuses), "median margin", sorted(reads)[len(reads) // 2])
    assert set(statuses) <= {CostStatus.AUDITED, CostStatus.RECORDS_DELETED}
    assert statuses[CostStatus.AUDITED] > 5 * statuses[CostStatus.RECORDS_DELETED]
