"""When a view is due, specified with a fake clock: given its SCHEDULE or TRIGGER clause (as CREATE
stores it) and when it last refreshed, then at this moment it is (or is not) due. No Spark here."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from mv import schedule, statements
from mv.errors import MvError
from mv.schedule import Cron, is_due, last_fire


def at(text: str) -> datetime:
    """'2024-01-01 12:05' as a UTC time."""
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def stored(clause: str) -> str:
    """The clause as CREATE MATERIALIZED VIEW stores it in the view's definition."""
    return statements.parse(f"CREATE MATERIALIZED VIEW v {clause} AS SELECT 1").definition.schedule


# --- SCHEDULE EVERY ------------------------------------------------------------------------------

def test_every_is_due_once_the_period_has_passed_since_the_last_refresh_started():
    every = stored("SCHEDULE EVERY 15 MINUTES")
    assert not is_due(every, at("2024-01-01 12:14"), last_refresh=at("2024-01-01 12:00"))
    assert is_due(every, at("2024-01-01 12:15"), last_refresh=at("2024-01-01 12:00"))


@pytest.mark.parametrize("clause, period", [("SCHEDULE EVERY 1 MINUTE", timedelta(minutes=1)),
                                            ("schedule every 2 hours", timedelta(hours=2)),
                                            ("SCHEDULE EVERY 3 DAYS", timedelta(days=3))])
def test_every_reads_minutes_hours_and_days_in_any_case(clause, period):
    assert schedule.parse(stored(clause)).period == period


def test_a_view_never_refreshed_is_due_and_one_without_a_schedule_never_is():
    assert is_due(stored("SCHEDULE EVERY 1 DAY"), at("2024-01-01 00:00"), last_refresh=None)
    assert is_due(stored("TRIGGER ON UPDATE"), at("2024-01-01 00:00"), last_refresh=None)
    assert not is_due(None, at("2024-01-01 00:00"), last_refresh=None)


# --- SCHEDULE CRON -------------------------------------------------------------------------------

def test_cron_is_due_when_a_named_minute_has_passed_since_the_last_refresh():
    hourly = stored("SCHEDULE CRON '0 * * * *'")
    assert is_due(hourly, at("2024-01-01 12:05"), last_refresh=at("2024-01-01 11:58"))
    assert not is_due(hourly, at("2024-01-01 12:05"), last_refresh=at("2024-01-01 12:00:30"))
    assert not is_due(hourly, at("2024-01-01 12:59"), last_refresh=at("2024-01-01 12:01"))


def test_cron_without_a_time_zone_runs_on_the_views_clocks_and_at_time_zone_overrides_them():
    nine = stored("SCHEDULE CRON '0 9 * * *'")
    nine_in_new_york = stored("SCHEDULE CRON '0 9 * * *' AT TIME ZONE 'America/New_York'")
    before, now = at("2024-01-01 08:00"), at("2024-01-01 10:00")
    assert is_due(nine, now, before, time_zone="UTC")
    assert not is_due(nine, now, before, time_zone="Asia/Tokyo")  # 09:00 in Tokyo was 00:00 UTC
    assert not is_due(nine_in_new_york, now, before, time_zone="UTC")  # 09:00 in New York is 14:00 UTC
    assert is_due(nine_in_new_york, at("2024-01-01 14:00"), before, time_zone="UTC")


@pytest.mark.parametrize("expression, moment, expected", [
    ("*/15 * * * *", "2024-01-01 12:44", "2024-01-01 12:30"),
    ("5,35 9-17 * * *", "2024-01-01 18:00", "2024-01-01 17:35"),
    ("0 8-18/5 * * *", "2024-01-01 20:00", "2024-01-01 18:00"),
    ("0 9 * * MON-FRI", "2024-01-07 12:00", "2024-01-05 09:00"),   # Sunday: Friday's run
    ("0 0 1 JAN,JUL *", "2024-06-30 00:00", "2024-01-01 00:00"),
    ("0 0 * * 7", "2024-01-09 00:00", "2024-01-07 00:00"),        # 7 is Sunday too
    ("0 0 13 * FRI", "2024-01-14 00:00", "2024-01-13 00:00"),     # day and weekday: either will do
    ("@daily", "2024-01-01 23:59", "2024-01-01 00:00"),
])
def test_cron_fields_take_lists_ranges_steps_and_names(expression, moment, expected):
    assert last_fire(Cron.parse(expression), at(moment), "UTC") == at(expected)


def test_a_cron_time_skipped_by_daylight_saving_counts_once_it_is_past():
    # Paris skips 02:00-03:00 on 2024-03-31; 03:10 local is 01:10 UTC.
    fired = last_fire(Cron.parse("30 2 * * *"), at("2024-03-31 01:10"), "Europe/Paris")
    assert fired <= at("2024-03-31 01:10")
    assert fired > at("2024-03-30 01:30")  # not yesterday's 02:30


@pytest.mark.parametrize("expression", ["0 * * *", "60 * * * *", "* 24 * * *", "*/0 * * * *",
                                        "0 0 * * FUNDAY", "5-1 * * * *"])
def test_a_malformed_cron_expression_is_an_error(expression):
    with pytest.raises(MvError) as error:
        is_due(stored(f"SCHEDULE CRON '{expression}'"), at("2024-01-01 00:00"), at("2024-01-01 00:00"))
    assert error.value.error_class == "MV_SCHEDULE_INVALID"


def test_an_unknown_time_zone_is_an_error():
    with pytest.raises(MvError) as error:
        schedule.parse(stored("SCHEDULE CRON '0 * * * *' AT TIME ZONE 'Mars/Olympus'"))
    assert error.value.error_class == "MV_SCHEDULE_INVALID"


# --- TRIGGER ON UPDATE ---------------------------------------------------------------------------

def test_trigger_on_update_is_due_when_a_source_has_a_version_not_yet_processed():
    trigger = stored("TRIGGER ON UPDATE")
    last = at("2024-01-01 12:00")
    assert is_due(trigger, at("2024-01-01 12:00:01"), last, sources_changed=True)
    assert not is_due(trigger, at("2024-01-02 12:00"), last, sources_changed=False)


def test_at_most_every_holds_a_triggered_refresh_back_until_the_interval_is_over():
    trigger = stored("TRIGGER ON UPDATE AT MOST EVERY INTERVAL '10' MINUTES")
    last = at("2024-01-01 12:00")
    assert not is_due(trigger, at("2024-01-01 12:09"), last, sources_changed=True)
    assert is_due(trigger, at("2024-01-01 12:10"), last, sources_changed=True)
    assert not is_due(trigger, at("2024-01-01 13:00"), last, sources_changed=False)


def test_at_most_every_takes_any_interval_through_the_callers_reader():
    trigger = stored("TRIGGER ON UPDATE AT MOST EVERY INTERVAL '1:30' HOUR TO MINUTE")
    ninety_minutes = lambda text: timedelta(minutes=90)  # noqa: E731 - what Spark would say
    last = at("2024-01-01 12:00")
    assert not is_due(trigger, at("2024-01-01 13:29"), last, sources_changed=True, interval=ninety_minutes)
    assert is_due(trigger, at("2024-01-01 13:30"), last, sources_changed=True, interval=ninety_minutes)
