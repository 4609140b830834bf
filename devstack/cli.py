"""What the stack's long-running commands (mirror, traffic, consumers) share on the command line."""

from __future__ import annotations

import argparse
import logging
import signal
import threading


def cluster_address(text: str) -> tuple[str, str]:
    """``NAME=HOST:PORT`` -> ``(NAME, HOST:PORT)``, for argparse."""
    name, _, bootstrap = text.partition("=")
    if not name or not bootstrap:
        raise argparse.ArgumentTypeError(f"expected NAME=HOST:PORT, got {text!r}")
    return name, bootstrap


def start_process_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so a loop can finish its batch and shut down cleanly."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop
