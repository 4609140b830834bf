"""The sensors' intervals come from the environment: unset means the documented default, a positive
whole number is taken, and anything else fails at load time naming the variable and the value (a
bare ``int()`` used to raise a ``ValueError`` that named neither)."""

from __future__ import annotations

import pytest

from offset_pipeline.sensors.run_retention import retention_interval_s
from offset_pipeline.sensors.stale_partitions import stale_sensor_interval_s
from offset_pipeline.sensors.sync_cadence import sync_interval_s
from offset_pipeline.settings import SettingsError

INTERVALS = [
    ("OFFSET_PIPELINE_SYNC_INTERVAL_S", sync_interval_s, 30),
    ("OFFSET_PIPELINE_STALE_SENSOR_INTERVAL_S", stale_sensor_interval_s, 10),
    ("OFFSET_PIPELINE_RUN_RETENTION_INTERVAL_S", retention_interval_s, 600),
]


@pytest.mark.parametrize(("variable", "read", "default"), INTERVALS)
def test_unset_or_empty_is_the_default(monkeypatch, variable, read, default):
    monkeypatch.delenv(variable, raising=False)
    assert read() == default
    monkeypatch.setenv(variable, "")
    assert read() == default


@pytest.mark.parametrize(("variable", "read", "default"), INTERVALS)
def test_a_positive_whole_number_is_taken(monkeypatch, variable, read, default):
    monkeypatch.setenv(variable, "7")
    assert read() == 7


@pytest.mark.parametrize(("variable", "read", "default"), INTERVALS)
@pytest.mark.parametrize("bad", ["30s", "0", "-5", "2.5", "ten"])
def test_anything_else_fails_naming_the_variable_and_the_value(monkeypatch, variable, read, default, bad):
    monkeypatch.setenv(variable, bad)
    with pytest.raises(SettingsError) as raised:
        read()
    assert variable in str(raised.value) and repr(bad) in str(raised.value)
