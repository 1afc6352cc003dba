"""The Nexmark benchmark's report: its RESULTS.md section and a chart of refresh time against change size.

Example:
    >>> results = json.loads(RESULTS_JSON.read_text())
    >>> print(write(results))        # rewrites bench/RESULTS.md's nexmark section and results/nexmark.png
"""
from __future__ import annotations

import json
from pathlib import Path

from bench.report import rewrite_section
from bench.windows import BENCH_DIR, RESULTS_MD

RESULTS_JSON = BENCH_DIR / "results" / "nexmark.json"
CHART = BENCH_DIR / "results" / "nexmark.png"
SCALES_CHART = BENCH_DIR / "results" / "nexmark-scales.png"   # every results/nexmark*.json in one chart
SIDES = ("incremental", "full", "streaming")
TARGETS = {"incremental/streaming": 1.0, "incremental/full": 0.2}


def write(results: dict, md: Path = RESULTS_MD, chart: Path = CHART) -> str:
    """Rewrite the nexmark section of ``md`` and draw ``chart``; return the section."""
    plot(results, chart)
    text = markdown(results)
    rewrite_section(md, "nexmark", "Nexmark: incremental vs full vs Structured Streaming", text)
    return text


def markdown(results: dict) -> str:
    m, load = results["machine"], results["load_average"]
    lines = [
        f"Measured {results['measured_at'][:10]} on {m['cores']} cores / {m['memory_gib']} GiB, Spark {m['spark']},"
        f" Delta {m['delta']}, Python {m['python']}, Java {m['java']}, driver memory"
        f" {m['spark_conf'].get('spark.driver.memory')}; batches per variant: "
        + ", ".join(f"{k} {v}" for k, v in results["rounds"].items())
        + f"; load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after;"
        f" whole run {results['total_s'] / 60:.0f} min.", "",
        "Ratios (median seconds per refresh of one side / the other's; paired = median of the per-batch ratios):", "",
        "| Bids | Variant | Workload | Incremental / Streaming | Paired | Incremental / Full | Paired |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for run in results["runs"]:
        for name, summary in run["summary"].items():
            r = summary["ratios"]
            auto = f" (AUTO: full in {summary['auto_full']} of {summary['rounds']})" if summary.get("auto_full") else ""
            lines.append(f"| {run['bids']:,} | {run['variant']} | {name}{auto} | {_ratio(r, 'incremental/streaming')}"
                         f" | {_ratio(r, 'incremental/full')} |")
    lines += ["", "Targets: incremental / streaming <= 1.0 on append-only batches; incremental / full <= 0.2"
              " with updates and deletes at 10M bids. Streaming runs on the append-only variant only: it"
              " cannot retract deleted or updated bids. The incremental side is the view under REFRESH POLICY"
              f" {results.get('policy', 'AUTO')}; \"AUTO: full in k of n\" marks batches its estimate refreshed"
              " in full (FULL_CHEAPER), as users get it.", ""]
    lines += _figures(results)
    lines += ["", *_phases(results)]
    lines += ["", *_checks(results)]
    notes = results.get("notes", {})
    if notes:
        lines += ["", *[f"- {name}: {note}." for name, note in notes.items()]]
    if CHART.exists():
        lines += ["", f"![refresh time against change size](results/{CHART.name})"]
    return "\n".join(lines)


def _ratio(ratios: dict, key: str) -> str:
    if key not in ratios:
        return "n/a | n/a"
    value = ratios[key]["ratio"]
    mark = f"**{value:.2f}**" + ("" if value <= TARGETS[key] else " (over)")
    return f"{mark} | {ratios[key]['paired']:.2f}"


def _figures(results: dict) -> list[str]:
    lines = ["Per refresh (medians over the batches; peak heap: the highest of the batches):", "",
             "| Bids | Variant | Workload | Side | Seconds | Events/s | Peak heap MiB | Source files read"
             " | Source MiB read | Read / change bytes | Read / table bytes | Initial s |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run in results["runs"]:
        for name, summary in run["summary"].items():
            for side, f in summary["medians"].items():
                initial = run["initial"][name][side]["seconds"]
                lines.append(
                    f"| {run['bids']:,} | {run['variant']} | {name} | {side} | {f['seconds']:.1f} | {f['events_per_s']:,.0f}"
                    f" | {f['peak_heap_mib']:,.0f} | {f['source_files']:.0f} | {f['source_bytes'] / 2**20:.1f}"
                    f" | {f['read_per_change_byte']:.2f} | {f['read_per_table_byte']:.3f} | {initial:.1f} |")
    return lines


def _phases(results: dict, top: int = 5) -> list[str]:
    """Where each side's time went in its median batch: the largest kinds of Spark SQL execution."""
    lines = ["Where the time went in each side's median batch (seconds of top-level Spark SQL executions by"
             " kind, as bench/refresh.py classifies them; driver = the rest of the wall-clock time):", "",
             "| Bids | Variant | Workload | Side | Seconds | Largest phases |", "|---:|---|---|---|---:|---|"]
    for run in results["runs"]:
        for name in run["summary"]:
            for side in run["sides"]:
                costs = sorted((r["workloads"][name][side] for r in run["rounds"]), key=lambda c: c["seconds"])
                median = costs[(len(costs) - 1) // 2]
                phases = list((median.get("phases") or {}).items())[:top]
                text = ", ".join(f"{label.replace('other queries: ', '')} {sec:.1f}" for label, sec in phases)
                lines.append(f"| {run['bids']:,} | {run['variant']} | {name} | {side} | {median['seconds']:.1f} | {text} |")
    return lines


def _checks(results: dict) -> list[str]:
    lines = ["Correctness, checked on the final tables before any figure is written: rows equal to the query"
             " recomputed from scratch on the windows every side has closed; rows (bids) of windows late bids"
             " touched, which each side treats its own way:", "",
             "| Bids | Variant | Workload | Rows equal | Late-touched rows (bids): query | incremental | full"
             " | streaming | Rows in __late: incremental / full |", "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for run in results["runs"]:
        for name, c in run["checks"].items():
            t, late = c["touched"], c["late_table_rows"]
            cells = [f"{t[s]['rows']:,} ({t[s]['bids']:,})" if s in t else "n/a" for s in ("truth", *SIDES)]
            lines.append(f"| {run['bids']:,} | {run['variant']} | {name} | {c['compared_rows']:,} | "
                         + " | ".join(cells) + f" | {late.get('incremental', 0):,} / {late.get('full', 0):,} |")
    return lines


COLORS = {"incremental": "tab:blue", "full": "tab:orange", "streaming": "tab:green"}


def plot(results: dict, path: Path) -> Path:
    """Seconds per refresh against the batch's changed rows: one panel per workload, a line per side and variant."""
    names = results["workloads"]
    figure, axes = _panels(names, 3.2)
    for ax, name in zip(axes, names):
        for run in results["runs"]:
            for side in SIDES:
                points = sorted((r["events"], r["workloads"][name][side]["seconds"])
                                for r in run["rounds"] if side in r["workloads"].get(name, {}))
                if points:
                    ax.plot(*zip(*points), marker="o", ms=3, color=COLORS[side],
                            linestyle="-" if run["variant"] == "append" else "--",
                            label=f"{side} ({run['variant']})")
    return _save(figure, axes, path)


def scale_documents() -> list[dict]:
    """Every results/nexmark*.json: the rendered run and those kept beside it (10M, 50M bids)."""
    return [json.loads(p.read_text()) for p in sorted(RESULTS_JSON.parent.glob("nexmark*.json"))]


def plot_scales(documents: list[dict], path: Path = SCALES_CHART) -> Path:
    """Seconds per refresh against the batch's changed rows, every batch of every run in ``documents``
    (1M, 10M and 50M bids), on log axes: one panel per workload, a colour per side, a marker per scale.

    Example:
        >>> plot_scales(scale_documents())     # results/nexmark-scales.png
    """
    from matplotlib.ticker import ScalarFormatter

    names = list(dict.fromkeys(n for d in documents for n in d["workloads"]))
    figure, axes = _panels(names, 3.4)
    markers = ["o", "s", "^", "D"]
    scales = sorted({run["bids"] for d in documents for run in d["runs"]})
    for ax, name in zip(axes, names):
        for side in SIDES:
            for i, bids in enumerate(scales):
                points = [(r["events"], r["workloads"][name][side]["seconds"]) for d in documents for run in d["runs"]
                          if run["bids"] == bids for r in run["rounds"] if side in r["workloads"].get(name, {})]
                if points:
                    ax.scatter(*zip(*points), s=14, color=COLORS[side], marker=markers[i % len(markers)],
                               label=f"{side}, {bids / 1e6:g}M bids")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
    return _save(figure, axes, path)


def _panels(names: list[str], inches: float):
    """A figure with one titled panel per workload in ``names``, side by side, and its panels."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, len(names), figsize=(inches * len(names), inches), squeeze=False)
    for ax, name in zip(axes[0], names):
        ax.set_title(name, fontsize="small")
        ax.set_xlabel("changed rows in the batch", fontsize="small")
        ax.tick_params(labelsize="x-small")
    return figure, list(axes[0])


def _save(figure, axes: list, path: Path) -> Path:
    """Label the first panel, write the figure to ``path`` and close it."""
    from matplotlib import pyplot as plt

    axes[0].set_ylabel("seconds per refresh", fontsize="small")
    axes[0].legend(fontsize="xx-small")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
