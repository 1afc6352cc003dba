"""The Nexmark benchmark's workloads, each as our materialized view and as a Structured Streaming job.

Both sides of a workload use the same window, the same aggregates and the same 10-minute watermark;
the streaming side runs in append mode, so it writes a window once,
when the watermark passes its end, as our EMIT ON WINDOW CLOSE does.

Example:
    >>> w = WORKLOADS["q7"]
    >>> mv.sql(spark, f"CREATE MATERIALIZED VIEW q7_inc {w.options} AS {w.query('bids')}")
    >>> w.stream(spark.readStream.format("delta").table("bids"))     # the same windows, streaming
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

DELAY = "10 minutes"
WATERMARK = "WATERMARK FOR date_time AS date_time - INTERVAL '10' MINUTES"
CLOSE = f"{WATERMARK} EMIT ON WINDOW CLOSE"
GAP_US = 10 * 60_000_000
SESSION_NOTE = ("a bid that the stream takes into a session still open, but that is more than gap behind"
                " our watermark or within gap of a final session, goes to our view's __late table: sessions"
                " such bids touch are compared by count only")
CUMULATE_NOTE = ("Spark has no cumulative window: the stream keeps hourly window() totals per channel"
                 " (watermark, append) in a Delta table of its own, and foreachBatch sums each day's closed"
                 " hours into the running totals it MERGEs into the result (two MERGEs a batch)")


@dataclass(frozen=True)
class Workload:
    """One Nexmark-like query: our view (options + SELECT) and the streaming job that computes the same rows.

    ``touch_key`` and ``pad_us`` say which result rows a late bid may change: those whose window,
    widened by ``pad_us``, holds its time (and with the same ``touch_key``, if any).
    """
    name: str
    label: str
    window: str
    options: str
    select: str
    keys: tuple[str, ...]
    stream: Callable[[DataFrame], DataFrame]
    touch_key: str | None = None
    pad_us: int = 0
    note: str = ""
    hourly: bool = False              # the stream gives hourly totals that foreachBatch accumulates

    def query(self, source: str) -> str:
        return self.select.format(source=source)

    @property
    def merge_keys(self) -> tuple[str, ...]:
        return (*self.keys, "window_start", "window_end")


def _windowed(df: DataFrame, keys: list, window, **aggregates) -> DataFrame:
    """``df`` with the watermark, grouped by ``keys`` and ``window``, with the window's start and end as columns."""
    grouped = df.withWatermark("date_time", DELAY).groupBy(*keys, window.alias("w"))
    return grouped.agg(*[a.alias(n) for n, a in aggregates.items()]).select(
        *keys, F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), *aggregates)


WORKLOADS = {w.name: w for w in (
    Workload("q5", "q5 hot items", "HOP 5 min / 10 min, per auction", CLOSE,
             """SELECT auction, window_start, window_end, count(*) AS bids
                FROM HOP(TABLE({source}), DESCRIPTOR(date_time), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
                GROUP BY auction, window_start, window_end""", ("auction",),
             lambda df: _windowed(df, ["auction"], F.window("date_time", "10 minutes", "5 minutes"),
                                  bids=F.count("*"))),
    Workload("q7", "q7 highest bid", "TUMBLE 10 min", CLOSE,
             """SELECT window_start, window_end, max(price) AS highest, count(*) AS bids
                FROM TUMBLE(TABLE({source}), DESCRIPTOR(date_time), INTERVAL '10' MINUTES)
                GROUP BY window_start, window_end""", (),
             lambda df: _windowed(df, [], F.window("date_time", "10 minutes"),
                                  highest=F.max("price"), bids=F.count("*"))),
    Workload("q11", "q11 user sessions", "SESSION 10 min gap, per bidder", CLOSE,
             """SELECT bidder, window_start, window_end, count(*) AS bids, max(price) AS highest
                FROM SESSION(TABLE({source}) PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' MINUTES)
                GROUP BY bidder, window_start, window_end""", ("bidder",),
             lambda df: _windowed(df, ["bidder"], F.session_window("date_time", "10 minutes"),
                                  bids=F.count("*"), highest=F.max("price")),
             touch_key="bidder", pad_us=GAP_US, note=SESSION_NOTE),
    Workload("cumulate", "daily running total", "CUMULATE 1 h / 1 day, per channel", CLOSE,
             """SELECT channel, window_start, window_end, count(*) AS bids, sum(price) AS volume
                FROM CUMULATE(TABLE({source}), DESCRIPTOR(date_time), INTERVAL '1' HOUR, INTERVAL '1' DAY)
                GROUP BY channel, window_start, window_end""", ("channel",),
             lambda df: _windowed(df, ["channel"], F.window("date_time", "1 hour"),
                                  bids=F.count("*"), volume=F.sum("price")),
             note=CUMULATE_NOTE, hourly=True),
)}
