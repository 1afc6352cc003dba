"""A source's change that only appends rows is read as the files its commits added
(mv/jvm/AppendedChanges.scala), not through Delta's change feed relation: the same rows and
columns; any other change (an update, a delete, a schema change, too many commits) is left to the
change feed.

Oracle: Delta's change feed of the same versions.
"""
import pytest

import mv

TABLE = "apc_source"
FEED = ["_change_type", "_commit_version"]  # _commit_timestamp: the commit's time, not its log file's


@pytest.fixture
def source(spark):
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
    spark.sql(f"CREATE TABLE {TABLE} (k INT, v BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    yield TABLE
    for name in (f"{TABLE}_view", f"{TABLE}_view__late", TABLE):
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def version(spark, table) -> int:
    return spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"]


def append(spark, table, first, count=50):
    spark.sql(f"INSERT INTO {table} SELECT CAST(id % 5 AS INT), id, TIMESTAMP'2024-01-01 00:00:00' + "
              f"make_interval(0, 0, 0, 0, 0, 0, id) FROM range({first}, {first + count}, 1, 2)")


def appended(spark, table, first, last):
    """AppendedChanges' rows of versions `first` to `last` (None when it leaves them to the change feed)."""
    jdf = spark._jvm.io.mvengine.AppendedChanges.frame(spark._jsparkSession, table, first, last)
    return None if jdf is None else sorted(tuple(r) for r in mv_frame(spark, jdf).drop("_commit_timestamp").collect())


def mv_frame(spark, jdf):
    from pyspark.sql import DataFrame
    return DataFrame(jdf, spark)


def change_feed(spark, table, first, last):
    frame = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", first)
             .option("endingVersion", last).table(table))
    return sorted(tuple(r) for r in frame.drop("_commit_timestamp").collect())


def test_appends_are_read_as_the_files_they_added_with_the_change_feeds_rows_and_columns(spark, source):
    first = version(spark, source) + 1
    for i in range(3):
        append(spark, source, i * 100)
    last = version(spark, source)
    rows = appended(spark, source, first, last)
    assert rows == change_feed(spark, source, first, last) and len(rows) == 150
    jdf = spark._jvm.io.mvengine.AppendedChanges.frame(spark._jsparkSession, source, first, last)
    assert mv_frame(spark, jdf).columns == ["k", "v", "ts", *FEED, "_commit_timestamp"]


def test_a_compaction_between_appends_adds_no_rows(spark, source):
    first = version(spark, source) + 1
    append(spark, source, 0)
    spark.sql(f"OPTIMIZE {source}")  # rewrites the files: dataChange false, no change feed rows
    append(spark, source, 100)
    last = version(spark, source)
    rows = appended(spark, source, first, last)
    assert rows == change_feed(spark, source, first, last) and len(rows) == 100


@pytest.mark.parametrize("statement", [
    f"UPDATE {TABLE} SET v = v + 1 WHERE k = 1",
    f"DELETE FROM {TABLE} WHERE k = 2",
    f"ALTER TABLE {TABLE} ADD COLUMN extra INT",
])
def test_a_change_that_is_not_only_appends_is_left_to_the_change_feed(spark, source, statement):
    append(spark, source, 0)
    first = version(spark, source) + 1
    append(spark, source, 100)
    spark.sql(statement)
    assert appended(spark, source, first, version(spark, source)) is None


def test_more_commits_than_its_limit_are_left_to_the_change_feed(spark, source):
    limit = spark._jvm.io.mvengine.AppendedChanges.MaxCommits()
    first = version(spark, source) + 1
    assert appended(spark, source, first, first + limit) is None  # versions that do not even exist yet


def test_a_view_over_appends_compactions_and_corrections_equals_its_query(spark, source):
    query = (f"SELECT k, window_start, window_end, count(*) AS n, sum(v) AS total "
             f"FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '1' MINUTE) GROUP BY k, window_start, window_end")
    append(spark, source, 0)
    mv.sql(spark, f"CREATE MATERIALIZED VIEW {source}_view AS {query}").collect()
    steps = [lambda: append(spark, source, 100), lambda: spark.sql(f"OPTIMIZE {source}"),
             lambda: append(spark, source, 200), lambda: spark.sql(f"DELETE FROM {source} WHERE v % 7 = 0"),
             lambda: append(spark, source, 300)]
    for step in steps:
        step()
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {source}_view").first()
        assert outcome.technique == "incremental"
        assert sorted(map(tuple, spark.table(f"{source}_view").collect())) == sorted(
            map(tuple, spark.sql(query).collect()))
