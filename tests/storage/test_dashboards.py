"""The Grafana dashboards: the files match the code that renders them, the provisioning points at
the data source they use, and every panel's SQL (as Grafana expands it) runs against ClickHouse.
The SQL runs on rows of real sync cycles in tests/assets/test_metrics_asset.py and others
(``check_every_panel``, tests/helpers/dashboards.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from offset_pipeline.storage import dashboards
from devstack.grafana_sql import expand, singlequote

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_dashboards_are_the_rendered_ones():
    rendered = dashboards.rendered()
    committed = {p.name: p.read_text() for p in (REPO / "grafana" / "dashboards").glob("*.json")}
    assert committed == rendered, "run: .venv/bin/python -m offset_pipeline.storage.dashboards"


def test_every_panel_and_variable_uses_the_provisioned_data_source():
    provisioning = (REPO / "grafana" / "provisioning" / "datasources" / "clickhouse.yaml").read_text()
    assert f"uid: {dashboards.DATASOURCE['uid']}" in provisioning
    assert f"type: {dashboards.DATASOURCE['type']}" in provisioning
    for text in dashboards.rendered().values():
        model = json.loads(text)
        assert model["panels"] and {v["name"] for v in model["templating"]["list"]} == {"cluster", "group", "topic"}
        for item in model["panels"] + model["templating"]["list"]:
            assert item["datasource"] == dashboards.DATASOURCE
        for panel in model["panels"]:
            (target,) = panel["targets"]
            assert target["editorType"] == "sql" and target["rawSql"]
            expected = ("table", 1) if panel["type"] == "table" else ("timeSeries", 0)
            assert (target["queryType"], target["format"]) == expected, panel["title"]


def test_expansion_quotes_values_and_refuses_leftovers():
    assert singlequote(["a", "it's", "back\\slash"]) == "'a','it\\'s','back\\\\slash'"
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    sql = expand("SELECT $__timeInterval(m) FROM x WHERE $__timeFilter(m) AND g IN (${group:singlequote})",
                 time_from=t0, time_to=t0 + timedelta(hours=1), interval_s=60, variables={"group": ["g'1"]})
    assert sql == ("SELECT toStartOfInterval(toDateTime(m), INTERVAL 60 second) FROM x WHERE m >= toDateTime(1767225600) "
                   "AND m <= toDateTime(1767229200) AND g IN ('g\\'1')")
    with pytest.raises(KeyError):
        expand("${topic:singlequote}", time_from=t0, time_to=t0, interval_s=60, variables={})
    with pytest.raises(ValueError):
        expand("$__unknownMacro", time_from=t0, time_to=t0, interval_s=60, variables={})


