"""``python -m devstack {fetch,up,watch,down,status,clean,shapes,sync-env,spark-url,spark-master-url,spark-standalone-conf,instance-config,postgres}`` — the local stack's commands."""

from __future__ import annotations

import argparse
import sys

from devstack.cli import stop_on_signals
from devstack.errors import DevStackError
from devstack.jars import fetch_jars
from devstack.paths import jars_dir
from devstack.stack import MIRROR_CHOICES, SPARK_CHOICES, DevStack, StackSettings, plan_topic_shapes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="fetch the pinned Kafka and MirrorMaker 2 jars from Maven Central and build the "
                                 "project's Connect transform (connect-transform/); cached")
    up = sub.add_parser(
        "up", help="start both clusters, the mirror both ways, traffic and consumers (again: restarts the dead parts)"
    )
    watch = sub.add_parser(
        "watch", help="up, then restart any part that dies, checking every --every seconds (Ctrl-C/SIGTERM stops watching)"
    )
    watch.add_argument("--every", type=float, default=10.0, help="seconds between checks (default 10)")
    for command in (up, watch):
        command.add_argument("--no-traffic", action="store_true", help="start without the traffic generator")
        command.add_argument("--no-consumers", action="store_true", help="start without the consumer groups")
        command.add_argument("--spark", choices=SPARK_CHOICES, default="connect",
                             help="the Spark for sync runs: the Spark Connect server (default), a standalone "
                                  "master and two workers whose executors lack offset_pipeline, or none")
        command.add_argument("--no-spark-connect", dest="spark", action="store_const", const="none",
                             help="the same as --spark none")
        command.add_argument("--mirror", choices=MIRROR_CHOICES,
                             help="the data mirror: mm2 (MirrorMaker 2 with the project's origin-header transform, "
                                  "the default) or python (devstack/mirror.py); as "
                                  "OFFSET_PIPELINE_DEVSTACK_MIRROR; the other one is stopped")
        command.add_argument("--secure", action="store_true",
                             help="secure clusters: SASL_SSL, SCRAM-SHA-512, ACLs (as OFFSET_PIPELINE_DEVSTACK_SECURE=1); "
                                  "the sync logs in as 'sync' with the settings `sync-env` prints")
    down = sub.add_parser("down", help="stop everything the stack started")
    down.add_argument("--leave-postgres", action="store_true",
                      help="all but the PostgreSQL server (bin/up stops it once Dagster, which writes there, has ended)")
    sub.add_parser("status", help="show what runs")
    sub.add_parser("clean", help="stop everything and delete cluster data and logs (keeps the jar cache)")
    sub.add_parser("shapes", help="print OFFSET_PIPELINE_TOPIC_SHAPES for the traffic plan's topics")
    sub.add_parser("mirror-positions", help="print OFFSET_PIPELINE_MIRROR_POSITIONS for the mirror "
                                            "OFFSET_PIPELINE_DEVSTACK_MIRROR chooses (nothing for the Python "
                                            "mirror: its position groups are the product's default)")
    sub.add_parser("sync-env", help="a secure stack: print the shell exports that make the sync log in as 'sync' "
                                    "(bin/up evaluates them; the password included); a plain stack: nothing")
    sub.add_parser("spark-url", help="print the local Spark Connect server's URL (OFFSET_PIPELINE_SPARK_CONNECT_URL)")
    sub.add_parser("spark-master-url", help="print the local standalone cluster's master URL (OFFSET_PIPELINE_SPARK_MASTER)")
    sub.add_parser("spark-standalone-conf", help="print OFFSET_PIPELINE_SPARK_CONF for runs on the standalone cluster")
    instance = sub.add_parser("instance-config", help="write DAGSTER_HOME/dagster.yaml from deploy/dagster.yaml, "
                                                      "or add the blocks an existing one lacks")
    instance.add_argument("dagster_home")
    instance.add_argument("--postgres", action="store_true",
                          help="with Dagster's storage on PostgreSQL at the URL in OFFSET_PIPELINE_DAGSTER_PG_URL")
    postgres = sub.add_parser("postgres", help="the stack's PostgreSQL server for Dagster's storage "
                                               "(OFFSET_PIPELINE_DAGSTER_STORAGE=postgres)")
    postgres.add_argument("action", choices=("url", "start", "stop", "status"),
                          help="url: print OFFSET_PIPELINE_DAGSTER_PG_URL's value; start, stop, status")
    args = parser.parse_args(argv)

    try:
        settings = StackSettings.from_env()
    except DevStackError as exc:  # a setting of the stack's own (OFFSET_PIPELINE_DAGSTER_STORAGE)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.command in ("up", "watch"):
        settings = StackSettings(
            settings.base_dir, settings.seed, settings.rate_scale,
            traffic=not args.no_traffic, consumers=not args.no_consumers, spark=args.spark,
            postgres=settings.postgres, secure=settings.secure or args.secure,
            mirror=args.mirror or settings.mirror,
        )
    stack = DevStack(settings)
    try:
        if args.command == "fetch":
            from devstack.connect_transform import transform_jar
            from devstack.mirrormaker2 import mm2_jars

            print(fetch_jars(jars_dir()))
            print(mm2_jars())
            print(transform_jar())
        elif args.command == "up":
            stack.up()
        elif args.command == "watch":
            stack.watch(stop_on_signals(), args.every, echo=lambda line: print(line, flush=True))
        elif args.command == "down":
            stack.down(leave_postgres=args.leave_postgres)
        elif args.command == "status":
            print("\n".join(stack.status_lines()))
        elif args.command == "clean":
            stack.clean()
        elif args.command == "shapes":
            print(plan_topic_shapes())
        elif args.command == "mirror-positions":
            if settings.mirror == "mm2":
                from devstack.mirrormaker2 import mirror_positions_setting

                print(mirror_positions_setting(list(stack.bootstraps)))
        elif args.command == "sync-env":
            import shlex

            for name, value in stack.sync_env().items():
                print(f"export {name}={shlex.quote(value)}")
        elif args.command == "instance-config":
            from pathlib import Path

            from devstack.instance_config import (
                ensure_instance_config,
                postgres_storage,
            )

            added = ensure_instance_config(Path(args.dagster_home),
                                           storage=postgres_storage() if args.postgres else None)
            if added:
                print(f"{args.dagster_home}/dagster.yaml: added {', '.join(added)}")
        elif args.command == "postgres":
            server = stack.postgres
            if args.action == "url":
                print(server.url)
            elif args.action == "start":
                print(f"{server.name} pid {server.start()}  {server.url}")
            elif args.action == "stop":
                print(f"stopped {server.name}" if server.stop() else f"{server.name} was not running")
            else:
                print(server.status_line())
        elif args.command == "spark-url":
            print(stack.spark_connect.url)
        elif args.command == "spark-master-url":
            print(stack.spark_standalone.master_url)
        elif args.command == "spark-standalone-conf":
            print(stack.spark_standalone_conf())
    except DevStackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
