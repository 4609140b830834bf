"""``offset-pipeline mirror check``: per topic and direction, which proof the sync can use to move a
group (origin headers, offset syncs, none) and why.

It reads the newest records of every topic on both clusters (or the ``--topic`` ones) and the
offset-syncs topics MirrorMaker 2 keeps, and says, for a group active on one cluster, whether the
sync can prove a loss-free offset on the other: by the origin headers the project's transform (or
the dev mirror) writes on every copy, by plain MirrorMaker 2's offset syncs (one-way topics), or not
at all, with the reason to act on.

Exit status: :data:`~offset_pipeline.mirror_check.rules.EXIT_CODES` (``--help`` lists them).
"""

from __future__ import annotations

import argparse
import json
import sys

from offset_pipeline.cli.connections import kafka_clusters
from offset_pipeline.cli.help_text import command_parser, description, exit_status
from offset_pipeline.mirror_check.probe import ClusterAccess, check_mirrors
from offset_pipeline.mirror_check.rules import EXIT_CODES, MirrorVerdict, exit_code
from offset_pipeline.settings import kafka_timeout_s, offset_syncs_topics, parsed_topic_shapes


def add_parser(commands) -> None:
    mirror = commands.add_parser("mirror", help="what the mirror between the clusters lets the sync prove",
                                 description=description(__doc__.split("\n\n")[0]),
                                 epilog=exit_status(EXIT_CODES, "exit status of offset-pipeline mirror check"),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = mirror.add_subparsers(dest="mirror_command", required=True)
    parser = command_parser(actions, "check", summary="per topic and direction: origin headers, offset syncs or none, "
                            "and why", doc=__doc__, codes=EXIT_CODES)
    parser.add_argument("--topic", action="append", dest="topics", metavar="TOPIC", help="only this topic (repeatable)")
    parser.add_argument("--records", type=int, default=10,
                        help="newest records read per partition, up to 4 partitions a topic (default 10)")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="per Kafka call (default OFFSET_PIPELINE_KAFKA_TIMEOUT_S, 10)")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    parser.set_defaults(run=run)


def text(verdicts: list[MirrorVerdict]) -> str:
    rows = [("topic", "direction", "proof", "status")] + [(v.topic, v.direction, v.proof.value, v.status.value)
                                                         for v in verdicts]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines += ["", *(f"- {v.reason}" for v in verdicts)]
    return "\n".join(lines)


def as_json(verdicts: list[MirrorVerdict]) -> str:
    return json.dumps([{"topic": v.topic, "active": v.active, "standby": v.standby, "proof": v.proof.value,
                        "status": v.status.value, "reason": v.reason} for v in verdicts], indent=2)


def verdicts_from_settings(topics: list[str] | None, records: int, timeout_s: float) -> list[MirrorVerdict]:
    clusters = tuple(ClusterAccess(r.cluster_name, r.admin_config(), r.client_config())
                     for r in kafka_clusters().values())
    return check_mirrors(clusters, shapes=parsed_topic_shapes(), syncs_topics=offset_syncs_topics(), topics=topics,
                         per_partition=records, timeout_s=timeout_s)


def run(args) -> int:
    
    verdicts = verdicts_from_settings(args.topics, args.records, args.timeout_s or kafka_timeout_s())
    print(as_json(verdicts) if args.json else (text(verdicts) if verdicts else "no topics"))
    if not verdicts:
        print("nothing to show: no such topic on either cluster", file=sys.stderr)
    return exit_code(verdicts)

