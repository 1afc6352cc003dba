"""The time ranges a refresh reads for its touched windows (window_refresh.time_ranges, tiled).

Given windows scattered in time and a limit on how many ranges a predicate may list, the ranges
cover every window, are at most the limit, and are the ones joining the narrowest gaps first
(the plain greedy merge, quadratic, is the oracle; time_ranges is n log n, which bench/joins.py's
dimension changes measure: 100,000 scattered windows once took minutes there).
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mv import row_refresh
from mv.query import Window
from mv.window_refresh import time_ranges, time_runs

import window_reference


def greedy(windows, limit):
    """The oracle: join the two closest runs, again and again."""
    ranges = [list(r) for r in time_runs(windows)]
    while len(ranges) > limit:
        i = min(range(len(ranges) - 1), key=lambda k: ranges[k + 1][0] - ranges[k][1])
        ranges[i:i + 2] = [[ranges[i][0], ranges[i + 1][1]]]
    return [(a, b) for a, b in ranges]


WINDOWS = st.lists(st.tuples(st.integers(0, 200), st.integers(1, 9)).map(lambda p: (p[0], p[0] + p[1])), max_size=40)


@settings(max_examples=300, deadline=None)
@given(windows=WINDOWS, limit=st.integers(1, 8))
def test_ranges_cover_every_window_within_the_limit_joining_the_closest_first(windows, limit):
    ranges = time_ranges(windows, limit)
    assert ranges == greedy(windows, limit)
    assert len(ranges) <= limit
    assert all(any(a <= s and e <= b for a, b in ranges) for s, e in windows)



@settings(max_examples=300, deadline=None)
@given(times=st.lists(st.integers(-300, 300), min_size=1, max_size=30), size=st.integers(1, 20),
       offset=st.integers(0, 19))
def test_the_ranges_of_touched_tumble_windows_hold_no_other_tumble_window(times, size, offset):
    # why window_refresh.tiled lets a refresh recompute TUMBLE windows by their time ranges alone
    touched = {w for t in times for w in window_reference.tumble(t, size, offset)}
    for a, b in time_runs(sorted(touched)):
        within = {w for t in range(a, b) for w in window_reference.tumble(t, size, offset) if a <= w[0] and w[1] <= b}
        assert within <= touched


@settings(max_examples=300, deadline=None)
@given(step=st.integers(1, 12), steps=st.integers(1, 12), offset=st.integers(0, 11), t=st.integers(-500, 500),
       kind=st.sampled_from(["HOP", "CUMULATE"]))
def test_a_row_falls_in_at_most_as_many_windows_as_the_window_says(step, steps, offset, t, kind):
    """Window.copies bounds the windowed rows of a change (which decides where its touched windows
    are grouped): the pure-Python window rules never put a row in more, and some row fills it."""
    size = step * steps
    window = Window(kind, size, step, offset % step, None, "ts", [], ["s"])
    assign = window_reference.hop if kind == "HOP" else window_reference.cumulate
    assert len(assign(t, step, size, offset % step)) <= window.copies
    assert max(len(assign(u, step, size, offset % step)) for u in range(size)) == window.copies


@settings(max_examples=300, deadline=None)
@given(times=st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=30), width=st.integers(1, 500),
       limit=st.integers(3, 40))
def test_a_window_terms_buckets_hold_every_time_within_the_padding_of_a_changed_row(times, width, limit):
    """row_refresh._near_buckets: the changed rows' buckets and their neighbours, coarsened to at
    most the limit, hold every time within `width` of a changed time (None: one run, the span's)."""
    near = row_refresh._near_buckets({t // width for t in times}, width, limit)
    if near is None:
        return
    kept_width, buckets = near
    assert len(buckets) <= limit and kept_width % width == 0
    assert all((x // kept_width) in buckets for t in times for x in (t - width, t, t + width))


def test_a_bucket_in_sql_is_the_floor_of_a_time_over_the_width(spark):
    """row_refresh._bucket_sql numbers a time's bucket as Python's floor division does, before 1970
    and on a bucket's first microsecond too (the terms' SQL and _near_buckets must agree)."""
    times = [-1_000_001, -1_000_000, -999_999, -1, 0, 1, 999_999, 1_000_000, 1_700_000_000_123_456]
    width = 1_000_000
    rows = spark.sql(f"SELECT x, {row_refresh._bucket_sql('x', width)} AS b FROM VALUES "
                     f"{', '.join(f'({t})' for t in times)} AS v(x)").collect()
    assert {r.x: r.b for r in rows} == {t: t // width for t in times}
