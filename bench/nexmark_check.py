"""Whether the contenders of one workload hold the same rows as the query recomputed from scratch.

Two things differ on purpose, so the comparison leaves them out and counts them instead:
- Windows still open. Streaming (append mode) and our EMIT ON WINDOW CLOSE write a window once the
  watermark passes its end; each side has its own watermark. Only windows every side has closed
  (window_end <= the lowest watermark) are compared; a view without a watermark (q11) shows open
  windows too, which the streaming side's watermark then cuts.
- Late bids. Streaming drops a bid whose window its watermark has closed; our views put it in
  <view>__late and leave the closed window alone (EMIT ON UPDATE views take it). Rows whose window
  (widened by a session's gap, same bidder for sessions) holds a bid that came late (extra = 'late')
  or is in a __late table are compared only by count: how many such rows and bids each side holds.
Everything else must be equal, row for row.

Example:
    >>> check(spark, WORKLOADS["q7"], "bids", {"incremental": "q7_incr", ...})
    {'compared_rows': 431, 'cutoff_us': ..., 'touched': {'truth': {'rows': 9, 'bids': 17234}, ...}}
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench.nexmark_workloads import Workload
from bench.refresh import checksum
from bench.report import ResultMismatch


def check(spark, workload: Workload, source: str, contenders: dict) -> dict:
    """Raise ResultMismatch unless every contender equals the query on the compared rows; the counts.

    ``contenders`` maps a side to its view's name or its StreamingJob.
    """
    tables = {side: getattr(c, "target", c) for side, c in contenders.items()}
    cutoff = _cutoff(spark, workload, contenders)
    touched = _touched(spark, source, tables, workload)
    truth = _closed(spark.sql(workload.query(source)), cutoff)
    columns = truth.columns
    kept, aside = _split(truth, touched, workload)
    expected = checksum(kept)
    report = {"compared_rows": expected[0], "cutoff_us": cutoff, "touched": {"truth": _count(aside)},
              "late_table_rows": {}}
    for side, table in tables.items():
        ours, theirs = _split(_closed(spark.table(table).select(*columns), cutoff), touched, workload)
        if checksum(ours) != expected:
            raise ResultMismatch(f"{workload.name}: {side} ({table}) differs from the query recomputed from scratch"
                                 f"\n  only in {table}: {ours.exceptAll(kept).limit(5).collect()}"
                                 f"\n  only in the query: {kept.exceptAll(ours).limit(5).collect()}")
        report["touched"][side] = _count(theirs)
        if spark.catalog.tableExists(f"{table}__late"):
            report["late_table_rows"][side] = spark.table(f"{table}__late").count()
    return report


def _cutoff(spark, workload: Workload, contenders: dict) -> int | None:
    """The lowest watermark of the sides that have one (microseconds), None if none has."""
    import mv.api

    marks = []
    for side, c in contenders.items():
        if hasattr(c, "run"):
            marks.append(c.last_watermark_us)
        elif workload.options:
            marks.append(int(mv.api.MaterializedView.for_name(spark, c).describe()["watermark_micros"]))
    marks = [m for m in marks if m is not None]
    return min(marks) if marks else None


def _closed(df: DataFrame, cutoff: int | None) -> DataFrame:
    return df if cutoff is None else df.where(F.col("window_end") <= F.timestamp_micros(F.lit(cutoff)))


def _touched(spark, source: str, tables: dict, workload: Workload) -> DataFrame:
    """What late bids touched: the windows holding one (or, for sessions, each one's time and bidder).

    The late bids are the source's rows with extra = 'late' and the rows of the views' __late tables;
    their windows come from the workload's own query run over them, so a join on the window finds them.
    """
    columns = spark.table(source).columns
    late = spark.table(source).where("extra = 'late'")
    for table in tables.values():
        if spark.catalog.tableExists(f"{table}__late"):
            late = late.unionByName(spark.table(f"{table}__late").select(*columns))
    if workload.touch_key:
        return late.select(F.col("date_time").alias("__t"), F.col(workload.touch_key).alias("__key")).distinct()
    late.createOrReplaceTempView("nexmark_touched")
    return spark.sql(workload.query("nexmark_touched")).select("window_start", "window_end").distinct()


def _split(df: DataFrame, touched: DataFrame, workload: Workload) -> tuple[DataFrame, DataFrame]:
    """``df``'s rows no late bid touched, and those one did."""
    if not workload.touch_key:
        on = ["window_start", "window_end"]
    else:   # a session a late bid would have joined: same key, within the gap of its ends
        pad = F.expr(f"make_dt_interval(0, 0, 0, {workload.pad_us / 1e6})")
        on = ((F.col("__key") == F.col(workload.touch_key)) & (F.col("__t") >= F.col("window_start") - pad)
              & (F.col("__t") <= F.col("window_end") + pad))
    return df.join(touched, on, "left_anti"), df.join(touched, on, "left_semi")


def _count(df: DataFrame) -> dict:
    row = df.agg(F.count("*").alias("rows"), F.coalesce(F.sum("bids"), F.lit(0)).alias("bids")).first()
    return {"rows": row["rows"], "bids": row["bids"]}
