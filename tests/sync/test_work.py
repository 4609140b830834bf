"""build_work: direction per group from members, offset movement and the previous direction; and
the history reads from ClickHouse that feed it."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offset_pipeline.resources import ClickHouseResource
from offset_pipeline.storage import snapshots, translations
from offset_pipeline.storage.history import direction_history, previous_snapshot_id
from offset_pipeline.storage.snapshots import SnapshotRow
from offset_pipeline.sync.work import build_work
from offset_pipeline.translation.direction import DirectionHistory
from offset_pipeline.sync.offset_sync_stamps import offset_syncs_from_column
from offset_pipeline.translation import Anchor, CaughtUpPoint, OffsetSyncFacts, SyncPair, TranslationStatus

CLUSTERS = ("idc1", "idc2")
G = 'g "q" ü'


def rows(group=G, *, members=(0, 0), committed=({("t", 0): 10}, {("t", 0): 4}), logs=(0, 20)):
    """Snapshot rows of one group: members and committed offsets per cluster (idc1, idc2)."""
    out = []
    parts = sorted(set(committed[0]) | set(committed[1]))
    for cluster, m, offsets in zip(CLUSTERS, members, committed):
        for topic, partition in parts:
            out.append((cluster, group, m, topic, partition, offsets.get((topic, partition)), True, *logs, "CreateTime"))
    return out


def history(before=None, written=None, previous=None):
    return DirectionHistory(
        committed_before=before, written_by_sync=written or {}, previous_active=previous or {},
    )


CASES = [
    # (name, members, committed now, history, expected active or status)
    ("members decide", (1, 0), None, history(), "idc1"),
    ("members on idc2 decide", (0, 2), None, history(), "idc2"),
    ("members on both: split brain", (1, 1), None, history(), TranslationStatus.SPLIT_BRAIN),
    ("first cycle, no members: undetermined", (0, 0), None, history(), TranslationStatus.DIRECTION_UNDETERMINED),
    ("no members, moved on idc1", (0, 0), None,
     history(before={("idc1", G): {("t", 0): 8}, ("idc2", G): {("t", 0): 4}}), "idc1"),
    ("no members, moved on idc2", (0, 0), None,
     history(before={("idc1", G): {("t", 0): 10}, ("idc2", G): {("t", 0): 2}}), "idc2"),
    ("idc2 moved only by the sync's own commit: idc1", (0, 0), None,
     history(before={("idc1", G): {("t", 0): 8}, ("idc2", G): {("t", 0): 2}}, written={("idc2", G): {("t", 0): 4}}),
     "idc1"),
    ("moved on both without members: split brain", (0, 0), None,
     history(before={("idc1", G): {("t", 0): 8}, ("idc2", G): {("t", 0): 2}}), TranslationStatus.SPLIT_BRAIN),
    ("no movement: previous direction kept", (0, 0), None,
     history(before={("idc1", G): {("t", 0): 10}, ("idc2", G): {("t", 0): 4}}, previous={G: "idc2"}), "idc2"),
    ("group new since the previous snapshot: its offsets are movement", (0, 0),
     ({("t", 0): 10}, {}), history(before={}), "idc1"),
]


@pytest.mark.parametrize("name, members, committed, hist, expected", CASES, ids=[c[0] for c in CASES])
def test_direction_per_group(name, members, committed, hist, expected):
    snapshot = rows(members=members, **({"committed": committed} if committed else {}))
    cycle = build_work(snapshot, {}, {}, CLUSTERS, hist)
    if isinstance(expected, TranslationStatus):
        assert cycle.work == []
        assert [r.status for r in cycle.undecided] == [expected]
        assert cycle.directions[G].active is None
    else:
        assert cycle.undecided == []
        assert [(w["active"], w["standby"]) for w in cycle.work] == [(expected, ({*CLUSTERS} - {expected}).pop())]
        assert cycle.directions[G].active == expected


def test_work_rows_carry_both_sides_the_kept_anchor_and_point_and_the_shape():
    snapshot = rows(members=(1, 0), committed=({("t", 0): 10, ("t", 1): 3}, {("t", 0): 4}))
    anchors = {(G, "t", 0, "idc1", "idc2"): Anchor("idc1", "idc2", 9, 3)}
    points = {(G, "t", 0, "idc1", "idc2"): CaughtUpPoint("idc1", "idc2", 10, 20),
              (G, "t", 1, "idc2", "idc1"): CaughtUpPoint("idc2", "idc1", 3, 5)}  # the other direction: not used
    cycle = build_work(snapshot, {"t": "two_way"}, anchors, CLUSTERS, caught_up_points=points)
    by_partition = {w["partition"]: w for w in cycle.work}
    assert by_partition[0] | {} == {
        "group_id": G, "topic": "t", "partition": 0, "active": "idc1", "standby": "idc2", "committed": 10,
        "standby_committed": 4, "active_log_start": 0, "active_log_end": 20, "standby_log_start": 0,
        "standby_log_end": 20, "anchor_active_offset": 9, "anchor_standby_offset": 3, "shape": "two_way",
        "standby_timestamp_type": "CreateTime", "shape_source": "configured",
        "ff_active_offset": 10, "ff_standby_offset": 20, "offset_syncs": None,
    }
    assert by_partition[1]["standby_committed"] is None and by_partition[1]["anchor_active_offset"] is None
    assert (by_partition[1]["ff_active_offset"], by_partition[1]["ff_standby_offset"]) == (None, None)


def test_work_rows_carry_the_offset_syncs_of_their_direction():
    snapshot = rows(members=(1, 0), committed=({("t", 0): 10, ("t", 1): 3}, {("t", 0): 4}))
    syncs = OffsetSyncFacts((SyncPair(5, 4, 8),))
    work = build_work(snapshot, {"t": "one_way:idc1"}, {}, CLUSTERS, offset_syncs={
        ("t", 0, "idc1", "idc2"): syncs, ("t", 1, "idc2", "idc1"): OffsetSyncFacts(unreadable="other direction"),
    }).work
    by_partition = {w["partition"]: w for w in work}
    assert offset_syncs_from_column(by_partition[0]["offset_syncs"]) == syncs
    assert by_partition[1]["offset_syncs"] is None
    # a direction whose topic is read: a partition without pairs names why (none yet, or unreadable)
    unreadable = OffsetSyncFacts(unreadable="idc1: mm2-offset-syncs.idc2.internal does not exist")
    work = build_work(snapshot, {"t": "one_way:idc1"}, {}, CLUSTERS, offset_syncs={("t", 0, "idc1", "idc2"): syncs},
                      offset_syncs_default={("idc1", "idc2"): unreadable, ("idc2", "idc1"): OffsetSyncFacts()}).work
    by_partition = {w["partition"]: w for w in work}
    assert offset_syncs_from_column(by_partition[0]["offset_syncs"]) == syncs
    assert offset_syncs_from_column(by_partition[1]["offset_syncs"]) == unreadable


def test_a_configured_shape_wins_over_a_detected_one():
    snapshot = rows(members=(1, 0), committed=({("t", 0): 10, ("u", 0): 3, ("v", 0): 1}, {}))
    work = build_work(snapshot, {"t": "two_way"}, {}, CLUSTERS, detected_shapes={"t": "one_way:idc1", "u": "one_way:idc1"}).work
    by_topic = {w["topic"]: (w["shape"], w["shape_source"]) for w in work}
    assert by_topic == {"t": ("two_way", "configured"), "u": ("one_way:idc1", "detected"), "v": ("", "")}


def test_work_rows_carry_the_standby_timestamp_type_of_a_present_topic_only():
    snapshot = [
        ("idc1", G, 1, "t", 0, 5, True, 0, 9, "CreateTime"),
        ("idc2", G, 0, "t", 0, 2, True, 0, 9, "LogAppendTime"),
        ("idc1", G, 1, "u", 0, 5, True, 0, 9, "CreateTime"),
        ("idc2", G, 0, "u", 0, None, False, None, None, "LogAppendTime"),  # missing: not a fact
    ]
    by_topic = {w["topic"]: w for w in build_work(snapshot, {}, {}, CLUSTERS).work}
    assert by_topic["t"]["standby_timestamp_type"] == "LogAppendTime"
    assert by_topic["u"]["standby_timestamp_type"] is None


def test_a_partition_missing_on_the_standby_has_no_log_range():
    snapshot = [
        ("idc1", G, 1, "t", 0, 5, True, 0, 9, "CreateTime"),
        ("idc2", G, 0, "t", 0, None, False, None, None, ""),
    ]
    (row,) = build_work(snapshot, {}, {}, CLUSTERS).work
    assert (row["standby_log_start"], row["standby_log_end"], row["active_log_end"]) == (None, None, 9)


def test_rows_of_a_third_cluster_are_refused():
    with pytest.raises(ValueError, match="idc3"):
        build_work([("idc3", G, 0, "t", 0, 1, True, 0, 2, "")], {}, {}, CLUSTERS)


offsets = st.dictionaries(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2)), st.integers(0, 50), max_size=4)


@given(
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.tuples(offsets, offsets),
    st.one_of(st.none(), st.tuples(offsets, offsets)),
    st.one_of(st.none(), st.sampled_from(CLUSTERS)),
)
def test_every_group_partition_gets_one_outcome_and_standbys_have_no_members(members, now, before, previous):
    snapshot = rows(members=members, committed=now)
    hist = history(
        before=None if before is None else {("idc1", G): before[0], ("idc2", G): before[1]},
        previous={G: previous} if previous else None,
    )
    cycle = build_work(snapshot, {}, {}, CLUSTERS, hist)
    keys = {(topic, partition) for _, _, _, topic, partition, *_ in snapshot}
    done = [(w["topic"], w["partition"]) for w in cycle.work] + [(r.topic, r.partition) for r in cycle.undecided]
    assert sorted(done) == sorted(keys)
    member_count = dict(zip(CLUSTERS, members))
    for w in cycle.work:
        assert member_count[w["standby"]] == 0
    if cycle.work:
        assert not cycle.undecided  # a group is decided as a whole
    if before is None and members == (0, 0) and snapshot:
        assert cycle.directions[G].basis.value in ("previous", "undetermined")


def test_history_reads_previous_snapshot_commits_and_directions(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    snapshots.ensure_table(client)
    translations.ensure_tables(client)
    t0 = int(time.time()) * 1000  # recent: rows older than the tables' TTL (storage/retention.py) expire

    def snap(sid, ms, cluster, committed):
        return SnapshotRow(sid, ms, cluster, G, "Empty", 0, "t", 0, committed, True, 0, 20, 20)

    snapshots.insert_rows(client, [snap("s1", t0 + 1000, "idc1", 8), snap("s1", t0 + 1000, "idc2", 2),
                                   snap("s2", t0 + 2000, "idc1", 10), snap("s2", t0 + 2000, "idc2", 4)])
    assert previous_snapshot_id(client, "s2") == "s1"
    assert previous_snapshot_id(client, "s1") is None

    first = direction_history(client, "s1")
    assert first.committed_before is None and first.written_by_sync == {}

    hist = direction_history(client, "s2")
    assert hist.committed_before == {("idc1", G): {("t", 0): 8}, ("idc2", G): {("t", 0): 2}}
    assert hist.written_by_sync == {}  # no commits table yet
    client.command(
        "CREATE TABLE offset_commits (snapshot_id String, cycle_time DateTime64(3, 'UTC'), group_id String, "
        "topic String, partition UInt32, standby String, new_offset Nullable(Int64), applied Bool) "
        "ENGINE = MergeTree ORDER BY snapshot_id"
    )
    at = datetime.fromtimestamp((t0 + 1500) / 1000, tz=timezone.utc)  # each run commits after its snapshot
    client.insert("offset_commits", [["s1", at, G, "t", 0, "idc2", 4, True], ["s1", at, G, "t", 1, "idc2", 9, False],
                                     ["s2", at, G, "t", 0, "idc2", 6, True]],
                  column_names=["snapshot_id", "cycle_time", "group_id", "topic", "partition", "standby",
                                "new_offset", "applied"])
    hist = direction_history(client, "s2")
    assert hist.written_by_sync == {("idc2", G): {("t", 0): 4}}  # applied writes of the previous run only

    translations.insert_translations(client, [
        {"snapshot_id": sid, "cycle_time": ms, "group_id": G, "topic": "t", "partition": 0, "active": active,
         "standby": standby, "committed": 1, "standby_committed": None, "strategy": "none", "standby_offset": None,
         "status": "no_anchor", "reason": "", "expected_duplicates": None, "timestamp_inversion": False,
         "anchor_active_offset": None, "anchor_standby_offset": None, "safe_bound": None}
        for sid, ms, active, standby in (("s0", t0 + 500, "idc2", "idc1"), ("s1", t0 + 1000, "idc1", "idc2"),
                                         ("s2", t0 + 2000, "", ""))
    ])
    assert direction_history(client, "s2").previous_active == {G: "idc1"}
    # the moved-on-idc1 history, with the sync's own write on idc2 ignored, decides idc1
    cycle = build_work(
        [("idc1", G, 0, "t", 0, 10, True, 0, 20, ""), ("idc2", G, 0, "t", 0, 4, True, 0, 20, "")], {}, {}, CLUSTERS, hist,
    )
    assert cycle.directions[G].active == "idc1" and cycle.directions[G].basis.value == "offset_movement"


def test_ensure_table_adds_timestamp_type_to_a_snapshot_table_from_before_it(chdb_dsn):
    client = ClickHouseResource(dsn=chdb_dsn).get_client()
    old_ddl = snapshots.DDL.replace(",\n    timestamp_type   LowCardinality(String) DEFAULT ''", "").replace(
        ",\n    read_error       String DEFAULT ''", "")
    assert "timestamp_type" not in old_ddl and "read_error" not in old_ddl
    client.command(old_ddl)
    t0 = int(time.time()) * 1000  # recent: rows older than the table's TTL (storage/retention.py) expire
    old = SnapshotRow("s0", t0 + 500, "idc1", G, "Empty", 0, "t", 0, 3, True, 0, 9, 9)
    client.insert(snapshots.TABLE, [["s0", datetime.fromtimestamp(t0 / 1000, tz=timezone.utc), "idc1", G, "t", 0]],
                  column_names=["snapshot_id", "snapshot_time", "cluster", "group_id", "topic", "partition"])
    snapshots.ensure_table(client)
    snapshots.ensure_table(client)  # idempotent
    snapshots.insert_rows(client, [replace(old, timestamp_type="LogAppendTime", read_error="idc1 unavailable")])
    assert client.query(f"SELECT timestamp_type, read_error FROM {snapshots.TABLE} ORDER BY snapshot_time").result_rows == [
        ("", ""), ("LogAppendTime", "idc1 unavailable")]


# --- facts that were not read: never guessed, named per group or partition -------------

def with_state(snapshot, cluster, state, error, partition=None):
    """``snapshot`` rows with ``cluster``'s rows (or one partition's) given a group state and read error."""
    out = []
    for row in snapshot:
        hit = row[0] == cluster and (partition is None or row[4] == partition)
        out.append((*row, state if hit else "Empty", error if hit else ""))
    return out


UNREAD_CASES = [
    # (name, cluster, state, partition, expected status per partition, expected reason fragment)
    ("standby cluster unavailable", "idc2", "UNAVAILABLE", None,
     {0: TranslationStatus.CLUSTER_UNAVAILABLE, 1: TranslationStatus.CLUSTER_UNAVAILABLE}, "idc2: connection refused"),
    ("active cluster unavailable", "idc1", "UNAVAILABLE", None,
     {0: TranslationStatus.CLUSTER_UNAVAILABLE, 1: TranslationStatus.CLUSTER_UNAVAILABLE}, "idc1: connection refused"),
    ("group unreadable on the standby", "idc2", "UNREADABLE", None,
     {0: TranslationStatus.CLUSTER_UNAVAILABLE, 1: TranslationStatus.CLUSTER_UNAVAILABLE}, "idc2: connection refused"),
    ("one partition's log range unreadable on the standby: the other is translated", "idc2", "Empty", 1,
     {0: None, 1: TranslationStatus.CLUSTER_UNAVAILABLE}, "idc2: connection refused"),
    ("one partition's log range unreadable on the active cluster", "idc1", "Empty", 0,
     {0: TranslationStatus.CLUSTER_UNAVAILABLE, 1: None}, "idc1: connection refused"),
]


@pytest.mark.parametrize("name, cluster, state, partition, expected, reason", UNREAD_CASES, ids=[c[0] for c in UNREAD_CASES])
def test_unread_facts_are_never_translated_and_say_why(name, cluster, state, partition, expected, reason):
    snapshot = with_state(
        rows(members=(1, 0), committed=({("t", 0): 10, ("t", 1): 5}, {("t", 0): 4, ("t", 1): 2})),
        cluster, state, "connection refused", partition,
    )
    anchors = {(G, "t", 1, "idc1", "idc2"): Anchor("idc1", "idc2", 3, 3)}
    cycle = build_work(snapshot, {}, anchors, CLUSTERS)
    statuses = {r.partition: r.status for r in cycle.undecided}
    translated = {w["partition"] for w in cycle.work}
    for p, status in expected.items():
        if status is None:
            assert p in translated and p not in statuses
        else:
            assert statuses[p] is status and p not in translated
    for result in cycle.undecided:
        assert reason in result.reason
        assert result.standby_offset is None
        if result.active and result.partition == 1:  # a partition-level outage keeps the anchor kept so far
            assert result.anchor_to_keep == Anchor("idc1", "idc2", 3, 3)


REFUSED_GROUP = 'KafkaException: KafkaError{code=GROUP_AUTHORIZATION_FAILED,val=30,str="Broker: Group authorization failed"}'
REFUSED_TOPIC = 'KafkaException: KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,str="Broker: Topic authorization failed"}'
REFUSED_CASES = [
    # (name, cluster, state, partition, error, expected status per partition, reason fragments)
    ("group hidden on the active", "idc1", "UNREADABLE", None, REFUSED_GROUP,
     {0: TranslationStatus.NOT_AUTHORIZED, 1: TranslationStatus.NOT_AUTHORIZED},
     ["not authorized on idc1", f"may not read group {G!r}", f"--operation Read --group {G!r}"]),
    ("topic refused on the standby: that partition only", "idc2", "Empty", 1, REFUSED_TOPIC,
     {0: None, 1: TranslationStatus.NOT_AUTHORIZED},
     ["not authorized on idc2", "may not read topic 't'", "--operation Read --operation DescribeConfigs --topic 't'"]),
    ("an outage stays cluster_unavailable", "idc1", "UNREADABLE", None, "KafkaException: _TIMED_OUT",
     {0: TranslationStatus.CLUSTER_UNAVAILABLE, 1: TranslationStatus.CLUSTER_UNAVAILABLE}, ["_TIMED_OUT"]),
]


@pytest.mark.parametrize("name, cluster, state, partition, error, expected, says", REFUSED_CASES,
                         ids=[c[0] for c in REFUSED_CASES])
def test_a_read_refused_by_acl_is_not_authorized_naming_cluster_resource_and_right(name, cluster, state, partition,
                                                                                 error, expected, says):
    snapshot = with_state(rows(members=(1, 0), committed=({("t", 0): 10, ("t", 1): 5}, {("t", 0): 4, ("t", 1): 2})),
                          cluster, state, error, partition)
    cycle = build_work(snapshot, {}, {}, CLUSTERS)
    statuses = {r.partition: r.status for r in cycle.undecided}
    assert {p: statuses.get(p) for p in expected} == expected
    assert {w["partition"] for w in cycle.work} == {p for p, status in expected.items() if status is None}
    for result in cycle.undecided:
        for text in says:
            assert text in result.reason


def test_rows_without_the_new_columns_still_build_work():
    """Rows of a table from before group_state/read_error (10 values) are read as fully read."""
    assert len(build_work(rows(members=(1, 0)), {}, {}, CLUSTERS).work) == 1
