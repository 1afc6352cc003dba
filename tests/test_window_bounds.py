"""Window.bounds, the arithmetic a refresh uses to find the windows of an append at the end of time
from its files' statistics (window_refresh._statistics_span), finds the same windows as the window
function itself: TUMBLE and HOP (slides that divide the size and slides that do not), offsets,
zones with one offset from UTC, TIMESTAMP, TIMESTAMP_NTZ and BIGINT epoch milliseconds, times
before 1970 too.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mv.query import Window, micros_sql, time_sql
from mv.window_refresh import zone_shift
from test_window_time_zones import time_zone

SECOND = 1_000_000
# Zones whose windows align on one offset from UTC (the extension's WindowSpec.fixedZoneOffsetMicros).
FIXED_ZONES = ["UTC", "+05:30", "-08:00", "Etc/GMT+3", "+14:00"]


@st.composite
def windows(draw):
    """A TUMBLE or HOP window in whole milliseconds, the zone its windows align in, a time type."""
    kind = draw(st.sampled_from(["TUMBLE", "HOP"]))
    step = draw(st.sampled_from([1, 7, 60, 90, 3600, 86400])) * SECOND + draw(st.sampled_from([0, 250_000]))
    size = step if kind == "TUMBLE" else step * draw(st.integers(1, 5)) + draw(st.sampled_from([0, step // 2]))
    offset = draw(st.integers(0, step // 1000 - 1)) * 1000
    time_type = draw(st.sampled_from(["timestamp", "timestamp_ntz", "bigint"]))
    zone = draw(st.sampled_from(FIXED_ZONES))
    return Window(kind, size, step, offset, None if time_type == "timestamp_ntz" else zone, "ts", [], [], True), \
        zone, time_type


def by_the_window_function(spark, w: Window, zone: str, time_type: str, earliest: int, latest: int):
    """The earliest window start and latest window end the window function gives the two times."""
    with time_zone(spark, zone):
        times = f"(SELECT * FROM VALUES ({time_sql(earliest, time_type)}), ({time_sql(latest, time_type)}) AS t(ts))"
        return tuple(spark.sql(f"SELECT min({micros_sql('window_start', time_type)}), "
                               f"max({micros_sql('window_end', time_type)}) FROM {w.call(times)}").first())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=windows(), earliest=st.integers(-10**15, 10**15), later=st.integers(0, 10**12))
def test_bounds_are_the_window_functions_own(spark, window, earliest, later):
    w, zone, time_type = window
    earliest -= earliest % 1000  # Delta's statistics keep milliseconds; BIGINT times are milliseconds
    latest = earliest + later - later % 1000
    shift = zone_shift(spark, w.time_zone)
    assert w.bounds(earliest, latest, shift) == by_the_window_function(spark, w, zone, time_type, earliest, latest)


def test_a_zone_ahead_of_utc_shifts_hourly_windows_to_its_half_hours(spark):
    hour = 3600 * SECOND
    w = Window("TUMBLE", hour, hour, 0, "+05:30", "ts", [], [], True)
    # 04:45 UTC is 10:15 in +05:30: its hour [10:00, 11:00) there is [04:30, 05:30) in UTC.
    assert w.bounds(4 * hour + 45 * 60 * SECOND, 4 * hour + 45 * 60 * SECOND, zone_shift(spark, "+05:30")) \
        == (4 * hour + 30 * 60 * SECOND, 5 * hour + 30 * 60 * SECOND)
