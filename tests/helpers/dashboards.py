"""Every Grafana panel's SQL, as Grafana expands it, run on the rows real sync cycles wrote."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from devstack.grafana_sql import expand
from offset_pipeline.storage import dashboards


def check_every_panel(client, group: str, topic: str, with_rows=None,
                      clusters: tuple[str, ...] = ("idc1", "idc2")) -> dict[str, list[tuple]]:
    """Run every panel and variable query for the last hour, filtered to ``group`` and ``topic`` (and
    the ``cluster`` variable set to ``clusters``); each must run, and return rows of the panel's columns
    (only the panels titled in ``with_rows``, when given, must return rows; otherwise all but the
    sparse ones). Returns panel title -> rows."""
    now = datetime.now(timezone.utc)
    variables = {"cluster": list(clusters), "group": [group], "topic": [topic]}
    out = {}
    for _, (_, panels) in dashboards.DASHBOARDS.items():
        for panel in panels:
            sql = expand(panel.sql, time_from=now - timedelta(hours=1), time_to=now + timedelta(minutes=1),
                         interval_s=60, variables=variables)
            result = client.query(sql)
            out[panel.title] = result.result_rows
            optional = panel.title not in with_rows if with_rows is not None else panel.sparse
            if optional and not result.result_rows:
                continue  # (the embedded engine's client names no columns for an empty result)
            assert tuple(result.column_names) == panel.columns, panel.title
            assert result.result_rows, f"{panel.title}: no rows"
    for name, _, sql in dashboards.VARIABLES:
        rows = client.query(expand(sql, time_from=now, time_to=now, interval_s=60, variables=variables)).result_rows
        assert rows or with_rows is not None, name
    return out

