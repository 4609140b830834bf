"""``offset-pipeline``: the commands a person runs around a failover.

    offset-pipeline readiness [--group G ...] [--json]     is it safe to switch now, and its cost
    offset-pipeline switchover --group G --to CLUSTER       move a stopped group, verified, exactly
    offset-pipeline connections                             can the sync reach both clusters; if not, why
    offset-pipeline mirror check [--topic T ...] [--json]   which proof the mirror gives each topic and direction

Connections come from the same environment as the code location (``offset_pipeline/settings.py``);
the clusters are called what ``OFFSET_PIPELINE_CLUSTERS`` names them (default ``idc1,idc2``).
"""

from __future__ import annotations

import argparse

from offset_pipeline.cli import connections_check, mirror_check, readiness, switchover
from offset_pipeline.settings import SettingsError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offset-pipeline", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    try:  # a malformed setting (OFFSET_PIPELINE_CLUSTERS...) is said, named, without a traceback
        readiness.add_parser(commands)
        switchover.add_parser(commands)
        connections_check.add_parser(commands)
        mirror_check.add_parser(commands)
        args = parser.parse_args(argv)
        return args.run(args)
    except SettingsError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")

