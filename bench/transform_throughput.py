"""MirrorMaker 2's copy rate with the project's origin-header transforms against without them, same run
(target: the harness's configuration >= 95 % of plain MirrorMaker 2, records/s).

    .venv/bin/python bench/transform_throughput.py [--records 1000000] [--rounds 3] [--partitions 4]
        [--variants none,filter,origin,both,single] [--before-jar JAR] [--jfr DIR]

Two scratch clusters; per round and variant a fresh topic on the first cluster is filled with
``--records`` records (200-byte values, one ``trace`` header each) first, then one MirrorMaker 2
(dedicated mode, one flow, exactly-once, the dev harness's ``devstack/mirrormaker2.py``) starts and
copies the backlog. The target's log ends are read every 0.1 s; the **steady rate** is the records
between 10 % and 90 % of the backlog over the seconds between those two marks (interpolated), which
leaves out MirrorMaker 2's start, the JIT's first seconds and the last partition's tail. The
**whole rate** (first copy seen to last) is printed beside it. Variants, all on the same flow:

* ``none``: MirrorMaker 2 without transforms (the baseline);
* ``filter``: Kafka's ``Filter`` under ``HasHeaderKey{IDC}`` only (drops copies, adds nothing);
* ``origin``: the project's ``OriginHeaders`` only (adds ``IDC`` and ``Offset``, drops nothing);
* ``both``: ``Filter``+``HasHeaderKey`` then ``OriginHeaders``, two transforms;
* ``bytes``: no transform, but the backlog's records already carry two more headers (``IDX``,
  ``Offsex``) of the sizes ``IDC`` and ``Offset`` have on a copy: copies as large as ``origin``'s,
  without its code (what the added bytes cost, apart from the transform's work);
* ``single``: ``OriginHeaders`` with ``drop.copies=true``, one transform doing what ``both`` does;
* ``origin-before``, ``both-before``: ``origin`` and ``both`` with the build given by ``--before-jar``
  (e.g. a copy of an earlier build's jar), to compare two builds of the transform in one run;
* ``harness``: exactly what ``devstack/mirrormaker2.py`` configures (one flow).

Each round runs every variant once, in an order rotated from round to round, so a drift of the
shared machine's speed spreads over all of them; the medians of the steady rates are compared. A
warm-up run comes first and is not counted (``--warmup``): the first copy onto a freshly started pair
of brokers was the slowest run of every measurement (their JIT is still cold).
``--jfr DIR`` records a Java Flight Recorder profile of each run into ``DIR`` (diagnosis only: the
recording costs a little CPU of its own). Prints one line per run and a table of medians (also after
Ctrl-C, over the runs that finished; ``--medians-of FILE`` prints it for a saved output's lines).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from bench.clusters import ScratchClusters, free_port
from devstack.cluster import find_java
from devstack.connect_transform import TRANSFORM_CLASS
from devstack.mirror import MirrorEndpoint
from devstack.mirrormaker2 import MAIN_CLASS, MirrorMaker2, MirrorMaker2Config, mm2_jars, mm2_properties
from offset_pipeline.translation.headers import ORIGIN_CLUSTER_HEADER, ORIGIN_OFFSET_HEADER

BASELINE = "none"
STEADY_FROM, STEADY_TO = 0.10, 0.90


def _without_transforms(props: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if ".transforms" not in k and ".predicates" not in k}


def _filter_only(flow: str) -> dict[str, str]:
    return {
        f"{flow}.transforms": "dropCopies",
        f"{flow}.transforms.dropCopies.type": "org.apache.kafka.connect.transforms.Filter",
        f"{flow}.transforms.dropCopies.predicate": "isCopy",
        f"{flow}.predicates": "isCopy",
        f"{flow}.predicates.isCopy.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        f"{flow}.predicates.isCopy.name": ORIGIN_CLUSTER_HEADER,
    }


def _origin_only(flow: str) -> dict[str, str]:
    return {
        f"{flow}.transforms": "origin",
        f"{flow}.transforms.origin.type": TRANSFORM_CLASS,
        f"{flow}.transforms.origin.cluster.header": ORIGIN_CLUSTER_HEADER,
        f"{flow}.transforms.origin.offset.header": ORIGIN_OFFSET_HEADER,
    }


def _both(flow: str) -> dict[str, str]:
    chain = {**_filter_only(flow), **_origin_only(flow)}
    chain[f"{flow}.transforms"] = "dropCopies,origin"
    return chain


def _single(flow: str) -> dict[str, str]:
    return {**_origin_only(flow), f"{flow}.transforms.origin.drop.copies": "true"}


@dataclass(frozen=True)
class Variant:
    name: str
    origin_headers: bool  # copies carry the origin headers (the start-up probe checks them)
    edit: Callable[[dict[str, str], str], dict[str, str]] | None  # (harness props, flow) -> props
    before: bool = False  # runs the --before-jar build of the transform
    sized_like_origin: bool = False  # the backlog's records carry two headers the size of IDC and Offset


VARIANTS = {
    "none": Variant("none", False, None),
    "filter": Variant("filter", False, lambda props, flow: {**_without_transforms(props), **_filter_only(flow)}),
    "origin": Variant("origin", True, lambda props, flow: {**_without_transforms(props), **_origin_only(flow)}),
    "both": Variant("both", True, lambda props, flow: {**_without_transforms(props), **_both(flow)}),
    "bytes": Variant("bytes", False, None, sized_like_origin=True),
    "single": Variant("single", True, lambda props, flow: {**_without_transforms(props), **_single(flow)}),
    "origin-before": Variant("origin-before", True,
                             lambda props, flow: {**_without_transforms(props), **_origin_only(flow)}, True),
    "both-before": Variant("both-before", True, lambda props, flow: {**_without_transforms(props), **_both(flow)},
                           True),
    "harness": Variant("harness", True, None),
}


class BenchMirrorMaker2(MirrorMaker2):
    """The harness's MirrorMaker 2 with the variant's transforms and, on request, a JFR recording."""

    def __init__(self, config: MirrorMaker2Config, variant: Variant, jfr: Path | None, jar: Path | None):
        super().__init__(config)
        self.variant = variant
        self.jfr = jfr
        self.jar = jar

    def command(self) -> list[str]:
        if self.jar is None:
            command = super().command()
        else:  # the harness's command with another build of the transform (no rebuild from the sources)
            command = [find_java(), f"-Xmx{self.config.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                       f"-Dlog4j2.configurationFile={self.config.work_dir / 'log4j2.properties'}",
                       "-cp", f"{mm2_jars()}/*{os.pathsep}{self.jar}", MAIN_CLASS, str(self.config.properties_path)]
        if self.jfr is not None:
            command.insert(1, f"-XX:StartFlightRecording=filename={self.jfr},settings=profile")
        return command

    def write_config(self) -> None:
        self.config.work_dir.mkdir(parents=True, exist_ok=True)
        super().write_config()
        props = mm2_properties(self.config)
        if self.variant.edit is not None:
            (flow,) = (f"{s}->{t}" for s, t in self.config.flows)
            props = self.variant.edit(props, flow)
        # Java .properties values: a backslash escapes (the topic regex has them); no value here
        # starts with a blank or holds a line break.
        lines = [f"{key} = {value.replace(chr(92), chr(92) * 2)}\n" for key, value in props.items()]
        self.config.properties_path.write_text("".join(lines))


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int, origin_sized: bytes | None) -> None:
    """``records`` records over the partitions; with ``origin_sized`` (an alias) each also carries
    headers of the sizes the origin headers would have (the offset's digits: about its offset's)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "log_level": 3})
    payload = b"x" * size
    for i in range(records):
        headers = [("trace", str(i).encode())]
        if origin_sized is not None:
            headers += [("IDX", origin_sized), ("Offsex", str(i // partitions).encode())]
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=payload, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0, "the backlog was not produced"


def copied(consumer: Consumer, topic: str, partitions: int) -> int:
    """Records on the target so far; 0 while the topic MirrorMaker 2 creates is not known in full."""
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    except KafkaException:
        return 0


def crossing(samples: list[tuple[float, int]], count: float) -> float:
    """The time the copied count reached ``count``, interpolated between the two samples around it."""
    previous = samples[0]
    for sample in samples:
        if sample[1] >= count:
            (t0, n0), (t1, n1) = previous, sample
            return t1 if n1 == n0 else t0 + (t1 - t0) * (count - n0) / (n1 - n0)
        previous = sample
    raise ValueError(f"the count never reached {count}")


@dataclass(frozen=True)
class RunResult:
    steady_rate: float  # records/s between STEADY_FROM and STEADY_TO of the backlog
    whole_rate: float  # records/s from the first copy seen to the last
    steady_s: float
    startup_s: float


def one_run(clusters: ScratchClusters, variant: Variant, records: int, partitions: int, size: int,
            work: Path, jfr_dir: Path | None, jar: Path | None) -> RunResult:
    source, target = "idc1", "idc2"
    topic = f"tp.{uuid.uuid4().hex[:8]}"
    admin = clusters.admin(source)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)
    run = topic.split(".")[1]
    fill(clusters.bootstraps[source], topic, records, size, partitions,
         f"src-{run}".encode() if variant.sized_like_origin else None)
    # Aliases of the run's own: MirrorMaker 2 keeps its connector configs, offsets and status in
    # topics named after them, and a JVM started with another variant's config would first run
    # its tasks with the previous run's config found there.
    config = MirrorMaker2Config(
        (MirrorEndpoint(f"src-{run}", clusters.bootstraps[source]), MirrorEndpoint(f"dst-{run}", clusters.bootstraps[target])),
        work / f"mm2-{topic}", topics=topic.replace(".", "\\."), rest_port=free_port(),
        origin_headers=variant.origin_headers, one_way=True, heap="1g",
    )
    consumer = Consumer({"bootstrap.servers": clusters.bootstraps[target], "group.id": "bench-watermarks",
                         "log_level": 3})
    jfr = None if jfr_dir is None else jfr_dir / f"{variant.name}-{run}.jfr"
    mm2 = BenchMirrorMaker2(config, variant, jfr, jar)
    try:
        startup = mm2.start(timeout_s=180)
        samples: list[tuple[float, int]] = []
        deadline = time.monotonic() + 1800
        n = 0
        while time.monotonic() < deadline:
            n = copied(consumer, topic, partitions)
            if n:
                samples.append((time.monotonic(), n))
            if n >= records:
                break
            time.sleep(0.1)
        if n < records or len(samples) < 2:
            raise RuntimeError(f"MirrorMaker 2 copied {n} of {records} records in time; log {mm2.log_path}")
        start, end = crossing(samples, STEADY_FROM * records), crossing(samples, STEADY_TO * records)
        if end - start < 2.0:
            raise RuntimeError(f"{records} records were copied too fast to time ({end - start:.2f} s for "
                               f"{STEADY_TO - STEADY_FROM:.0%} of them): raise --records")
        whole_s = samples[-1][0] - samples[0][0]
        return RunResult((STEADY_TO - STEADY_FROM) * records / (end - start), records / whole_s, end - start, startup)
    finally:
        mm2.stop()
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every variant once")
    parser.add_argument("--warmup", type=int, default=1,
                        help="uncounted runs of the baseline first: a fresh pair of brokers copies slower")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=200, help="value bytes per record")
    parser.add_argument("--variants", default="none,filter,origin,both,single",
                        help=f"comma-separated, from {', '.join(VARIANTS)}; '{BASELINE}' is always run")
    parser.add_argument("--jfr", type=Path, help="record a JFR profile of every run into this folder")
    parser.add_argument("--before-jar", type=Path, help="the build of the transform the *-before variants run")
    parser.add_argument("--medians-of", type=Path, help="only print the table of medians for the per-run lines of "
                        "an earlier run's saved output (e.g. one interrupted with Ctrl-C); --records as it ran")
    args = parser.parse_args(argv)
    if args.medians_of is not None:
        medians_from_output(args.medians_of.read_text().splitlines(), args.records)
        return 0
    names = [BASELINE] + [n for n in args.variants.split(",") if n and n != BASELINE]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    if any(VARIANTS[n].before for n in names) and (args.before_jar is None or not args.before_jar.is_file()):
        parser.error("the *-before variants need --before-jar (an existing jar)")
    if args.jfr is not None:
        args.jfr.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[RunResult]] = {n: [] for n in names}
    try:
        with ScratchClusters() as clusters, tempfile.TemporaryDirectory(prefix="mm2-throughput-") as work:
            for _ in range(args.warmup):  # the brokers' JIT is cold: a fresh pair's first copy is slow
                result = one_run(clusters, VARIANTS[BASELINE], args.records, args.partitions, args.size, Path(work),
                                 None, None)
                print(f"warm-up  {BASELINE:13s} steady {result.steady_rate:8.0f} records/s (not counted)", flush=True)
            for round_no in range(args.rounds):
                shift = round_no % len(names)
                for name in names[shift:] + names[:shift]:
                    result = one_run(clusters, VARIANTS[name], args.records, args.partitions, args.size, Path(work),
                                     args.jfr, args.before_jar.resolve() if VARIANTS[name].before else None)
                    results[name].append(result)
                    print(f"round {round_no + 1} {name:13s} steady {result.steady_rate:8.0f} records/s "
                          f"({result.steady_s:5.1f} s for {STEADY_TO - STEADY_FROM:.0%}), whole "
                          f"{result.whole_rate:8.0f} records/s, start-up {result.startup_s:4.1f} s", flush=True)
    except KeyboardInterrupt:  # the runs so far still count (MirrorMaker 2 and the clusters were stopped)
        print("interrupted: medians of the runs that finished", flush=True)
    print_medians(results, args.records)
    return 0


RUN_LINE = re.compile(r"^round (\d+) (\S+)\s+steady\s+(\d+) records/s \(\s*([\d.]+) s for \d+%\), whole\s+(\d+) "
                      r"records/s, start-up\s+([\d.]+) s")


def medians_from_output(lines: list[str], records: int) -> None:
    """The table of medians for the per-run lines of an earlier (e.g. interrupted) run's output."""
    results: dict[str, list[RunResult]] = {}
    for line in lines:
        match = RUN_LINE.match(line)
        if match:
            _, name, steady, steady_s, whole, startup = match.groups()
            results.setdefault(name, []).append(RunResult(float(steady), float(whole), float(steady_s), float(startup)))
    print_medians(results, records)


def print_medians(results: dict[str, list[RunResult]], records: int) -> None:
    """Per variant: the medians of its runs, the steady rate against the baseline's, and the wall-clock
    microseconds per record (the copy is one task thread: poll, transform, send, commit, in turn)."""
    done = {name: runs for name, runs in results.items() if runs}
    if BASELINE not in done:
        print(f"no run of the baseline '{BASELINE}' finished: nothing to compare")
        return
    base = statistics.median(r.steady_rate for r in done[BASELINE])
    print(f"\nmedians, {records} records a run (steady = {STEADY_FROM:.0%}..{STEADY_TO:.0%} of the backlog):")
    print(f"{'variant':13s} {'runs':>4s} {'steady rec/s':>12s} {'% of none':>9s} {'min..max rec/s':>15s} "
          f"{'whole rec/s':>11s} {'us/record':>9s} {'+us vs none':>11s}")
    for name, runs in done.items():
        steady = statistics.median(r.steady_rate for r in runs)
        whole = statistics.median(r.whole_rate for r in runs)
        spread = f"{min(r.steady_rate for r in runs):.0f}..{max(r.steady_rate for r in runs):.0f}"
        print(f"{name:13s} {len(runs):4d} {steady:12.0f} {100 * steady / base:8.1f}% {spread:>15s} {whole:11.0f} "
              f"{1e6 / steady:9.2f} {1e6 / steady - 1e6 / base:11.2f}")
    # Each round ran every variant minutes apart at most: the ratio within a round leaves out most of
    # the drift of the machine's speed that spreads a variant's runs (runs i of every variant: round i)
    print(f"\nwithin each round, steady rate against {BASELINE}'s of the same round:")
    for name, runs in done.items():
        if name == BASELINE:
            continue
        ratios = [r.steady_rate / b.steady_rate for r, b in zip(runs, done[BASELINE])]
        print(f"{name:13s} " + " ".join(f"{100 * x:6.1f}%" for x in ratios)
              + f"   median {100 * statistics.median(ratios):5.1f}%")
    print(f"target: the harness's transforms (both, or single if it configures that) >= 95.0 % of {BASELINE}")

if __name__ == "__main__":
    sys.exit(main())
