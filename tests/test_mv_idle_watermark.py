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
from tests.test_mv_scenarios import COUNTS, SESSIONS, bid, given, refresh, rows, values, version, view_changes  # noqa: F401

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
