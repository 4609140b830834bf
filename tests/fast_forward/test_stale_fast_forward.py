"""Stale low-traffic partitions on the real clusters (docs/operating/fast-forward.md): the sensor finds them
from the snapshot history, the fast-forward job re-checks live and commits, a failover afterwards
loses and repeats nothing, the partitions that must be left alone are, each with its reason, and
the sync age stays bounded with the sensor and grows without it.

The window is shortened to seconds; sync cycles, sensor ticks and fast-forward runs are executed
in this process in order, as the daemon would launch them.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import ConsumerGroupState

from devstack.mirror import DataMirror, MirrorConfig
from devstack.mirrormaker2 import mirror_positions_setting
from offset_pipeline.kafka_io.mirror_positions import read_mirror_positions
from offset_pipeline.resources.mirrors import MirrorPositionGroup, MirrorsResource
from offset_pipeline.settings import mirror_position_groups
from tests.conftest import wait_for
from tests.helpers.dashboards import check_every_panel
from tests.helpers.fast_forward import WINDOW_S, StaleStack, fail_over, run_until_requested, skip_message
from tests.helpers.groups import Member
from tests.helpers.one_partition import committed, mirrored, produce, read_values
from tests.helpers.records import log_end

pytestmark = pytest.mark.kafka

CYCLE_S, TICK_S = 4.0, 1.0  # the sync-age test's cadence: a sync cycle every 4 s, a sensor tick every second


def session_mirror_positions() -> MirrorsResource:
    """Where the session's MirrorMaker 2 keeps its positions: each flow's Connect offsets topic on its
    target, as ``bin/up`` configures the product for the stack's MirrorMaker 2."""
    setting = mirror_positions_setting(["idc1", "idc2"])
    return MirrorsResource(position_groups=[
        MirrorPositionGroup(**entry) for entry in mirror_position_groups({"OFFSET_PIPELINE_MIRROR_POSITIONS": setting})
    ])


def default_mirrors() -> MirrorsResource:
    return MirrorsResource(position_groups=[
        MirrorPositionGroup(source=s, target=t, stored_on=t, group_id=f"offset-pipeline-mirror.{s}-to-{t}")
        for s, t in (("idc1", "idc2"), ("idc2", "idc1"))
    ])


class DedicatedMirrors:
    """Both devstack mirrors for one topic (outside the session mirrors' ``t.*`` pattern), in threads,
    each direction started and stopped by the test. A restart resumes from the committed positions
    (same instance name: same transactional id and positions group)."""

    def __init__(self, kafka_pair, topic: str):
        self.kafka_pair, self.topic = kafka_pair, topic
        self.instance = f"ff-{uuid.uuid4().hex[:6]}"
        self.running: dict[tuple[str, str], tuple[threading.Event, threading.Thread]] = {}

    def config(self, source: str, target: str) -> MirrorConfig:
        return MirrorConfig(self.kafka_pair.endpoint(source), self.kafka_pair.endpoint(target),
                            topic_pattern=rf"^{re.escape(self.topic)}$", metadata_refresh_s=0.5, instance=self.instance)

    def start(self, source: str, target: str) -> None:
        mirror = DataMirror(self.config(source, target))
        stop = threading.Event()
        thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True, name=f"mirror-{source}-{self.instance}")
        thread.start()
        self.running[(source, target)] = (stop, thread)

    def stop(self, source: str, target: str) -> None:
        stop, thread = self.running.pop((source, target))
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive(), f"the {source}->{target} mirror did not stop"

    def close(self) -> None:
        for direction in list(self.running):
            self.stop(*direction)

    def resource(self) -> MirrorsResource:
        return MirrorsResource(position_groups=[
            MirrorPositionGroup(source=s, target=t, stored_on=t, group_id=self.config(s, t).group_id)
            for s, t in (("idc1", "idc2"), ("idc2", "idc1"))
        ])

    def position(self, source: str, target: str) -> int | None:
        """The ``source``->``target`` mirror's committed position, as the pipeline reads it."""
        conf = {"bootstrap.servers": self.kafka_pair.bootstrap(target), "log_level": 3}
        return read_mirror_positions(conf, self.config(source, target).group_id, [(self.topic, 0)]).get((self.topic, 0))


# -- a quiet partition is fast-forwarded, and a failover afterwards loses and repeats nothing ------


def test_a_quiet_low_traffic_partition_is_fast_forwarded_and_fails_over_clean(kafka_pair, session_mirrors, chdb_dsn,
                                                                             topic_name):
    topic = kafka_pair.create_topic(topic_name, partitions=1)
    group = f"low 'traffic' ü {uuid.uuid4().hex[:6]}"
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    produce(idc1, topic, [f"a{i}" for i in range(3)])  # all produced on the active side: no header anchor
    mirrored(kafka_pair, topic)
    member = Member(idc1, group, topic)
    c = log_end(idc1, topic)
    member.commit(topic, {0: c})  # the group processed everything
    # a longer window here: the first cycle starts Spark, which can take longer than WINDOW_S
    stack = StaleStack(kafka_pair, chdb_dsn, [group], [topic], session_mirror_positions(), window_s=20.0)
    try:
        before_first_snapshot = time.time()
        first = stack.cycle()
        assert "no_anchor" in {r[0] for r in stack.client.query(
            "SELECT status FROM offset_translations WHERE snapshot_id = {s:String}", parameters={"s": first.run_id}
        ).result_rows}
        assert committed(idc2, group, topic) is None  # nothing the cycle could sync

        requests, reasons = run_until_requested(stack, 90)
        requested_ms = time.time() * 1000
        [request] = requests
        # The window had to pass first, judged from the snapshots: quiet since no earlier than the
        # first one, and for the whole window (a tick before then said history_shorter_than_window;
        # on a loaded machine the first cycles alone may take the window, and no tick comes earlier).
        stable_since_ms = request.run_config["ops"]["offset_fast_forwards"]["config"]["partitions"][0]["stable_since_ms"]
        assert stable_since_ms >= before_first_snapshot * 1000 and requested_ms - stable_since_ms >= 20_000
        assert all("history_shorter_than_window" in r for r in reasons[:1]), reasons
        assert request.run_key.startswith("fast-forward-")
        config = request.run_config["ops"]["offset_fast_forwards"]["config"]
        assert (config["group_id"], config["active"], config["standby"]) == (group, "idc1", "idc2")
        assert config["partitions"][0]["active_end"] == c

        run = stack.fast_forward(request.run_config)
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        t = log_end(idc2, topic)
        assert (row["outcome"], row["decision"], row["new_offset"], row["applied"]) == ("fast_forwarded", "commit", t, True)
        assert committed(idc2, group, topic) == t
        [check] = run.get_asset_check_evaluations()
        assert check.passed
        assert any(line.startswith("offset-sync fast-forward") and "outcome=fast_forwarded" in line for line in stack.lines)
        ff_metric = stack.metric_rows(group)[-1]
        assert (ff_metric["strategy"], ff_metric["synced"], ff_metric["sync_age_s"], ff_metric["sync_status"]) == (
            "caught_up", True, 0.0, "InSync")

        # The sensor does not request the same quiet state again; the next cycle keeps the point.
        assert not (isinstance(r := stack.tick(), dg.SensorResult) and r.run_requests)
        stack.cycle()
        after = stack.metric_rows(group)[-1]
        assert (after["status"], after["synced"], after["sync_status"]) == ("caught_up", True, "InSync")
        assert committed(idc2, group, topic) == t
        # ... and Grafana shows it (the panels' SQL run as the plugin would)
        title = "Fast-forwards of stale low-traffic partitions"
        panels = check_every_panel(stack.client, group, topic, with_rows={title})
        [shown] = panels[title]
        assert shown[1:4] == (group, topic, 0) and shown[6:8] == ("fast_forwarded", "") and shown[9] == t
    finally:
        member.close()

    # Failover: the group resumes on idc2 from its synced offset.
    lost, read_again = fail_over(kafka_pair, group, topic, c, ["after-failover"])
    assert lost == [] and len(read_values(idc2, topic, 0, t)) == 3
    assert read_again == ["after-failover"]  # 0 duplicates, and the new record is not lost


# -- partitions that must be left alone, each with its reason ----------------------------------


def test_receiving_data_lag_and_a_stopped_mirror_are_left_alone_with_their_reasons(kafka_pair, session_mirrors,
                                                                                  chdb_dsn, topic_name):
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    topic = kafka_pair.create_topic(topic_name, partitions=2)  # p0 keeps receiving data, p1 the group lags
    busy, lagging = f"busy-{uuid.uuid4().hex[:6]}", f"lagging-{uuid.uuid4().hex[:6]}"
    produce(idc1, topic, ["x0", "x1"], partition=0)
    produce(idc1, topic, ["y0", "y1", "y2"], partition=1)
    mirrored(kafka_pair, topic, 0)
    mirrored(kafka_pair, topic, 1)
    busy_member, lag_member = Member(idc1, busy, topic), Member(idc1, lagging, topic)
    lag_member.commit(topic, {1: 1})  # two records left to read
    stop_traffic = threading.Event()

    sent: list[int] = []

    def traffic():  # one record every second on p0, processed at once
        while not stop_traffic.is_set():
            produce(idc1, topic, [f"busy-{len(sent)}"], partition=0)
            end = log_end(idc1, topic, 0)
            busy_member.commit(topic, {0: end})
            sent.append(end)
            stop_traffic.wait(1.0)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    stack = StaleStack(kafka_pair, chdb_dsn, [busy, lagging], [topic], session_mirror_positions())
    try:
        # The busy group's lag is 0 but for a snapshot taken between a record and its commit (under
        # load, its offset and the log end are read seconds apart): some ticks say group_has_lag. So
        # the ticks go on (a dozen at most) until one after the first has seen it receiving data.
        busy_receiving = rf"'{busy}' {re.escape(topic)}\[0\]: receiving_data \(log ends moved"
        reasons = []
        started = time.monotonic()
        while (time.monotonic() - started < WINDOW_S * 2.5 or len(reasons) < 4  # the first cycle may start Spark
               or not any(re.search(busy_receiving, r) for r in reasons[1:])) and len(reasons) < 12:
            stack.cycle()
            result = stack.tick()
            assert not (isinstance(result, dg.SensorResult) and result.run_requests), (
                f"nothing here is stale; traffic sent {sent}, alive {thread.is_alive()}: {result}")
            reasons.append(result.skip_reason.skip_message if isinstance(result, dg.SensorResult) else result.skip_message)
        last = reasons[-1]
        assert any(re.search(busy_receiving, r) for r in reasons[1:]), reasons
        assert re.search(rf"'{lagging}' {re.escape(topic)}\[1\]: group_has_lag \(lag 2 on idc1", last), last

        # The job re-checks live even when asked (as if the sensor had seen these ends quiet for a
        # minute): each named, nothing written. The busy partition's ends are 2 s old by then.
        seen = {p: (log_end(idc1, topic, p), log_end(idc2, topic, p)) for p in (0, 1)}
        time.sleep(2.5)
        now = int(time.time() * 1000)
        asked = []
        for group, p in ((busy, 0), (lagging, 1)):
            ask = {"group_id": group, "active": "idc1", "standby": "idc2", "window_s": WINDOW_S, "partitions": [{
                "topic": topic, "partition": p, "active_end": seen[p][0], "standby_end": seen[p][1],
                "stable_since_ms": now - 60_000}]}
            asked.append((group, p, stack.fast_forward({"ops": {"offset_fast_forwards": {"config": ask}}})))
    finally:
        stop_traffic.set()
        thread.join(timeout=10)
        busy_member.close()
        lag_member.close()
    rows = {group: stack.fast_forward_rows(run.run_id)[(topic, p)] for group, p, run in asked}
    assert rows[lagging]["outcome"] == "left_alone" and rows[lagging]["rejection"] == "group_has_lag"
    assert rows[busy]["outcome"] == "left_alone" and rows[busy]["rejection"] == "receiving_data"
    assert "log end moved since the sensor looked" in rows[busy]["reason"]
    assert committed(idc2, lagging, topic, 1) is None and committed(idc2, busy, topic, 0) is None


def test_a_stopped_mirror_is_left_alone_with_its_reason(kafka_pair, chdb_dsn):
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    topic = f"stale.stopped.{uuid.uuid4().hex[:6]}"  # outside the session mirrors' t.* pattern
    kafka_pair.create_topic(topic, partitions=1)
    mirrors = DedicatedMirrors(kafka_pair, topic)
    group = f"behind-{uuid.uuid4().hex[:6]}"
    member = None
    try:
        mirrors.start("idc1", "idc2")
        mirrors.start("idc2", "idc1")
        produce(idc1, topic, ["m0", "m1"])
        mirrored(kafka_pair, topic)
        mirrors.stop("idc1", "idc2")  # the idc1 -> idc2 mirror stops ...
        produce(idc1, topic, ["m2", "m3"])  # ... and these never reach idc2
        member = Member(idc1, group, topic)
        member.commit(topic, {0: log_end(idc1, topic)})
        stack = StaleStack(kafka_pair, chdb_dsn, [group], [topic], mirrors.resource())
        reasons = []
        started = time.monotonic()
        while time.monotonic() - started < WINDOW_S * 2.5:
            stack.cycle()
            result = stack.tick()
            assert not (isinstance(result, dg.SensorResult) and result.run_requests), "the mirror is stopped"
            reasons.append(skip_message(result))
        assert re.search(rf"'{group}' {re.escape(topic)}\[0\]: mirror_stopped \(the idc1->idc2 mirror is at 2, 2 behind "
                         r"idc1's log end 4, which has not moved for \d+s: the mirror is not copying", reasons[-1]), reasons[-1]
        ask = {"group_id": group, "active": "idc1", "standby": "idc2", "window_s": WINDOW_S, "partitions": [{
            "topic": topic, "partition": 0, "active_end": log_end(idc1, topic), "standby_end": log_end(idc2, topic),
            "stable_since_ms": int(time.time() * 1000) - 60_000}]}
        run = stack.fast_forward({"ops": {"offset_fast_forwards": {"config": ask}}})
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        assert (row["outcome"], row["rejection"]) == ("left_alone", "mirror_stopped"), row
        assert "idc1->idc2 mirror is at 2" in row["reason"]
        assert committed(idc2, group, topic) is None
    finally:
        if member is not None:
            member.close()
        mirrors.close()


# -- the reverse (standby -> active) mirror stopped -------------------------------------------------


def test_a_stopped_reverse_mirror_blocks_the_fast_forward_until_it_has_copied_everything(kafka_pair, chdb_dsn):
    """Group active on idc1 at its log end; idc1->idc2 running, idc2->idc1 stopped and records produced
    on idc2 after the stop: idc1 is quiet because it is cut off. A fast-forward to idc2's log end
    would skip them (the group never saw them): the sensor and the job say ``mirror_stopped``. Once the
    mirror is back and has copied them (and the group processed them), the fast-forward happens and
    a failover loses nothing."""
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    topic = f"stale.reverse.{uuid.uuid4().hex[:6]}"  # outside the session mirrors' t.* pattern
    kafka_pair.create_topic(topic, partitions=1)
    mirrors = DedicatedMirrors(kafka_pair, topic)
    group = f"cut off ü {uuid.uuid4().hex[:6]}"
    member = None
    try:
        mirrors.start("idc1", "idc2")
        mirrors.start("idc2", "idc1")
        produce(idc1, topic, ["a0", "a1"])
        mirrored(kafka_pair, topic)
        produce(idc2, topic, ["b0"])
        mirrored(kafka_pair, topic)
        # A running mirror's positions group shows no member (it assigns its partitions and commits in
        # its producer's transactions): membership is no evidence of a running mirror.
        positions_group = mirrors.config("idc2", "idc1").group_id
        admin = kafka_pair.admin("idc1")  # kept referenced until its answer came
        [future] = admin.describe_consumer_groups([positions_group], request_timeout=10).values()
        described = future.result(timeout=15)
        assert (described.members, described.state) == ([], ConsumerGroupState.EMPTY)  # it exists: offsets, no member

        mirrors.stop("idc2", "idc1")
        produce(idc2, topic, ["b1", "b2"])  # cut off: never copied to idc1 while the mirror is stopped
        member = Member(idc1, group, topic)
        c = log_end(idc1, topic)
        member.commit(topic, {0: c})  # the group processed everything idc1 has
        stack = StaleStack(kafka_pair, chdb_dsn, [group], [topic], mirrors.resource())

        position, b_end = mirrors.position("idc2", "idc1"), log_end(idc2, topic)
        assert position is not None and b_end - position == 2
        expected = (rf"'{re.escape(group)}' {re.escape(topic)}\[0\]: mirror_stopped \(the idc2->idc1 mirror is at "
                    rf"{position}, 2 behind idc2's log end {b_end}, which has not moved for \d+s")
        reasons = []
        deadline = time.monotonic() + 120
        while not (reasons and re.search(expected, reasons[-1])):
            assert time.monotonic() < deadline, f"no mirror_stopped rejection; skip reasons: {reasons[-3:]}"
            stack.cycle()
            result = stack.tick()
            assert not (isinstance(result, dg.SensorResult) and result.run_requests), "the reverse mirror is stopped"
            reasons.append(skip_message(result))
        # Meanwhile the sync cycle synced what it could prove (a header anchor: b0's copy on idc1),
        # and a failover now would read b1 and b2.
        t_cycle = committed(idc2, group, topic)
        assert t_cycle is not None and t_cycle <= position < b_end
        assert {v for _, v in read_values(idc2, topic, t_cycle, b_end)} >= {"b1", "b2"}

        # The job trusts nothing it is asked (as if the sensor had seen this quiet a minute ago).
        ask = {"group_id": group, "active": "idc1", "standby": "idc2", "window_s": WINDOW_S, "partitions": [{
            "topic": topic, "partition": 0, "active_end": c, "standby_end": b_end,
            "stable_since_ms": int(time.time() * 1000) - 60_000}]}
        run = stack.fast_forward({"ops": {"offset_fast_forwards": {"config": ask}}})
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        assert (row["outcome"], row["rejection"], row["applied"]) == ("left_alone", "mirror_stopped", False), row
        assert row["reason"].startswith(f"the idc2->idc1 mirror is at {position}, 2 behind idc2's log end {b_end}")
        assert committed(idc2, group, topic) == t_cycle

        # The mirror comes back and copies b1, b2; the group processes them, then one more record
        # produced on idc1 (so the last records are the active side's: no header anchor reaches the end).
        mirrors.start("idc2", "idc1")
        mirrored(kafka_pair, topic)
        produce(idc1, topic, ["a2"])
        mirrored(kafka_pair, topic)
        wait_for(lambda: mirrors.position("idc2", "idc1") >= log_end(idc2, topic) - 1, timeout=60,
                 what="the idc2->idc1 mirror past idc2's log end (but its marker)")
        c = log_end(idc1, topic)
        member.commit(topic, {0: c})
        requests, reasons = run_until_requested(stack, 120)
        [request] = requests
        assert request.run_config["ops"]["offset_fast_forwards"]["config"]["partitions"][0]["active_end"] == c
        run = stack.fast_forward(request.run_config)
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        t = log_end(idc2, topic)
        assert (row["outcome"], row["new_offset"], row["applied"]) == ("fast_forwarded", t, True), row
        assert committed(idc2, group, topic) == t > b_end
        [check] = run.get_asset_check_evaluations()
        assert check.passed
    finally:
        if member is not None:
            member.close()
        mirrors.close()

    lost, read_again = fail_over(kafka_pair, group, topic, c, ["after-failover"])
    assert lost == []
    assert read_again == ["after-failover"]  # b1, b2 were processed on idc1: nothing lost, nothing repeated


def test_a_caught_up_stopped_reverse_mirror_is_fast_forwarded_and_fails_over_clean(kafka_pair, chdb_dsn):
    """The case a stopped mirror does not block (stale_candidates' docstring): the idc2->idc1 mirror
    stops after copying everything, and both logs stay quiet. idc1 is quiet because it is cut off, and
    the position equals idc2's end only because idc2 is quiet too -- yet every record of idc2 below its
    end is on idc1, so the fast-forward is NO-LOSS: records idc2 gets later lie at or after ``t``, and
    the group reads them on a failover."""
    idc1, idc2 = kafka_pair.bootstrap("idc1"), kafka_pair.bootstrap("idc2")
    topic = f"stale.caughtup.{uuid.uuid4().hex[:6]}"
    kafka_pair.create_topic(topic, partitions=1)
    mirrors = DedicatedMirrors(kafka_pair, topic)
    group = f"quiet-{uuid.uuid4().hex[:6]}"
    member = None
    try:
        mirrors.start("idc1", "idc2")
        mirrors.start("idc2", "idc1")
        produce(idc2, topic, ["b0"])
        mirrored(kafka_pair, topic)
        produce(idc1, topic, ["a0", "a1"])
        mirrored(kafka_pair, topic)
        wait_for(lambda: mirrors.position("idc2", "idc1") >= log_end(idc2, topic) - 1, timeout=60,
                 what="the idc2->idc1 mirror past idc2's log end (but its marker)")
        mirrors.stop("idc2", "idc1")  # caught up, then stopped
        member = Member(idc1, group, topic)
        c = log_end(idc1, topic)
        member.commit(topic, {0: c})
        stack = StaleStack(kafka_pair, chdb_dsn, [group], [topic], mirrors.resource())
        requests, _ = run_until_requested(stack, 120)
        run = stack.fast_forward(requests[0].run_config)
        row = stack.fast_forward_rows(run.run_id)[(topic, 0)]
        t = log_end(idc2, topic)
        assert (row["outcome"], row["new_offset"], row["applied"]) == ("fast_forwarded", t, True), row
    finally:
        if member is not None:
            member.close()
        mirrors.close()
    # idc2 gets records the stopped mirror never copies: the group never saw them, and reads them all
    # after failing over, nothing below t it had not processed.
    lost, read_again = fail_over(kafka_pair, group, topic, c, ["b1", "b2"])
    assert lost == [] and read_again == ["b1", "b2"]


# -- the sync age: bounded with the sensor, growing without it -------------------------------------


def test_sync_age_stays_within_window_plus_one_cycle_with_the_sensor_and_grows_without(kafka_pair, session_mirrors,
                                                                                       chdb_dsn, topic_name):
    idc1 = kafka_pair.bootstrap("idc1")
    topic = kafka_pair.create_topic(topic_name, partitions=1)
    group = f"hourly-{uuid.uuid4().hex[:6]}"
    member = Member(idc1, group, topic)
    stack = StaleStack(kafka_pair, chdb_dsn, [group], [topic], session_mirror_positions())

    def record(i: int) -> None:  # one record, processed at once, as a low-traffic topic sees them
        produce(idc1, topic, [f"h{i}"])
        member.commit(topic, {0: log_end(idc1, topic)})

    try:
        record(0)
        requests, _ = run_until_requested(stack, 60)  # the first sync ever
        stack.fast_forward(requests[0].run_config)

        # With the sensor: a cycle every CYCLE_S, the sensor ticking every TICK_S in between (as the
        # daemon runs them: 30 s and 10 s by default), a record now and then.
        cycle_starts, overheads, fast_forwards = [], [], 0
        started = time.monotonic()
        next_record, next_cycle, i = started + 2, started, 1
        while time.monotonic() - started < 4 * WINDOW_S + 24:
            now = time.monotonic()
            if now >= next_record and i <= 2:
                record(i)
                i, next_record = i + 1, now + 2 * WINDOW_S + 10
            if now >= next_cycle:
                cycle_starts.append(now)
                stack.cycle()
                next_cycle = max(next_cycle + CYCLE_S, time.monotonic())
            tick_started = time.monotonic()
            result = stack.tick()
            if isinstance(result, dg.SensorResult) and result.run_requests:
                stack.fast_forward(result.run_requests[0].run_config)
                fast_forwards += 1
            overheads.append(time.monotonic() - tick_started)
            time.sleep(max(0.0, min(tick_started + TICK_S, next_cycle) - time.monotonic()))
        with_sensor = [r for r in stack.metric_rows(group) if r["sync_age_s"] is not None]
        assert fast_forwards == 2  # one per record
        max_age = max(r["sync_age_s"] for r in with_sensor)
        # From the last sync to the first snapshot showing the record: at most one cycle; then the
        # window; then at most one tick interval until a tick sees it passed, and that tick's run.
        cycle = max(b - a for a, b in zip(cycle_starts, cycle_starts[1:]))
        bound = WINDOW_S + cycle + TICK_S + max(overheads)
        print(f"with the sensor: max sync age {max_age:.1f}s <= window {WINDOW_S}s + one cycle {cycle:.1f}s + "
              f"one tick interval {TICK_S}s + tick and fast-forward run {max(overheads):.1f}s = {bound:.1f}s")
        assert max_age <= bound
        assert max_age > WINDOW_S  # it did wait for the window each time

        # Without the sensor: a record, then cycles only.
        record(9)
        ages = []
        started = time.monotonic()
        while time.monotonic() - started < 2 * WINDOW_S + 2 * cycle:
            stack.cycle()
            ages.append(stack.metric_rows(group)[-1]["sync_age_s"])
    finally:
        member.close()
    print(f"without the sensor: sync ages {[round(a, 1) for a in ages]}")
    assert all(later > earlier for earlier, later in zip(ages, ages[1:]))
    assert ages[-1] > bound
