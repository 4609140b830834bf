"""``offset-pipeline readiness`` prints what the newest mirror check said of the directions it shows."""

from __future__ import annotations

from offset_pipeline.cli.readiness import mirror_lines
from offset_pipeline.storage.mirror_checks import MirrorCheckRow
from offset_pipeline.storage.readiness import ReadinessRow


def row(active: str, standby: str) -> ReadinessRow:
    return ReadinessRow("s", 0, "g", active, standby, 1, True, 0, 0, 1.0, {}, "")


def check(topic: str, active: str, standby: str, proof: str, status: str) -> MirrorCheckRow:
    return MirrorCheckRow("c", 0, topic, active, standby, proof, status, f"'{topic}' {active}->{standby}: why")


def test_the_directions_shown_get_their_mirror_verdicts():
    mirror = [check("orders", "a", "b", "origin_headers", "origin_headers"),
              check("payments", "a", "b", "none", "not_mirrored"),
              check("orders", "b", "a", "none", "renamed_remote_topic")]  # a direction no group is in
    text = mirror_lines([row("a", "b")], mirror)
    assert text.splitlines() == [
        "mirror a->b: 1 of 2 topics proven",
        "  payments: none (not_mirrored): 'payments' a->b: why",
    ]


def test_no_check_yet_is_said():
    assert mirror_lines([row("a", "b")], [check("orders", "b", "a", "none", "x")]).startswith("mirror: not checked yet")
