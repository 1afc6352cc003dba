"""The windows a change touches (mv/window_refresh.py's `touched`), counted in one query: given HOP
and CUMULATE views over two identical sources, when the same change (inserts, updates of the price
and of the event time, deletes, late rows) reaches both, and one is refreshed with its change
grouped by the period its windows start on while the other's windowed rows go one by one
(GROUPED_FROM_COPIES out of reach), then both views hold the same rows as their query, count the
same late rows and keep the same late table. Windows that align on a time zone with daylight
saving, and an offset, included.

A large append whose rows all come after every event time the view has seen spans its TUMBLE
or HOP windows from its first row's to its last's without grouping, and refreshes as its twin
whose change is grouped by window.

Oracle: the query recomputed in full, and the twin refreshed row by row (or grouped).
"""
from __future__ import annotations

from contextlib import contextmanager

import pytest

import mv
from mv import window_refresh
from test_mv_scenarios import Catalog, given  # noqa: F401 - given: the fixture

AGGREGATES = "count(*) AS n, sum(price) AS total, max(price) AS top"
WINDOWS = {
    "hop": "HOP(TABLE({src}), DESCRIPTOR(ts), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)",
    "hop_offset": "HOP(TABLE({src}), DESCRIPTOR(ts), INTERVAL '3' MINUTES, INTERVAL '9' MINUTES, INTERVAL '1' MINUTES)",
    "cumulate": "CUMULATE(TABLE({src}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '30' MINUTES)",
    "hop_new_york": "HOP(TABLE({src}), DESCRIPTOR(ts), INTERVAL '30' MINUTES, INTERVAL '2' HOURS)",
}
# 2024-03-10 02:00 in New York does not exist: the clocks jump to 03:00 (07:00 UTC).
START = {"hop_new_york": "TIMESTAMP'2024-03-10 05:00:00'"}
LATE_VIEW = "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES EMIT ON WINDOW CLOSE"
# One window function of each kind whose windows a run of time can name alone (window_refresh.tiled).
SPANNED = {"tumble": "TUMBLE(TABLE({src}), DESCRIPTOR(ts), INTERVAL '1' MINUTES)",
           "hop": "HOP(TABLE({src}), DESCRIPTOR(ts), INTERVAL '1' MINUTES, INTERVAL '3' MINUTES)"}


def query(kind: str, src: str) -> str:
    return (f"SELECT window_start, window_end, item, {AGGREGATES} FROM {WINDOWS[kind].format(src=src)} "
            f"GROUP BY window_start, window_end, item")


def rows_from(start: str, first: int, count: int, every_s: int) -> str:
    return (f"SELECT id, CAST(id % 7 AS STRING) AS item, {start} + make_interval(0, 0, 0, 0, 0, 0, id * {every_s}) "
            f"AS ts, CAST(id % 13 AS INT) AS price FROM range({first}, {first + count})")


def same(spark, a: str, b: str) -> None:
    """The queries `a` and `b` give the same rows, as bags."""
    left, right = spark.sql(a), spark.sql(b)
    assert left.exceptAll(right).count() == 0 and right.exceptAll(left).count() == 0, \
        (sorted(left.collect()), sorted(right.collect()))


LATE_COLUMNS = "id, item, ts, price, _change_type, _change_sign, _commit_version"


def twins(spark, given, start: str, query_of, clauses: str) -> tuple[list[str], list[str]]:
    """Two identical sources of 85 minutes of rows from `start`, each with a view of `query_of(source)`."""
    sources, views = [], []
    for _ in range(2):
        src = given.name("touched")
        spark.sql(f"CREATE TABLE {src} (id BIGINT, item STRING, ts TIMESTAMP, price INT) USING delta")
        given.tables.append(src)
        spark.sql(f"INSERT INTO {src} {rows_from(start, 0, 300, 17)}")  # 85 minutes
        sources.append(src)
        views.append(given.view(query_of(src), clauses))
    return sources, views


def watermarks(spark, views: list[str]) -> list[int]:
    """Each view's watermark after its last refresh, in microseconds (its refresh history)."""
    return [spark.sql(f"SELECT watermark_micros FROM mv_refresh_history('', '{v}', '1')").first()[0] for v in views]


def spanned_twins(spark, given, monkeypatch, window: str, clauses: str):
    """`twins` with a per-minute view under SPANNED's `window`, the view's query (`by_minute`), and
    a list to which each grouping of a change by window (touched_windows, still run) adds a 1."""
    def by_minute(src: str) -> str:
        return (f"SELECT window_start, window_end, item, {AGGREGATES} FROM {SPANNED[window].format(src=src)} "
                "GROUP BY window_start, window_end, item")
    sources, views = twins(spark, given, "TIMESTAMP'2024-01-01 00:00:00'", by_minute,
                           f"{clauses} REFRESH POLICY INCREMENTAL")
    grouped, touched_windows = [], window_refresh.touched_windows

    def watched(*args):  # the real grouping, each call recorded
        grouped.append(1)
        return touched_windows(*args)
    monkeypatch.setattr(window_refresh, "touched_windows", watched)
    return sources, views, by_minute, grouped


@pytest.fixture
def utc(spark):
    yield spark
    spark.conf.set("spark.sql.session.timeZone", "UTC")


# Each window kind in one emit mode in make test, in the other in make test-slow (19-32 s a case).
SLOW_PERIOD_CASES = {"on_close-hop", "on_update-hop_offset", "on_update-cumulate", "on_close-hop_new_york"}
PERIOD_CASES = [pytest.param(clauses, kind, id=f"{mode}-{kind}",
                             marks=[pytest.mark.slow] if f"{mode}-{kind}" in SLOW_PERIOD_CASES else [])
                for kind in WINDOWS for mode, clauses in (("on_update", ""), ("on_close", LATE_VIEW))]


@pytest.mark.parametrize("clauses, kind", PERIOD_CASES)
def test_a_change_grouped_by_window_period_refreshes_as_one_windowed_row_by_row(utc, given, monkeypatch, kind, clauses):
    spark = utc
    if kind == "hop_new_york":
        spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    start = START.get(kind, "TIMESTAMP'2024-01-01 00:00:00'")
    sources, views = twins(spark, given, start, lambda src: query(kind, src), f"{clauses} REFRESH POLICY INCREMENTAL")
    outcomes = []
    for src, view, copies in zip(sources, views, [2, 1 << 40]):   # every window kind here grouped, or none
        spark.sql(f"INSERT INTO {src} {rows_from(start, 300, 200, 23)}")  # later rows
        spark.sql(f"INSERT INTO {src} {rows_from(start, 1000, 40, 5)}")   # late under a watermark
        spark.sql(f"UPDATE {src} SET price = price + 100 WHERE id % 11 = 0")
        spark.sql(f"UPDATE {src} SET ts = ts + INTERVAL '7' MINUTES WHERE id % 17 = 0")
        spark.sql(f"DELETE FROM {src} WHERE id % 19 = 0")
        spark.sql(f"INSERT INTO {src} VALUES (3000, 'a', {start} + INTERVAL '300' MINUTES, 1), "
                  f"(3001, 'a', {start} + INTERVAL '300:30' MINUTE TO SECOND, 2)")   # the latest: one period
        monkeypatch.setattr(window_refresh, "SMALL_CHANGE_BYTES", 0)   # grouped in Spark, not in the driver
        monkeypatch.setattr(window_refresh, "GROUPED_FROM_COPIES", copies)
        outcomes.append(mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first())

    grouped, one_by_one = outcomes
    assert grouped.technique == one_by_one.technique == "incremental", outcomes
    assert (grouped.rows_read, grouped.late_rows) == (one_by_one.rows_read, one_by_one.late_rows)
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    if clauses:
        assert grouped.late_rows > 0
        marks = watermarks(spark, views)
        assert marks[0] == marks[1] == spark.sql(f"SELECT unix_micros(max(ts)) - 60000000 FROM {sources[0]}").first()[0]
        same(spark, f"SELECT {LATE_COLUMNS} FROM {views[0]}__late", f"SELECT {LATE_COLUMNS} FROM {views[1]}__late")
    else:
        same(spark, f"SELECT * FROM {views[0]}", query(kind, sources[0]))


def test_a_small_change_is_grouped_in_the_driver_under_every_refresh_policy(spark, given, monkeypatch):
    """A change's size comes from its source's log whatever the view's policy, so a small change's
    touched windows are grouped in the driver (one Spark job fewer) under INCREMENTAL as under
    AUTO; until 2026-11-29 only AUTO's refreshes knew the size. A small append at the end of time
    takes its windows from its file's statistics instead, without a job (the test after next):
    this one has a row before the latest the views have seen."""
    src = given.name("small")
    spark.sql(f"CREATE TABLE {src} (id BIGINT, item STRING, ts TIMESTAMP, price INT) USING delta")
    given.tables.append(src)
    start = "TIMESTAMP'2024-01-01 00:00:00'"
    spark.sql(f"INSERT INTO {src} {rows_from(start, 0, 100, 17)}")
    views = [given.view(query("hop", src), f"REFRESH POLICY {policy}") for policy in ("AUTO", "INCREMENTAL")]
    spark.sql(f"INSERT INTO {src} {rows_from(start, 98, 5, 17)}")  # rows 98 and 99 again
    in_driver, touched_windows = [], window_refresh.touched_windows

    def watched(spark_, counted, changes, small):   # the real query, its `small` recorded
        in_driver.append(small)
        return touched_windows(spark_, counted, changes, small)
    monkeypatch.setattr(window_refresh, "touched_windows", watched)

    outcomes = [mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first() for view in views]

    assert [o.technique for o in outcomes] == ["incremental", "incremental"] and in_driver == [True, True]
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    same(spark, f"SELECT * FROM {views[1]}", query("hop", src))


@pytest.mark.parametrize("window, corrected", [("tumble", True), ("hop", False)])
def test_more_windows_than_a_list_holds_are_recomputed_by_their_time_ranges(utc, given, monkeypatch, window,
                                                                             corrected):
    """TUMBLE windows tile time, so the touched ones are all the windows within their runs
    (window_refresh.tiled), as HOP windows are when a run holds every window that fits in it (a
    dense append's): an append that reaches 1,500 windows (and corrections of older TUMBLE ones)
    is recomputed by the runs' time ranges alone, no list of windows in the SQL, and the view
    equals its twin refreshed with the list (and a join to the view's rows) and its query."""
    spark = utc
    start = "TIMESTAMP'2024-01-01 00:00:00'"

    def by_minute(src: str) -> str:
        return (f"SELECT window_start, window_end, item, {AGGREGATES} FROM {SPANNED[window].format(src=src)} "
                "GROUP BY window_start, window_end, item")
    sources, views = twins(spark, given, start, by_minute, "REFRESH POLICY INCREMENTAL")
    listed, relation = [], window_refresh.windows_relation

    def watched(run, windows):  # the real relation, how many windows it lists recorded
        listed.append(len(windows))
        return relation(run, windows)
    monkeypatch.setattr(window_refresh, "windows_relation", watched)
    for src, view, tiled in zip(sources, views, [window_refresh.tiled, lambda run, windows: False]):
        spark.sql(f"INSERT INTO {src} {rows_from(start, 300, 3000, 30)}")  # 1,500 later minutes
        if corrected:
            spark.sql(f"UPDATE {src} SET price = price + 100 WHERE id % 11 = 0 AND id < 300")
            spark.sql(f"DELETE FROM {src} WHERE id % 19 = 0 AND id < 300")
        monkeypatch.setattr(window_refresh, "tiled", tiled)
        assert mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first().technique == "incremental"
        if view == views[0]:
            assert listed == []  # the tiled refresh listed no window
    assert listed and max(listed) > window_refresh.MAX_LISTED   # the twin listed them
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    same(spark, f"SELECT * FROM {views[0]}", by_minute(sources[0]))


@pytest.mark.parametrize("clauses", ["", LATE_VIEW], ids=["on_update", "on_close"])
@pytest.mark.parametrize("window, zone, earlier, spanned", [
    ("tumble", "UTC", False, True), ("hop", "UTC", False, True), ("tumble", "UTC", True, False),
    ("hop", "America/New_York", False, False)],
    ids=["tumble_at_the_end_of_time", "hop_at_the_end_of_time", "one_row_before_the_latest_seen",
         "zone_with_daylight_saving"])
def test_a_large_append_after_every_row_seen_spans_its_windows_without_grouping(utc, given, monkeypatch, clauses,
                                                                               window, zone, earlier, spanned):
    """An append whose rows all come at or after the latest event time the view has seen touches
    every TUMBLE or HOP window from its earliest row's first to its latest's last
    (window_refresh._spanned): those between hold no source row, so one aggregation of the
    change's time column finds them, and the view equals its twin refreshed with the change
    grouped by window. An append with an earlier row (a late one under a watermark), or windows
    aligned in a zone with daylight saving, is grouped."""
    spark = utc
    spark.conf.set("spark.sql.session.timeZone", zone)
    start = "TIMESTAMP'2024-01-01 00:00:00'"
    sources, views, by_minute, grouped = spanned_twins(spark, given, monkeypatch, window, clauses)
    spanned_windows = window_refresh._spanned
    monkeypatch.setattr(window_refresh, "SMALL_CHANGE_BYTES", 0)   # every change large
    outcomes = []
    for src, view, allowed in zip(sources, views, [True, False]):
        spark.sql(f"INSERT INTO {src} {rows_from(start, 400, 60, 17)}")    # from 01:53, after 85 minutes
        spark.sql(f"INSERT INTO {src} {rows_from(start, 700, 40, 17)}")    # from 03:18: an hour of empty windows
        if earlier:
            spark.sql(f"INSERT INTO {src} {rows_from(start, 10, 1, 17)}")  # 00:02:50
        monkeypatch.setattr(window_refresh, "_spanned", spanned_windows if allowed else lambda *args, **kw: None)
        del grouped[:]
        outcomes.append(mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first())
        assert bool(grouped) == (not allowed or not spanned)

    assert [o.technique for o in outcomes] == ["incremental", "incremental"], outcomes
    spanned_counts, grouped_counts = [(o.rows_read, o.rows_inserted, o.rows_updated, o.late_rows) for o in outcomes]
    assert spanned_counts == grouped_counts and outcomes[0].rows_read == 100 + earlier
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    if clauses:
        marks = watermarks(spark, views)
        assert marks[0] == marks[1] == spark.sql(f"SELECT unix_micros(max(ts)) - 60000000 FROM {sources[0]}").first()[0]
        assert outcomes[0].late_rows == earlier
    else:
        same(spark, f"SELECT * FROM {views[0]}", by_minute(sources[0]))


@contextmanager
def timestamps_written_as(spark, encoding: str | None):
    """TIMESTAMP columns written in Parquet as `encoding` (INT96: Spark's default, which the local
    session's conf replaces by INT64 microseconds) inside the block; None: as configured."""
    kept = spark.conf.get("spark.sql.parquet.outputTimestampType")
    spark.conf.set("spark.sql.parquet.outputTimestampType", encoding or kept)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", kept)


# An append whose Delta statistics tell its span, or not: the time its first rows count from, the
# first's row number (the latest seen is row 299 from 00:00:00.000700), what is done to the source
# before it, the window, and whether the statistics are taken. Delta writes times to the millisecond.
ZERO, SEEN = "TIMESTAMP'2024-01-01 00:00:00'", "TIMESTAMP'2024-01-01 00:00:00.000700'"
FROM_STATISTICS = {
    "microseconds": (SEEN, 300, None, "tumble", True),
    "null_times": (ZERO, 300, None, "hop", True),
    "null_times_as_int96": (ZERO, 300, None, "hop", True),   # no Parquet statistics: the latest time read
    "no_time_statistics": (ZERO, 300, "'delta.dataSkippingStatsColumns' = 'id'", "tumble", False),
    "window_not_whole_milliseconds": (ZERO, 300, None, "odd_tumble", False),
    "same_millisecond_as_the_latest_seen": ("TIMESTAMP'2024-01-01 00:00:00.000800'", 299, None, "tumble", False),
}


@pytest.mark.parametrize("clauses", ["", LATE_VIEW], ids=["on_update", "on_close"])
@pytest.mark.parametrize("case", list(FROM_STATISTICS))
def test_a_large_append_spans_its_windows_by_its_files_statistics_without_reading_them(utc, given, monkeypatch,
                                                                                      clauses, case):
    """An append at the end of time takes its rows, its earliest and latest time from the Delta
    statistics of the files it added (window_refresh._statistics_span), and its rows are not read to
    find its windows. The view equals its twin whose change is grouped by window, with the same
    windows closed and final, and the same watermark to the microsecond: Delta writes times to the
    millisecond, the latest one's microsecond comes from the Parquet footers (INT64), or from the
    rows of that millisecond (INT96, which keeps no statistics). Statistics that lack the time
    column, windows not in whole milliseconds, or an earliest time in the millisecond of the latest
    seen, are not taken: the change is read."""
    spark = utc
    first_rows, first_id, properties, window, told = FROM_STATISTICS[case]
    seen = SEEN   # the first 85 minutes' rows, as in every case
    windows = dict(SPANNED, odd_tumble="TUMBLE(TABLE({src}), DESCRIPTOR(ts), INTERVAL '60.0005' SECONDS)")

    def by_window(src: str) -> str:
        return (f"SELECT window_start, window_end, item, {AGGREGATES} FROM {windows[window].format(src=src)} "
                "GROUP BY window_start, window_end, item")
    sources, views = twins(spark, given, seen, by_window, f"{clauses} REFRESH POLICY INCREMENTAL")
    taken, from_statistics, spanned_windows = [], window_refresh._statistics_span, window_refresh._spanned

    def watched(*args):  # the real statistics, whether they told recorded
        found = from_statistics(*args)
        taken.append(found is not None)
        return found
    monkeypatch.setattr(window_refresh, "_statistics_span", watched)
    monkeypatch.setattr(window_refresh, "SMALL_CHANGE_BYTES", 0)   # every change large
    outcomes = []
    for src, view, allowed in zip(sources, views, [True, False]):
        if properties:
            spark.sql(f"ALTER TABLE {src} SET TBLPROPERTIES ({properties})")
        with timestamps_written_as(spark, "INT96" if case.endswith("as_int96") else None):
            spark.sql(f"INSERT INTO {src} {rows_from(first_rows, first_id, 60, 17)}")   # from the latest seen on
            spark.sql(f"INSERT INTO {src} {rows_from(seen, 700, 40, 17)} UNION ALL "
                      f"SELECT 5000, 'a', {'NULL' if 'null_times' in case else seen + ' + INTERVAL 4 HOURS'}, 1")
        monkeypatch.setattr(window_refresh, "_spanned", spanned_windows if allowed else lambda *args, **kw: None)
        del taken[:]
        outcomes.append(mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first())
        assert taken == ([told] if allowed else [])

    assert [o.technique for o in outcomes] == ["incremental", "incremental"], outcomes
    spanned_counts, grouped_counts = [(o.rows_read, o.rows_inserted, o.rows_updated, o.late_rows) for o in outcomes]
    assert spanned_counts == grouped_counts and outcomes[0].rows_read == 101 and outcomes[0].late_rows == 0
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    if clauses:
        marks = watermarks(spark, views)
        exact = spark.sql(f"SELECT unix_micros(max(ts)) - 60000000 FROM {sources[0]}").first()[0]
        assert marks == [exact, exact], marks   # Delta's statistics keep milliseconds; the watermark does not
    else:
        same(spark, f"SELECT * FROM {views[0]}", by_window(sources[0]))


@pytest.mark.parametrize("latest, encoding, told", [("01:30:59.998999", "INT96", True),
                                                     ("01:30:59.999999", "INT96", False),
                                                     ("01:30:59.999999", None, True)],
                         ids=["a_microsecond_short_of_a_close", "the_microsecond_that_closes_a_window",
                              "the_microsecond_that_closes_a_window_kept_in_the_footer"])
def test_a_small_append_at_the_end_of_time_takes_its_windows_from_its_files_statistics(utc, given, monkeypatch,
                                                                                      latest, encoding, told):
    """A small append at the end of time (under SMALL_CHANGE_BYTES) whose file's statistics tell its
    span takes its windows from them, as a large one does: no Spark job groups its rows. Delta's
    statistics keep the millisecond: a latest row at 01:30:59.999999 closes [01:29, 01:30) under a
    one-minute delay (the window of the append's other row) and its millisecond would not, so
    an append written as INT96 (whose Parquet footer keeps no statistics) is read and grouped
    instead; written as INT64 microseconds, the footer gives the microsecond, and its windows come
    from the statistics. A row at 01:30:59.998999 closes nothing either way. The view equals its
    twin, whose changes are always grouped, with the same windows closed and the same watermark."""
    spark = utc
    sources, views, _, grouped = spanned_twins(spark, given, monkeypatch, "tumble", LATE_VIEW)
    spanned_windows = window_refresh._spanned
    outcomes = []
    for src, view, allowed in zip(sources, views, [True, False]):
        with timestamps_written_as(spark, encoding):
            spark.sql(f"INSERT INTO {src} VALUES (1000, 'a', TIMESTAMP'2024-01-01 01:29:30', 3), "
                      f"(1001, 'b', TIMESTAMP'2024-01-01 {latest}', 4)")   # after 01:24:43, the latest seen
        monkeypatch.setattr(window_refresh, "_spanned", spanned_windows if allowed else lambda *args, **kw: None)
        del grouped[:]
        outcomes.append(mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first())
        assert bool(grouped) == (not allowed or not told)

    assert [(o.technique, o.rows_read, o.late_rows) for o in outcomes] == [("incremental", 2, 0)] * 2, outcomes
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    closed = spark.sql(f"SELECT max(window_end) FROM {views[0]}").first()[0]
    closes = latest.endswith("999999")   # [01:29, 01:30) holds row 1000; the watermark then reaches its last µs
    assert str(closed).endswith("01:30:00" if closes else "01:25:00"), closed
    marks = watermarks(spark, views)
    exact = spark.sql(f"SELECT unix_micros(max(ts)) - 60000000 FROM {sources[0]}").first()[0]
    assert marks == [exact, exact], marks
