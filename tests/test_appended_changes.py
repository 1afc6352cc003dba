"""A source's change that only appends rows is read as the files its commits added
(mv/jvm/AppendedChanges.scala), not through Delta's change feed relation: the same rows and
columns; any other change (an update, a delete, a schema change, too many commits) is left to the
change feed. A change that also updates or deletes has its appending commits read as files and
the others through the change feed (`partly`), unless a commit changes the schema.

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


def partly(spark, table, first, last):
    """AppendedChanges.partly's rows of versions `first` to `last` (None when it leaves them to the change feed)."""
    jdf = spark._jvm.io.mvengine.AppendedChanges.partly(spark._jsparkSession, table, first, last)
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


def test_a_change_that_also_updates_and_deletes_reads_its_appends_as_files_and_the_rest_as_the_change_feed(
        spark, source):
    append(spark, source, 0)
    first = version(spark, source) + 1
    append(spark, source, 100)
    spark.sql(f"UPDATE {source} SET v = v + 1 WHERE k = 1")
    spark.sql(f"DELETE FROM {source} WHERE k = 2")
    append(spark, source, 200)
    spark.sql(f"UPDATE {source} SET v = v + 1 WHERE k = 3")
    last = version(spark, source)
    rows = partly(spark, source, first, last)
    assert rows == change_feed(spark, source, first, last)
    assert {r[3] for r in rows} == {"insert", "update_preimage", "update_postimage", "delete"}
    jdf = spark._jvm.io.mvengine.AppendedChanges.partly(spark._jsparkSession, source, first, last)
    assert mv_frame(spark, jdf).columns == ["k", "v", "ts", *FEED, "_commit_timestamp"]


@pytest.mark.parametrize("between", ["appends only", "no append", "a schema change"])
def test_a_change_partly_appended_is_left_whole_to_the_change_feed_or_to_frame_otherwise(spark, source, between):
    append(spark, source, 0)
    first = version(spark, source) + 1
    if between == "appends only":  # `frame` reads it
        append(spark, source, 100)
    elif between == "no append":
        spark.sql(f"DELETE FROM {source} WHERE k = 2")
    else:
        append(spark, source, 100)
        spark.sql(f"ALTER TABLE {source} ADD COLUMN extra INT")
        spark.sql(f"DELETE FROM {source} WHERE k = 2")
    assert partly(spark, source, first, version(spark, source)) is None


def test_a_view_over_appends_mixed_with_updates_and_deletes_equals_its_query(spark, source):
    query = (f"SELECT k, window_start, window_end, count(*) AS n, sum(v) AS total, max(v) AS top "
             f"FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '1' MINUTE) GROUP BY k, window_start, window_end")
    append(spark, source, 0)
    mv.sql(spark, f"CREATE MATERIALIZED VIEW {source}_view REFRESH POLICY INCREMENTAL AS {query}").collect()
    for i in range(1, 4):
        first = version(spark, source) + 1
        append(spark, source, i * 100)
        spark.sql(f"UPDATE {source} SET v = v + 1000, ts = ts + INTERVAL 30 SECONDS WHERE v % 11 = {i}")
        spark.sql(f"DELETE FROM {source} WHERE v % 13 = {i}")
        append(spark, source, i * 100 + 50)
        assert partly(spark, source, first, version(spark, source)) is not None  # the path the refresh takes
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {source}_view").first()
        assert outcome.technique == "incremental"
        assert sorted(map(tuple, spark.table(f"{source}_view").collect())) == sorted(
            map(tuple, spark.sql(query).collect()))


def since(spark, table, before, watermark=None):
    """What change_feed's log readers ask of a refresh: its source's versions after `before` up to
    the latest, none of them declared an update, for a view with the `watermark` column or none
    (a Run's fields they read, nothing else)."""
    from types import SimpleNamespace
    return SimpleNamespace(spark=spark, updated=frozenset(), spans={},
                           previous=SimpleNamespace(sources={table: before}), targets={table: version(spark, table)},
                           view=SimpleNamespace(definition=SimpleNamespace(watermark_column=watermark)))


def test_an_appends_rows_and_column_ranges_are_read_from_its_files_statistics_as_a_job_would_find_them(spark):
    """change_feed.appended_rows and appended_ranges: the rows and each column's range
    (writes.value_ranges) of a change that only appends, from the added files' statistics, without
    a job; a TIMESTAMP's a millisecond wider each way (Delta writes them to the millisecond). None
    when the statistics cannot tell: a string column, a change that also updates."""
    from mv import change_feed, writes
    table = "apc_typed"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (k INT, d DATE, ts TIMESTAMP, s STRING) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(f"INSERT INTO {table} VALUES (100, DATE'2020-01-01', TIMESTAMP'2020-01-01 00:00:00', 'old')")
    before = version(spark, table)
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), DATE'2024-02-28' + CAST(id AS INT), "
              f"TIMESTAMP'2024-01-01 00:00:00.000001' + make_interval(0, 0, 0, 0, 0, 0, id * 1.000123), "
              f"CAST(id AS STRING) FROM range(3, 40, 1, 3)")
    spark.sql(f"INSERT INTO {table} VALUES (NULL, NULL, TIMESTAMP'2024-01-01 00:00:00.999999', NULL)")
    run = since(spark, table, before)
    change = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", before + 1) \
        .table(table).drop(*change_feed.FEED_COLUMNS)
    exact = writes.value_ranges(change.drop("s"))

    assert change_feed.appended_rows(run, table, spark.table(table)) == change.count() == 38
    found = change_feed.appended_ranges(run, table, change.drop("s").schema)
    assert {c: found[c] for c in ("k", "d")} == {c: exact[c] for c in ("k", "d")}
    (low, high), (least, greatest) = ((int(r.low), int(r.high)) for r in (found["ts"], exact["ts"]))
    assert low <= least < low + 2000 and high - 1000 < greatest <= high
    assert found["ts"].nulls is exact["ts"].nulls is False
    assert change_feed.appended_ranges(run, table, change.schema) is None  # s: a string's statistics may be cut short

    spark.sql(f"UPDATE {table} SET k = 0 WHERE k = 100")
    later = since(spark, table, before)
    assert change_feed.appended_rows(later, table, spark.table(table)) is None
    assert change_feed.appended_ranges(later, table, change.drop("s").schema) is None
    spark.sql(f"DROP TABLE {table}")


@pytest.mark.parametrize("encoding, exact", [("TIMESTAMP_MICROS", True), ("INT96", False)])
def test_an_appends_latest_microsecond_comes_from_its_parquet_footers_when_they_keep_it(spark, encoding, exact):
    """For a view with a watermark, change_feed.appended_span takes a TIMESTAMP's greatest value to
    the microsecond from the Parquet footers of the files whose Delta statistics hold its
    millisecond (those statistics truncate it): INT64 microseconds, the local session's encoding,
    keep it. INT96, Spark's default elsewhere, keeps no statistics: the span then gives the
    millisecond and says it is not exact (the refresh reads the rows of that millisecond:
    window_refresh._latest_exactly). A view without a watermark is not given the microsecond."""
    from mv import change_feed
    from test_touched_windows import timestamps_written_as
    table = "apc_latest"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (k INT, ts TIMESTAMP) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    before = version(spark, table)
    with timestamps_written_as(spark, encoding):   # three files; the latest row, 00:00:41.999999, in one of them
        spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), TIMESTAMP'2024-01-01 00:00:00.000700' + "
                  f"make_interval(0, 0, 0, 0, 0, 0, id) FROM range(0, 42, 1, 3) "
                  f"UNION ALL SELECT 99, TIMESTAMP'2024-01-01 00:00:41.999999'")
    latest = spark.sql(f"SELECT unix_micros(max(ts)) FROM {table}").first()[0]

    rows, timed, _, greatest, told = change_feed.appended_span(since(spark, table, before, "ts"), table, "ts")
    assert (rows, timed, greatest, bool(told)) == (43, 43, latest if exact else latest - 999, exact)
    assert change_feed.appended_span(since(spark, table, before), table, "ts")[3:] == (latest - 999, 0)
    spark.sql(f"DROP TABLE {table}")
