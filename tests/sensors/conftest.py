"""Fixtures of the sensors' tests."""

from __future__ import annotations

import pytest

from tests.conftest import started_pair


@pytest.fixture
def own_pair(kafka_jars, tmp_path):
    """Two clusters of the test's own: its daemon's sensors commit standby offsets for every group they
    see, which the session's shared pair must not get."""
    with started_pair(kafka_jars, tmp_path) as pair:
        yield pair
