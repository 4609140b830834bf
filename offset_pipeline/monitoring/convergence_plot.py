"""The convergence graph (docs/operating/monitoring.md) as a PNG, for the metrics asset's metadata: the Dagster UI
shows sync health without Grafana. Per cluster: dD per minute and its trailing 10-minute sum,
which stays near 0 while sync works and grows when it stops."""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

WINDOW = timedelta(minutes=10)


def window_sums(points: Iterable[tuple[datetime, str, int]]) -> dict[str, list[tuple[datetime, int, int]]]:
    """(minute, cluster, dD) -> per cluster, in time order: (minute, dD, sum of dD over the trailing
    10 minutes, that minute included)."""
    by_cluster: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for minute, cluster, dd in points:
        by_cluster[cluster].append((minute, int(dd)))
    out = {}
    for cluster, series in by_cluster.items():
        series.sort()
        rows, start, running = [], 0, 0
        for minute, dd in series:
            running += dd
            while series[start][0] <= minute - WINDOW:
                running -= series[start][1]
                start += 1
            rows.append((minute, dd, running))
        out[cluster] = rows
    return out


def convergence_png(points: Iterable[tuple[datetime, str, int]], title: str = "offset sync convergence") -> bytes:
    import matplotlib

    matplotlib.use("Agg")  # no display: rendered in the run's process
    from matplotlib import pyplot as plt

    sums = window_sums(points)
    fig, ax = plt.subplots(figsize=(8, 3), dpi=100)
    try:
        for cluster, rows in sorted(sums.items()):
            times = [r[0] for r in rows]
            line = ax.plot(times, [r[2] for r in rows], linewidth=2, label=f"{cluster}: dD, 10-min sum")[0]
            ax.plot(times, [r[1] for r in rows], linewidth=0.8, alpha=0.5, color=line.get_color(),
                    label=f"{cluster}: dD per minute")
        ax.axhline(0, color="grey", linewidth=0.5)
        ax.set_title(title)
        ax.set_ylabel("records")
        if sums:
            ax.legend(loc="upper left", fontsize="small")
        else:
            ax.text(0.5, 0.5, "no monitoring rows yet", ha="center", va="center", transform=ax.transAxes)
        fig.autofmt_xdate()
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return _palette_png(buffer.getvalue())
    finally:
        plt.close(fig)


def _palette_png(png: bytes, colors: int = 64) -> bytes:
    """The same picture with a 64-colour palette: a third of the bytes. The picture rides in the
    metadata of every cycle's materialization (kept in Dagster's event log), so its size is storage
    paid every 30 seconds."""
    from PIL import Image  # matplotlib's own dependency

    out = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colors).save(out, format="PNG", optimize=True)
    return out.getvalue()


def as_markdown_image(png: bytes, alt: str = "convergence") -> str:
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"
