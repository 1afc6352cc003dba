"""TIMESTAMP windows align on wall-clock time in the session time zone; TIMESTAMP_NTZ on its value.

docs/design.md rule 9: a one-day window on a TIMESTAMP column runs from local midnight to local
midnight (23 or 25 hours across daylight-saving changes), as Flink does for TIMESTAMP_LTZ.
"""
from contextlib import contextmanager
from datetime import datetime

import pytest


@contextmanager
def time_zone(spark, zone):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def windows_utc(spark, query):
    """Window bounds rendered in UTC, whatever the session zone was when they were computed."""
    spark.sql(query).createOrReplaceTempView("tz_windows")
    with time_zone(spark, "UTC"):
        return sorted(tuple(r) for r in spark.sql(
            "SELECT DISTINCT window_start, window_end FROM tz_windows").collect())


def test_one_day_tumble_runs_from_local_midnight_to_local_midnight(spark):
    with time_zone(spark, "America/New_York"):
        query = """SELECT * FROM TUMBLE(TABLE(SELECT TIMESTAMP'2024-03-10 12:00:00' AS ts),
                   DESCRIPTOR(ts), INTERVAL '1' DAY)"""
        got = windows_utc(spark, query)
    # 2024-03-10 is the spring-forward day in New York: 23 hours from 05:00Z to 04:00Z.
    assert got == [(datetime(2024, 3, 10, 5, 0), datetime(2024, 3, 11, 4, 0))]


def test_the_fall_back_day_is_25_hours_long(spark):
    with time_zone(spark, "America/New_York"):
        got = windows_utc(spark, """SELECT * FROM TUMBLE(TABLE(SELECT TIMESTAMP'2024-11-03 12:00:00' AS ts),
                                    DESCRIPTOR(ts), INTERVAL '1' DAY)""")
    assert got == [(datetime(2024, 11, 3, 4, 0), datetime(2024, 11, 4, 5, 0))]


def test_fixed_offset_zone_shifts_hourly_windows_to_its_half_hours(spark):
    with time_zone(spark, "+05:30"):
        got = windows_utc(spark, """SELECT * FROM TUMBLE(TABLE(SELECT TIMESTAMP'2024-01-01 10:15:00+05:30' AS ts),
                                    DESCRIPTOR(ts), INTERVAL '1' HOUR)""")
    # Local [10:00, 11:00) is [04:30, 05:30) in UTC; aligned on UTC it would be [04:00, 05:00).
    assert got == [(datetime(2024, 1, 1, 4, 30), datetime(2024, 1, 1, 5, 30))]


def test_cumulate_day_starts_at_local_midnight(spark):
    with time_zone(spark, "Asia/Kolkata"):
        got = windows_utc(spark, """SELECT * FROM CUMULATE(TABLE(SELECT TIMESTAMP'2024-01-01 01:00:00+05:30' AS ts),
                                    DESCRIPTOR(ts), INTERVAL '12' HOURS, INTERVAL '1' DAY)""")
    assert got == [(datetime(2023, 12, 31, 18, 30), datetime(2024, 1, 1, 6, 30)),
                   (datetime(2023, 12, 31, 18, 30), datetime(2024, 1, 1, 18, 30))]


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "+05:30"])
def test_timestamp_ntz_ignores_the_session_zone(spark, zone):
    with time_zone(spark, zone):
        got = spark.sql("""SELECT window_start, window_end FROM TUMBLE(TABLE(SELECT
            TIMESTAMP_NTZ'2024-03-10 12:00:00' AS ts), DESCRIPTOR(ts), INTERVAL '1' DAY)""").first()
    assert tuple(got) == (datetime(2024, 3, 10), datetime(2024, 3, 11))


def test_sessions_measure_the_gap_in_absolute_time_across_a_dst_change(spark):
    with time_zone(spark, "America/New_York"):
        # 01:50 EDT and 01:10 EST are 20 minutes apart, though the wall clock reads 40 minutes earlier.
        got = windows_utc(spark, """SELECT * FROM SESSION(TABLE(SELECT * FROM VALUES
            (TIMESTAMP'2024-11-03 05:50:00+00:00'), (TIMESTAMP'2024-11-03 06:10:00+00:00') AS t(ts)),
            DESCRIPTOR(ts), INTERVAL '30' MINUTES)""")
    assert got == [(datetime(2024, 11, 3, 5, 50), datetime(2024, 11, 3, 6, 40))]
