"""Windows close when sources go quiet: WATERMARK ... IDLE AFTER INTERVAL ...

Given a view whose sources bring no newer event time, when refreshes run later by the wall clock
(a clock the test sets, never slept), then the watermark follows the clock once the idle interval
has passed and not before, closing windows and sessions; rows arriving afterwards follow the
rules of any late row (GRACE, then <view>__late), and a full refresh gives the same view.
Times are minutes past midnight of 2024-01-01, for event time and wall clock alike.
"""
from __future__ import annotations

import pytest

from mv import watermark
from tests.test_mv_scenarios import (COUNTS, SESSIONS, bid, describe_extended, full_query, given,  # noqa: F401
                                     refresh, rows, values, version, view_changes)

MIDNIGHT = 1_704_067_200  # 2024-01-01 00:00 UTC, in seconds
IDLE = "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES IDLE AFTER INTERVAL '30' MINUTES EMIT ON WINDOW CLOSE"


def at(minute: int):
    """The wall clock reads `minute` past midnight while the block runs."""
    return watermark.clock(lambda: MIDNIGHT + minute * 60.0)


def test_a_quiet_source_closes_its_windows_after_the_idle_interval_and_not_before(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    with at(13):  # watermark 00:11: [00:00, 00:10) closes
        view = given.view(COUNTS.format(bids=bids), IDLE + " GRACE INTERVAL '60' MINUTES")
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]

    with at(40):  # 28 minutes without a newer event time: not yet idle
        quiet = refresh(spark, view)
    assert quiet.reason == "NO_CHANGES" and rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]

    with at(45):  # idle: as if event time had gone on from 00:12 for 32 minutes, minus the delay
        closing = refresh(spark, view)
    assert (closing.technique, closing.reason) == ("incremental", "IDLE_WATERMARK")
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "b", 1, 7)]
    history = spark.sql(f"SELECT watermark_micros, watermark_idle FROM mv_refresh_history "
                        f"WHERE view = '{view}' ORDER BY refresh_id").collect()
    assert [(h.watermark_micros, h.watermark_idle) for h in history] == [
        ((MIDNIGHT + 11 * 60) * 1_000_000, False), ((MIDNIGHT + 43 * 60) * 1_000_000, True)]

    before = version(spark, view)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:15', 2))}")  # late, within GRACE
    with at(50):
        updated = refresh(spark, view)
    assert updated.late_rows == 0
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "b", 2, 9)]
    assert view_changes(spark, view, since=before) == [("update_postimage", "00:10", "00:20", "b", 2),
                                                      ("update_preimage", "00:10", "00:20", "b", 1)]


def test_a_row_after_grace_of_a_window_the_clock_closed_goes_to_the_late_table(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    with at(13):
        view = given.view(COUNTS.format(bids=bids), IDLE + " GRACE INTERVAL '10' MINUTES")
    with at(45):  # watermark 00:43: [00:10, 00:20) closes, and is final (00:43 >= 00:20 + 10)
        refresh(spark, view)
    closed = rows(spark, view)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:15', 2), bid(4, 'c', '00:44', 1))}")
    with at(46):
        outcome = refresh(spark, view)

    assert outcome.late_rows == 1
    assert rows(spark, view) == closed  # [00:40, 00:50) is still open
    assert [tuple(r) for r in spark.sql(f"SELECT id FROM {view}__late").collect()] == [(3,)]
    with at(46):
        assert refresh(spark, view, full=True).technique == "full"
    assert rows(spark, view) == closed  # a full refresh gives the same view


def test_a_quiet_source_closes_its_sessions_after_gap_plus_delay_once_idle(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:02", 7))
    with at(3):
        view = given.view(SESSIONS.format(bids=bids), IDLE)
    assert rows(spark, view) == []

    with at(32):  # 29 minutes: not yet idle
        assert refresh(spark, view).reason == "NO_CHANGES"
    with at(40):  # watermark min(00:02 + 37, 00:40) - 1 = 00:38: both sessions are over
        outcome = refresh(spark, view)

    assert outcome.reason == "IDLE_WATERMARK"
    assert rows(spark, view) == [("00:01", "00:06", "a", 1), ("00:02", "00:07", "b", 1)]


@pytest.mark.parametrize("window, open_at_13, closed_by_the_clock", [
    ("HOP(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
     [("23:55", "00:05", "a", 1), ("00:00", "00:10", "a", 1)], [("00:05", "00:15", "b", 1), ("00:10", "00:20", "b", 1)]),
    ("CUMULATE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
     [("00:00", "00:05", "a", 1), ("00:00", "00:10", "a", 1)], [("00:10", "00:15", "b", 1), ("00:10", "00:20", "b", 1)]),
], ids=["HOP", "CUMULATE"])
def test_hop_and_cumulate_windows_close_with_the_clock_too(spark, given, window, open_at_13, closed_by_the_clock):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    query = (f"SELECT window_start, window_end, item, count(*) AS n FROM {window.format(bids=bids)} "
             "GROUP BY window_start, window_end, item")
    with at(13):  # watermark 00:11
        view = given.view(query, IDLE)
    assert rows(spark, view) == sorted(open_at_13)

    with at(45):  # idle: watermark 00:43
        assert refresh(spark, view).reason == "IDLE_WATERMARK"

    assert rows(spark, view) == sorted(open_at_13 + closed_by_the_clock)
    assert rows(spark, view) == sorted(full_query(spark, query))  # every window is closed: the whole query


def test_a_view_reading_a_view_sees_the_windows_the_clock_closed_and_describe_says_why(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    with at(13):
        per_window = given.view(COUNTS.format(bids=bids), IDLE)
        per_item = given.view(f"SELECT item, sum(n) AS bids FROM {per_window} GROUP BY item")
    assert sorted(map(tuple, spark.table(per_item).collect())) == [("a", 1)]

    with at(45):  # the upstream view first: its [00:10, 00:20) closes by the clock
        assert refresh(spark, per_item).technique == "incremental"

    assert sorted(map(tuple, spark.table(per_item).collect())) == [("a", 1), ("b", 1)]
    extended = describe_extended(spark, per_window)
    assert (extended["last_refresh.reason"], extended["last_refresh.watermark_idle"]) == ("IDLE_WATERMARK", "True")


def test_a_source_waking_up_with_rows_older_than_the_clocks_watermark_loses_none(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    with at(13):
        view = given.view(COUNTS.format(bids=bids), IDLE)  # no GRACE: a row for a closed window is late
    with at(45):
        refresh(spark, view)  # watermark 00:43: every window up to [00:30, 00:40) is closed

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 1), bid(4, 'b', '00:33', 2), bid(5, 'c', '00:50', 3))}")
    with at(52):
        outcome = refresh(spark, view)

    assert outcome.late_rows == 2
    assert sorted(r.id for r in spark.table(f"{view}__late").collect()) == [3, 4]
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "b", 1, 7)]  # [00:50, 01:00) open
    with at(85):  # quiet again for 33 minutes: [00:50, 01:00) closes with the clock; no row was lost
        refresh(spark, view)
    assert rows(spark, view)[-1] == ("00:50", "01:00", "c", 1, 3)


def test_without_idle_after_a_quiet_source_keeps_its_windows_open(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    with at(13):
        view = given.view(COUNTS.format(bids=bids),
                          "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES EMIT ON WINDOW CLOSE")
    with at(24 * 60):
        assert refresh(spark, view).reason == "NO_CHANGES"
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]


@pytest.mark.parametrize("idle", ["INTERVAL '0' MINUTES", "INTERVAL '-5' MINUTES"])
def test_idle_after_must_be_a_positive_interval(spark, given, idle):
    bids = given.bids(bid(1, "a", "00:01", 4))
    with pytest.raises(Exception) as raised:
        given.view(COUNTS.format(bids=bids), f"WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES IDLE AFTER {idle}")
    assert raised.value.getCondition() == "MV_STATEMENT_INTERVAL"


def test_a_view_triggered_on_update_is_due_when_the_clock_closes_its_windows(spark, given):
    from datetime import datetime, timezone
    from mv import catalog, schedule
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    with at(13):
        view = given.view(COUNTS.format(bids=bids), IDLE + " TRIGGER ON UPDATE")
    loaded, last = catalog.require(spark, view), datetime.fromtimestamp(MIDNIGHT + 13 * 60, timezone.utc)

    def due(minute: int) -> bool:
        return schedule.due(spark, loaded, datetime.fromtimestamp(MIDNIGHT + minute * 60, timezone.utc), last)

    assert (due(40), due(45)) == (False, True)  # no source moved; at 00:45 the clock closes [00:10, 00:20)
