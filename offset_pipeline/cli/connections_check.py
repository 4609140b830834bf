"""``offset-pipeline connections``: can the sync reach each cluster with its settings, and if not,
why and what to fix (a wrong CA, password or SASL mechanism, a wrong security protocol, brokers not
reachable): one bounded probe per cluster (``kafka_io/connection_probe.py``), both at once.

Exit status: :data:`EXIT_CODES` (``--help`` lists them).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from offset_pipeline.cli.connections import kafka_clusters
from offset_pipeline.cli.help_text import command_parser
from offset_pipeline.kafka_io.connection_probe import ProbeResult, probe
from offset_pipeline.settings import kafka_timeout_s

CONNECTED, NOT_CONNECTED = 0, 1
EXIT_CODES = {
    CONNECTED: "every cluster answered",
    NOT_CONNECTED: "a cluster did not answer (its line says why and what to fix)",
}


def add_parser(commands) -> None:
    parser = command_parser(commands, "connections", summary="can the sync reach both clusters, and if not, why",
                            doc=__doc__, codes=EXIT_CODES)
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="per cluster (default OFFSET_PIPELINE_KAFKA_TIMEOUT_S, 10)")
    parser.add_argument("--json", action="store_true", help="JSON instead of text")
    parser.set_defaults(run=run)


def check(timeout_s: float | None = None, clusters=None) -> dict[str, ProbeResult]:
    """Cluster name -> what its probe found, every cluster probed at once."""
    clusters = clusters or kafka_clusters()
    timeout = timeout_s or kafka_timeout_s()
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
        results = pool.map(lambda r: probe(r.admin_config(), r.cluster_name, timeout), clusters.values())
        return dict(zip(clusters, results))


def text(results: dict[str, ProbeResult]) -> str:
    lines = []
    for result in results.values():
        if result.diagnosis.connected:
            lines.append(f"{result.diagnosis.message} (cluster id {result.cluster_id}, {result.broker_count} brokers)")
        else:
            lines.append(f"{result.diagnosis.message} [{result.diagnosis.cause.value}]")
    return "\n".join(lines)


def run(args) -> int:
    results = check(args.timeout_s)
    if args.json:
        print(json.dumps({name: {"cause": r.diagnosis.cause.value, "message": r.diagnosis.message,
                                 "cluster_id": r.cluster_id, "broker_count": r.broker_count}
                          for name, r in results.items()}, indent=2))
    else:
        print(text(results))
    return CONNECTED if all(r.diagnosis.connected for r in results.values()) else NOT_CONNECTED
