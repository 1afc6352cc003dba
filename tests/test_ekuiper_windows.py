"""eKuiper's window functions in GROUP BY, in eKuiper's own syntax (docs/windows.md, "eKuiper windows").

Given a tiny `demo` stream of events one per row (event time `ts`, as eKuiper's TIMESTAMP="ts"), each
test runs a query from eKuiper's window document, or an edge case, and checks the rows it returns.
"""
import datetime as dt
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException

import mv
from tests import window_reference as ref

pytestmark = pytest.mark.compat  # run on every supported Spark line (make test-compat)

T0 = dt.datetime(2024, 1, 1)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def events(spark, name, rows, schema="n INT, ID STRING, ts TIMESTAMP_NTZ, temperature INT, revenue INT"):
    spark.createDataFrame(rows, schema).createOrReplaceTempView(name)


@pytest.fixture(scope="module")
def demo(spark):
    """Seven events at 1, 4, 8, 11, 14, 17, 21 s; IDs a and b; temperature and revenue rise with n."""
    seconds = [1, 4, 8, 11, 14, 17, 21]
    events(spark, "demo", [(n, "ab"[n % 2], at(s), 15 + 2 * n, 50 * n) for n, s in enumerate(seconds, 1)])


def rows(spark, sql):
    return sorted(tuple(r) for r in mv.sql(spark, sql).collect())


# --- the document's examples ------------------------------------------------------------------------

def test_tumbling_window_counts_each_id_per_ten_seconds_aligned_to_natural_time(spark, demo):
    assert rows(spark, "SELECT ID, window_start(), window_end(), count(*) FROM demo "
                       "GROUP BY ID, TUMBLINGWINDOW(ss, 10)") == [
        ("a", at(0), at(10), 1), ("a", at(10), at(20), 2),
        ("b", at(0), at(10), 2), ("b", at(10), at(20), 1), ("b", at(20), at(30), 1)]


def test_doc_examples_run_verbatim_and_return_only_the_aggregates(spark, demo):
    assert spark.sql("SELECT count(*) FROM demo GROUP BY ID, TUMBLINGWINDOW(ss, 10);").columns == ["count(1)"]
    assert sorted(r[0] for r in spark.sql("SELECT count(*) FROM demo GROUP BY ID, COUNTWINDOW(5, 2)").collect()) == [2, 3]
    assert sorted(r[0] for r in mv.sql(spark, "SELECT count(*) FROM demo GROUP BY ID, COUNTWINDOW(5, 2)").collect()) == [2, 3]


def test_hopping_window_of_ten_seconds_every_five(spark, demo):
    assert rows(spark, "SELECT window_start(), window_end(), count(*) FROM demo "
                       "GROUP BY HOPPINGWINDOW(ss, 10, 5)") == [
        (at(-5), at(5), 2), (at(0), at(10), 3), (at(5), at(15), 3), (at(10), at(20), 3),
        (at(15), at(25), 2), (at(20), at(30), 1)]


def test_hopping_window_with_hop_equal_to_size_is_the_tumbling_window(spark, demo):
    assert rows(spark, "SELECT window_start(), count(*) FROM demo GROUP BY HOPPINGWINDOW(ss, 10, 10)") == \
        rows(spark, "SELECT window_start(), count(*) FROM demo GROUP BY TUMBLINGWINDOW(ss, 10)")


def test_sliding_window_gives_one_window_per_event_ending_at_it(spark, demo):
    assert rows(spark, "SELECT window_end(), count(*) FROM demo GROUP BY SLIDINGWINDOW(ss, 5)") == [
        (at(1), 1), (at(4), 2), (at(8), 2), (at(11), 2), (at(14), 2), (at(17), 2), (at(21), 2)]


def test_sliding_window_with_delay_also_holds_the_events_of_the_delay(spark, demo):
    # SLIDINGWINDOW(ss, 5, 5): the event at 8 s triggers (3, 13]: events at 4, 8, 11.
    got = rows(spark, "SELECT window_start(), window_end(), count(*) FROM demo GROUP BY SLIDINGWINDOW(ss, 5, 5)")
    assert (at(3), at(13), 3) in got and len(got) == 7


def test_sliding_window_over_when_chooses_the_events_that_open_a_window(spark, demo):
    # The document's SlidingWindow(ss,1) FILTER(where revenue > 100) OVER(when revenue > 200), scaled to 5 s.
    got = rows(spark, "SELECT window_end(), collect_list(n) FROM demo "
                      "GROUP BY SlidingWindow(ss, 5) FILTER(where revenue > 100) OVER(when revenue > 200)")
    assert [(end, sorted(ns)) for end, ns in got] == [(at(14), [4, 5]), (at(17), [5, 6]), (at(21), [6, 7])]


def test_sliding_window_with_keys_groups_each_window_by_them(spark, demo):
    got = rows(spark, "SELECT ID, window_end(), count(*) FROM demo GROUP BY ID, SLIDINGWINDOW(mi, 1) OVER(WHEN n = 7)")
    assert got == [("a", at(21), 3), ("b", at(21), 4)]


def test_session_window_parameters_are_max_duration_then_timeout(spark, demo):
    # SESSIONWINDOW(ss, 10, 4): timeout 4 s never ends a session here (gaps are 3-4 s, and touching
    # events join); the check at 20 s (the first multiple of 10 with 20 - 10 > start 1) cuts it.
    assert rows(spark, "SELECT window_start(), window_end(), count(*) FROM demo GROUP BY SESSIONWINDOW(ss, 10, 4)") == [
        (at(1), at(20), 6), (at(21), at(25), 1)]


def test_session_window_closes_after_the_timeout(spark, demo):
    # The document's SESSIONWINDOW(mi, 2, 1) in seconds: timeout 3 s splits at the 4 s gaps only.
    assert rows(spark, "SELECT window_start(), window_end(), count(*) FROM demo GROUP BY SESSIONWINDOW(ss, 20, 3)") == [
        (at(1), at(7), 2), (at(8), at(20), 4), (at(21), at(24), 1)]


def test_count_window_tumbles_over_where_filtered_rows(spark, demo):
    # SELECT * FROM demo WHERE temperature > 20 GROUP BY COUNTWINDOW(5): rows 3..7 pass WHERE; one full window.
    assert rows(spark, "SELECT collect_list(n) FROM demo WHERE temperature > 20 GROUP BY COUNTWINDOW(5)") == [
        ([3, 4, 5, 6, 7],)]


def test_count_window_walkthrough_of_five_every_two(spark, demo):
    # Events 2 and 4 do not trigger (fewer than 5); event 6 gives events 2..6; event 8 never comes.
    got = rows(spark, "SELECT window_start(), window_end(), collect_list(n) FROM demo GROUP BY COUNTWINDOW(5, 2)")
    assert [(s, e, sorted(ns)) for s, e, ns in got] == [(at(4), at(17), [2, 3, 4, 5, 6])]


def test_count_window_every_event_with_having(spark, demo):
    # COUNTWINDOW(5,1) HAVING COUNT(*) > 2 after WHERE temperature > 20 (rows 3..7): windows at rows 7 only.
    assert rows(spark, "SELECT count(*) FROM demo WHERE temperature > 20 GROUP BY COUNTWINDOW(5, 1) "
                       "HAVING COUNT(*) > 2") == [(5,)]


def test_filter_runs_before_the_count_window_where_after(spark, demo):
    filtered = rows(spark, "SELECT count(*) FROM demo GROUP BY COUNTWINDOW(3, 1) FILTER(where revenue > 100)")
    where = rows(spark, "SELECT count(*) FROM demo WHERE revenue > 100 GROUP BY COUNTWINDOW(3, 1)")
    assert filtered == [(3,)] * 3 and where == filtered
    assert rows(spark, "SELECT count(*) FROM demo GROUP BY COUNTWINDOW(3, 3) HAVING count(*) = 3") == [(3,), (3,)]


# --- edge cases ------------------------------------------------------------------------------------

def test_units_are_case_insensitive_and_milliseconds_work(spark, demo):
    assert rows(spark, "SELECT count(*) FROM demo GROUP BY TumblingWindow(MS, 10000)") == \
        rows(spark, "SELECT count(*) FROM demo GROUP BY tumblingwindow(Ss, 10)")


def test_a_day_window_ends_at_local_midnight(spark):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Shanghai")
    try:
        spark.sql("""CREATE OR REPLACE TEMP VIEW day_events AS SELECT * FROM VALUES
            (TIMESTAMP'2024-01-01 23:30:00'), (TIMESTAMP'2024-01-02 00:30:00') AS t(ts)""")
        got = rows(spark, "SELECT CAST(window_end() AS STRING), count(*) FROM day_events GROUP BY TUMBLINGWINDOW(dd, 1)")
        assert got == [("2024-01-02 00:00:00", 1), ("2024-01-03 00:00:00", 1)]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_window_bounds_are_half_open(spark):
    events(spark, "edges", [(1, "a", at(10), 0, 0), (2, "a", at(20), 0, 0)])
    assert rows(spark, "SELECT window_start(), count(*) FROM edges GROUP BY TUMBLINGWINDOW(ss, 10)") == [
        (at(10), 1), (at(20), 1)]
    # (t - 10, t]: the event at 10 is not in the window ending at 20.
    assert rows(spark, "SELECT window_end(), count(*) FROM edges GROUP BY SLIDINGWINDOW(ss, 10)") == [
        (at(10), 1), (at(20), 1)]


def test_ties_give_one_window_per_event_and_a_stable_count_order(spark):
    events(spark, "ties", [(n, "a", at(5), 0, 0) for n in range(1, 5)])
    assert rows(spark, "SELECT count(*) FROM ties GROUP BY SLIDINGWINDOW(ss, 1)") == [(4,)] * 4
    first = rows(spark, "SELECT collect_list(n) FROM ties GROUP BY COUNTWINDOW(2)")
    assert first == rows(spark, "SELECT collect_list(n) FROM ties GROUP BY COUNTWINDOW(2)") and len(first) == 2


def test_empty_input_gives_no_windows(spark):
    events(spark, "nothing", [])
    for window in ("TUMBLINGWINDOW(ss, 10)", "HOPPINGWINDOW(ss, 10, 5)", "SLIDINGWINDOW(ss, 10)",
                   "SESSIONWINDOW(ss, 10, 5)", "COUNTWINDOW(2)", "COUNTWINDOW(2, 1)"):
        assert rows(spark, f"SELECT count(*) FROM nothing GROUP BY ID, {window}") == []


def test_null_event_times_are_dropped(spark):
    events(spark, "with_nulls", [(1, "a", at(1), 0, 0), (2, "a", None, 0, 0), (3, "a", at(2), 0, 0)])
    for window in ("TUMBLINGWINDOW(ss, 10)", "SLIDINGWINDOW(ss, 10) OVER(WHEN n = 3)", "SESSIONWINDOW(ss, 10, 5)",
                   "COUNTWINDOW(2)"):
        assert rows(spark, f"SELECT count(*) FROM with_nulls GROUP BY {window}") == [(2,)], window


def test_bigint_epoch_milliseconds_as_event_time(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW ms_events AS SELECT * FROM VALUES
        (1, 1704067201000L), (2, 1704067209999L), (3, 1704067210000L) AS t(n, ts)""")
    assert rows(spark, "SELECT window_start(), window_end(), count(*) FROM ms_events GROUP BY TUMBLINGWINDOW(ss, 10)") == [
        (1704067200000, 1704067210000, 2), (1704067210000, 1704067220000, 1)]
    assert rows(spark, "SELECT window_end(), count(*) FROM ms_events GROUP BY SLIDINGWINDOW(ms, 8999)") == [
        (1704067201000, 1), (1704067209999, 1), (1704067210000, 2)]


def test_timecol_names_another_time_column(spark, demo):
    assert rows(spark, "SELECT count(*) FROM (SELECT n, ts AS happened FROM demo) "
                       "GROUP BY TUMBLINGWINDOW(ss, 10, TIMECOL => happened)") == [(1,), (3,), (3,)]


# --- against the pure-Python reference -------------------------------------------------------------

@pytest.fixture(scope="module")
def scattered(spark):
    rng = random.Random(4)
    seconds = sorted(rng.sample(range(0, 120), 40))
    events(spark, "scattered", [(i, "ab"[i % 2], at(s), 0, 0) for i, s in enumerate(seconds)])
    return seconds


def test_sliding_matches_the_reference_with_and_without_keys(spark, scattered):
    expected = sorted((at(t - 7), at(t + 3), len(members)) for t, members in ref.ekuiper_sliding(scattered, 7, 3))
    assert rows(spark, "SELECT window_start(), window_end(), count(*) FROM scattered "
                       "GROUP BY SLIDINGWINDOW(ss, 7, 3)") == expected
    keyed = rows(spark, "SELECT s, e, sum(c) FROM (SELECT window_start() AS s, window_end() AS e, count(*) AS c "
                        "FROM scattered GROUP BY ID, SLIDINGWINDOW(ss, 7, 3)) GROUP BY 1, 2")
    assert keyed == expected


def test_count_windows_match_the_reference(spark, scattered):
    for n, m in ((5, 2), (4, 4), (3, 1)):
        expected = sorted(tuple(sorted(w)) for w in ref.ekuiper_count(len(scattered), n, m))
        got = rows(spark, f"SELECT collect_list(n) FROM scattered GROUP BY COUNTWINDOW({n}, {m})")
        keyed = rows(spark, f"SELECT _s, _w, flatten(collect_list(ns)) FROM (SELECT window_start() AS _s, window_end() AS _w, "
                            f"collect_list(n) AS ns FROM scattered GROUP BY ID, COUNTWINDOW({n}, {m})) GROUP BY 1, 2")
        assert sorted(tuple(sorted(ns)) for (ns,) in got) == expected
        assert sorted(tuple(sorted(ns)) for _, _, ns in keyed) == expected
        assert all(s == at(scattered[ns[0]]) for s, _, ns in map(lambda r: (r[0], r[1], sorted(r[2])), keyed))


def test_sessions_match_the_reference(spark, scattered):
    for max_duration, timeout in ((10, 4), (30, 6), (5, 10)):
        expected = sorted((at(s), at(e), len(m)) for s, e, m in ref.ekuiper_session(scattered, max_duration, timeout))
        assert rows(spark, f"SELECT window_start(), window_end(), count(*) FROM scattered "
                           f"GROUP BY SESSIONWINDOW(ss, {max_duration}, {timeout})") == expected


# --- SLIDINGWINDOW in one pass (EkuiperSlidingWindowExec) -----------------------------------------

ONE_PASS = "spark.mv.ekuiper.slidingExec"


def plan(spark, sql) -> str:
    return spark.sql(sql)._jdf.queryExecution().executedPlan().toString()


def sorted_rows(spark, sql):
    """Like rows(), for results with NULLs: NULL sorts first in each column."""
    return sorted((tuple(r) for r in spark.sql(sql).collect()),
                  key=lambda r: tuple((x is not None, x if x is not None else 0) for x in r))


def both_ways(spark, sql):
    """The rows of ``sql`` with the one-pass operator and with Spark's RANGE frame (the conf off)."""
    try:
        spark.conf.set(ONE_PASS, "true")
        assert "EkuiperSlidingWindow" in plan(spark, sql), sql
        one_pass = sorted_rows(spark, sql)
        spark.conf.set(ONE_PASS, "false")
        assert "EkuiperSlidingWindow" not in plan(spark, sql), sql
        return one_pass, sorted_rows(spark, sql)
    finally:
        spark.conf.unset(ONE_PASS)


KEPT = "count(*), count(v), count(v, d), sum(v), avg(v), min(v), max(v), sum(i), avg(i), sum(d), avg(d), min(d), max(s)"


@pytest.fixture(scope="module")
def values(spark):
    """Given rows with times in seconds (ties, NULLs), BIGINT v, INT i, DECIMAL d and STRING s, some NULL."""
    spark.createDataFrame([
        (at(1), 5, 1, "1.25", "m"), (at(4), None, 2, "2.50", "a"), (at(6), 7, 3, None, "z"),
        (at(6), -2, None, "7.00", None), (None, 100, 9, "1.00", "q"), (at(9), 3, 4, "-3.00", "b"),
        (at(11), 1, 5, "0.01", "k"), (at(16), 2, 6, "4.00", "k")],
        "ts TIMESTAMP_NTZ, v BIGINT, i INT, d STRING, s STRING").selectExpr(
        "ts", "v", "i", "CAST(d AS DECIMAL(10, 2)) AS d", "s").createOrReplaceTempView("valued")


@pytest.mark.parametrize("items", [
    "count(*)", "count(v)", "sum(v)", "avg(v)", "min(v)", "max(v)", "min(s)", "sum(d)", "avg(d)",
    "bool_and(v > 1)",  # Spark plans it as min of a BOOLEAN
    "window_start(), window_end(), count(*) + 1, sum(v) / count(*)", KEPT])
def test_sliding_window_runs_in_one_pass_for_count_sum_avg_min_max(spark, values, items):
    sql = f"SELECT {items} FROM valued GROUP BY SLIDINGWINDOW(ss, 5)"
    assert "EkuiperSlidingWindow" in plan(spark, sql)
    assert "- Window [" not in plan(spark, sql)


@pytest.mark.parametrize("items", [
    "sum(CAST(v AS DOUBLE))",  # a float sum's rounding depends on the order of additions
    "avg(CAST(v AS DOUBLE))", "collect_list(v)", "stddev(v)", "var_pop(v)", "count(*), max_by(s, v)",
    "sum(CAST(v AS DECIMAL(30, 2)))",  # beyond 18 digits the unscaled total is not a BIGINT
])
def test_other_aggregates_keep_sparks_range_frame(spark, values, items):
    sql = f"SELECT {items} FROM valued GROUP BY SLIDINGWINDOW(ss, 5)"
    assert "EkuiperSlidingWindow" not in plan(spark, sql)


def test_keys_and_hand_written_range_frames_are_not_taken_over(spark, values):
    assert "EkuiperSlidingWindow" not in plan(spark, "SELECT count(*) FROM valued GROUP BY s, SLIDINGWINDOW(ss, 5)")
    assert "EkuiperSlidingWindow" not in plan(spark, "SELECT count(*) OVER (ORDER BY ts RANGE BETWEEN "
                                                     "INTERVAL '4.999999' SECOND PRECEDING AND CURRENT ROW) FROM valued")


@pytest.mark.parametrize("window", [
    "SLIDINGWINDOW(ss, 5)", "SLIDINGWINDOW(ss, 2)", "SLIDINGWINDOW(ss, 5, 3)", "SLIDINGWINDOW(mi, 1)",
    "SLIDINGWINDOW(ss, 5) OVER(WHEN v > 2)", "SLIDINGWINDOW(ss, 5) FILTER(WHERE s <> 'z')",
    "SLIDINGWINDOW(ms, 5000, 2000) FILTER(WHERE i > 1) OVER(WHEN i % 2 = 0)"])
def test_one_pass_equals_the_range_frame_with_delay_when_and_filter(spark, values, window):
    one_pass, frame = both_ways(spark, f"SELECT window_start(), window_end(), {KEPT} FROM valued GROUP BY {window}")
    assert one_pass == frame and frame


def test_one_pass_boundaries_ties_null_times_and_empty_input(spark, values):
    # Times exactly `size` apart fall out of each other's window; equal times share one window.
    events(spark, "apart", [(n, "a", at(s), n, 0) for n, s in enumerate([0, 5, 5, 10, 10.000001, 15], 1)])
    one_pass, frame = both_ways(spark, "SELECT window_end(), count(*), sum(n), min(n), max(n) FROM apart "
                                       "GROUP BY SLIDINGWINDOW(ss, 5)")
    assert one_pass == frame == [(at(0), 1, 1, 1, 1), (at(5), 2, 5, 2, 3), (at(5), 2, 5, 2, 3),
                                 (at(10), 1, 4, 4, 4), (at(10.000001), 2, 9, 4, 5), (at(15), 2, 11, 5, 6)]
    one_pass, frame = both_ways(spark, f"SELECT {KEPT} FROM valued WHERE ts IS NULL GROUP BY SLIDINGWINDOW(ss, 5)")
    assert one_pass == frame == []
    events(spark, "nulls_only", [(1, "a", None, 1, 1)])
    assert both_ways(spark, "SELECT count(*) FROM nulls_only GROUP BY SLIDINGWINDOW(ss, 5)") == ([], [])


def test_one_pass_sums_past_bigint_fail_under_ansi_and_wrap_otherwise_as_the_frame_does(spark):
    big = 2**62
    spark.createDataFrame([(at(0), big), (at(1), big), (at(2), big), (at(9), -big)], "ts TIMESTAMP_NTZ, v BIGINT") \
        .createOrReplaceTempView("huge")
    sql = "SELECT window_end(), sum(v), avg(v), min(v) FROM huge GROUP BY SLIDINGWINDOW(ss, 3)"
    for conf in ("true", "false"):
        spark.conf.set(ONE_PASS, conf)
        with pytest.raises(Exception) as raised:
            spark.sql(sql).collect()
        assert "ARITHMETIC_OVERFLOW" in str(raised.value)
    spark.conf.unset(ONE_PASS)
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        one_pass, frame = both_ways(spark, sql)
        assert one_pass == frame and len(frame) == 4
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def test_one_pass_averages_of_large_bigints_round_as_the_frame_does(spark):
    # Past 2^53 a DOUBLE sum rounds; the operator then adds in the frame's order, as Spark does.
    spark.createDataFrame([(at(i), v) for i, v in enumerate([2**53 + 1, 3, 2**60 + 7, -(2**60), 5, 2**53 + 3])],
                          "ts TIMESTAMP_NTZ, v BIGINT").createOrReplaceTempView("rounding")
    one_pass, frame = both_ways(spark, "SELECT window_end(), avg(v), sum(v) FROM rounding GROUP BY SLIDINGWINDOW(ss, 3)")
    assert one_pass == frame


@st.composite
def timed_values(draw):
    """Up to 30 rows: times on a coarse grid (ties, gaps), some NULL; values of each kept type, some NULL."""
    n = draw(st.integers(0, 30))
    times = draw(st.lists(st.one_of(st.none(), st.integers(0, 40)), min_size=n, max_size=n))
    ints = st.one_of(st.none(), st.integers(-1000, 1000))
    return [(None if t is None else at(t / 2), draw(ints), draw(ints), draw(st.sampled_from([None, "a", "b", "c"])))
            for t in times]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(table=timed_values(), size=st.integers(1, 12), delay=st.sampled_from(["", ", 0", ", 3"]),
       when=st.sampled_from(["", " OVER(WHEN i > 0)"]))
def test_one_pass_equals_the_frame_and_the_reference_on_random_tables(spark, table, size, delay, when):
    spark.createDataFrame(table, "ts TIMESTAMP_NTZ, v BIGINT, i INT, s STRING").selectExpr(
        "ts", "v", "i", "CAST(i AS DECIMAL(6, 1)) AS d", "s").createOrReplaceTempView("random_values")
    sql = (f"SELECT window_start(), window_end(), {KEPT} FROM random_values "
           f"GROUP BY SLIDINGWINDOW(ms, {size * 500}{delay}){when}")
    one_pass, frame = both_ways(spark, sql)
    assert one_pass == frame
    if not when:
        timed = sorted(((ref.to_micros(t) // 1000, v) for t, v, _, _ in table if t is not None), key=lambda p: p[0])
        times = [t for t, _ in timed]
        windows = ref.ekuiper_sliding(times, size * 500, int(delay.strip(", ") or 0))
        expected = list((len(m), sum(timed[j][1] for j in m if timed[j][1] is not None)
                           if any(timed[j][1] is not None for j in m) else None) for _, m in windows)
        assert sorted(((r[2], r[5]) for r in one_pass), key=repr) == sorted(expected, key=repr)


# --- COUNTWINDOW in one pass (the same operator over a ROWS frame) --------------------------------

@pytest.mark.parametrize("items", ["count(*)", "window_start(), window_end(), sum(v), avg(d), min(s)", KEPT])
def test_count_window_runs_in_one_pass_for_count_sum_avg_min_max(spark, values, items):
    for window in ("COUNTWINDOW(3, 2)", "COUNTWINDOW(3)", "COUNTWINDOW(1)"):
        sql = f"SELECT {items} FROM valued GROUP BY {window}"
        assert "EkuiperSlidingWindow" in plan(spark, sql) and "ROWS BETWEEN" in plan(spark, sql), sql
        assert "- Window [" not in plan(spark, sql)


def test_count_windows_with_other_aggregates_keys_or_hand_written_rows_frames_keep_spark(spark, values):
    for sql in ("SELECT collect_list(v) FROM valued GROUP BY COUNTWINDOW(3, 2)",
                "SELECT sum(CAST(v AS DOUBLE)) FROM valued GROUP BY COUNTWINDOW(3, 2)",
                "SELECT count(*) FROM valued GROUP BY s, COUNTWINDOW(3, 2)",
                "SELECT count(*) FROM valued GROUP BY COUNTWINDOW(3, 2) HAVING count(*) > 1",
                "SELECT sum(v) OVER (ORDER BY ts, i ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM valued"):
        assert "EkuiperSlidingWindow" not in plan(spark, sql), sql


@pytest.mark.parametrize("window", ["COUNTWINDOW(3, 2)", "COUNTWINDOW(3)", "COUNTWINDOW(3, 3)", "COUNTWINDOW(1)",
                                    "COUNTWINDOW(2, 1)", "COUNTWINDOW(7, 1)", "COUNTWINDOW(7, 7)",
                                    "COUNTWINDOW(3, 1) FILTER(WHERE s <> 'z')"])
def test_count_window_one_pass_equals_the_rows_frame_on_ties_and_null_times(spark, values, window):
    # `valued` has two rows at 6 s (ordered by the row hash) and one NULL time (dropped): 7 rows.
    one_pass, frame = both_ways(spark, f"SELECT window_start(), window_end(), {KEPT} FROM valued GROUP BY {window}")
    assert one_pass == frame and frame


def test_count_window_one_pass_with_fewer_rows_than_n_and_empty_input(spark, values):
    assert both_ways(spark, f"SELECT {KEPT} FROM valued GROUP BY COUNTWINDOW(8, 2)") == ([], [])
    assert both_ways(spark, "SELECT count(*) FROM valued WHERE ts IS NULL GROUP BY COUNTWINDOW(2)") == ([], [])


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(table=timed_values(), n=st.integers(1, 8), m=st.integers(1, 8))
def test_count_window_one_pass_equals_the_frame_and_the_reference_on_random_tables(spark, table, n, m):
    m = min(m, n)  # COUNTWINDOW(n, m) with m > n is an error (INTERVAL_ABOVE_SIZE)
    spark.createDataFrame(table, "ts TIMESTAMP_NTZ, v BIGINT, i INT, s STRING").selectExpr(
        "ts", "v", "i", "CAST(i AS DECIMAL(6, 1)) AS d", "s").createOrReplaceTempView("random_values")
    one_pass, frame = both_ways(spark, f"SELECT window_start(), window_end(), {KEPT} FROM random_values "
                                       f"GROUP BY COUNTWINDOW({n}, {m})")
    assert one_pass == frame
    # Ties in time are ordered by a row hash, so check what does not depend on their order.
    times = sorted(ref.to_micros(t) for t, _, _, _ in table if t is not None)
    expected = [(times[w[0]], times[w[-1]], len(w)) for w in ref.ekuiper_count(len(times), n, m)]
    assert sorted((ref.to_micros(r[0]), ref.to_micros(r[1]), r[2]) for r in one_pass) == sorted(expected)


# --- bad calls -------------------------------------------------------------------------------------

@pytest.mark.parametrize("error_class, window", [
    ("MV_EKUIPER_WINDOW.UNKNOWN_UNIT", "TUMBLINGWINDOW(xx, 10)"),
    ("MV_EKUIPER_WINDOW.UNKNOWN_UNIT", "SLIDINGWINDOW(seconds, 10)"),
    ("MV_EKUIPER_WINDOW.NOT_POSITIVE", "TUMBLINGWINDOW(ss, 0)"),
    ("MV_EKUIPER_WINDOW.NOT_POSITIVE", "HOPPINGWINDOW(ss, 10, -5)"),
    ("MV_EKUIPER_WINDOW.NOT_POSITIVE", "COUNTWINDOW(0)"),
    ("MV_EKUIPER_WINDOW.INTERVAL_ABOVE_SIZE", "COUNTWINDOW(2, 3)"),
    ("MV_EKUIPER_WINDOW.ARGUMENTS", "TUMBLINGWINDOW(ss)"),
    ("MV_EKUIPER_WINDOW.ARGUMENTS", "SESSIONWINDOW(ss, 10)"),
    ("MV_EKUIPER_WINDOW.ARGUMENTS", "COUNTWINDOW(5, 2, 1)"),
    ("MV_EKUIPER_WINDOW.ARGUMENTS", "TUMBLINGWINDOW(ss, n)"),
    ("MV_EKUIPER_WINDOW.BAD_OVER", "TUMBLINGWINDOW(ss, 10) OVER(WHEN n > 1)"),
    ("MV_EKUIPER_WINDOW.MORE_THAN_ONE", "TUMBLINGWINDOW(ss, 10), COUNTWINDOW(5)"),
    ("MV_EKUIPER_WINDOW.TIME_NOT_TIMESTAMP", "SLIDINGWINDOW(ss, 10, TIMECOL => ID)"),
    ("MV_WINDOW_TIME_COLUMN.NOT_TIMESTAMP", "TUMBLINGWINDOW(ss, 10, TIMECOL => ID)"),
])
def test_bad_calls_raise_a_stable_error_class_with_a_hint(spark, demo, error_class, window):
    with pytest.raises(AnalysisException) as raised:
        spark.sql(f"SELECT count(*) FROM demo GROUP BY {window}").collect()
    assert raised.value.getCondition() == error_class
    assert "Hint: " in raised.value.getMessage()
