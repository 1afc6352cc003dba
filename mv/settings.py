"""Spark session settings in force for one block of code only.

Example:
    >>> with session_settings(spark, {"spark.databricks.delta.commitInfo.userMetadata": "note"}):
    ...     frame.write.format("delta").mode("append").saveAsTable("t")   # its commit says "note"
"""
from __future__ import annotations

from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]):
    """`settings` in force in the session inside the block only; afterwards each key is as it was.

    Example:
        >>> with session_settings(spark, {USER_METADATA: "note"}):
        ...     frame.write.format("delta").mode("append").saveAsTable("t")   # its commit says "note"
    """
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
