"""What the stack's long-running commands (mirror, traffic, consumers) share on the command line."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path


def cluster_address(text: str) -> tuple[str, str]:
    """``NAME=HOST:PORT`` -> ``(NAME, HOST:PORT)``, for argparse."""
    name, _, bootstrap = text.partition("=")
    if not name or not bootstrap:
        raise argparse.ArgumentTypeError(f"expected NAME=HOST:PORT, got {text!r}")
    return name, bootstrap


def cluster_login(text: str) -> tuple[str, Path]:
    """``NAME=ACCESS_FILE`` -> ``(NAME, Path)``, for argparse (``--login``)."""
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=ACCESS_FILE, got {text!r}")
    return name, Path(path)


def add_login_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--login", type=cluster_login, action="append", default=[], metavar="NAME=ACCESS_FILE",
        help="log in to cluster NAME as admin (SASL_SSL, SCRAM) with a secure dev cluster's access file "
             "(<data>/secure-access.json, devstack/secure_cluster.py); once per secure cluster")


def login_configs(logins: list[tuple[str, Path]]) -> dict[str, dict[str, str]]:
    """Cluster name -> librdkafka login settings, read from each ``--login`` access file."""
    from devstack.secure_cluster import login_config

    return {name: login_config(path) for name, path in logins}


def start_process_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so a loop can finish its batch and shut down cleanly."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop
