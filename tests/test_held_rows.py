"""A refresh's intermediate rows held as a plan of their own (mv/jvm/HeldRows.scala, `Run.held`):
computed once into Spark's cache, and read back through a leaf whose plan is those rows alone, not
the query that made them, with the cache's measured size as its statistics.

Oracle: the same rows computed from their query, as a bag (duplicates and NULLs included).
"""
import pytest
from pyspark.sql import DataFrame

from mv.maintainer import extension


@pytest.fixture
def made(spark):
    """Rows from a query of several operators: duplicates, a NULL, a join and an aggregate."""
    query = ("SELECT a.k, b.v, count(*) AS n FROM (SELECT id % 5 AS k FROM range(100)) a "
             "JOIN (SELECT id AS k, IF(id = 3, NULL, concat('v', id % 2)) AS v FROM range(5)) b ON a.k = b.k "
             "GROUP BY a.k, b.v UNION ALL SELECT 1, 'v1', 20")
    frame = spark.sql(query)
    yield frame
    spark.catalog.clearCache()


def held(spark, frame: DataFrame) -> DataFrame:
    return DataFrame(extension(spark).HeldRows.of(frame.cache()._jdf), spark)


def plan(frame: DataFrame):
    return frame._jdf.queryExecution().analyzed()


def bag(frame: DataFrame) -> list:
    return sorted(tuple(r) for r in frame.collect())


def test_held_rows_are_the_rows_of_their_query(spark, made):
    assert bag(held(spark, made)) == bag(made)
    assert len(bag(made)) == 6  # five groups and a duplicate of one


def test_held_rows_plan_as_one_leaf_without_their_query(spark, made):
    rows = held(spark, made)
    assert plan(rows).children().isEmpty() and plan(rows).nodeName() == "LogicalRDD"
    assert "Join" not in rows._jdf.queryExecution().toString()
    assert rows.columns == made.columns


def test_held_rows_are_known_by_their_measured_size(spark, made):
    """A join's estimate multiplies its sides; the held rows' statistics are what the cache holds."""
    size = held(spark, made)._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
    assert int(str(size)) < 10_000


def test_held_rows_join_themselves(spark, made):
    rows = held(spark, made)
    pairs = rows.alias("x").join(rows.alias("y"), "k").count()
    assert pairs == 4 + 2 * 2  # four keys of one row each; k = 1 holds two


def test_held_rows_are_computed_again_when_the_cache_is_gone(spark, made):
    """The leaf reads the cache, whose blocks Spark rebuilds from their lineage (a lost executor):
    not a local checkpoint, which would fail the refresh."""
    rows = held(spark, made)
    spark.catalog.clearCache()
    assert bag(rows) == bag(made)
