"""Esper's derived-value windows as aggregates returning Esper's field names (docs/windows.md).

Values are worked out by hand or with Python's statistics module; composed with a data window they
answer the chapter's examples, e.g. `select stddev from StockTickEvent#length(3)#uni(price)`.
"""
import math
import statistics

import pytest

LINEST_FIELDS = ["slope", "YIntercept", "XAverage", "XStandardDeviationPop", "XStandardDeviationSample", "XSum",
                 "XVariance", "YAverage", "YStandardDeviationPop", "YStandardDeviationSample", "YSum", "YVariance",
                 "dataPoints", "n", "sumX", "sumXSq", "sumXY", "sumY", "sumYSq"]


@pytest.fixture(scope="module")
def ticks(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW agg_ticks AS SELECT * FROM VALUES
        (1, TIMESTAMP_NTZ'2024-01-01 00:00:00', 'GE', 2.0, 100), (2, TIMESTAMP_NTZ'2024-01-01 00:00:01', 'GE', 4.0, 300),
        (3, TIMESTAMP_NTZ'2024-01-01 00:00:02', 'IBM', 4.0, 50), (4, TIMESTAMP_NTZ'2024-01-01 00:00:03', 'GE', 4.0, NULL),
        (5, TIMESTAMP_NTZ'2024-01-01 00:00:04', 'IBM', 5.0, 150), (6, TIMESTAMP_NTZ'2024-01-01 00:00:05', 'GE', 5.0, 10),
        (7, TIMESTAMP_NTZ'2024-01-01 00:00:06', 'IBM', 7.0, 20), (8, TIMESTAMP_NTZ'2024-01-01 00:00:07', 'GE', 9.0, 40)
        AS t(id, ts, symbol, price, volume)""")


def test_uni_gives_esper_univariate_fields(spark, ticks):
    # uni(price): datapoints, total, average, variance, stddev (sample) and stddevpa (population)
    uni = spark.sql("SELECT STAT_UNI(price) AS u FROM agg_ticks").first().u
    assert uni.asDict().keys() == {"datapoints", "total", "average", "variance", "stddev", "stddevpa"}
    assert (uni.datapoints, uni.total, uni.average, uni.stddevpa) == (8, 40.0, 5.0, 2.0)
    assert uni.variance == pytest.approx(32 / 7) and uni.stddev == pytest.approx(math.sqrt(32 / 7))


def test_uni_over_a_length_window_is_the_stddev_of_the_last_rows(spark, ticks):
    # select stddev from StockTickEvent#length(3)#uni(price)
    rows = spark.sql("SELECT window_seq, STAT_UNI(price).stddev AS s FROM WIN_LENGTH(TABLE(agg_ticks), "
                     "DESCRIPTOR(ts), 3) GROUP BY window_seq ORDER BY window_seq").collect()
    prices = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    for row in rows:
        last = prices[max(0, row.window_seq - 3):row.window_seq]
        assert row.s == (pytest.approx(statistics.stdev(last)) if len(last) > 1 else None)


def test_linest_gives_the_regression_of_y_on_x_with_esper_field_names(spark):
    # linest(price, volume) over (10, 50000) and (11, 50100)
    fit = spark.sql("SELECT STAT_LINEST(x, y) AS f FROM VALUES (10.0, 50000L), (11.0, 50100L) AS t(x, y)").first().f
    assert list(fit.asDict()) == LINEST_FIELDS
    assert (fit.slope, fit.YIntercept) == (pytest.approx(100.0), pytest.approx(49000.0))
    assert (fit.XAverage, fit.XSum, fit.YSum, fit.dataPoints, fit.n) == (10.5, 21.0, 100100.0, 2, 2)
    assert (fit.XStandardDeviationPop, fit.XVariance) == (pytest.approx(0.5), pytest.approx(0.5))
    assert (fit.sumXSq, fit.sumXY, fit.sumYSq) == (221.0, 1051100.0, 5010010000.0)


def test_linest_of_one_point_has_no_slope_and_zero_population_deviation(spark):
    # Esper answers NaN where a statistic needs two points; SQL answers NULL
    fit = spark.sql("SELECT STAT_LINEST(1.0, 1.0) AS f").first().f
    assert (fit.slope, fit.YIntercept, fit.XVariance, fit.XStandardDeviationSample) == (None,) * 4
    assert (fit.XStandardDeviationPop, fit.XSum, fit.sumXY, fit.dataPoints) == (0.0, 1.0, 1.0, 1)


def test_linest_over_a_time_window(spark, ticks):
    # select slope, YIntercept from StockTickEvent#time(10 seconds)#linest(price, offer), here offer = 2 * price + 1
    rows = spark.sql("SELECT STAT_LINEST(price, 2 * price + 1) AS f FROM WIN_TIME(TABLE(agg_ticks), "
                     "DESCRIPTOR(ts), 10) WHERE window_time = TIMESTAMP_NTZ'2024-01-01 00:00:07'").collect()
    assert (rows[0].f.slope, rows[0].f.YIntercept) == (pytest.approx(2.0), pytest.approx(1.0))


def test_correl_gives_the_correlation(spark):
    rows = spark.sql("SELECT STAT_CORREL(x, y).correlation AS up, STAT_CORREL(x, -y).correlation AS down "
                     "FROM VALUES (1, 2.0), (2, 4.5), (3, 6.0) AS t(x, y)").first()
    assert rows.up == pytest.approx(statistics.correlation([1, 2, 3], [2.0, 4.5, 6.0])) and rows.down < 0


def test_weighted_avg_is_the_volume_weighted_price_per_symbol(spark, ticks):
    # "select symbol, sum(price*volume)/sum(volume) ... group by symbol" computes the same average
    rows = spark.sql("SELECT symbol, STAT_WEIGHTED_AVG(price, volume).average AS esper, "
                     "CAST(sum(price * volume) / sum(volume) AS DOUBLE) AS sql FROM agg_ticks GROUP BY symbol").collect()
    for row in rows:
        assert row.esper == pytest.approx(row.sql)


def test_weighted_avg_of_zero_weight_is_null(spark):
    assert spark.sql("SELECT STAT_WEIGHTED_AVG(5.0, 0).average").first()[0] is None


def test_size_counts_the_rows_per_group(spark, ticks):
    # select size from StockTickEvent#groupwin(symbol)#size
    rows = spark.sql("SELECT symbol, STD_SIZE().size AS size, count(*) AS n FROM agg_ticks GROUP BY symbol").collect()
    assert {r.symbol: r.size for r in rows} == {r.symbol: r.n for r in rows} == {"GE": 5, "IBM": 3}


def test_size_over_a_time_window(spark, ticks):
    # select size from StockTickEvent#time(1 min)#size, here 3 seconds
    sizes = spark.sql("SELECT window_time, STD_SIZE().size AS size FROM WIN_TIME(TABLE(agg_ticks), DESCRIPTOR(ts), 3) "
                      "GROUP BY window_time ORDER BY window_time").collect()
    assert [r.size for r in sizes] == [1, 2, 3, 3, 3, 3, 3, 3]


def test_no_rows_give_zero_counts_and_sums_and_null_statistics(spark, ticks):
    uni = spark.sql("SELECT STAT_UNI(price) AS u FROM agg_ticks WHERE id < 0").first().u
    assert (uni.datapoints, uni.total, uni.average, uni.stddev) == (0, 0.0, None, None)


def test_two_value_statistics_skip_rows_where_either_is_null(spark, ticks):
    # row 4 has no volume: its price counts in neither XSum nor dataPoints
    fit = spark.sql("SELECT STAT_LINEST(price, volume) AS f FROM agg_ticks").first().f
    assert (fit.dataPoints, fit.XSum) == (7, 36.0)
