"""The Structured Streaming contender: a workload's job over the Delta source, run as scheduled batches.

Each run is ``trigger(availableNow=True)``: it reads what the source gained since the checkpoint,
aggregates with the watermark in append mode, MERGEs the windows it closes into a Delta table in
foreachBatch, and stops (Spark then runs a no-data batch that advances the watermark and emits the
windows it closes). The checkpoint carries the stream's state and watermark to the next run.

Example:
    >>> job = StreamingJob(spark, WORKLOADS["q7"], "bids", "q7_stream", "bench/data/ckpt/q7")
    >>> job.create(); job.run()
    {'batches': 2, 'input_rows': 700000, 'watermark_us': ...}
"""
from __future__ import annotations

import shutil
from datetime import datetime

from bench.nexmark_workloads import Workload


class StreamingJob:
    """One workload as a streaming job from ``source`` into the Delta table ``target``."""

    def __init__(self, spark, workload: Workload, source: str, target: str, checkpoint: str):
        self.spark, self.workload, self.source, self.target = spark, workload, source, target
        self.checkpoint = checkpoint
        self.hours = f"{target}__hours"        # the hourly totals a cumulative job accumulates
        self.last_watermark_us: int | None = None

    def create(self) -> None:
        """Create the empty result table (with the schema of our view's query) and forget any checkpoint."""
        shutil.rmtree(self.checkpoint, ignore_errors=True)
        for table in (self.target, self.hours):
            self.spark.sql(f"DROP TABLE IF EXISTS {table}")
        empty = self.spark.sql(self.workload.query(self.source)).limit(0)
        empty.write.format("delta").saveAsTable(self.target)
        if self.workload.hourly:
            self.spark.createDataFrame([], self._stream().schema).write.format("delta").saveAsTable(self.hours)

    def _stream(self):
        return self.workload.stream(self.spark.readStream.format("delta").table(self.source))

    def run(self) -> dict:
        """Process what the source gained since the last run; return batches, input rows and the watermark."""
        sink = self._merge_hours if self.workload.hourly else self._merge
        query = (self._stream().writeStream.outputMode("append").foreachBatch(sink)
                 .option("checkpointLocation", self.checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        progress = query.recentProgress
        watermark = next((p["eventTime"]["watermark"] for p in reversed(progress)
                          if p.get("eventTime", {}).get("watermark")), None)
        if watermark:
            self.last_watermark_us = _micros(watermark)
        return {"batches": len(progress), "input_rows": sum(p["numInputRows"] for p in progress),
                "watermark_us": self.last_watermark_us}

    def _merge(self, batch, batch_id: int) -> None:
        """Write a batch's closed windows into the result: MERGE on the group keys and the window."""
        merge_into(batch, self.target, self.workload.merge_keys)

    def _merge_hours(self, batch, batch_id: int) -> None:
        """CUMULATE by hand: keep the closed hours, then rewrite the running totals of the days they fall in."""
        merge_into(batch, self.hours, self.workload.merge_keys)
        batch.createOrReplaceTempView("closed_hours")
        session = batch.sparkSession
        totals = session.sql(f"""
            WITH days AS (
              SELECT channel, date_trunc('DAY', window_start) AS day, max(window_end) AS upto
              FROM closed_hours GROUP BY channel, date_trunc('DAY', window_start)),
            ends AS (
              SELECT channel, day, explode(sequence(day + INTERVAL 1 HOUR, upto, INTERVAL 1 HOUR)) AS e FROM days)
            SELECT h.channel, ends.day AS window_start, ends.e AS window_end,
                   sum(h.bids) AS bids, sum(h.volume) AS volume
            FROM ends JOIN {self.hours} h
              ON h.channel = ends.channel AND h.window_start >= ends.day AND h.window_end <= ends.e
            GROUP BY h.channel, ends.day, ends.e""")
        merge_into(totals, self.target, self.workload.merge_keys)


def merge_into(batch, target: str, keys: tuple[str, ...]) -> None:
    """MERGE ``batch`` into the Delta table ``target``: update the rows with the same ``keys``, insert the others."""
    view = f"batch_of_{target}"
    batch.createOrReplaceTempView(view)
    on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    batch.sparkSession.sql(f"MERGE INTO {target} t USING {view} s ON {on} "
                           "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def _micros(iso: str) -> int:
    """Microseconds since the epoch of a progress report's time, e.g. '2026-01-07T00:50:00.000Z'."""
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond
