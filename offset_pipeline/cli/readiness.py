"""``offset-pipeline readiness``: per group and direction, is it safe to switch to the standby now,
the expected duplicates, the seconds since the last sync, and why not.

It reads each group's verdicts in force from ``offset_group_readiness``, which the sync writes every
checkpoint (continuous mode, every ``OFFSET_PIPELINE_CHECKPOINT_S``) or cycle (interval mode): those of
the group's newest cycle, one per direction (``readiness/current.py``). A direction only older cycles
wrote is no longer in force and not shown: the ``undecided`` verdict written while a cluster was
unreachable ends with the first cycle after its return. A verdict older than ``--max-row-age-s`` is
shown, and counts as not ready: the sync is not running.

Figures are plain numbers: ``expected duplicates`` exact, ``duplicates at most`` its upper bound.

Exit status: :data:`EXIT_CODES` (``--help`` lists them).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from offset_pipeline.cli.connections import clickhouse
from offset_pipeline.cli.help_text import command_parser
from offset_pipeline.readiness import report
from offset_pipeline.resources.clickhouse import close_embedded_clients
from offset_pipeline.storage import commit_log_follow, mirror_checks, readiness

STALE_ROW = "sync_not_running"

READY, NOT_READY, NOTHING_TO_SHOW = 0, 1, 2
EXIT_CODES = {
    READY: "every group shown is safe to switch now",
    NOT_READY: "a group shown is not safe to switch now (its row says why)",
    NOTHING_TO_SHOW: "nothing to show: no such group, or no row recent enough (--within-s)",
}


def add_parser(commands) -> None:
    parser = command_parser(commands, "readiness", summary="is it safe to switch each group to its standby now",
                            doc=__doc__, codes=EXIT_CODES)
    parser.add_argument("--group", action="append", dest="groups", metavar="GROUP", help="only this group (repeatable)")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    parser.add_argument("--max-row-age-s", type=float, default=120.0,
                        help="a newer row is needed to call a group ready (default 120)")
    parser.add_argument("--within-s", type=float, default=86_400.0, help="how far back rows are looked for")
    parser.set_defaults(run=run)


def aged(rows: list[readiness.ReadinessRow], now_ms: int, max_age_s: float) -> list[readiness.ReadinessRow]:
    """Rows older than ``max_age_s`` are not ready: the sync has not confirmed them since."""
    out = []
    for row in rows:
        age_s = (now_ms - row.checked_at_ms) / 1000
        if age_s > max_age_s:
            row = replace(row, ready=False, reasons={STALE_ROW: row.partitions, **row.reasons},
                          first_problem=f"this verdict is {age_s:.0f}s old: is the sync running?")
        out.append(row)
    return out


def mirror_lines(rows: list[readiness.ReadinessRow], mirror: list[mirror_checks.MirrorCheckRow]) -> str:
    """What the newest mirror check said of the directions shown: how many topics have a proof,
    and each topic without one, with its reason (``offset-pipeline mirror check`` has the rest)."""
    directions = {(r.active, r.standby) for r in rows}
    shown = [m for m in mirror if (m.active, m.standby) in directions]
    if not shown:
        return "mirror: not checked yet (offset_mirror_proofs, or offset-pipeline mirror check)"
    lines = []
    for active, standby in sorted(directions):
        verdicts = [m for m in shown if (m.active, m.standby) == (active, standby)]
        proven = sum(1 for m in verdicts if m.proof != "none")
        lines.append(f"mirror {active}->{standby}: {proven} of {len(verdicts)} topics proven")
        lines += [f"  {m.topic}: none ({m.status}): {m.reason}" for m in verdicts if m.proof == "none"]
    return "\n".join(lines)


def commit_log_lines(follow: list[commit_log_follow.CommitLogFollowRow]) -> str:
    """How the continuous sync reads each cluster at its newest checkpoint: following its commit log,
    or polling and why (a polling sync is as safe, its standby offsets a poll interval older)."""
    if not follow:
        return "commit logs: no continuous checkpoint yet (the interval mode, or the sync not running)"
    parts = [f"{r.cluster} following" if r.mode == "following" else f"{r.cluster} polled ({r.mode}): {r.reason}"
             for r in follow]
    return "commit logs: " + "; ".join(parts)


def run(args) -> int:
    resource = clickhouse()
    client = resource.get_client()
    try:
        readiness.ensure_table(client)
        rows = readiness.newest(client, args.groups, within_s=args.within_s)
        mirror_checks.ensure_table(client)
        mirror = mirror_checks.newest(client, within_s=args.within_s)
        commit_log_follow.ensure_table(client)
        follow = commit_log_follow.newest(client, within_s=args.within_s)
    finally:
        if resource.embedded:
            close_embedded_clients(resource.dsn)  # the sync's next checkpoint needs the data folder
    rows = aged(rows, int(time.time() * 1000), args.max_row_age_s)
    print(report.as_json(rows) if args.json else (report.text(rows) if rows else "no readiness rows"))
    if not args.json and rows:
        print(mirror_lines(rows, mirror))
        print(commit_log_lines(follow))
    if not rows:
        print("nothing to show: no such group, or the sync has not written readiness yet", file=sys.stderr)
        return NOTHING_TO_SHOW
    return READY if all(r.ready for r in rows) else NOT_READY
