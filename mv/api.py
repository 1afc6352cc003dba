"""The Python API beside mv.sql: one object per materialized view, as DeltaTable is one per Delta table.

Example:
    >>> hourly = mv.MaterializedView.for_name(spark, "hourly_bids")
    >>> hourly.refresh().technique
    'incremental'
    >>> hourly.describe()["emit"]
    'WINDOW CLOSE'
    >>> hourly.history().select("refresh_id", "technique", "duration_s").show()
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Row, SparkSession

from mv import catalog, commands, history, refresh
from mv.catalog import View
from mv.statements import Definition


class MaterializedView:
    """A materialized view of the catalog. Make one with `MaterializedView.for_name`."""

    def __init__(self, spark: SparkSession, view: View):
        self._spark = spark
        self._view = view

    @classmethod
    def for_name(cls, spark: SparkSession, name: str) -> MaterializedView:
        """The view called `name`; raises MV_VIEW_NOT_FOUND (or MV_NAME_TAKEN for a plain table)."""
        return cls(spark, catalog.require(spark, name))

    @property
    def name(self) -> str:
        return self._view.name

    @property
    def definition(self) -> Definition:
        return self._view.definition

    def refresh(self, full: bool = False) -> refresh.Outcome:
        """Bring the view up to date (its upstream views first); what it did, as in the history."""
        return refresh.refresh(self._spark, self.name, full=full)

    def describe(self) -> dict[str, str]:
        """DESCRIBE MATERIALIZED VIEW EXTENDED as a dict: the definition, then the last refresh."""
        return dict(commands.describe_view(self._spark, self.name, extended=True))

    def history(self) -> DataFrame:
        """This view's rows of mv_refresh_history, oldest first (its columns: docs/statements.md)."""
        return history.of_view(self._spark, self.name)

    def toDF(self) -> DataFrame:  # noqa: N802 - DeltaTable's name for it
        """The view's rows."""
        return self._spark.table(self.name)

    def __repr__(self) -> str:
        return f"MaterializedView({self.name!r})"


def latest_refreshes(spark: SparkSession) -> dict[str, Row]:
    """The latest history row of each view in the current database, by lower-case view name
    (times as epoch µs); each view's newest commits only are read."""
    rows = spark.sql("""
        SELECT lower(view) AS name,
               struct(unix_micros(started_at) AS started_us, refresh_id, technique, reason,
                      duration_s, watermark_micros) AS last
        FROM mv_refresh_history('', '', '1')""").collect()
    return {row.name: row.last for row in rows}
