"""The sources' changes since a view's last refresh, from Delta's Change Data Feed, signed: +1 for
an insert or update post-image, -1 for a delete or update pre-image.

Example:
    >>> frames = change_feed.read(run)     # {source table: its signed changes}, cached
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mv.internal_columns import SIGN
from mv.run import Run

# The error conditions in which Delta says the change feed of a version range can no longer be
# read (not recorded, its log or files cleaned up, vacuumed).
CHANGE_FEED_GONE = {"DELTA_MISSING_CHANGE_DATA", "DELTA_VERSIONS_NOT_CONTIGUOUS", "DELTA_VERSION_NOT_FOUND",
                    "DELTA_TRUNCATED_TRANSACTION_LOG", "DELTA_LOG_FILE_NOT_FOUND", "DELTA_FILE_NOT_FOUND",
                    "FAILED_READ_FILE.FILE_NOT_EXIST"}


def is_gone(error: Exception) -> bool:
    """Whether `error` is Delta saying a change feed can no longer be read, by its error condition."""
    condition = error.getCondition() if hasattr(error, "getCondition") else None
    return condition in CHANGE_FEED_GONE


class SourceReplaced(Exception):
    """A source's Delta table id is not the one the previous refresh read: its versions start anew."""


def check_sources(run: Run) -> None:
    """Raise SourceReplaced when a source's table id is not the one the previous refresh read:
    the changes read are not changes of what the view holds."""
    if any(run.previous.source_ids.get(s, i) != i for s, i in run.source_ids.items()):
        raise SourceReplaced


class ChangeFeedGone(Exception):
    def __init__(self, source: str, version: int):
        super().__init__(source)
        self.source, self.version = source, version


def none(run: Run, source: str) -> DataFrame:
    """No changes of `source`, in the shape `read` gives them (a refresh the clock alone moves)."""
    return (run.spark.sql(f"SELECT * FROM {run.source(source)} WHERE false")
            .withColumn("_change_type", F.lit("insert")).withColumn("_commit_version", F.lit(0).cast("long"))
            .withColumn("_commit_timestamp", F.current_timestamp()).withColumn(SIGN, F.lit(1)))


def read(run: Run) -> dict[str, DataFrame]:
    """Each source's changes since the version last processed, signed: +1 insert/postimage, -1 delete/preimage."""
    changes = {}
    for source, target in run.targets.items():
        start = run.previous.sources.get(source, -1) + 1
        if start <= target:
            frame = (run.spark.read.format("delta").option("readChangeFeed", "true")
                     .option("startingVersion", start).option("endingVersion", target).table(source))
            changes[source] = frame.withColumn(SIGN, F.when(
                F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(-1)).cache()
    return changes
