"""GROUP BY views whose touched groups are recomputed (joins, COUNT DISTINCT, computed keys) and
OVER views whose touched partitions are: the recomputation reads only the files that can hold the
keys a change reaches (their ranges; for a key that is a time column's day or hour, the time it
spans), and a change that reaches no key merges nothing.
"""
from __future__ import annotations

import pytest

import mv
from bench.probe import reads_since
from bench.refresh import execution_marker
from mv import time_keys
from mv.query import describe
from tests.view_sources import bag

VIEW = "rv_grouped"
TABLES = ("rv_lots", "rv_offers", "rv_visits")


@pytest.fixture
def tables(spark):
    """Empty tables rv_lots (id, label), rv_offers (id, lot, price), rv_visits (user, at TIMESTAMP);
    dropped after the test with the view."""
    for table in TABLES:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql("CREATE TABLE rv_lots (id BIGINT, label STRING) USING delta")
    spark.sql("CREATE TABLE rv_offers (id BIGINT, lot BIGINT, price BIGINT) USING delta")
    spark.sql("CREATE TABLE rv_visits (user BIGINT, at TIMESTAMP) USING delta")
    yield
    mv.sql(spark, f"DROP MATERIALIZED VIEW IF EXISTS {VIEW}").collect()
    for table in TABLES:
        spark.sql(f"DROP TABLE {table}")


def refreshed(spark, query: str, change: str) -> tuple[str, dict]:
    """The view of `query` created, `change` made, the view refreshed: how, and the files it read per table."""
    mv.sql(spark, f"CREATE OR REPLACE MATERIALIZED VIEW {VIEW} REFRESH POLICY INCREMENTAL AS {query}").collect()
    spark.sql(change)
    marker = execution_marker(spark)
    done = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {VIEW}").first()
    files = {table: read["files"] for table, read in reads_since(spark, marker).items()}
    assert bag(spark, VIEW) == bag(spark, f"({query})")
    return done.technique, files


@pytest.mark.parametrize("query, read", [
    # the offers' change joined to lot 1000's file finds lot 1000; recomputed (a COUNT DISTINCT does
    # not combine): the offers' two files of lot 1000 (the new offer's too) and the lots' one
    ("SELECT l.id, l.label, count(DISTINCT o.price) AS prices, max(o.price) AS top FROM rv_offers o JOIN rv_lots l "
     "ON o.lot = l.id GROUP BY l.id, l.label", {"rv_offers": 1 + 2, "rv_lots": 1 + 1}),
    # one source, a COUNT DISTINCT (recomputed, not combined): the change, then the offers of lot 1000
    ("SELECT lot, count(DISTINCT price) AS prices FROM rv_offers GROUP BY lot", {"rv_offers": 1 + 2}),
])
def test_a_group_by_recomputes_its_touched_groups_from_the_files_that_can_hold_their_keys(spark, tables, query,
                                                                                         read):
    """The groups a change reaches are recomputed with their keys' ranges (writes.value_range) as a
    filter, which Spark pushes below the GROUP BY and through the join's equality to both sources:
    Delta skips the files of other lots, on both sides."""
    for first in (0, 100, 200, 1000):  # a file each, its own lots
        spark.sql(f"INSERT INTO rv_lots SELECT id, concat('lot ', id) FROM range({first}, {first + 100}, 1, 1)")
        spark.sql(f"INSERT INTO rv_offers SELECT id, id, id % 50 FROM range({first}, {first + 100}, 1, 1)")

    technique, files = refreshed(spark, query, "INSERT INTO rv_offers VALUES (5000, 1000, 42)")

    assert technique == "incremental"
    assert {t: files[t] for t in read} == read, files


@pytest.mark.parametrize("key", ["DATE_FORMAT(at, 'yyyy-MM-dd')", "date_trunc('DAY', at)", "DATE_FORMAT(at, 'yyyyMMdd HH')",
                                 "date_trunc('hour', at)"])
def test_a_group_by_a_time_columns_day_recomputes_from_the_files_of_that_time_only(spark, tables, key):
    """A key that is a function of a TIMESTAMP column keeping its order (mv/time_keys.py) keeps
    that column to the time the touched keys span: a visit on the last of six days reads that day's
    files, not the five before."""
    for day in range(1, 7):  # a file a day, a visit an hour
        spark.sql(f"INSERT INTO rv_visits SELECT id % 7, timestamp'2026-11-0{day} 00:30:00' + make_interval(0, 0, 0, "
                  f"0, CAST(id AS INT)) FROM range(0, 24, 1, 1)")
    query = f"SELECT {key} AS period, count(DISTINCT user) AS users FROM rv_visits GROUP BY {key}"

    technique, files = refreshed(spark, query, "INSERT INTO rv_visits VALUES (99, timestamp'2026-11-06 12:00:00')")

    assert technique == "incremental"
    assert files["rv_visits"] == 1 + 2, files   # the change; the 6th's and the new visit's files


def test_a_format_whose_text_does_not_sort_as_its_time_is_no_time_key(spark, tables):
    """'dd-MM-yyyy' sorts days of different months out of their order: its keys' range is no range
    of time, so the source is read whole (and the view stays exact); mv_describe still lists it."""
    for day in range(1, 7):
        spark.sql(f"INSERT INTO rv_visits VALUES ({day}, timestamp'2026-11-0{day} 10:00:00')")
    query = ("SELECT DATE_FORMAT(at, 'dd-MM-yyyy') AS day, count(DISTINCT user) AS users FROM rv_visits "
             "GROUP BY DATE_FORMAT(at, 'dd-MM-yyyy')")
    keys = [read.time_keys for read in describe(spark, query).reads]

    technique, files = refreshed(spark, query, "INSERT INTO rv_visits VALUES (99, timestamp'2026-11-06 12:00:00')")

    assert keys == [({"key": "day", "column": "at", "function": "date_format", "argument": "dd-MM-yyyy"},)]
    assert (technique, files["rv_visits"]) == ("incremental", 1 + 7), files


@pytest.mark.parametrize("query", [
    "SELECT l.id, count(*) AS offers FROM rv_offers o JOIN rv_lots l ON o.lot = l.id GROUP BY l.id",
    """SELECT id, price FROM (SELECT l.id, o.price, row_number() OVER (PARTITION BY l.id ORDER BY o.price DESC, o.id)
       AS rn FROM rv_offers o JOIN rv_lots l ON o.lot = l.id) WHERE rn = 1""",
])
def test_a_change_that_reaches_no_group_or_partition_leaves_the_view_untouched(spark, tables, query):
    """An offer of a lot that is not there joins nothing, so no key is touched: the refresh commits
    its new state only (a WRITE of no rows), not a MERGE, and nothing is recomputed."""
    spark.sql("INSERT INTO rv_lots VALUES (1, 'lamp'), (2, 'kite')")
    spark.sql("INSERT INTO rv_offers VALUES (10, 1, 5), (11, 2, 7)")

    technique, _ = refreshed(spark, query, "INSERT INTO rv_offers VALUES (12, 99, 9)")

    assert technique == "incremental"
    assert spark.sql(f"DESCRIBE HISTORY {VIEW} LIMIT 1").first().operation == "WRITE"


@pytest.mark.parametrize("function, argument, period", [
    ("date_format", "yyyy-MM-dd", "1 DAY"), ("date_format", "yyyyMMdd HH", "1 HOUR"),
    ("date_format", "yyyy-MM-dd HH:mm", "1 MINUTE"), ("date_format", "yyyy/MM", "1 MONTH"), ("date_format", "yyyy", "1 YEAR"),
    ("date_format", "dd-MM-yyyy", None), ("date_format", "yyyy-MMM-dd", None), ("date_format", "yyyy-M-d", None),
    ("date_format", "yy-MM-dd", None), ("date_format", "YYYY-MM", None),
    ("date_trunc", "week", "7 DAY"), ("date_trunc", "QUARTER", "3 MONTH"), ("date_trunc", "millisecond", None)])
def test_a_key_spans_a_period_of_time_only_when_its_text_sorts_as_its_time(function, argument, period):
    """Zero-padded numbers, largest unit first, calendar years ('YYYY' is the week's year, 'MMM' a
    month's name): otherwise a range of keys is no range of time."""
    assert time_keys.period({"function": function, "argument": argument}) == period


@pytest.mark.parametrize("query", [
    "SELECT DATE_FORMAT(v.at, 'yyyy-MM-dd') AS day, count(l.id) AS n FROM rv_lots l LEFT JOIN rv_visits v "
    "ON v.user = l.id GROUP BY DATE_FORMAT(v.at, 'yyyy-MM-dd')",
    "SELECT DATE_FORMAT(at, 'yyyy-MM-dd') AS day, count(*) AS n FROM (SELECT at, row_number() OVER "
    "(PARTITION BY user ORDER BY at) AS k FROM rv_visits) WHERE k = 1 GROUP BY DATE_FORMAT(at, 'yyyy-MM-dd')",
])
def test_a_time_key_over_rows_that_depend_on_other_rows_keeps_no_source_to_a_time(spark, tables, query):
    """Below an outer join (a lot whose visits were cut away would count as unvisited) or an OVER (a
    user's first visit among fewer rows), the source kept to a time would change the rows of a key."""
    assert [read.time_keys for read in describe(spark, query).reads if read.time_keys] == []


@pytest.mark.parametrize("key", ["DATE_FORMAT(at, 'yyyy-MM-dd HH')", "DATE_FORMAT(at, 'yyyy-MM-dd')"])
def test_time_keys_stay_exact_across_a_clock_change_and_for_null_times(spark, tables, key):
    """In New York the hour '2026-11-01 01' happens twice and that day has 25 hours: the time a key
    spans is found in the session's time zone, as the key was made, so a visit in the repeated
    hour, a deleted one and one without a time all land in their groups."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for hour in range(0, 4):  # a file an hour, from 2026-11-01 00:00 EDT (04:00 UTC) to 02:00 EST
            spark.sql(f"INSERT INTO rv_visits SELECT id, timestamp_micros(unix_micros(timestamp'2026-11-01 04:00:00 UTC') "
                      f"+ {hour} * 3600000000 + id * 60000000) FROM range(0, 30, 1, 1)")
        query = f"SELECT {key} AS period, count(DISTINCT user) AS users, count(*) AS n FROM rv_visits GROUP BY {key}"
        change = ("INSERT INTO rv_visits VALUES (77, timestamp'2026-11-01 06:30:00 UTC'), "  # 01:30 EST, the 2nd time
                  "(78, timestamp'2026-11-02 04:59:00 UTC'), (79, NULL)")                    # the 25-hour day's end

        technique, _ = refreshed(spark, query, change)
        spark.sql("DELETE FROM rv_visits WHERE user = 3 AND at < timestamp'2026-11-01 06:00:00 UTC'")
        again = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {VIEW}").first()

        assert (technique, again.technique) == ("incremental", "incremental")
        assert bag(spark, VIEW) == bag(spark, f"({query})")
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
