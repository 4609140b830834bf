"""The soak's report: the table (text), ``soak.json`` and ``soak.png``."""

from __future__ import annotations

import json
from pathlib import Path

MB = 2**20


def _fmt(value, spec: str = ".1f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def table(result: dict) -> str:
    lines = []
    meta = result["meta"]
    lines.append(f"soak: {meta['duration_s']:.0f}s at {meta['group_partitions']} group-partitions "
                 f"({meta['topics']} topics x {meta['partitions']} partitions x {meta['groups_per_topic']} groups), "
                 + ("continuous sync (a checkpoint every 30 s counts as a cycle), " if meta.get("sync_mode") == "continuous"
                    else f"sync every {meta['sync_interval_s']}s, ")
                 + f"groups commit every {meta.get('commit_every_s', 5)}s, warm-up {meta['warmup_s']:.0f}s, seed {meta['seed']}")
    runs = result["runs"]
    lines.append("")
    lines.append("| runs | ok | failed | other |")
    lines.append("|---|---|---|---|")
    for where in ("outside", "inside"):
        r = runs[where]
        lines.append(f"| {where} fault windows | {r['ok']} | {r['failed']} | {r['other']} |")
    if runs["failed_outside_runs"]:
        lines.append(f"failed outside fault windows: {', '.join(runs['failed_outside_runs'])}")
    lines.append("")
    lines.append("| fault | at (min) | window (s) | cycles to recover | baseline group-partitions | synced share at cycle 1 / 2 / 3 | what |")
    lines.append("|---|---|---|---|---|---|---|")
    for f in result["faults"]:
        shares = " / ".join(_fmt(s, ".0%") if s is not None else "-" for s in f.get("shares", [])[:3]) or "-"
        lines.append(f"| {f['name']} | {f['at_min']:.1f} | {f['window_s']:.0f} | "
                     f"{_fmt(f.get('cycles_to_recover'), 'd', 'not within the run')} | {f.get('baseline', '-')} | "
                     f"{shares} | {f['what']} |")
    c = result["checker"]
    lines.append("")
    lines.append("| no-loss checker (independent, by record identity) | |")
    lines.append("|---|---|")
    for key in ("unsafe", "checks", "distinct_group_partitions", "records_judged", "rounds", "not_synced",
                "unidentified", "read_errors"):
        lines.append(f"| {key.replace('_', ' ')} | {c[key]} |")
    lines.append("")
    lines.append("| process | mean RSS (MB) | slope after warm-up (%/h) | anonymous RSS (MB) | its slope (%/h) "
                 "| fitted over (min) | restarts seen |")
    lines.append("|---|---|---|---|---|---|---|")
    for role, r in sorted(result["rss"].items()):
        lines.append(f"| {role} | {_fmt(r['mean_mb'], '.0f')} | {_fmt(r['slope_pct_per_h'], '+.1f')} | "
                     f"{_fmt(r.get('anon_mean_mb'), '.0f')} | {_fmt(r.get('anon_slope_pct_per_h'), '+.1f')} | "
                     f"{r['span_s'] / 60:.0f} | {max(r['segments'] - 1, 0)} |")
    inst = result.get("code_server_instances")
    if inst and inst["rss"]["instances"]:
        r, a = inst["rss"], inst["anon"]
        lines.append("")
        lines.append("The daemon's code server is replaced every minute or so; its row above sums the overlapping "
                     "lives. Per instance (each one's peak, fitted over time):")
        lines.append("")
        lines.append("| code server instances | fitted | mean life (s) | most alive at once | mean peak RSS (MB) "
                     "| max peak (MB) | peak slope (%/h) | mean peak anonymous (MB) | its slope (%/h) |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        lines.append(f"| {r['instances']} | {r['fitted_instances']} | {_fmt(r['mean_life_s'], '.0f')} | "
                     f"{r['most_alive_at_once']} | {_fmt(r['mean_peak_mb'], '.0f')} | {_fmt(r['max_peak_mb'], '.0f')} | "
                     f"{_fmt(r['peak_slope_pct_per_h'], '+.1f')} | {_fmt(a['mean_peak_mb'], '.0f')} | "
                     f"{_fmt(a['peak_slope_pct_per_h'], '+.1f')} |")
    lines.append("")
    lines.append("| store | now (MB) | growth (MB/h) | 30 days at that rate, no retention (GB) "
                 "| 30 days with retention (GB) | bounded by |")
    lines.append("|---|---|---|---|---|---|")
    for store, s in result["stores"].items():
        per_h = None if s["bytes_per_h"] is None else s["bytes_per_h"] / MB
        proj = None if s["projected_bytes"] is None else s["projected_bytes"] / 2**30
        bounded = None if s.get("bounded_bytes") is None else s["bounded_bytes"] / 2**30
        lines.append(f"| {store} | {s['last_bytes'] / MB:.1f} | {_fmt(per_h, '.2f')} | {_fmt(proj, '.2f')} | "
                     f"{_fmt(bounded, '.2f')} | {s.get('bound') or '-'} |")
    return "\n".join(lines)


def write_json(result: dict, samples: dict, out: Path) -> Path:
    path = out / "soak.json"
    path.write_text(json.dumps({**result, "samples": samples}, indent=1, default=str))
    return path


def write_png(result: dict, samples: dict, out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t0 = result["meta"]["started"]
    fig, axes = plt.subplots(3, 1, figsize=(12, 12), sharex=True)

    def shade(ax):
        for f in result["faults"]:
            ax.axvspan((f["start"] - t0) / 60, (f["end"] - t0) / 60, color="red", alpha=0.12)
            ax.text((f["start"] - t0) / 60, 1.0, f["name"], rotation=90, va="top", fontsize=7,
                    transform=ax.get_xaxis_transform())

    by_role: dict[str, list] = {}
    for ts, role, _pid, rss in samples["rss"]:
        by_role.setdefault(role, []).append(((ts - t0) / 60, rss / MB))
    for role, pts in sorted(by_role.items()):
        axes[0].plot([p[0] for p in pts], [p[1] for p in pts], label=role, lw=1)
    axes[0].set_ylabel("RSS (MB)")
    axes[0].legend(fontsize=7, ncol=3)
    shade(axes[0])
    by_store: dict[str, list] = {}
    for ts, store, size in samples["bytes"]:
        by_store.setdefault(store, []).append(((ts - t0) / 60, size / MB))
    for store, pts in sorted(by_store.items()):
        axes[1].plot([p[0] for p in pts], [p[1] for p in pts], label=store)
    axes[1].set_ylabel("bytes on disk (MB)")
    axes[1].legend(fontsize=8)
    shade(axes[1])
    ok = failed = 0
    xs, oks, fails = [], [], []
    for run in sorted((r for r in samples["runs"] if r["end"]), key=lambda r: r["end"]):
        ok += run["status"] == "SUCCESS"
        failed += run["status"] in ("FAILURE", "CANCELED")
        xs.append((run["end"] - t0) / 60)
        oks.append(ok)
        fails.append(failed)
    axes[2].step(xs, oks, where="post", label="runs ok", color="green")
    axes[2].step(xs, fails, where="post", label="runs failed", color="red")
    axes[2].set_ylabel("runs (cumulative)")
    axes[2].set_xlabel("minutes since start (fault windows shaded)")
    axes[2].legend()
    shade(axes[2])
    fig.suptitle(f"bin/soak: {result['meta']['group_partitions']} group-partitions, "
                 f"{result['meta']['duration_s'] / 60:.0f} min")
    fig.tight_layout()
    path = out / "soak.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
