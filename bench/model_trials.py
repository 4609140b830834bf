"""Failover trials on the pure two-cluster model (devstack/two_cluster_model.py): lost and
duplicated records at failover by strategy, topic shape, timestamp pattern and trial kind, and the
status of every sync cycle. Prints figures; asserts nothing (tests/translation/test_properties.py
asserts NO-LOSS on 1,000 trials).

    .venv/bin/python -m bench.model_trials [--trials 1000] [--seed 20240601]

Each trial generates an interleaving of produce / mirror / consume / sync events with offset gaps
(transactions), repeated and reversed timestamps, resets, retention on either side, a mirror that
redelivers and forged headers, runs the real translation rules every cycle, fails the group over and
counts what the restarted group misses or processes twice.
"""

from __future__ import annotations

import argparse
import sys
import time

from devstack.two_cluster_model import run_trials


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)
    started = time.monotonic()
    summary = run_trials(args.trials, seed=args.seed)
    seconds = time.monotonic() - started
    print(f"pure-model failover trials: {summary['trials']} trials, seed {summary['seed']}, {seconds:.1f}s")
    print(f"lost records: {summary['lost']} at failover, {summary['cycle_lost']} in any cycle's translation")
    print(f"duplicates at failover: {summary['duplicates']} (planned switchovers: {summary['planned_duplicates']})")
    print(f"cycles: {summary['cycles']}, translated {summary['cycles_translated']} "
          f"({100 * summary['cycles_translated'] / max(1, summary['cycles']):.1f}%), "
          f"timestamp inversions seen {summary['timestamp_inversions']}")
    for group in ("by_strategy", "by_shape", "by_shape_mode", "by_timestamp_pattern", "by_kind"):
        print(f"\n{group.replace('_', ' ')}:")
        print(f"  {'':24} {'trials':>7} {'lost':>6} {'duplicates':>11} {'dup/trial':>10} {'0-dup trials':>13}")
        for key, bucket in sorted(summary[group].items(), key=lambda kv: str(kv[0])):
            trials = bucket["trials"]
            print(f"  {str(key):24} {trials:7d} {bucket['lost']:6d} {bucket['duplicates']:11d} "
                  f"{bucket['duplicates'] / max(1, trials):10.2f} {100 * bucket['zero_duplicate_trials'] / max(1, trials):12.1f}%")
    statuses = summary.get("cycle_statuses", {})
    if statuses:
        print("\ncycle statuses:")
        for status, n in sorted(statuses.items(), key=lambda kv: -kv[1]):
            print(f"  {status:36} {n:7d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
