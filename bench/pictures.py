"""The pictures of the benchmarks that print tables but draw nothing themselves, drawn from the summary
each wrote to ``bench/results/<benchmark>/`` (``scale_curve`` and the soak draw their own). Run after
a benchmark's summary is replaced; asserts nothing.

    .venv/bin/python -m bench.pictures [--only freshness,compare-mm2,...]

* ``freshness``: ``summary.json`` (``python -m bench.freshness --json``): sync latency and cycle
  seconds by quantile, against the targets (p50 <= 1 s, p99 <= 5 s);
* ``compare-mm2``: ``output.txt`` (what ``bin/compare-mm2`` prints): duplicated records per failover
  and lost records per row of its first table;
* ``failover-trials``: ``summary.json`` (``python -m bench.failover_trials --json``): trials, lost and
  duplicated records by topic shape and timestamp pattern;
* ``transform-throughput``: ``summary.txt`` (what ``bench.transform_throughput`` prints): each
  variant's median steady copy rate with its runs' range, against 95 % of no transform;
* ``storage``: ``upkeep-effect.txt`` (what ``bench.clickhouse_upkeep_effect`` prints): bytes per row
  of each table before and after the project's codecs.

Each picture is ``<benchmark>.png`` beside its summary. Then every benchmark's picture (these and
``scale-curve/scale_curve.png``, ``soak/soak.png``) is copied to ``docs/img/results/<benchmark>.png``,
where the results pages show it (the docs site serves files under ``docs/`` only).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from devstack.paths import REPO_ROOT


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def freshness(folder: Path) -> Path:
    summary = json.loads((folder / "summary.json").read_text())
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    labels = ["p50", "p90", "p99", "max"]
    latency = [summary.get(f"latency_{q}_s") for q in labels]
    cycle = [summary.get("cycle_p50_s"), None, summary.get("cycle_p99_s"), summary.get("cycle_max_s")]
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [v or 0 for v in latency], 0.4, label="sync latency: group commit to standby committed")
    ax.bar([x + 0.2 for x in xs], [v or 0 for v in cycle], 0.4, label="a cycle")
    for x, v in zip(xs, latency):
        ax.annotate(f"{v:.2f} s", (x - 0.2, v), ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="tab:green", linestyle="--", linewidth=1, label="target p50 <= 1 s")
    ax.axhline(5.0, color="tab:red", linestyle="--", linewidth=1, label="target p99 <= 5 s")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("seconds")
    ax.set_title(f"continuous sync at {summary['group_partitions']:,} group-partitions, "
                 f"{summary['rate']:g} records/s, {summary['commits_settled']:,} commits")
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, plt, folder / "freshness.png")


# a row of compare_mm2's table: system, setting, then the numeric columns (the setting holds spaces)
_MM2_ROW = re.compile(r"^(MirrorMaker 2|offset_pipeline)\s+(.+?)\s+(\d+)s\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+")


def compare_mm2_rows(text: str) -> list[tuple[str, int, float]]:
    """(system and setting, lost, mean duplicates per failover) of each row of the first table."""
    rows = []
    for line in text.splitlines():
        if line.startswith("by timestamp pattern"):
            break  # the first table only: one row per system and setting
        match = _MM2_ROW.match(line)
        if match:
            system, setting = match.group(1), match.group(2)
            rows.append((f"{system}\n{setting}", int(match.group(6)), float(match.group(7))))
    return rows


def compare_mm2(folder: Path) -> Path:
    rows = compare_mm2_rows((folder / "output.txt").read_text())
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    names = [r[0] for r in rows]
    colors = ["tab:orange" if n.startswith("MirrorMaker") else "tab:blue" for n in names]
    ax.barh(range(len(rows)), [max(r[2], 0.1) for r in rows], color=colors)
    for y, (_, lost, dup) in enumerate(rows):
        ax.annotate(f"{dup:g} duplicated, {lost} lost", (max(dup, 0.1), y), va="center", fontsize=8,
                    xytext=(4, 0), textcoords="offset points")
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("records read again per failover (mean; log scale)")
    ax.set_title("a failover every 0.1 s of the window: MirrorMaker 2 and this project")
    return _save(fig, plt, folder / "compare-mm2.png")


def failover_trials(folder: Path) -> Path:
    summary = json.loads((folder / "summary.json").read_text())
    groups = summary["by_shape_and_pattern"]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.2))
    names = [f"{g['shape']}\n{g['pattern']}" for g in groups]
    xs = range(len(groups))
    ax.bar(xs, [g["duplicates"] / max(1, g["trials"]) for g in groups], color="tab:blue",
           label="duplicated records per trial")
    for x, g in zip(xs, groups):
        ax.annotate(f"{g['trials']} trials\n{g['lost']} lost", (x, g["duplicates"] / max(1, g["trials"])),
                    ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs), names, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("records read again per trial")
    ax.set_ylim(0, max(1.5, max(g["duplicates"] / max(1, g["trials"]) for g in groups) * 1.5))
    ax.set_title(f"{summary['trials']} failover trials, mirror {summary['mirror']}: "
                 f"{summary['lost']} lost, one-way {summary['one_way_zero_duplicate_trials']}/"
                 f"{summary['one_way_trials']} without a duplicate")
    return _save(fig, plt, folder / "failover-trials.png")


# a row of transform_throughput's medians table: variant, runs, steady rec/s, % of none, min..max
_THROUGHPUT_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)%\s+(\d+)\.\.(\d+)\s")


def throughput_rows(text: str) -> list[tuple[str, int, float, int, int]]:
    """(variant, median steady records/s, % of none, lowest, highest run) of the first medians table."""
    rows = []
    for line in text.splitlines():
        match = _THROUGHPUT_ROW.match(line)
        if match:
            rows.append((match.group(1), int(match.group(3)), float(match.group(4)),
                         int(match.group(5)), int(match.group(6))))
        elif rows and line.startswith("target"):
            break  # the first medians table: the latest run's
    return rows


def transform_throughput(folder: Path) -> Path:
    rows = throughput_rows((folder / "summary.txt").read_text())
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = range(len(rows))
    medians = [r[1] for r in rows]
    ax.bar(xs, medians, color=["tab:gray" if r[0] == "none" else "tab:blue" for r in rows])
    ax.errorbar(xs, medians, yerr=[[r[1] - r[3] for r in rows], [r[4] - r[1] for r in rows]], fmt="none",
                ecolor="black", capsize=4, label="runs' range")
    for x, r in zip(xs, rows):
        ax.annotate(f"{r[2]:.1f} %", (x, r[1]), ha="center", va="bottom", fontsize=8, xytext=(12, 2),
                    textcoords="offset points")
    none = next((r[1] for r in rows if r[0] == "none"), None)
    if none:
        ax.axhline(0.95 * none, color="tab:red", linestyle="--", linewidth=1, label="target: 95 % of none")
    ax.set_xticks(list(xs), [r[0] for r in rows])
    ax.set_ylabel("records/s copied (median, 10-90 % of the backlog)")
    ax.set_title("MirrorMaker 2's copy rate with and without the transform")
    ax.legend(fontsize=8)
    return _save(fig, plt, folder / "transform-throughput.png")


# a row of clickhouse_upkeep_effect's table: table, rows, before MB, B/row, after MB, B/row, smaller
_UPKEEP_ROW = re.compile(r"^(offset_\w+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)%")


def upkeep_rows(text: str) -> list[tuple[str, float, float, int]]:
    """(table, bytes per row before, after, % smaller) of each table's row."""
    rows = []
    for line in text.splitlines():
        match = _UPKEEP_ROW.match(line)
        if match:
            rows.append((match.group(1), float(match.group(4)), float(match.group(6)), int(match.group(7))))
    return rows


def storage(folder: Path) -> Path:
    rows = upkeep_rows((folder / "upkeep-effect.txt").read_text())
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r[1] for r in rows], 0.4, label="before (ClickHouse's default codec)")
    ax.bar([x + 0.2 for x in xs], [r[2] for r in rows], 0.4, label="with the project's codecs")
    for x, r in zip(xs, rows):
        ax.annotate(f"-{r[3]} %", (x + 0.2, r[2]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [r[0] for r in rows], fontsize=7, rotation=25, ha="right")
    ax.set_ylabel("bytes per row on disk (merged)")
    ax.set_title("ClickHouse bytes per row, 15 minutes at 10,000 group-partitions")
    ax.legend(fontsize=8)
    return _save(fig, plt, folder / "storage.png")


def _save(fig, plt, path: Path) -> Path:
    fig.tight_layout()
    # no software/date metadata: a redraw of the same summary gives the same file
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


PICTURES: dict[str, Callable[[Path], Path]] = {
    "freshness": freshness,
    "compare-mm2": compare_mm2,
    "failover-trials": failover_trials,
    "transform-throughput": transform_throughput,
    "storage": storage,
}


#: the pictures the benchmarks draw themselves
OWN_PICTURES = {"scale-curve": "scale_curve.png", "soak": "soak.png"}


def copy_to_docs(results: Path, docs_img: Path) -> list[Path]:
    """Every benchmark's picture to ``docs_img/<benchmark>.png``; a missing one is skipped."""
    docs_img.mkdir(parents=True, exist_ok=True)
    copied = []
    sources = {name: results / name / f"{name}.png" for name in PICTURES}
    sources.update({name: results / name / file for name, file in OWN_PICTURES.items()})
    for name, source in sorted(sources.items()):
        if source.exists():
            copied.append(Path(shutil.copyfile(source, docs_img / f"{name}.png")))
    return copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "bench" / "results")
    parser.add_argument("--docs-img", type=Path, default=REPO_ROOT / "docs" / "img" / "results")
    parser.add_argument("--only", default=",".join(PICTURES), help="comma-separated benchmarks to draw")
    args = parser.parse_args(argv)
    for name in filter(None, args.only.split(",")):
        print("drew", PICTURES[name](args.results / name))
    for path in copy_to_docs(args.results, args.docs_img):
        print("copied", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
