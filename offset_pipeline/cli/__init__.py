"""``offset-pipeline``: the commands a person runs around a failover.

    offset-pipeline readiness [--group G ...] [--json]     is it safe to switch now, and its cost
    offset-pipeline switchover --group G --to CLUSTER       move a stopped group, verified, exactly
    offset-pipeline connections                             can the sync reach both clusters; if not, why
    offset-pipeline mirror check [--topic T ...] [--json]   which proof the mirror gives each topic and direction

Connections come from the same environment as the code location (``offset_pipeline/settings.py``);
the clusters are called what ``OFFSET_PIPELINE_CLUSTERS`` names them (default ``idc1,idc2``).

Each command's exit codes are listed by ``offset-pipeline COMMAND --help``.
"""

from __future__ import annotations

import argparse

from offset_pipeline.cli import connections_check, mirror_check, readiness, switchover
from offset_pipeline.cli.help_text import USAGE_ERROR, description, exit_status
from offset_pipeline.settings import SettingsError


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser. Raises SettingsError for a malformed setting the help needs
    (``switchover --to`` offers the configured cluster names)."""
    parser = argparse.ArgumentParser(prog="offset-pipeline", description=description(__doc__), epilog=exit_status({}),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    readiness.add_parser(commands)
    switchover.add_parser(commands)
    connections_check.add_parser(commands)
    mirror_check.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offset-pipeline")  # says a setting's error until the real one is built
    try:  # a malformed setting (OFFSET_PIPELINE_CLUSTERS...) is said, named, without a traceback
        parser = build_parser()
        args = parser.parse_args(argv)
        return args.run(args)
    except SettingsError as exc:
        parser.exit(USAGE_ERROR, f"{parser.prog}: error: {exc}\n")

