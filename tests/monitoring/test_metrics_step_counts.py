"""status_counts: group-partitions per status, and groups per the worst status of their partitions."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.monitoring.metric_rules import (
    BROKEN,
    IN_SYNC,
    LAGGING,
    STATUS_ORDER,
    MetricRow,
    worst,
)
from offset_pipeline.monitoring.metrics_step import status_counts


def row(group: str, partition: int, sync_status: str) -> MetricRow:
    return MetricRow(0, group, "t", partition, "idc1", "idc2", 5, 5, 0, 0, True, 0, 0.0, True, True, True,
                     "header_exact", "header_anchor", sync_status)


def test_a_group_counts_once_under_its_worst_partition():
    rows = [row("a", 0, IN_SYNC), row("a", 1, BROKEN), row("b", 0, LAGGING), row("b", 1, IN_SYNC), row("c", 0, IN_SYNC)]
    statuses, groups = status_counts(rows)
    assert statuses == Counter({IN_SYNC: 3, BROKEN: 1, LAGGING: 1})
    assert groups == Counter({BROKEN: 1, LAGGING: 1, IN_SYNC: 1})


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(STATUS_ORDER)), max_size=40))
def test_groups_per_worst_status_match_the_per_group_definition(cells):
    rows = [row(g, i, status) for i, (g, status) in enumerate(cells)]
    _, groups = status_counts(rows)
    expected = Counter(worst(s for g2, s in cells if g2 == g) for g in {g for g, _ in cells})
    assert groups == expected
    assert sum(groups.values()) == len({g for g, _ in cells})
