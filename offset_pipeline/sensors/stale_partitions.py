"""``stale_partition_sensor``: finds quiet low-traffic group-partitions and requests their fast-forward.

See docs/operating/fast-forward.md. Each tick, once the sync cycle has written a new snapshot (the JSON cursor keeps the
newest snapshot time seen, and the last tick's counts):

1. reads the snapshot history of the window from ClickHouse (``storage/stale_history.py``);
2. classifies every group-partition (``stale_candidates.classify``: committed, standby behind its
   log end, lag 0 or a trailing marker, both log ends unmoved); those passing every other condition
   get both mirrors' positions (``resources/mirrors.py``) and both log ends read from Kafka now, and
   are classified again: ends unchanged since the snapshots extend the quiet up to now, so a
   partition qualifies as soon as the window has passed, not one snapshot later;
3. requests one ``offset_fast_forward`` run per group and direction with its candidates; the run key
   is derived from the group, direction, partitions and the log ends seen, so the same quiet state
   is requested once, and a moved log end makes a new request.

A mirror whose position stays behind its source's log end once the window has passed is
``mirror_stopped`` (the records beyond it waited the whole window uncopied; ``stale_candidates``
works the stopped-mirror cases through). Such a verdict is not re-read on the ticks
between snapshots: a mirror that comes back copies, which moves a log end, and the next snapshot
starts the quiet again. A stopped mirror that had copied everything blocks nothing: the positions
prove every record of the standby is on the active cluster, which is all NO-LOSS needs.

Rows under clusters that are not configured are skipped, with one count in the summary
(``under unconfigured clusters``): after a deployment renames its clusters (``OFFSET_PIPELINE_CLUSTERS``)
the history still holds the old names for the window and the lookback, and no Kafka client or
mirror position exists under them. They are never fast-forwarded, never read, never a warning.

When nothing qualifies, the ``SkipReason`` counts the rejections by name and lists the first ones
with their reason; every rejection (up to ``LOGGED_REJECTIONS``) is also logged, once per snapshot. With the embedded ClickHouse
(chdb: one process at a time) the sensor does not read while a sync or fast-forward run holds it.
"""

import dataclasses
import hashlib
import json
import time
from collections import Counter, defaultdict

import dagster as dg

from offset_pipeline.fast_forward.stale_candidates import (
    LogEnds,
    StaleVerdict,
    classify,
    partition_histories,
    skip_reason,
)
from offset_pipeline.kafka_io.group_offsets import read_partition_ranges
from offset_pipeline.resources import ClickHouseResource, KafkaClusterResource
from offset_pipeline.resources.mirrors import MirrorsResource
from offset_pipeline.run_targets import FAST_FORWARD_JOB, SYNC_CONCURRENCY_TAG
from offset_pipeline.sensors.sync_cadence import IN_FLIGHT, MODE, sync_interval_s
from offset_pipeline.settings import checkpoint_s, kafka_timeout_s, positive_number, stale_window_s
from offset_pipeline.storage import snapshots
from offset_pipeline.storage.stale_history import read_stale_history

LISTED_REJECTIONS = 10  # in the SkipReason; all are logged
LOGGED_REJECTIONS = 200
HISTORY_LOOKBACK_S = 300.0  # history read beyond the window: a snapshot older than the window must be in it


def _live_ends(clusters, partitions_by_cluster, log) -> dict:
    """(cluster, topic, partition) -> its log end now, for the partitions asked (absent: not read)."""
    out = {}
    for cluster, partitions in partitions_by_cluster.items():
        try:
            for r in read_partition_ranges(clusters[cluster].admin(), cluster, sorted(partitions),
                                           timeout_s=kafka_timeout_s()):
                out[(cluster, r.topic, r.partition)] = r.log_end
        except Exception as exc:  # noqa: BLE001 - those partitions keep the snapshots' view
            log.warning(f"reading the log ends on {cluster} failed: {type(exc).__name__}: {exc}")
    return out


def _with_live_reads(verdicts, clusters, mirrors, now_ms, window_s, marker_slack, log):
    """Re-classify the verdicts that only lack mirror positions, with the positions read from Kafka
    and both log ends read now: unchanged ends extend the quiet the snapshots show up to now (logs
    only grow), moved ones reject the partition at once."""
    waiting = [v for v in verdicts if v.quiet_by(now_ms, window_s)]
    wanted = defaultdict(set)  # (source, target) -> partitions
    by_cluster = defaultdict(set)
    for v in waiting:
        h = v.history
        wanted[(h.standby, h.active)].add((h.topic, h.partition))
        wanted[(h.active, h.standby)].add((h.topic, h.partition))
        by_cluster[h.active].add((h.topic, h.partition))
        by_cluster[h.standby].add((h.topic, h.partition))
    ends = _live_ends(clusters, by_cluster, log)
    positions = {}
    for (source, target), partitions in wanted.items():
        try:
            positions[(source, target)] = mirrors.positions(clusters, source, target, partitions)
        except Exception as exc:  # noqa: BLE001 - stays mirror_position_unknown, said on the tick
            log.warning(f"reading the {source}->{target} mirror positions failed: {type(exc).__name__}: {exc}")
            positions[(source, target)] = {}
    checked = {id(v) for v in waiting}
    out = []
    for v in verdicts:
        if id(v) not in checked:
            out.append(v)
            continue
        h = v.history
        tp = (h.topic, h.partition)
        live = (ends.get((h.active, h.topic, h.partition)), ends.get((h.standby, h.topic, h.partition)))
        points = h.points + ((LogEnds(now_ms, *live),) if None not in live else ())
        filled = dataclasses.replace(h, points=points, standby_mirror_position=positions[(h.standby, h.active)].get(tp),
                                     active_mirror_position=positions[(h.active, h.standby)].get(tp))
        out.append(classify(filled, now_ms, window_s=window_s, marker_slack=marker_slack))
    return out


def under_configured_clusters(histories: list, cluster_names) -> tuple[list, int]:
    """(the histories whose active and standby clusters are both configured, how many are not)."""
    names = set(cluster_names)
    kept = [h for h in histories if h.active in names and h.standby in names]
    return kept, len(histories) - len(kept)


UNCONFIGURED = "under unconfigured clusters"  # the summary's name for the rows skipped


def group_run_key(verdicts: list[StaleVerdict]) -> str:
    """One run per group and direction: derived from its partitions' run keys (group, partition, log ends)."""
    keys = sorted(v.run_key() for v in verdicts)
    return "fast-forward-" + hashlib.sha256(json.dumps(keys).encode()).hexdigest()[:24]


def run_request(verdicts: list[StaleVerdict], now_ms: int, window_s: float, marker_slack: int) -> dg.RunRequest:
    h = verdicts[0].history
    partitions = []
    for v in sorted(verdicts, key=lambda v: (v.history.topic, v.history.partition)):
        newest = max(v.history.points, key=lambda p: p.time_ms)
        partitions.append({
            "topic": v.history.topic, "partition": v.history.partition, "active_end": newest.active_end,
            "standby_end": newest.standby_end, "stable_since_ms": int(now_ms - (v.stable_for_s or 0.0) * 1000),
        })
    config = {"group_id": h.group_id, "active": h.active, "standby": h.standby, "partitions": partitions,
              "window_s": window_s, "marker_slack": marker_slack}
    return dg.RunRequest(
        run_key=group_run_key(verdicts),
        run_config={"ops": {"offset_fast_forwards": {"config": config}}},
        tags={"offset_pipeline/fast_forward_partitions": str(len(partitions))},
    )


def evaluate_stale_tick(context, now_ms: int, clickhouse: ClickHouseResource, clusters: dict, mirrors: MirrorsResource,
                        *, window_s: float, marker_slack: int = 1):
    """The tick's decision, apart from the decorator so tests can pass the clock and the window."""
    cursor = json.loads(context.cursor) if context.cursor else {}
    if clickhouse.embedded:
        in_flight = context.instance.get_runs(
            filters=dg.RunsFilter(tags={SYNC_CONCURRENCY_TAG: ["cycle", "fast_forward"]}, statuses=IN_FLIGHT), limit=1)
        if in_flight:
            return dg.SkipReason(
                f"run {in_flight[0].run_id} ({in_flight[0].job_name}) holds the embedded ClickHouse; "
                "the snapshot history is read on a later tick")
    client = clickhouse.get_client()
    snapshots.ensure_table(client)
    newest = snapshots.newest_snapshot_ms(client)
    if newest is None:
        return dg.SkipReason("no snapshot yet: the sync cycle (offset_sync_sensor) has not run")
    if cursor.get("newest_snapshot_ms") == newest and not cursor.get("waiting"):
        return dg.SkipReason(f"no snapshot since the last tick ({(now_ms - newest) / 1000:.0f}s old) and no "
                             f"partition waiting for its window; then: {cursor.get('summary', '-')}")
    since_ms = int(now_ms - (window_s + max(HISTORY_LOOKBACK_S, window_s)) * 1000)
    histories, unconfigured = under_configured_clusters(partition_histories(*read_stale_history(client, since_ms)),
                                                        clusters)
    verdicts = [classify(h, now_ms, window_s=window_s, marker_slack=marker_slack) for h in histories]
    verdicts = _with_live_reads(verdicts, clusters, mirrors, now_ms, window_s, marker_slack, context.log)

    rejected = [v for v in verdicts if not v.candidate]
    # Logged once per snapshot: ticks in between re-read only the partitions waiting for their window.
    logged = rejected[:LOGGED_REJECTIONS] if cursor.get("newest_snapshot_ms") != newest else []
    for v in logged:
        h = v.history
        context.log.info(f"stale-partition rejected group={h.group_id!r} topic={h.topic!r} partition={h.partition} "
                         f"{h.active}->{h.standby}: {v.rejection.value}: {v.detail}")
    by_group = defaultdict(list)
    for v in verdicts:
        if v.candidate:
            by_group[(v.history.group_id, v.history.active, v.history.standby)].append(v)
    counts = Counter(v.rejection.value for v in rejected)
    summary = f"{sum(map(len, by_group.values()))} candidates in {len(by_group)} groups; " + (
        ", ".join(f"{n} {r}" for r, n in counts.most_common()) or "nothing rejected")
    skipped = f"; {unconfigured} group-partitions {UNCONFIGURED} skipped (an earlier name?)" if unconfigured else ""
    summary += skipped
    # Waiting: quiet, no lag, and the window ends before the next snapshot is due: later ticks read
    # them live again without a new snapshot, so a fast-forward follows the window by one tick, not
    # one cycle. Busy partitions never count: their quiet restarts at every snapshot.
    # (a continuous run writes its state every checkpoint: the snapshot to come)
    next_snapshot_ms = now_ms + (checkpoint_s() if MODE == "continuous" else sync_interval_s()) * 1000
    waiting = sum(1 for v in rejected if v.quiet_by(next_snapshot_ms, window_s))
    new_cursor = json.dumps({"newest_snapshot_ms": newest, "evaluated_at_ms": now_ms, "summary": summary,
                             "rejections": dict(counts), "waiting": waiting})
    if not by_group:
        listed = "; ".join(f"{v.history.group_id!r} {v.history.topic}[{v.history.partition}]: {v.rejection.value} "
                           f"({v.detail})" for v in rejected[:LISTED_REJECTIONS])
        more = f"; {len(rejected) - LISTED_REJECTIONS} more in the tick's log" if len(rejected) > LISTED_REJECTIONS else ""
        return dg.SensorResult(skip_reason=dg.SkipReason(skip_reason(verdicts) + skipped
                                                         + (f" -- {listed}{more}" if listed else "")),
                               cursor=new_cursor)
    requests = [run_request(vs, now_ms, window_s, marker_slack) for _, vs in sorted(by_group.items())]
    return dg.SensorResult(run_requests=requests, cursor=new_cursor)


def stale_sensor_interval_s() -> int:
    """``OFFSET_PIPELINE_STALE_SENSOR_INTERVAL_S`` (default 10): ticks between cycles see a window end
    sooner (a tick without a new snapshot only reads the partitions waiting for their window)."""
    return positive_number(None, "OFFSET_PIPELINE_STALE_SENSOR_INTERVAL_S", 10, whole=True)


@dg.sensor(
    job_name=FAST_FORWARD_JOB,
    minimum_interval_seconds=stale_sensor_interval_s(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Finds quiet, caught-up low-traffic group-partitions and requests their fast-forward "
                "(docs/operating/fast-forward.md).",
)
def stale_partition_sensor(
    context: dg.SensorEvaluationContext,
    clickhouse: ClickHouseResource,
    idc1: KafkaClusterResource,
    idc2: KafkaClusterResource,
    mirrors: MirrorsResource,
):
    clusters = {r.cluster_name: r for r in (idc1, idc2)}
    return evaluate_stale_tick(context, int(time.time() * 1000), clickhouse, clusters, mirrors, window_s=stale_window_s())
