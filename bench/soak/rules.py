"""Pure rules of the soak: the independent no-loss verdict, recovery counting, fits and the fault
schedule. No Kafka, no Dagster, and nothing from ``offset_pipeline`` (the checker must not share
the product's translation code, or it would share its mistakes).

NO-LOSS, checked by record identity: a group active on cluster A, committed at ``c``
there, with the standby offset ``t`` on cluster S. A failover now restarts it on S at ``t``; every
record of S below ``t`` must have been processed on A, i.e. its copy (or, for a copy, its original)
sits on A below ``c``. The data mirror writes ``IDC=<origin cluster>`` and ``Offset=<offset on the
origin>`` on every copy (README "The data mirror"), so:

* a standby record carrying ``IDC=A``, ``Offset=x`` is a copy of A's record at ``x``: safe iff ``x < c``;
* a standby record without an origin header (or ``IDC=S``) was produced on S: its copy on A carries
  ``IDC=S``, ``Offset=<its offset>``. Safe iff that copy is on A below ``c``: found directly among
  the copies read below ``c``, or at or below the newest S-copy below ``c`` (``active_last_copy``:
  the mirror copies each partition in order, exactly once, so the copies of S's records appear on A
  in S's offset order -- a copy of an earlier record is earlier on A).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

ORIGIN_CLUSTER = "IDC"
ORIGIN_OFFSET = "Offset"


@dataclass(frozen=True)
class Rec:
    """One record as the checker sees it: its offset, and its origin headers (None: an original)."""

    offset: int
    origin: str | None = None
    origin_offset: int | None = None


def rec_from_headers(offset: int, headers: Iterable[tuple[str, bytes | None]] | None) -> Rec:
    """The origin headers, parsed here (not by the product's header code)."""
    origin = origin_offset = None
    for key, value in headers or ():
        if key == ORIGIN_CLUSTER and value is not None:
            origin = value.decode(errors="replace")
        elif key == ORIGIN_OFFSET and value is not None:
            try:
                origin_offset = int(value.decode())
            except ValueError:
                origin_offset = None
    return Rec(offset, origin, origin_offset)


@dataclass(frozen=True)
class NoLossVerdict:
    checked: int  # standby records below t whose copy was looked at
    unsafe: tuple[tuple[int, str], ...]  # (standby offset, why)
    unidentified: int  # records with an origin the rule does not know (neither A nor S)

    @property
    def safe(self) -> bool:
        return not self.unsafe


def no_loss_verdict(
    active: str,
    standby: str,
    t: int,
    c: int,
    standby_records: Sequence[Rec],
    active_copies_below_c: Iterable[int] = (),
    active_last_copy: int | None = None,
) -> NoLossVerdict:
    """Judge the standby records below ``t`` (``standby_records``: those read, any window below t).

    ``active_copies_below_c``: the ``Offset`` values of the S-copies read on A below ``c``;
    ``active_last_copy``: the largest ``Offset`` of an S-copy on A below ``c`` (None: none there).
    """
    direct = set(active_copies_below_c)
    checked = unidentified = 0
    unsafe: list[tuple[int, str]] = []
    for rec in standby_records:
        if rec.offset >= t:
            continue
        if rec.origin == active:
            checked += 1
            if rec.origin_offset is None:
                unsafe.append((rec.offset, f"copy of {active} without an Offset header"))
            elif rec.origin_offset >= c:
                unsafe.append((rec.offset, f"copy of {active}@{rec.origin_offset} >= c={c}"))
        elif rec.origin is None or rec.origin == standby:
            checked += 1
            if rec.offset in direct:
                continue
            if active_last_copy is None:
                unsafe.append((rec.offset, f"no copy of {standby} records on {active} below c={c}"))
            elif rec.offset > active_last_copy:
                unsafe.append((rec.offset, f"its copy is not on {active} below c={c} "
                                           f"(newest copy there: {standby}@{active_last_copy})"))
        else:
            unidentified += 1
    return NoLossVerdict(checked, tuple(unsafe), unidentified)


# -- runs and fault windows -------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    name: str
    start: float
    end: float


def overlaps(start: float, end: float | None, windows: Iterable[Window], grace_s: float = 0.0) -> list[str]:
    """Names of the windows ``[w.start, w.end + grace_s]`` that ``[start, end]`` touches (an
    unfinished run: ``end`` None, up to now, i.e. open)."""
    stop = math.inf if end is None else end
    return [w.name for w in windows if start <= w.end + grace_s and stop >= w.start]


@dataclass(frozen=True)
class RunSeen:
    run_id: str
    job: str
    status: str
    start: float | None
    end: float | None


def run_counts(runs: Iterable[RunSeen], windows: Sequence[Window], grace_s: float = 0.0) -> dict:
    """ok / failed, inside any fault window (with ``grace_s`` after its end) and outside."""
    out = {"inside": {"ok": 0, "failed": 0, "other": 0}, "outside": {"ok": 0, "failed": 0, "other": 0},
           "failed_outside_runs": []}
    for run in runs:
        if run.start is None:
            continue
        where = "inside" if overlaps(run.start, run.end, windows, grace_s) else "outside"
        kind = {"SUCCESS": "ok", "FAILURE": "failed", "CANCELED": "failed"}.get(run.status, "other")
        out[where][kind] += 1
        if where == "outside" and kind == "failed":
            out["failed_outside_runs"].append(run.run_id)
    return out


# -- recovery ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cycle:
    """One sync run: when it ran, and the group-partitions it left synced (None: it wrote no
    monitoring rows, e.g. ClickHouse was down or the run failed)."""

    start: float
    end: float
    synced: frozenset | None


def cycles_to_recover(window: Window, cycles: Sequence[Cycle]) -> tuple[int | None, int]:
    """How many cycles after ``window.end`` until every group-partition synced by the last cycle
    before ``window.start`` is synced again (in one cycle). Returns ``(cycles, baseline size)``;
    ``cycles`` is None when it never happened in the cycles seen. Cycles are counted from the first
    one that *started* after the window ended; a cycle in flight at the end does not count."""
    ordered = sorted(cycles, key=lambda cy: cy.start)
    before = [cy for cy in ordered if cy.end <= window.start and cy.synced]
    if not before:
        return None, 0
    baseline = before[-1].synced
    after = [cy for cy in ordered if cy.start >= window.end]
    for k, cycle in enumerate(after, start=1):
        if cycle.synced is not None and baseline <= cycle.synced:
            return k, len(baseline)
    return None, len(baseline)


# -- fits -------------------------------------------------------------------------------------------


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least squares ``(slope, intercept)`` of y over x; None with fewer than 3 points or one x."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return slope, my - slope * mx


def rss_slope_pct_per_hour(samples: Sequence[tuple[float, int, float]], warmup_s: float,
                           min_span_s: float = 600.0) -> dict:
    """``samples``: (time s, root pid, RSS bytes) of one role. A restarted process starts low and
    grows again, so the fit is per pid (a *segment*), skipping each segment's first ``warmup_s``;
    the longest segment spanning at least ``min_span_s`` after that is reported: slope in % of its
    mean RSS per hour."""
    segments: dict[int, list[tuple[float, float]]] = {}
    for ts, pid, rss in samples:
        segments.setdefault(pid, []).append((ts, rss))
    best = None
    for pid, points in segments.items():
        t0 = points[0][0]
        kept = [(ts, rss) for ts, rss in points if ts - t0 >= warmup_s]
        span = kept[-1][0] - kept[0][0] if kept else 0.0
        if span < min_span_s:
            continue
        fit = linear_fit(kept)
        if fit is None:
            continue
        mean = sum(r for _, r in kept) / len(kept)
        result = {"pid": pid, "span_s": span, "mean_mb": mean / 2**20,
                  "slope_pct_per_h": 100.0 * fit[0] * 3600.0 / mean if mean else 0.0,
                  "segments": len(segments)}
        if best is None or span > best["span_s"]:
            best = result
    return best or {"pid": None, "span_s": 0.0, "mean_mb": None, "slope_pct_per_h": None, "segments": len(segments)}


def instance_peak_slope(samples: Sequence[tuple[float, int, float]], warmup_s: float, start: float,
                        min_span_s: float = 600.0) -> dict:
    """For a process that is replaced again and again (the daemon's code server, reloaded every
    minute or so, the old one ending on its heartbeat): ``samples`` are (time s, instance pid, RSS
    bytes). A single instance lives too briefly for a slope, and the sum of the overlapping lives is
    a sawtooth; what would show a leak is each new instance needing more than the last. So: each
    instance's peak RSS at the time of its peak, fitted after ``start + warmup_s``; the slope in % of
    the mean peak per hour, with how many instances, how long they lived and how many were alive at
    once at most."""
    lives: dict[int, list[tuple[float, float]]] = {}
    alive_at: dict[float, int] = {}
    for ts, pid, rss in samples:
        lives.setdefault(pid, []).append((ts, rss))
        alive_at[ts] = alive_at.get(ts, 0) + 1
    peaks = []
    for points in lives.values():
        ts, rss = max(points, key=lambda p: p[1])
        if ts - start >= warmup_s:
            peaks.append((ts, rss))
    peaks.sort()
    span = peaks[-1][0] - peaks[0][0] if peaks else 0.0
    fit = linear_fit(peaks) if span >= min_span_s else None
    mean = sum(r for _, r in peaks) / len(peaks) if peaks else 0.0
    lifetimes = [points[-1][0] - points[0][0] for points in lives.values()]
    return {"instances": len(lives), "fitted_instances": len(peaks), "span_s": span,
            "mean_peak_mb": mean / 2**20 if peaks else None, "max_peak_mb": max((r for _, r in peaks), default=0) / 2**20,
            "peak_slope_pct_per_h": (100.0 * fit[0] * 3600.0 / mean) if fit and mean else None,
            "mean_life_s": sum(lifetimes) / len(lifetimes) if lifetimes else None,
            "most_alive_at_once": max(alive_at.values(), default=0)}


def bytes_growth(samples: Sequence[tuple[float, int]], warmup_s: float, start: float, days: float = 30.0,
                 retention_days: float | None = None, cap_bytes: float | None = None, bound: str = "") -> dict:
    """Bytes per hour (linear fit after ``start + warmup_s``) and the size in ``days`` at that rate:
    ``projected_bytes`` linearly (no retention), ``bounded_bytes`` with what bounds the store -- rows
    or runs older than ``retention_days`` deleted (at most ``retention_days`` of growth are kept),
    files rotated at ``cap_bytes``."""
    kept = [(ts, b) for ts, b in samples if ts - start >= warmup_s] or list(samples)
    fit = linear_fit(kept)
    last = samples[-1][1] if samples else 0
    per_h = fit[0] * 3600.0 if fit else None
    projected = None if per_h is None else last + max(per_h, 0.0) * 24 * days
    bounded = projected
    if bounded is not None and retention_days is not None and retention_days < days:
        bounded = max(last, max(per_h, 0.0) * 24 * retention_days)
    if bounded is not None and cap_bytes is not None:
        bounded = min(bounded, max(last, cap_bytes))
    return {"last_bytes": last, "bytes_per_h": per_h, "projected_bytes": projected, "bounded_bytes": bounded,
            "bound": bound}


# -- the fault schedule -----------------------------------------------------------------------------

ALL_FAULTS = ("broker_kill", "mirror_stop", "cluster_down", "spark_kill", "run_worker_kill",
              "daemon_restart", "clickhouse_down")


#: How long each fault takes, roughly (its window), for spacing them.
EXPECTED_S = {"broker_kill": 30.0, "mirror_stop": 300.0, "cluster_down": 120.0, "spark_kill": 60.0,
              "run_worker_kill": 120.0, "daemon_restart": 30.0, "clickhouse_down": 120.0}


def fault_schedule(faults: Sequence[str], duration_s: float, warmup_s: float, tail_s: float,
                   expected_s: Mapping[str, float] | None = None) -> list[tuple[float, str]]:
    """Each fault's start (seconds after the soak started): after the warm-up, each fault followed by
    an equal quiet gap (for its recovery to be seen), the last gap and ``tail_s`` free of faults."""
    if not faults:
        return []
    expected = {**EXPECTED_S, **(expected_s or {})}
    busy = sum(expected.get(name, 60.0) for name in faults)
    span = duration_s - warmup_s - tail_s
    if span <= busy:
        raise ValueError(f"no room for faults {list(faults)}: {span:.0f}s between warm-up and tail, "
                         f"they take about {busy:.0f}s")
    gap = (span - busy) / len(faults)
    out, at = [], warmup_s
    for name in faults:
        out.append((at, name))
        at += expected.get(name, 60.0) + gap
    return out


def merge_counts(counts: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    out = dict(counts)
    for k, v in more.items():
        out[k] = out.get(k, 0) + v
    return out


@dataclass
class CheckerTotals:
    rounds: int = 0
    checks: int = 0  # (group-partition, moment) pairs judged
    records: int = 0  # standby records judged
    unsafe: int = 0
    unidentified: int = 0
    not_synced: int = 0  # no standby offset yet
    read_errors: int = 0
    distinct: set = field(default_factory=set)
    unsafe_examples: list = field(default_factory=list)
    read_error_examples: list = field(default_factory=list)
