"""What the CLI and the demo print: tables, a refresh's one-line outcome, and the progress line
redrawn on a terminal while a view refreshes.

Example:
    >>> print(console.table(["view", "rows"], [("hourly", 12)], right=[False, True]))
    view    rows
    ------  ----
    hourly    12
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType

from mv import progress
from mv.run import Outcome


def outcome_line(o: Outcome) -> str:
    """One line for a refresh: technique (and why, unless incremental), rows, seconds."""
    written = o.rows_inserted + o.rows_updated + o.rows_deleted
    technique = o.technique.upper() + ("" if o.reason == "CHANGES_ONLY" else f" ({o.reason})")
    read = f" {o.rows_read:,} changes read," if o.technique == "incremental" else ""
    late = f", {o.late_rows:,} late" if o.late_rows else ""
    return (f"refresh {o.view}: {technique}{read} {written:,} row{'s' * (written != 1)} written "
            f"(+{o.rows_inserted:,} ~{o.rows_updated:,} -{o.rows_deleted:,}){late} in {o.duration_s:.1f} s")


class Progress:
    """On a terminal, a line redrawn in place while a view refreshes: Spark's tasks done, seconds."""

    SPINNER = "|/-\\"

    def __init__(self, spark: SparkSession, name: str, out: TextIO):
        self.spark, self.name, self.out = spark, name, out
        self.on = hasattr(out, "isatty") and out.isatty()
        self.finished = threading.Event()
        self.started = time.time()
        self.phase = ""  # "view: phase" of the refresh running now (an upstream view's, first)

    def __enter__(self) -> Progress:
        if self.on:
            self.watch = progress.watching(self._entered)
            self.watch.__enter__()
            self.thread = threading.Thread(target=self._draw, daemon=True)
            self.thread.start()
        return self

    def _entered(self, view: str, phase: str) -> None:
        self.phase = phase if view.split(".")[-1] == self.name.split(".")[-1] else f"{view}: {phase}"

    def __exit__(self, *exc) -> None:
        if self.on:
            self.watch.__exit__(*exc)
            self.finished.set()
            self.thread.join()
            self.out.write("\r\033[K")
            self.out.flush()

    def _draw(self) -> None:
        tick = 0
        while not self.finished.wait(0.25):
            self.out.write("\r\033[K" + self.line(tick))
            self.out.flush()
            tick += 1

    def line(self, tick: int = 0) -> str:
        done, total = tasks(self.spark)
        filled = 24 * done // total if total else 0
        bar = f" [{'#' * filled}{'.' * (24 - filled)}] {done}/{total} tasks" if total else ""
        phase = f" ({self.phase})" if self.phase else ""
        return f"{self.SPINNER[tick % 4]} refresh {self.name}{phase}{bar} {time.time() - self.started:.1f} s"


def tasks(spark: SparkSession) -> tuple[int, int]:
    """Tasks done and in all of Spark's running stages (0, 0 over Spark Connect, which does not say)."""
    try:
        tracker = spark.sparkContext.statusTracker()
        stages = [tracker.getStageInfo(stage) for stage in tracker.getActiveStageIds()]
    except Exception:  # noqa: BLE001 - no SparkContext (Spark Connect), or the context is stopping
        return 0, 0
    stages = [s for s in stages if s is not None]
    return sum(s.numCompletedTasks for s in stages), sum(s.numTasks for s in stages)


def log(out: TextIO, line: str, stamp: bool = True) -> None:
    prefix = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ ") if stamp else ""
    print(prefix + line, file=out, flush=True)


def table(header: list[str], rows: list[tuple], right: list[bool] | None = None) -> str:
    """`rows` as plain text columns under `header`; a value with line breaks continues below."""
    cells = [[("NULL" if v is None else str(v)).splitlines() or [""] for v in row] for row in rows]
    widths = [max([len(h)] + [len(line) for row in cells for line in row[i]]) for i, h in enumerate(header)]
    right = right or [False] * len(header)

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()

    lines = [line(header), line(["-" * w for w in widths])]
    for row in cells:
        lines += [line([c[k] if k < len(c) else "" for c in row]) for k in range(max(map(len, row)))]
    return "\n".join(lines)


def frame_table(frame: DataFrame, max_rows: int) -> str:
    """A DataFrame as a table, values as Spark writes them (session time zone), numbers to the right."""
    fields = frame.schema.fields
    positional = frame.toDF(*[f"c{i}" for i in range(len(fields))])  # names may repeat or hold dots
    rows = positional.select([F.col(f"c{i}").cast("string") for i in range(len(fields))]).limit(max_rows + 1).collect()
    text = table([f.name for f in fields], [tuple(r) for r in rows[:max_rows]],
                 right=[isinstance(f.dataType, NumericType) for f in fields])
    more = f"first {max_rows} rows shown" if len(rows) > max_rows else f"{len(rows)} row{'s' * (len(rows) != 1)}"
    return f"{text}\n({more})"
