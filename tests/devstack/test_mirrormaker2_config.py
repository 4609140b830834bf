"""The dev harness's MirrorMaker 2 configuration: with the transform both ways, and plain one way."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.errors import DevStackError
from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import MirrorMaker2Config, mm2_properties

CLUSTERS = (MirrorEndpoint("us-east", "127.0.0.1:1"), MirrorEndpoint("dc-a", "127.0.0.1:2"))


def test_with_the_transform_both_flows_drop_copies_then_mark_the_origin():
    props = mm2_properties(MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083))
    for flow in ("us-east->dc-a", "dc-a->us-east"):
        assert props[f"{flow}.enabled"] == "true"
        assert props[f"{flow}.transforms"] == "dropCopies,origin"
        assert props[f"{flow}.predicates.isCopy.name"] == "IDC"
        assert props[f"{flow}.transforms.origin.type"] == "io.offsetpipeline.connect.OriginHeaders"
    assert props["emit.offset-syncs.enabled"] == "false"


def test_without_the_transform_one_flow_runs_otherwise_configured_the_same():
    config = MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, origin_headers=False, one_way=True)
    props = mm2_properties(config)
    assert config.flows == (("us-east", "dc-a"),)
    assert (props["us-east->dc-a.enabled"], props["dc-a->us-east.enabled"]) == ("true", "false")
    assert not [key for key in props if "transforms" in key or "predicates" in key]
    with_transform = mm2_properties(MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, one_way=True))
    assert {k: v for k, v in with_transform.items() if "transforms" not in k and "predicates" not in k} == props


def test_plain_mirrormaker_both_ways_is_refused():
    with pytest.raises(DevStackError, match="one way only"):
        MirrorMaker2Config(CLUSTERS, Path("/tmp/mm2"), rest_port=8083, origin_headers=False)
