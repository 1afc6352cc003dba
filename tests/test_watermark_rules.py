"""The watermark's rules for lists of windows (mv/watermark.py): `closed_of` keeps exactly the
windows `is_closed` says the watermark closes, `not_final_of` exactly those `is_final` says are
not final, each in the list's order, whatever the watermark (none yet included) and grace.

Oracle: is_closed and is_final applied window by window. No Spark.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mv import watermark

windows = st.lists(st.tuples(st.integers(-100, 100), st.integers(1, 30)).map(lambda w: (w[0], w[0] + w[1])),
                   max_size=30)
marks = st.none() | st.integers(-150, 150)


@settings(max_examples=300, deadline=None)
@given(windows, marks)
def test_the_windows_a_watermark_closes_are_those_is_closed_says(listed, mark):
    assert watermark.closed_of(listed, mark) == [w for w in listed if watermark.is_closed(w[1], mark)]


@settings(max_examples=300, deadline=None)
@given(windows, marks, st.integers(0, 20))
def test_the_windows_not_final_are_those_is_final_leaves(listed, mark, grace):
    assert watermark.not_final_of(listed, mark, grace) == [w for w in listed if not watermark.is_final(w[1], mark, grace)]


def test_a_window_closes_when_the_watermark_reaches_its_last_microsecond():
    assert watermark.closed_of([(0, 10), (10, 20)], 8) == []
    assert watermark.closed_of([(0, 10), (10, 20)], 9) == [(0, 10)]
    assert watermark.not_final_of({(0, 10): None, (10, 20): 15}, 12, 2) == [(10, 20)]
