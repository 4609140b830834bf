"""OFFSET_PIPELINE_OFFSET_SYNCS: which offset-syncs topic the sync reads for each direction
(settings.offset_syncs_topics); every malformed entry fails at load time, named."""

from __future__ import annotations

import pytest

from offset_pipeline.settings import OffsetSyncsTopic, SettingsError, offset_syncs_topics

PLAIN = {"OFFSET_PIPELINE_MIRROR_WRITES_HEADERS": "0"}


def test_unset_reads_mirror_maker_2s_default_names_only_for_a_mirror_without_headers():
    assert offset_syncs_topics({}) == []  # origin headers prove more: no offset syncs read
    assert offset_syncs_topics(PLAIN) == [
        OffsetSyncsTopic("idc1", "idc2", "idc1", "mm2-offset-syncs.idc2.internal"),
        OffsetSyncsTopic("idc2", "idc1", "idc2", "mm2-offset-syncs.idc1.internal"),
    ]
    assert offset_syncs_topics({}, writes_headers=False) == offset_syncs_topics(PLAIN)  # a run's config
    assert offset_syncs_topics(PLAIN, writes_headers=True) == []


def test_entries_name_the_location_another_topic_or_none():
    env = {**PLAIN, "OFFSET_PIPELINE_CLUSTERS": "us-east,dc-a",
           "OFFSET_PIPELINE_OFFSET_SYNCS": "us-east->dc-a=target, dc-a->us-east=us-east:my.syncs"}
    assert offset_syncs_topics(env) == [
        OffsetSyncsTopic("us-east", "dc-a", "dc-a", "mm2-offset-syncs.us-east.internal"),
        OffsetSyncsTopic("dc-a", "us-east", "us-east", "my.syncs"),
    ]
    assert offset_syncs_topics({"OFFSET_PIPELINE_OFFSET_SYNCS": "idc2->idc1=off"}) == [
        OffsetSyncsTopic("idc1", "idc2", "idc1", "mm2-offset-syncs.idc2.internal")]  # the other keeps the default
    assert offset_syncs_topics({**PLAIN, "OFFSET_PIPELINE_OFFSET_SYNCS": "off"}) == []


@pytest.mark.parametrize("value, named", [
    ("idc1->idc2", "expected SOURCE->TARGET"),
    ("idc1->idc3=source", "not a configured cluster"),
    ("idc1->idc1=source", "not to 'idc1' itself"),
    ("idc1->idc2=source,idc1->idc2=target", "given twice"),
    ("idc1->idc2=idc3:topic", "not a configured cluster"),
    ("idc1->idc2=idc1:bad topic", "not a Kafka topic name"),
    ("idc1->idc2=somewhere", "expected source, target, CLUSTER:TOPIC or off"),
])
def test_malformed_entries_are_named(value, named):
    with pytest.raises(SettingsError, match=named):
        offset_syncs_topics({"OFFSET_PIPELINE_OFFSET_SYNCS": value})
