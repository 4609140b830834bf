"""What the benchmark's own workload costs at idle: the brokers' and this process's CPU with and without
the active groups' members (``_clusters.ActiveGroups``), no sync cycle running. Prints; asserts nothing.

    .venv/bin/python bench/harness_idle.py [--size 100k] [--seconds 30]

Why: the members share the 2 cores with what ``scale_curve.py`` measures. Until 2026-11-27 they
were not really paused (a pause before the client's own assign did not hold) and long-polled their
partitions: at 100k (500 members) the brokers took 1.28 cores and the members 0.47 at idle; paused
for real, 0.14 and 0.17.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clusters import ActiveGroups, ScratchClusters, create_and_fill  # noqa: E402
from process_tree_usage import ProcessTree  # noqa: E402
from scale_curve import parse_size, workload_for  # noqa: E402


def cores_used(tree: ProcessTree, seconds: float) -> float:
    before = tree.cpu_seconds()
    time.sleep(seconds)
    return (tree.cpu_seconds() - before) / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="100k", help="group-partitions, as scale_curve.py's sizes (default 100k)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each state is measured")
    parser.add_argument("--records-per-partition", type=int, default=40, help="per producing cluster (as scale_curve.py)")
    args = parser.parse_args(argv)
    # SIGTERM and SIGHUP end it as Ctrl-C does: through the with blocks, which stop the members and
    # the scratch brokers (as scale_curve.py does for SIGTERM).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: sys.exit(128 + number))
    size = parse_size(args.size)
    workload = workload_for(size, args.records_per_partition, seed=7)
    with ScratchClusters() as clusters:
        create_and_fill(clusters, workload)
        brokers = ProcessTree([c.pid() for c in clusters.clusters.values()])
        here = ProcessTree([os.getpid()])
        time.sleep(5)
        print(f"no members: brokers {cores_used(brokers, args.seconds):.2f} cores", flush=True)
        with ActiveGroups(clusters, workload) as groups:
            time.sleep(10)  # past the joins
            broker_cores = cores_used(brokers, args.seconds)
            here_cores = cores_used(here, args.seconds)
            print(f"{len(groups.members)} members ({size:,} group-partitions): brokers {broker_cores:.2f} cores, "
                  f"the members {here_cores:.2f} cores", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
