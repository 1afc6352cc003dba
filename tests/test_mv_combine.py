"""Changed groups are combined from their row in the view and the changes' own aggregates where that
is exact (count, sum, min, max), and recomputed from the source where the old row cannot say the
answer: a retracted minimum or maximum, a sum whose non-NULL values may all be gone, a group with
retractions and no count(*) to tell whether it emptied. Float sums are never combined.

Every test checks the view against the query recomputed from scratch, and how many groups took
each path (the refresh outcome's groups_combined / groups_recomputed). Windows are combined here
even when few: the engine itself recomputes affected windows that lie in a few runs of time,
which is cheaper (Delta reads just their files), and combines scattered ones.
"""
from __future__ import annotations

import pytest

from mv import refresh as maintainer
from mv import window_refresh
from test_mv_scenarios import Catalog, bid, values

TUMBLE = "TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)"


@pytest.fixture(autouse=True)
def combine_any_windows(monkeypatch):
    """Windows are combined only when scattered over many runs of time; here, always."""
    monkeypatch.setattr(window_refresh, "COMBINE_AFTER_RUNS", 0)


@pytest.fixture
def given(spark):
    catalog = Catalog(spark)
    yield catalog
    catalog.drop()


def refreshed(spark, view: str, query: str) -> tuple[int, int]:
    """Refresh incrementally, check the view equals its query recomputed, return (combined, recomputed)."""
    outcome = maintainer.refresh(spark, view)
    assert outcome.technique == "incremental", outcome
    actual, expected = spark.table(view), spark.sql(query)
    assert actual.exceptAll(expected).count() == 0 and expected.exceptAll(actual).count() == 0, \
        (sorted(actual.collect()), sorted(expected.collect()))
    return outcome.groups_combined, outcome.groups_recomputed


def test_inserts_are_combined_without_recomputing_any_group(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    query = (f"SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total, min(price) AS low, "
             f"max(price) AS high FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 9), bid(4, 'c', '00:25', 1))}")
    assert refreshed(spark, view, query) == (2, 0)


def test_a_retracted_maximum_is_recomputed_and_a_retracted_lesser_value_is_combined(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:02", 9), bid(3, "b", "00:03", 5),
                      bid(4, "b", "00:04", 8))
    query = (f"SELECT window_start, window_end, item, count(*) AS n, max(price) AS high "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"DELETE FROM {bids} WHERE id IN (2, 3)")   # a's maximum 9, b's lesser 5
    assert refreshed(spark, view, query) == (1, 1)


def test_a_sum_whose_last_non_null_value_is_retracted_becomes_null_not_zero(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:02", 0))
    spark.sql(f"UPDATE {bids} SET price = NULL WHERE id = 2")
    query = (f"SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"DELETE FROM {bids} WHERE id = 1")
    assert refreshed(spark, view, query) == (0, 1)
    assert spark.table(view).first().total is None


def test_a_group_whose_count_falls_to_zero_is_deleted_without_recomputing(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:02", 3))
    query = (f"SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"DELETE FROM {bids} WHERE item = 'a'")
    assert refreshed(spark, view, query) == (1, 0)
    assert spark.table(view).count() == 1


def test_without_count_star_a_group_with_retractions_is_recomputed(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:02", 3), bid(3, "b", "00:03", 6))
    query = (f"SELECT window_start, window_end, item, sum(price) AS total "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"DELETE FROM {bids} WHERE id IN (1, 3)")   # a keeps a row, b empties
    assert refreshed(spark, view, query) == (0, 2)


def test_a_float_sum_is_recomputed_as_adding_in_another_order_changes_its_last_bits(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:02", 3))
    query = (f"SELECT window_start, window_end, item, count(*) AS n, sum(CAST(price AS DOUBLE) / 10) AS total "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:03', 1))}")   # 0.7 + 0.1 != 0.4 + 0.3 + 0.1
    assert refreshed(spark, view, query) == (0, 0)
    spark.sql(f"DELETE FROM {bids} WHERE id = 1")
    assert refreshed(spark, view, query) == (0, 0)


@pytest.mark.parametrize("columns", ["avg(price) AS mean", "count(DISTINCT price) AS prices"])
def test_other_aggregates_recompute_their_groups_from_the_source(spark, given, columns):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    query = (f"SELECT window_start, window_end, item, {columns} "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 8))}")
    spark.sql(f"DELETE FROM {bids} WHERE id = 2")
    assert refreshed(spark, view, query) == (0, 0)   # not combinable: the windows are recomputed


def test_a_plain_group_by_is_combined_too(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    query = f"SELECT item, count(*) AS n, sum(price) AS total, max(price) AS high FROM {bids} GROUP BY item"
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 8), bid(4, 'c', '00:05', 1))}")
    spark.sql(f"UPDATE {bids} SET price = 1 WHERE id = 2")   # b's maximum retracted
    assert refreshed(spark, view, query) == (2, 1)


def test_on_window_close_late_rows_and_open_windows_are_combined_and_closing_ones_come_from_the_kept_rows(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:12", 7), bid(3, "a", "00:31", 1))
    query = (f"SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total "
             f"FROM {TUMBLE.format(bids=bids)} GROUP BY window_start, window_end, item")
    view = given.view(query, "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE "
                             "GRACE INTERVAL '1' HOUR")
    assert spark.table(view).count() == 2
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'a', '00:03', 2), bid(5, 'a', '00:45', 3))}")
    combined, recomputed = refreshed_closed(spark, view, query, "00:40")
    # 00:00-00:10 combined with its view row, 00:40-00:50 with nothing; 00:30-00:40 from <view>__open
    assert (combined, recomputed) == (2, 0)


def refreshed_closed(spark, view: str, query: str, closed_until: str) -> tuple[int, int]:
    """Like refreshed(), for EMIT ON WINDOW CLOSE: the view holds the windows ending by `closed_until`."""
    outcome = maintainer.refresh(spark, view)
    assert outcome.technique == "incremental", outcome
    expected = spark.sql(f"SELECT * FROM ({query}) WHERE window_end <= TIMESTAMP'2024-01-01 {closed_until}:00'")
    actual = spark.table(view)
    assert actual.exceptAll(expected).count() == 0 and expected.exceptAll(actual).count() == 0, \
        (sorted(actual.collect()), sorted(expected.collect()))
    return outcome.groups_combined, outcome.groups_recomputed


def test_cumulative_windows_are_combined_even_when_recent(spark, given, monkeypatch):
    """A CUMULATE window reaches back to the start of its day: recomputing it would reread the day."""
    monkeypatch.setattr(window_refresh, "COMBINE_AFTER_RUNS", window_refresh.MAX_RANGES)
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:12", 7))
    query = (f"SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total FROM "
             f"CUMULATE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '30' MINUTES) "
             f"GROUP BY window_start, window_end, item")
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:15', 9), bid(4, 'b', '00:25', 1))}")
    assert refreshed(spark, view, query) == (3, 0)   # a's 00:00-00:20 and 00:00-00:30, b's 00:00-00:30
