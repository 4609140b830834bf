"""docs/concepts/statuses.md names every status the code defines.

The names are collected from the code itself (its enums, ``STATUS_ORDER``, the readiness verdicts and
the fast-forward outcome constants), never from a list kept here: a status added to the code and not to
the page fails this test. A name counts as documented when it appears on the page in backticks, as the
page writes every name.
"""

from __future__ import annotations

import ast
import re
from enum import Enum
from pathlib import Path

import pytest

from offset_pipeline.audit.failover_cost import CostStatus
from offset_pipeline.cli.readiness import STALE_ROW
from offset_pipeline.continuous.revisit_rules import RevisitReason
from offset_pipeline.fast_forward.stale_candidates import Rejection
from offset_pipeline.kafka_io.connection_errors import ConnectionCause
from offset_pipeline.mirror_check.rules import MirrorStatus, Proof
from offset_pipeline.monitoring.metric_rules import STATUS_ORDER
from offset_pipeline.readiness.rules import GroupReadiness, NotReady
from offset_pipeline.sync.commit_rules import CommitDecision
from offset_pipeline.translation.connect_offsets import ConnectOffsetProblem
from offset_pipeline.translation.direction import DirectionBasis
from offset_pipeline.translation.headers import HeaderProblem
from offset_pipeline.translation.offset_sync import OffsetSyncProblem
from offset_pipeline.translation.result import Strategy, TranslationStatus

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "concepts" / "statuses.md"
FAST_FORWARD_OUTCOMES = REPO / "offset_pipeline" / "storage" / "fast_forwards.py"

ENUMS: dict[str, type[Enum]] = {
    "translation statuses": TranslationStatus,
    "strategies": Strategy,
    "commit decisions": CommitDecision,
    "readiness reasons": NotReady,
    "mirror-check statuses": MirrorStatus,
    "mirror-check proofs": Proof,
    "fast-forward rejections": Rejection,
    "failover audit statuses": CostStatus,
    "revisit reasons": RevisitReason,
    "direction bases": DirectionBasis,
    "origin header problems": HeaderProblem,
    "connection causes": ConnectionCause,
    "offset-sync record problems": OffsetSyncProblem,
    "Connect offsets record problems": ConnectOffsetProblem,
}


def readiness_verdicts() -> set[str]:
    """The verdict words a group's readiness is shown with: ``ready`` and ``not ready``."""
    def verdict(ready: bool) -> str:
        group = GroupReadiness("g", "a", "b", 1, ready, None, None, None, {} if ready else {"x": 1})
        return group.verdict.split(":")[0]
    return {verdict(True), verdict(False), STALE_ROW}


def fast_forward_outcomes() -> set[str]:
    """``offset_fast_forwards.outcome`` values: the module's constants named after their value
    (``FAST_FORWARDED = "fast_forwarded"``), read from its source."""
    tree = ast.parse(FAST_FORWARD_OUTCOMES.read_text())
    out = set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                and node.targets[0].id.lower() == node.value.value):
            out.add(node.value.value)
    return out


FAMILIES: dict[str, set[str]] = {
    **{family: {member.value for member in enum} for family, enum in ENUMS.items()},
    "monitoring statuses": set(STATUS_ORDER),
    "readiness verdicts": readiness_verdicts(),
    "fast-forward outcomes": fast_forward_outcomes(),
}


def documented(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


def test_every_family_was_collected() -> None:
    """The collection itself found names (an empty family would pass the check below vacuously)."""
    assert {family for family, names in FAMILIES.items() if not names} == set()
    assert len(FAMILIES["translation statuses"]) >= 30
    assert FAMILIES["fast-forward outcomes"] >= {"fast_forwarded", "left_alone"}
    assert FAMILIES["readiness verdicts"] == {"ready", "not ready", "sync_not_running"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_statuses_page_names_every_status(family: str) -> None:
    missing = sorted(FAMILIES[family] - documented(PAGE.read_text()))
    assert missing == [], f"{PAGE.relative_to(REPO)} does not name these {family}: {missing}"


def test_a_name_left_out_is_found_missing() -> None:
    """The check can fail: the page without one of its names does not document that name."""
    text = PAGE.read_text()
    name = TranslationStatus.OFFSET_SYNC_UNCONFIRMED.value
    assert name in documented(text)
    assert name not in documented(text.replace(f"`{name}`", name))
