"""CPU-seconds per kind of process on the whole machine while a command runs, sampled every two
seconds: where a run of the suite (or of anything else) spends the cores.

    .venv/bin/python -m bench.suite_census [--interval-s 2] -- bin/test

Every process alive at a sample is read (psutil): its user+sys time, kept per (pid, start time), so
a process counts once and a pid reused later counts as a new one; a process that ran before the
command started counts only what it spent after. A process
that lives less than one interval is missed. A process's kind is taken from its command line when it
is first seen (:func:`kind_of`). The table counts every process on the machine, not only the
command's descendants: a stack's parts are started detached. Run it on an otherwise idle machine.

A second table names the test folder each process works in (:func:`folder_of`: the first folder
under a pytest worker's base temp, ``popen-gwN/<folder>``, as a fixture's ``tmp_path_factory``
names it), with how many processes of it were seen: which fixtures' brokers, stacks and JVMs cost
the run most, and how often they were started.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import psutil

#: (kind, words that all appear in the command line), first match wins
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Kafka broker", ("java", "kafka.Kafka")),
    ("MirrorMaker 2", ("java", "MirrorMaker")),
    ("Spark (JVM)", ("java", "spark")),
    ("other JVM", ("java",)),
    ("Spark Python workers", ("pyspark.daemon",)),
    ("Chromium", ("chromium",)),
    ("Dagster webserver", ("dagster_webserver",)),
    ("Dagster daemon", ("dagster._daemon",)),
    ("Dagster code server", ("dagster", "api grpc")),
    ("Dagster run worker", ("dagster", "execute_run")),
    ("the sync's Kafka client processes", ("kafka_io.isolated",)),
    ("pytest workers", ("exec(eval(sys.stdin.readline()))",)),
    ("multiprocessing children", ("multiprocessing",)),
    ("PostgreSQL", ("postgres",)),
)


def kind_of(command_line: str) -> str:
    """The kind of a process by its command line (pure)."""
    for kind, words in KINDS:
        if all(word in command_line for word in words):
            return kind
    return "other"


_TEST_FOLDER = re.compile(r"/popen-gw\d+/([^/\s:]+)")
#: the session's shared pair of clusters lives outside the workers' folders (tests/helpers/shared_pair.py)
_SESSION_PAIR = "/offset-pipeline-session-pair-"


def folder_of(command_line: str) -> str:
    """The test folder a process works in, by the first ``popen-gwN/<folder>`` path in its command
    line, without the number pytest appends (``ui_stack0`` -> ``ui_stack``); ``session pair`` for the
    session's shared clusters and their mirror; ``-`` if none (pure)."""
    if _SESSION_PAIR in command_line:
        return "session pair"
    found = _TEST_FOLDER.search(command_line)
    return re.sub(r"\d+$", "", found[1]) if found else "-"


def program_of(command_line: str) -> str:
    """A process's program, for the processes no kind names: the executable's name and, for an
    interpreter, the module or script it runs (``python -m devstack``, ``python bin/x.py``) (pure)."""
    words = command_line.split()
    if not words:
        return "(no command line)"
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if program.startswith("python") or program in ("bash", "sh"):
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
            rest = rest[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"{program} -m {rest[1]}"
        if rest[:1] == ["-c"]:
            return f"{program} -c"
        if rest:
            return f"{program} {rest[0].rsplit('/', 1)[-1]}"
    return program


#: one process seen: its kind, its test folder, the CPU-seconds it spent while the command ran, its
#: program (:func:`program_of`)
Seen = tuple[str, str, float, str]


def census(command: list[str], interval_s: float) -> tuple[int, float, list[Seen]]:
    """Run ``command``; its exit code, seconds, and every process seen with its CPU-seconds."""
    # (pid, start time) -> (kind, folder, program, CPU when first seen if it ran before the command, last CPU)
    seen: dict[tuple[int, float], tuple[str, str, str, float, float]] = {}
    started, started_at = time.monotonic(), time.time()
    proc = subprocess.Popen(command)
    try:
        while True:
            for p in psutil.process_iter(["pid", "create_time", "cmdline", "cpu_times"]):
                info = p.info
                if info["cpu_times"] is None:
                    continue
                key = (info["pid"], info["create_time"])
                cpu = info["cpu_times"].user + info["cpu_times"].system
                if key in seen:
                    kind, folder, program, before, _ = seen[key]
                else:  # what a process spent before the command started is not the command's
                    line = " ".join(info["cmdline"] or [])
                    kind, folder, program, before = kind_of(line), folder_of(line), program_of(line), (
                        cpu if info["create_time"] < started_at else 0.0)
                seen[key] = (kind, folder, program, before, cpu)
            if proc.poll() is not None:
                break
            time.sleep(interval_s)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM / SIGHUP (main): the command stops with it
        proc.terminate()
        proc.wait(timeout=60)
    return (proc.returncode, time.monotonic() - started,
            [(kind, folder, cpu - before, program) for kind, folder, program, before, cpu in seen.values()])


def totals_by(processes: list[Seen], field: int) -> tuple[Counter, Counter]:
    """CPU-seconds and process counts per kind (``field`` 0), per test folder (1) or per program (3) (pure)."""
    cpu, count = Counter(), Counter()
    for process in processes:
        cpu[process[field]] += process[2]
        count[process[field]] += 1
    return cpu, count


def print_table(table: tuple[Counter, Counter], everything: float, limit: int | None = None) -> None:
    """One line per name of ``totals_by``'s table, costliest first: CPU-s, share, processes."""
    cpu, count = table
    for name, seconds in cpu.most_common(limit):
        print(f"{seconds:9,.0f} CPU-s {100 * seconds / max(everything, 1):5.1f} %  {name} ({count[name]} processes)")


def _interrupted(signum, _frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval-s", type=float, default=2.0)
    parser.add_argument("--folders", type=int, default=25, help="how many test folders to list")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    # Stopped as by Ctrl-C: the command is stopped too. SIGINT is set here as well: a process started
    # with SIGINT ignored (a background job, or a parent that ignored it) keeps it ignored otherwise,
    # and a suite's test of this stop then waited in vain.
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _interrupted)
    code, seconds, processes = census(command, args.interval_s)
    totals, counts = totals_by(processes, 0)
    everything = sum(totals.values())
    print(f"\n{' '.join(command)}: exit {code}, {seconds / 60:.1f} min, {everything:,.0f} CPU-s "
          f"({everything / max(seconds, 1):.2f} cores on average)")
    print_table((totals, counts), everything)
    print("\nthe processes of no kind above, by program, the 10 costliest:")
    print_table(totals_by([p for p in processes if p[0] == "other"], 3), everything, 10)
    print(f"\nby test folder (popen-gwN/<folder>; - for none), the {args.folders} costliest:")
    print_table(totals_by(processes, 1), everything, args.folders)
    return code


if __name__ == "__main__":
    sys.exit(main())
