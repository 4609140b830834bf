"""``offset-pipeline switchover --group G --to <cluster>``: move a stopped group to its other cluster
with no record lost and, once drained, none read twice.

``<cluster>`` is one of the two configured names (``OFFSET_PIPELINE_CLUSTERS``; the help offers them).

1. **Refuses** while the group has members on its source (stop its consumers there first) or already
   on its target, when the sync never wrote a standby offset for one of its partitions, or when the
   mirror writes no origin headers (identities cannot be checked).
2. **Drains**: waits (``--drain-timeout-s``) until every record the group processed on the source
   is on the target: the source's record just below the group's offset is there, as itself or as
   its copy (the mirror has passed the group).
3. **Final exact sync**: from the standby offset the sync committed (loss-free), moves forward over
   the target's records the group already processed (``readiness/switch_point.py``): the first one
   it did not is where it resumes.
4. **Verifies** by record identity on the target, over ``--window`` records before that point and
   everything after it read: records below it the group never processed (**lost**: then nothing is
   committed) and records from it on that it did (**duplicates**).
5. Commits the new offsets on the target in one call (unless ``--dry-run``), reads them back, and
   prints the report (a table, or ``--json``).

Exit status: :data:`EXIT_CODES` (``--help`` lists them).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field

from offset_pipeline.cli.connections import kafka_clusters
from offset_pipeline.cli.help_text import command_parser
from offset_pipeline.kafka_io.group_commits import commit_group_offsets
from offset_pipeline.kafka_io.group_offsets import GroupFilter, GroupState, read_groups
from offset_pipeline.kafka_io.record_window import RecordWindow, read_window
from offset_pipeline.kafka_io.standby_groups import read_group_members
from offset_pipeline.readiness.switch_point import (
    SourceView,
    drained,
    switch_point,
    verify,
)
from offset_pipeline.settings import cluster_names, kafka_timeout_s, mirror_writes_headers

DONE, LOST, REFUSED, NOT_DRAINED, FAILED = 0, 1, 3, 4, 5
EXIT_CODES = {
    DONE: "done: switched, or a dry run that found nothing lost",
    LOST: "a record below the switch point was never processed, or the commit did not land as planned",
    REFUSED: "refused, the report says why (members on either cluster, no standby offset yet, no origin "
             "headers); nothing committed",
    NOT_DRAINED: "the mirror did not pass the group within --drain-timeout-s (nothing committed)",
    FAILED: "a cluster did not answer (nothing committed)",
}
#: The bound of the probe that explains a failed read (most causes show within a second).
CONNECTION_PROBE_S = 5.0


def add_parser(commands) -> None:
    """The command's arguments; ``--to`` offers the configured names (a bad ``OFFSET_PIPELINE_CLUSTERS``
    raises ValueError here, named, before anything connects)."""
    names = cluster_names()
    parser = command_parser(commands, "switchover", summary="move a stopped group to its other cluster, exactly",
                            doc=__doc__, codes=EXIT_CODES)
    parser.add_argument("--group", required=True, help="the consumer group to move (stopped on its source)")
    parser.add_argument("--to", required=True, dest="target", choices=names, metavar="CLUSTER",
                        help=f"the cluster the group moves to: {' or '.join(names)} (OFFSET_PIPELINE_CLUSTERS)")
    parser.add_argument("--drain-timeout-s", type=float, default=120.0,
                        help="how long to wait for the mirror to pass the group (default 120)")
    parser.add_argument("--window", type=int, default=5000, help="records checked before the switch point")
    parser.add_argument("--dry-run", action="store_true", help="report, commit nothing")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    parser.set_defaults(run=run)


@dataclass
class PartitionReport:
    topic: str
    partition: int
    source_offset: int  # c: where the group stopped on the source
    standby_before: int  # t0: what the sync had committed on the target
    switch_point: int | None = None  # t: where the group resumes on the target
    duplicates_at_standby: int | None = None  # what resuming at t0 would have read again
    verified_lost: int | None = None
    verified_duplicates: int | None = None
    checked: str = ""  # the target offsets the verification read
    drained: bool = False
    committed_after: int | None = None


@dataclass
class Report:
    group: str
    source: str
    target: str
    outcome: str = ""
    detail: str = ""
    partitions: list[PartitionReport] = field(default_factory=list)
    dry_run: bool = False

    @property
    def lost(self) -> int:
        return sum(p.verified_lost or 0 for p in self.partitions)

    @property
    def duplicates(self) -> int:
        return sum(p.verified_duplicates or 0 for p in self.partitions)


def run(args) -> int:
    report, code = switchover(args.group, args.target, drain_timeout_s=args.drain_timeout_s, window=args.window,
                              dry_run=args.dry_run)
    print(json.dumps({**asdict(report), "lost": report.lost, "duplicates": report.duplicates}, indent=2,
                     ensure_ascii=False) if args.json else text(report))
    return code


def switchover(group: str, target: str, *, drain_timeout_s: float = 120.0, window: int = 5000,
               dry_run: bool = False, clusters=None, timeout_s: float | None = None) -> tuple[Report, int]:
    """The whole command (see the module's docstring): its report and exit status. A cluster that does
    not answer ends it with outcome ``failed`` (exit 5) before anything is committed: the one commit
    call reports its errors instead of raising."""
    clusters = clusters or kafka_clusters()
    try:
        return _switchover(group, target, drain_timeout_s, window, dry_run, clusters, timeout_s or kafka_timeout_s())
    except Exception as exc:  # noqa: BLE001 - a Kafka read that failed or timed out: said, nothing written
        report = Report(group, next((n for n in clusters if n != target), "?"), target, dry_run=dry_run)
        report.outcome = "failed"
        report.detail = f"a Kafka read failed, nothing committed: {type(exc).__name__}: {str(exc)[:300]}"
        causes = _connection_causes(clusters, timeout_s or kafka_timeout_s())
        if causes:  # the read only timed out: say why the clusters cannot be reached, and the fix
            report.detail += "; " + "; ".join(causes)
        return report, FAILED


def _connection_causes(clusters, timeout_s: float) -> list[str]:
    """Each cluster that cannot be reached, with its cause (one bounded probe each, both at once)."""
    from offset_pipeline.cli.connections_check import check

    try:
        results = check(min(timeout_s, CONNECTION_PROBE_S), clusters)
    except Exception:  # noqa: BLE001 - the probe only adds to a report that already says what failed
        return []
    return [r.diagnosis.message for r in results.values() if not r.diagnosis.connected]


def _switchover(group: str, target: str, drain_timeout_s: float, window: int, dry_run: bool, clusters,
                timeout_s: float) -> tuple[Report, int]:
    if target not in clusters:
        return Report(group, "?", target, "refused", f"unknown cluster {target!r}: one of {sorted(clusters)}"), REFUSED
    source = next(name for name in clusters if name != target)
    report = Report(group, source, target, dry_run=dry_run)
    refusal = _refusal(group, clusters, source, target, timeout_s)
    if refusal:
        report.outcome, report.detail = "refused", refusal
        return report, REFUSED
    states = {name: _group_state(clusters[name], group, timeout_s) for name in (source, target)}
    committed, standby = states[source].committed, states[target].committed
    missing = sorted(tp for tp in committed if tp not in standby)
    if not committed or missing:
        report.outcome = "refused"
        report.detail = (f"{group!r} has no committed offset on {source}" if not committed else
                         f"no standby offset on {target} for {', '.join(f'{t}[{p}]' for t, p in missing[:5])}: "
                         "let the sync run first")
        return report, REFUSED
    report.partitions = [PartitionReport(t, p, c, standby[(t, p)]) for (t, p), c in sorted(committed.items())]

    reads = _drain(report, clusters, window, drain_timeout_s, timeout_s)
    if not all(p.drained for p in report.partitions):
        report.outcome = "not drained"
        report.detail = (f"the mirror to {target} did not pass the group within {drain_timeout_s:g}s: "
                         + ", ".join(f"{p.topic}[{p.partition}]" for p in report.partitions if not p.drained)[:300])
        return report, NOT_DRAINED
    for p in report.partitions:
        _switch_point(p, *reads[(p.topic, p.partition)], window)
    if report.lost:
        report.outcome = "refused"
        report.detail = f"{report.lost} record(s) below the switch point were never processed: nothing committed"
        return report, LOST
    return _commit(report, clusters[target], timeout_s)


def _refusal(group: str, clusters, source: str, target: str, timeout_s: float) -> str:
    if not mirror_writes_headers():
        return "the mirror writes no origin headers (OFFSET_PIPELINE_MIRROR_WRITES_HEADERS=0): identities cannot be checked"
    members = {name: read_group_members(clusters[name], group, timeout_s=timeout_s) for name in (source, target)}
    if members[source].member_count:
        return (f"{group!r} still has {members[source].member_count} member(s) on {source}: stop its consumers there "
                "first (a switchover moves a stopped group)")
    if members[target].member_count:
        return f"{group!r} already has {members[target].member_count} member(s) on {target}"
    return ""


def _group_state(cluster, group: str, timeout_s: float) -> GroupState:
    [state] = read_groups(cluster.admin(), cluster.cluster_name, GroupFilter(f"^{re.escape(group)}$", ""),
                          timeout_s=timeout_s) or [GroupState(cluster.cluster_name, group, "ABSENT", 0)]
    if state.read_error:
        raise RuntimeError(f"reading {group!r} on {cluster.cluster_name} failed: {state.read_error}")
    return state


def _drain(report: Report, clusters, window: int, drain_timeout_s: float, timeout_s: float) -> dict:
    """Re-reads both sides until every partition is drained or the time is up; the last reads."""
    source, target = clusters[report.source], clusters[report.target]
    deadline = time.monotonic() + drain_timeout_s
    reads: dict = {}
    while True:
        for p in report.partitions:
            if p.drained:
                continue
            src = read_window(source.client_config(), report.source, report.target, p.topic, p.partition,
                              p.source_offset - 4 * window, None, timeout_s)
            dst = read_window(target.client_config(), report.target, report.source, p.topic, p.partition,
                              min(p.standby_before, p.source_offset) - window, None, timeout_s)
            view = SourceView.of(src.records, report.source, report.target, p.source_offset, src.start)
            last = next((r for r in reversed(src.records) if r.offset < p.source_offset), None)
            p.drained = drained(dst.records, view, last)
            reads[(p.topic, p.partition)] = (view, dst)
        if all(p.drained for p in report.partitions) or time.monotonic() > deadline:
            return reads
        time.sleep(1.0)


def _switch_point(p: PartitionReport, view: SourceView, dst: RecordWindow, window: int) -> None:
    point = switch_point(dst.records, p.standby_before, view, dst.read_to)
    p.switch_point, p.duplicates_at_standby = point.offset, point.skipped
    checked_from = max(dst.start, point.offset - window)
    check = verify(dst.records, point.offset, view, checked_from, dst.read_to)
    p.verified_lost, p.verified_duplicates = len(check.lost), len(check.duplicates)
    p.checked = f"[{checked_from}, {dst.read_to})"


def _commit(report: Report, target, timeout_s: float) -> tuple[Report, int]:
    offsets = {(p.topic, p.partition): p.switch_point for p in report.partitions}
    if report.dry_run:
        report.outcome, report.detail = "dry run", "nothing committed"
        return report, DONE
    members = read_group_members(target, report.group, timeout_s=timeout_s)
    if members.member_count:  # the group started on the target meanwhile: never write to a live group
        report.outcome, report.detail = "refused", f"{members.member_count} member(s) joined on {report.target} meanwhile"
        return report, REFUSED
    write = commit_group_offsets(target, report.group, offsets, reread=list(offsets), timeout_s=timeout_s)
    for p in report.partitions:
        p.committed_after = write.committed_after.get((p.topic, p.partition)) if write.committed_after else None
    if write.call_error or any(p.committed_after != p.switch_point for p in report.partitions):
        report.outcome = "failed"
        report.detail = f"the commit on {report.target} did not land: {write.call_error or write.reread_error or 'offsets differ'}"
        return report, LOST
    report.outcome = "switched"
    report.detail = (f"start {report.group!r} on {report.target}: {report.lost} lost, {report.duplicates} duplicates "
                     "(verified by record identity)")
    return report, DONE


def text(report: Report) -> str:
    lines = [f"switchover of {report.group!r}: {report.source} -> {report.target}: {report.outcome}"
             + (f" ({report.detail})" if report.detail else "")]
    if report.partitions:
        header = ["partition", "source offset", "standby before", "switch point", "re-read at standby before",
                  "lost", "duplicates", "checked"]
        rows = [header] + [[f"{p.topic}[{p.partition}]", str(p.source_offset), str(p.standby_before),
                            _s(p.switch_point), _s(p.duplicates_at_standby), _s(p.verified_lost),
                            _s(p.verified_duplicates), p.checked] for p in report.partitions]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        lines.append(f"total: {report.lost} lost, {report.duplicates} duplicates")
    return "\n".join(lines)


def _s(value) -> str:
    return "-" if value is None else str(value)

