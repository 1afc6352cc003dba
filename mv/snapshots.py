"""Delta snapshots built ahead of need, in a background thread, while a refresh does its own work.

The first time a refresh needs a Delta table's state after the table changed (its files and
their statistics), Delta rebuilds it with Spark jobs: about half a second on two cores, however
small the table. A small table needs none: its checksum file lists its files, which scans and the
refresh's commit read directly (mv/jvm/SmallDeltaScans.scala). A larger view's state is built here
in the background from the start, so the merge at the end of the refresh finds it ready instead
of waiting for it (measured at 0.88-0.92 of the refresh without it, bench/RESULTS.md).

Example:
    >>> with warming(spark, ["bids", "mv_refresh_history"]):
    ...     ...   # DESCRIBE DETAIL bids, or an append to mv_refresh_history, finds its snapshot built
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterable, Iterator

from pyspark.sql import SparkSession


@contextmanager
def warming(spark: SparkSession, tables: Iterable[str]) -> Iterator[None]:
    """Build the snapshots of those `tables` that exist, one after the other in a background
    thread, while the block runs; the block's end waits for the thread. Delta caches a table's
    snapshot until its next commit and builds it once when two threads ask for it at once, so
    whatever the block reads of these tables is exactly what it would have read without this."""
    thread = threading.Thread(target=_build, args=(spark, list(tables)), name="mv-snapshots", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _build(spark: SparkSession, tables: list[str]) -> None:
    for table in tables:
        try:
            if spark.catalog.tableExists(table):
                spark.sql(f"DESCRIBE DETAIL {table}").collect()
        except Exception:  # noqa: BLE001 - a head start only: whoever needs the table reads it itself
            pass
