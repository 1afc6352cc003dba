"""mv: windowed materialized views on Delta Lake, kept fresh incrementally, in Spark SQL.

Example:
    >>> import mv
    >>> spark = mv.session()
    >>> spark.sql("SELECT * FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)").show()
"""
from mv.api import MaterializedView
from mv.commands import sql
from mv.maintainer import attach
from mv.session import configure, session

__all__ = ["MaterializedView", "attach", "configure", "session", "sql"]
