"""A filter on window_start/window_end also becomes a range on the time column at the Delta scan.

Given a Delta table written as one file per hour, a query that keeps only some windows must read
only the files whose rows can fall into them, and still give the same answer as the filter
applied after windowing everything.
"""
import pytest


@pytest.fixture(scope="module")
def hourly_bids(spark):
    spark.sql("DROP TABLE IF EXISTS pushdown_bids")
    spark.sql("CREATE TABLE pushdown_bids (bidtime TIMESTAMP, price BIGINT) USING delta")
    for hour in range(6):
        spark.sql(f"""INSERT INTO pushdown_bids
            SELECT TIMESTAMP'2024-01-01 00:00:00' + make_dt_interval(0, {hour}, id, 0), id
            FROM range(0, 60, 1, 1)""")
    yield "pushdown_bids"
    spark.sql("DROP TABLE IF EXISTS pushdown_bids")


def _files_read(spark, query):
    """Run `query` without adaptive execution and return the scan's number of files read."""
    previous = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        df = spark.sql(query)
        rows = df.collect()
        plan = df._jdf.queryExecution().executedPlan()
        scans = [plan.collectLeaves().apply(i) for i in range(plan.collectLeaves().size())]
        return rows, sum(scan.metrics().apply("numFiles").value() for scan in scans)
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", previous)


WINDOWED = """SELECT window_start, window_end, window_time, count(*) AS n, sum(price) AS total
    FROM {tvf} {where} GROUP BY window_start, window_end, window_time"""
TVFS = {
    "tumble": "TUMBLE(TABLE(pushdown_bids), DESCRIPTOR(bidtime), INTERVAL '30' MINUTES)",
    "hop": "HOP(TABLE(pushdown_bids), DESCRIPTOR(bidtime), INTERVAL '15' MINUTES, INTERVAL '30' MINUTES)",
    "cumulate": "CUMULATE(TABLE(pushdown_bids), DESCRIPTOR(bidtime), INTERVAL '15' MINUTES, INTERVAL '1' HOUR)",
}


@pytest.mark.parametrize("kind", sorted(TVFS))
def test_window_start_filter_becomes_a_time_range_at_the_scan(spark, hourly_bids, kind):
    where = "WHERE window_start >= TIMESTAMP'2024-01-01 04:00:00'"
    plan = spark.sql(WINDOWED.format(tvf=TVFS[kind], where=where))._jdf.queryExecution() \
        .executedPlan().toString()
    scan = next(line for line in plan.splitlines() if "FileScan" in line or "Scan parquet" in line)
    assert "GreaterThanOrEqual(bidtime,2024-01-01 04:00:00" in scan.replace(".0", "")


@pytest.mark.parametrize("kind", sorted(TVFS))
@pytest.mark.parametrize("where", [
    "WHERE window_start >= TIMESTAMP'2024-01-01 04:00:00'",
    "WHERE window_end <= TIMESTAMP'2024-01-01 02:00:00'",
    "WHERE window_start = TIMESTAMP'2024-01-01 03:00:00'",
    "WHERE window_time < TIMESTAMP'2024-01-01 01:00:00'",
    "WHERE window_start BETWEEN TIMESTAMP'2024-01-01 02:00:00' AND TIMESTAMP'2024-01-01 03:00:00'",
    "WHERE window_start < TIMESTAMP'2024-01-01 00:30:00' OR window_start >= TIMESTAMP'2024-01-01 05:00:00'",
    "WHERE (window_start >= TIMESTAMP'2024-01-01 01:00:00' AND window_end <= TIMESTAMP'2024-01-01 02:00:00') "
    "OR window_start = TIMESTAMP'2024-01-01 04:30:00'",
])
def test_pruned_scan_gives_the_same_windows_as_filtering_afterwards(spark, hourly_bids, kind, where):
    query = WINDOWED.format(tvf=TVFS[kind], where=where)
    rows, files = _files_read(spark, query)
    spark.sql(WINDOWED.format(tvf=TVFS[kind], where="")).createOrReplaceTempView("all_windows")
    expected = spark.sql(f"SELECT * FROM all_windows {where}").collect()
    assert sorted(rows) == sorted(expected) and rows
    assert files <= 3, "Delta must skip the hourly files outside the implied time range"


def test_session_windows_are_never_pruned_by_a_window_filter(spark, hourly_bids):
    query = """SELECT window_start, count(*) FROM SESSION(TABLE(pushdown_bids), DESCRIPTOR(bidtime),
        INTERVAL '2' HOURS) WHERE window_start >= TIMESTAMP'2024-01-01 04:00:00' GROUP BY window_start"""
    rows, files = _files_read(spark, query)
    assert rows == [], "one session spans all six hours and starts at midnight"
    assert files == 6
