"""A chart of a view's refresh history: duration, rows written, and how far the watermark lags.

Watermark lag is the time from the watermark to the refresh's start: how old the newest final
window is when the refresh runs. It is drawn only for views with a WATERMARK, a red square where
the clock moved it (IDLE AFTER, the sources being quiet). Uses matplotlib's
Agg backend, so it needs no display.

Example:
    >>> rows = MaterializedView.for_name(spark, "hourly_bids").history().collect()
    >>> chart.plot_history("hourly_bids", rows, "hourly_bids.png")
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from mv.query import utc_datetime


def plot_history(name: str, rows: list, path: str | Path) -> Path:
    """Draw the history `rows` (mv_refresh_history rows, oldest first) of view `name` into a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    x = list(range(1, len(rows) + 1))
    figure, (duration, written, lag) = plt.subplots(3, 1, figsize=(8, 7.5), sharex=True)
    figure.suptitle(f"{name}: {len(rows)} refreshes")
    duration.bar(x, [r.duration_s for r in rows], color=[_color(r.technique) for r in rows])
    duration.set_ylabel("duration (s)")
    duration.legend(handles=_technique_legend(plt), loc="upper right", fontsize="small")
    _stacked(written, x, rows)
    _lag(lag, x, rows)
    if len(rows) <= 30:
        lag.set_xticks(x, [str(r.refresh_id) for r in rows])
        lag.set_xlabel("refresh id")
    else:
        lag.set_xlabel("refresh (oldest first)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return Path(path)


def _color(technique: str) -> str:
    return "tab:blue" if technique == "incremental" else "tab:orange"


def _technique_legend(plt) -> list:
    from matplotlib.patches import Patch
    return [Patch(color=_color("incremental"), label="incremental"), Patch(color=_color("full"), label="full")]


def _stacked(axes, x: list[int], rows: list) -> None:
    bottom = [0] * len(rows)
    for column, label in (("rows_inserted", "inserted"), ("rows_updated", "updated"), ("rows_deleted", "deleted")):
        values = [getattr(r, column) or 0 for r in rows]
        axes.bar(x, values, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    axes.set_ylabel("rows written")
    axes.legend(loc="upper right", fontsize="small")


def _lag(axes, x: list[int], rows: list) -> None:
    seconds = [(_utc(r.started_at) - utc_datetime(r.watermark_micros)).total_seconds()
               if r.watermark_micros is not None else None for r in rows]
    known = [s for s in seconds if s is not None]
    if not known:
        axes.text(0.5, 0.5, "no watermark", ha="center", va="center", transform=axes.transAxes)
        axes.set_ylabel("watermark lag")
        return
    unit, size = next((u, s) for u, s in (("days", 86400), ("hours", 3600), ("minutes", 60), ("seconds", 1))
                      if max(known) >= 2 * s or s == 1)
    axes.plot([i for i, s in zip(x, seconds) if s is not None], [s / size for s in known], marker="o")
    by_clock = [(i, s / size) for i, s, r in zip(x, seconds, rows) if s is not None and _idle(r)]
    if by_clock:  # IDLE AFTER: the watermark followed the clock, the sources being quiet
        axes.scatter(*zip(*by_clock), marker="s", s=60, color="tab:red", zorder=3, label="moved by the clock (idle)")
        axes.legend(loc="upper right", fontsize="small")
    axes.set_ylabel(f"watermark lag ({unit})")


def _idle(row) -> bool:
    return bool(getattr(row, "watermark_idle", False))


def _utc(value: datetime) -> datetime:
    # Spark hands TIMESTAMP values to Python as naive local times.
    return value.astimezone(timezone.utc) if value.tzinfo is None else value

