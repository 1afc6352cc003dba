"""Lenses' event time and durations in the window table functions (docs/windows.md, "Lenses").

Duration literals (100ms, 10s, 5m, 2h, 1d) stand for intervals; the time column may be a nested
field (Lenses' EVENTTIME BY details.startedAt) or BIGINT epoch milliseconds (eKuiper's ts BIGINT).
"""
import datetime as dt

import pytest

pytestmark = pytest.mark.compat  # run on every supported Spark line (make test-compat)

T0 = dt.datetime(2024, 1, 1)


@pytest.fixture(scope="module")
def games(spark):
    """Lenses' example shape: a struct `details` with the time inside, plus epoch milliseconds."""
    spark.sql("""CREATE OR REPLACE TEMP VIEW games AS SELECT country, named_struct('startedAt', started) AS details,
        unix_millis(CAST(started AS TIMESTAMP)) AS ms FROM VALUES
        ('UK', TIMESTAMP_NTZ'2024-01-01 00:00:30'), ('UK', TIMESTAMP_NTZ'2024-01-01 00:04:59.900'),
        ('FR', TIMESTAMP_NTZ'2024-01-01 00:05:00'), ('UK', TIMESTAMP_NTZ'2024-01-01 02:00:00') AS t(country, started)""")


def rows(spark, sql):
    return sorted(tuple(r) for r in spark.sql(sql).collect())


@pytest.mark.parametrize("literal, interval", [
    ("100ms", "INTERVAL '0.1' SECOND"), ("10s", "INTERVAL '10' SECOND"), ("5m", "INTERVAL '5' MINUTE"),
    ("2h", "INTERVAL '2' HOUR"), ("1d", "INTERVAL '1' DAY")])
def test_duration_literals_mean_their_intervals(spark, games, literal, interval):
    query = "SELECT window_start, count(*) FROM TUMBLE(TABLE(games), DESCRIPTOR(details.startedAt), {}) GROUP BY 1"
    assert rows(spark, query.format(literal)) == rows(spark, query.format(interval))


def test_lenses_hop_5m_1m_by_country_on_a_nested_time(spark, games):
    # WINDOW BY HOP 5m,1m ... EVENTTIME BY details.startedAt, GROUP BY country: HOP takes the slide first.
    got = rows(spark, """SELECT country, count(*) FROM HOP(TABLE(games), DESCRIPTOR(details.startedAt), 1m, 5m)
                         WHERE window_start = TIMESTAMP_NTZ'2024-01-01 00:00:00' GROUP BY country""")
    assert got == [("UK", 2)]


def test_session_1m_and_cumulate_take_durations_too(spark, games):
    assert rows(spark, "SELECT count(*) FROM SESSION(TABLE(games) PARTITION BY country, "
                       "DESCRIPTOR(details.startedAt), 5m) GROUP BY country, window_start") == [(1,), (1,), (2,)]
    assert rows(spark, "SELECT window_end, count(*) FROM CUMULATE(TABLE(games), DESCRIPTOR(ms), 1h, 1d) "
                       "WHERE window_end <= 1704070800000 GROUP BY 1") == [(1704070800000, 3)]


def test_bigint_epoch_milliseconds_give_bigint_window_columns(spark, games):
    df = spark.sql("SELECT * FROM TUMBLE(TABLE(games), DESCRIPTOR(ms), 5m)")
    types = dict(df.dtypes)
    assert types["window_start"] == types["window_end"] == types["window_time"] == "bigint"
    got = rows(spark, "SELECT window_start, window_end, window_time, count(*) FROM TUMBLE(games, ms, 5m) GROUP BY 1, 2, 3")
    assert got[0] == (1704067200000, 1704067500000, 1704067499999, 2)


def test_a_filter_on_bigint_window_columns_bounds_the_time_column(spark, games):
    query = "SELECT count(*) FROM TUMBLE(TABLE(games), DESCRIPTOR(ms), 5m) WHERE window_start >= 1704067500000"
    assert rows(spark, query) == [(2,)]


def test_outside_window_functions_10s_keeps_its_spark_meaning(spark):
    assert spark.sql("SELECT 10s AS x").dtypes == [("x", "smallint")]
