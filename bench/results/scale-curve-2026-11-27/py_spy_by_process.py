"""How py-spy-by-process.txt was made from a py-spy raw profile of a scale_cycles.py process and its
children (the Spark Python workers, the Kafka child processes, the JVM):

    py-spy record --subprocesses --nonblocking -r 50 -d 28 --format raw -o spy.txt -p <scale_cycles.py pid>
    .venv/bin/python bench/results/scale-curve-2026-11-27/py_spy_by_process.py spy.txt 40 [driver|worker|kafka-child]

Prints the samples per kind of process, then the top frames by self and by inclusive samples.
"""
import collections
import re
import sys


def main(path: str, top: int = 30, only: str | None = None) -> None:
    own = collections.Counter()
    inclusive = collections.Counter()
    processes = collections.Counter()
    for line in open(path):
        line = line.rstrip()
        if not line:
            continue
        stack, count = line.rsplit(" ", 1)
        n = int(count)
        frames = stack.split(";")
        # py-spy nests a child's frames under its parent's: the innermost "process" frame is the sampled one
        at = max(i for i, f in enumerate(frames) if f.startswith("process "))
        proc = frames[at]
        kind = ("worker" if "pyspark.daemon" in proc else "kafka-child" if "isolated" in proc
                else "jvm" if "java" in proc else "driver")
        processes[kind] += n
        if only and kind != only:
            continue
        names = [re.sub(r"\(/\S*/site-packages/", "(", f) for f in frames[at + 1:]]
        if names:
            own[(kind, names[-1])] += n
        for name in set(names):
            inclusive[(kind, name)] += n
    print("samples by process:", processes.most_common())
    print("--- self")
    for (kind, name), n in own.most_common(top):
        print(f"{n:6d} {kind:8s} {name[:150]}")
    print("--- inclusive")
    for (kind, name), n in inclusive.most_common(top * 2):
        print(f"{n:6d} {kind:8s} {name[:150]}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30, sys.argv[3] if len(sys.argv) > 3 else None)
