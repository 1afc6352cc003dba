"""Views over the other windows of issue 4, specified by example: Flink's window Top-N and window
deduplication (rows, not groups: ROW_NUMBER() OVER (PARTITION BY window_start, window_end ...)),
eKuiper's window functions in GROUP BY, and BIGINT epoch-millisecond time columns.

Given a small Delta table of bids and a view, when rows are inserted, updated and deleted and the
view is refreshed, then the refresh is incremental where the window rules allow it and the view
equals its query recomputed from scratch (for EMIT ON WINDOW CLOSE: over the closed windows).
Windows of rows are replaced window by window: one MERGE deletes the view's rows of the affected
windows and inserts the query's, so duplicate rows are kept exactly too.
"""
from __future__ import annotations

import random

import pytest

import mv
from mv import refresh as maintainer
from test_mv_scenarios import Catalog, bid, values

TUMBLE = "TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)"
TOP_2 = """SELECT * FROM (
             SELECT window_start, window_end, item, price,
                    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC, id) AS rn
             FROM {tumble}) WHERE rn <= 2"""
TOP_2_ITEMS = """SELECT * FROM (
                   SELECT window_start, window_end, item, count(*) AS n,
                          RANK() OVER (PARTITION BY window_start, window_end ORDER BY count(*) DESC) AS place
                   FROM {tumble} GROUP BY window_start, window_end, item) WHERE place <= 2"""
FIRST_BID_PER_ITEM = """SELECT window_start, window_end, item, price, ts FROM (
                          SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, item ORDER BY ts, id) AS rn
                          FROM {tumble}) WHERE rn = 1"""
ALL_PRICES = "SELECT window_start, window_end, price FROM {tumble}"   # duplicate rows on purpose

SESSION = "SESSION(TABLE({bids}) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES)"
SESSION_TOP_2 = """SELECT * FROM (
                     SELECT window_start, window_end, item, price,
                            RANK() OVER (PARTITION BY window_start, window_end, item ORDER BY price DESC) AS place
                     FROM {session}) WHERE place <= 2"""                # ties: equal prices share a place
SESSION_FIRST_BID = """SELECT window_start, window_end, item, price, ts FROM (
                         SELECT *, ROW_NUMBER() OVER (PARTITION BY item, window_start, window_end ORDER BY ts, id) AS rn
                         FROM {session}) WHERE rn = 1"""
SESSION_PRICES = "SELECT window_start, window_end, item, price FROM {session}"   # duplicate rows on purpose
# Sessions over every item (no keys): Top-N of all bids per session.
SESSION_ANY_TOP_1 = """SELECT window_start, window_end, price FROM (
                         SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price, id) AS rn
                         FROM SESSION(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '5' MINUTES)) WHERE rn <= 1"""


@pytest.fixture
def given(spark):
    catalog = Catalog(spark)
    yield catalog
    catalog.drop()


def refreshed(spark, view: str, query: str, technique: str = "incremental") -> maintainer.Outcome:
    """Refresh, check the technique and that the view equals its query recomputed from scratch."""
    outcome = maintainer.refresh(spark, view)
    assert (outcome.technique, outcome.reason) == (technique, "CHANGES_ONLY") or technique == "full", outcome
    assert outcome.technique == technique, outcome
    actual, expected = spark.table(view), spark.sql(query)
    assert actual.exceptAll(expected).count() == 0 and expected.exceptAll(actual).count() == 0, \
        (sorted(actual.collect()), sorted(expected.collect()))
    return outcome


def change_randomly(spark, bids: str, rng: random.Random, first_id: int) -> int:
    """Insert a few bids, update and delete some; returns the next free id."""
    new = [bid(first_id + i, rng.choice("abc"), f"00:{rng.randrange(40):02d}", rng.randrange(1, 6)) for i in range(4)]
    spark.sql(f"INSERT INTO {bids} VALUES {values(*new)}")
    spark.sql(f"UPDATE {bids} SET price = price + 1 WHERE id % 5 = {rng.randrange(5)}")
    spark.sql(f"DELETE FROM {bids} WHERE id % 7 = {rng.randrange(7)}")
    return first_id + len(new)


def kept_through_random_changes(spark, given, bids: str, query: str, seed: str, next_id: int) -> None:
    """Create the view, then twice change `bids` at random and check the incremental refresh."""
    view = given.view(query)
    rng = random.Random(seed)
    for _ in range(2):
        next_id = change_randomly(spark, bids, rng, next_id)
        refreshed(spark, view, query)


# top_n and deduplication in make test; the others in make test-slow (make test's 20 minutes)
@pytest.mark.parametrize("shape", [TOP_2, pytest.param(TOP_2_ITEMS, marks=pytest.mark.slow), FIRST_BID_PER_ITEM,
                                   pytest.param(ALL_PRICES, marks=pytest.mark.slow)],
                         ids=["top_n", "top_n_of_groups", "deduplication", "duplicate_rows"])
def test_window_rows_are_kept_incrementally_through_inserts_updates_and_deletes(spark, given, shape):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:02", 4), bid(3, "a", "00:12", 7),
                      bid(4, "c", "00:13", 2))
    kept_through_random_changes(spark, given, bids, shape.format(tumble=TUMBLE.format(bids=bids)), shape, 5)


def test_only_the_affected_windows_are_rewritten(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 5), bid(3, "c", "00:25", 6))
    query = TOP_2.format(tumble=TUMBLE.format(bids=bids))
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'd', '00:14', 9))}")
    changes = spark.sql(f"SELECT max(_commit_version) FROM table_changes('{view}', 0)").first()[0]
    refreshed(spark, view, query)
    feed = spark.sql(f"SELECT window_start, _change_type FROM table_changes('{view}', {changes + 1})").collect()
    assert {r.window_start.minute for r in feed} == {10}   # the 00:10-00:20 window's rows only


def test_top_n_with_emit_on_window_close_shows_each_window_once_closed(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:02", 8))
    query = TOP_2.format(tumble=TUMBLE.format(bids=bids))
    view = given.view(query, "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE")
    assert spark.table(view).count() == 0                       # 00:00-00:10 still open
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'c', '00:05', 9), bid(4, 'a', '00:15', 1))}")
    outcome = maintainer.refresh(spark, view)
    assert outcome.technique == "incremental"
    rows = sorted((r.window_start.minute, r.price, r.rn) for r in spark.table(view).collect())
    assert rows == [(0, 8, 2), (0, 9, 1)]                       # closed by 00:15 - 1 minute


def test_a_window_function_not_partitioned_by_the_window_refreshes_in_full(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    query = (f"SELECT window_start, window_end, price, ROW_NUMBER() OVER (ORDER BY price) AS rn "
             f"FROM {TUMBLE.format(bids=bids)}")
    view = given.view(query)
    plan = {r.property: r.value for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect()}
    assert (plan["technique"], plan["reason"]) == ("full", "OVER_NOT_BY_WINDOW")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(2, 'b', '00:12', 1))}")
    refreshed(spark, view, query, technique="full")


def test_an_ekuiper_tumbling_window_view_is_kept_incrementally(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 5))
    query = (f"SELECT item, window_start() AS ws, window_end() AS we, count(*) AS n "
             f"FROM {bids} GROUP BY item, TUMBLINGWINDOW(mi, 10, TIMECOL => ts)")
    view = given.view(query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 1), bid(4, 'c', '00:31', 2))}")
    spark.sql(f"DELETE FROM {bids} WHERE id = 2")
    refreshed(spark, view, query)


def test_an_ekuiper_count_window_view_refreshes_in_full_and_says_why(spark, given):
    bids = given.bids(*[bid(i, "a", f"00:{i:02d}", i) for i in range(1, 6)])
    query = f"SELECT window_end() AS we, sum(price) AS total FROM {bids} GROUP BY COUNTWINDOW(2, TIMECOL => ts)"
    view = given.view(query)
    spark.sql(f"DELETE FROM {bids} WHERE id = 1")   # every later count window shifts
    outcome = refreshed(spark, view, query, technique="full")
    assert outcome.reason != "CHANGES_ONLY"


def test_bigint_epoch_millisecond_time_columns_are_kept_incrementally_with_a_watermark(spark, given):
    events = given.name("events")
    spark.sql(f"CREATE TABLE {events} (id INT, item STRING, ts BIGINT) USING delta")
    given.tables.append(events)
    spark.sql(f"INSERT INTO {events} VALUES (1, 'a', 1000), (2, 'a', 11000), (3, 'b', 12000), (4, 'b', 25000)")
    query = (f"SELECT item, window_start, window_end, count(*) AS n "
             f"FROM TUMBLE(TABLE({events}), DESCRIPTOR(ts), 10s) GROUP BY item, window_start, window_end")
    view = given.view(query, "WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS GRACE INTERVAL '10' SECONDS "
                             "EMIT ON WINDOW CLOSE")
    spark.sql(f"INSERT INTO {events} VALUES (5, 'a', 13000), (6, 'c', 41000)")
    spark.sql(f"DELETE FROM {events} WHERE id = 2")
    outcome = maintainer.refresh(spark, view)
    assert (outcome.technique, outcome.late_rows) == ("incremental", 0)   # 10-20 s is closed, within grace
    rows = sorted(tuple(r) for r in spark.table(view).collect())
    # watermark 41 s - 5 s = 36 s: windows ending by 36 s are closed
    assert rows == [("a", 0, 10000, 1), ("a", 10000, 20000, 1), ("b", 10000, 20000, 1), ("b", 20000, 30000, 1)]


def test_an_ekuiper_session_window_view_refreshes_in_full_as_its_sessions_span_every_key(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:03", 5))
    query = (f"SELECT item, window_start() AS ws, window_end() AS we, count(*) AS n "
             f"FROM {bids} GROUP BY item, SESSIONWINDOW(mi, 60, 5, TIMECOL => ts)")
    view = given.view(query)
    plan = {r.property: r.value for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect()}
    assert (plan["technique"], plan["reason"]) == ("full", "WINDOW_DEPENDS_ON_OTHER_ROWS")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:02', 1))}")
    refreshed(spark, view, query, technique="full")


# --- rows over SESSION: Top-N, deduplication, plain rows ---------------------------------------------

@pytest.mark.parametrize("shape", [SESSION_TOP_2, pytest.param(SESSION_FIRST_BID, marks=pytest.mark.slow),
                                   pytest.param(SESSION_PRICES, marks=pytest.mark.slow),
                                   pytest.param(SESSION_ANY_TOP_1, marks=pytest.mark.slow)],
                         ids=["top_n_with_ties", "deduplication", "duplicate_rows", "without_keys"])
def test_session_rows_are_kept_incrementally_through_inserts_updates_and_deletes(spark, given, shape):
    """Given bids whose 5-minute sessions merge and split as bids come and go (times 00:00-00:39),
    when bids are inserted, updated and deleted at random, then each refresh is incremental and the
    view equals its query recomputed."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:04", 4), bid(3, "b", "00:02", 7),
                      bid(4, "a", "00:12", 2), bid(5, "c", "00:30", 3), bid(6, "b", "00:09", 7))
    kept_through_random_changes(spark, given, bids, shape.format(session=SESSION.format(bids=bids), bids=bids),
                                shape, 7)


def test_a_bridging_row_merges_two_sessions_and_deleting_a_middle_row_splits_one(spark, given):
    """Given a's sessions 00:01-00:04 and 00:12, and b's at 00:08, when a bid at 00:08 bridges a's two,
    then a has one session with its top two bids; when that bid and 00:04 are deleted, then a's
    session splits into 00:01 and 00:12 again; b's session is never rewritten."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:04", 2), bid(3, "a", "00:12", 7),
                      bid(4, "b", "00:08", 1), bid(5, "a", "00:02", 4))
    query = SESSION_TOP_2.format(session=SESSION.format(bids=bids))
    view = given.view(query)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(6, 'a', '00:08', 9))}")   # 00:04 + 5 >= 00:08, 00:08 + 5 >= 00:12
    before = spark.sql(f"SELECT max(_commit_version) FROM table_changes('{view}', 0)").first()[0]
    refreshed(spark, view, query)

    assert _session_rows(spark, view) == [("a", 1, 17, 7, 2), ("a", 1, 17, 9, 1), ("b", 8, 13, 1, 1)]
    feed = spark.sql(f"SELECT item FROM table_changes('{view}', {before + 1})").collect()
    assert {r.item for r in feed} == {"a"}

    spark.sql(f"DELETE FROM {bids} WHERE id IN (2, 6)")   # 00:01 and 00:02 stay; 00:12 is 10 minutes on
    refreshed(spark, view, query)

    assert _session_rows(spark, view) == [("a", 1, 7, 4, 1), ("a", 1, 7, 4, 1), ("a", 12, 17, 7, 1),
                                          ("b", 8, 13, 1, 1)]   # a tie at 4: both bids share place 1


def _session_rows(spark, view: str) -> list[tuple]:
    """(item, start minute, end minute, price, place), sorted."""
    return sorted((r.item, r.window_start.minute, r.window_end.minute, r.price, r.place)
                  for r in spark.table(view).collect())


def test_a_session_top_n_not_partitioned_by_its_keys_refreshes_in_full_and_says_why(spark, given):
    """Given Top-N over sessions per item whose OVER leaves out the item, when explained and refreshed,
    then it is refreshed in full with SESSION_OVER_NOT_BY_KEYS: sessions of two items with equal
    bounds share a partition, so one item's change can move the other's ranks."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:01", 5))
    query = f"""SELECT * FROM (
                  SELECT window_start, window_end, item, price,
                         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn
                  FROM {SESSION.format(bids=bids)}) WHERE rn <= 1"""
    view = given.view(query)
    plan = {r.property: r.value for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect()}
    assert (plan["technique"], plan["reason"]) == ("full", "SESSION_OVER_NOT_BY_KEYS")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:01', 9))}")   # a's 9 outranks b's 5
    refreshed(spark, view, query, technique="full")
    assert [(r.item, r.price) for r in spark.table(view).collect()] == [("a", 9)]


SESSION_EXPLAINED = [  # (query over {session}, technique, reason)
    (SESSION_TOP_2, "incremental", "CHANGES_ONLY"),
    ("SELECT * FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY window_start, window_end, item ORDER BY price) AS r "
     "FROM {session}) WHERE 3 > r AND r <= 5", "incremental", "CHANGES_ONLY"),
    ("SELECT item, window_start, window_end, price FROM {session} WHERE price > 2", "full", "SESSION_ROWS_FILTERED"),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, item ORDER BY price) AS r "
     "FROM {session}) WHERE r = 2", "full", "SESSION_ROWS_FILTERED"),
    ("SELECT item, window_start, window_end, count(*) AS n FROM {session} "
     "GROUP BY item, window_start, window_end HAVING count(*) > 1", "full", "SESSION_ROWS_FILTERED"),
    ("SELECT l.item, l.window_start, l.window_end, l.price, r.price AS other FROM {session} l JOIN {session} r "
     "ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.item = r.item WHERE l.price > 2",
     "incremental", "CHANGES_ONLY"),   # joined sessions are found from the sources: filters are fine
    ("SELECT l.item, l.window_start, l.window_end, r.item AS other FROM {session} l JOIN {session} r "
     "ON l.window_start = r.window_start AND l.window_end = r.window_end", "full", "SESSION_JOIN_NOT_ON_KEYS"),
    ("SELECT item AS what, window_start, window_end, price FROM {session}", "full",
     "SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS"),
    ("SELECT price AS item, window_start, window_end FROM {session}", "full",
     "SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS"),   # a column named as the key is not the key
]


@pytest.mark.parametrize("query, technique, reason", SESSION_EXPLAINED,
                         ids=["top_n", "rank_limits", "filter", "not_rank_one", "having", "self_join",
                              "join_not_on_keys", "key_renamed", "key_impostor"])
def test_explain_says_which_session_rows_are_kept_incrementally_and_why_not(spark, given, query, technique, reason):
    """Given a query over sessions per item, when EXPLAIN CREATE is asked (nothing is created), then it
    names the technique and reason: a filter above the sessions other than a Top-N limit could drop
    a session's every row, and the view must carry the key under its own name."""
    bids = given.bids()
    text = query.format(session=SESSION.format(bids=bids))
    plan = dict(map(tuple, mv.sql(spark, f"EXPLAIN CREATE MATERIALIZED VIEW {given.name('v')} AS {text}").collect()))
    assert (plan["technique"], plan["reason"]) == (technique, reason)


# --- SESSION window joins --------------------------------------------------------------------------

SESSION_PAIRS = """SELECT l.window_start, l.window_end, l.item, l.price AS bid, r.price AS ask
                   FROM {bids_session} l {join} {asks_session} r
                   ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.item = r.item"""
SESSION_PAIR_COUNTS = """SELECT l.item, l.window_start, l.window_end, count(*) AS pairs, max(r.price) AS top_ask
                         FROM {bids_session} l {join} {asks_session} r
                         ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.item = r.item
                         GROUP BY l.item, l.window_start, l.window_end"""


@pytest.mark.parametrize("shape, join", [pytest.param(SESSION_PAIRS, "JOIN", marks=pytest.mark.slow),
                                         pytest.param(SESSION_PAIR_COUNTS, "JOIN", marks=pytest.mark.slow),
                                         pytest.param(SESSION_PAIRS, "LEFT JOIN", marks=pytest.mark.slow)],
                         ids=["rows", "grouped", "left_join"])
def test_joined_sessions_are_kept_incrementally_through_inserts_updates_and_deletes(spark, given, shape, join):
    """Given bids and asks, each in 5-minute sessions per item, joined where an item's bid and ask
    sessions have equal bounds, when both tables change at random, then each refresh is
    incremental and the view equals its query recomputed."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:04", 4), bid(3, "b", "00:02", 7),
                      bid(4, "a", "00:12", 2), bid(5, "c", "00:30", 3))
    asks = given.bids(bid(1, "a", "00:01", 5), bid(2, "a", "00:04", 6), bid(3, "b", "00:02", 8),
                      bid(4, "a", "00:14", 3), bid(5, "c", "00:30", 4))
    query = shape.format(bids_session=SESSION.format(bids=bids), asks_session=SESSION.format(bids=asks), join=join)
    view = given.view(query)
    rng, next_id = random.Random(shape + join), 6
    for _ in range(2):
        change_randomly(spark, bids, rng, next_id)
        next_id = change_randomly(spark, asks, rng, next_id)
        refreshed(spark, view, query)


def test_a_deleted_bid_splits_a_long_joined_session_found_beyond_the_first_search(spark, given):
    """Given an item's bids and asks every 4 minutes for an hour (one session each, longer than the
    first search around a change reaches), when the 00:28 bid is deleted, then the bids' session
    splits in two, neither has the asks' bounds, and the view, refreshed incrementally, is empty;
    when it is inserted again, the pair is back."""
    every_4 = [bid(i, "a", f"00:{4 * i:02d}", i) for i in range(15)]
    bids, asks = given.bids(*every_4), given.bids(*every_4)
    query = SESSION_PAIRS.format(bids_session=SESSION.format(bids=bids), asks_session=SESSION.format(bids=asks),
                                 join="JOIN")
    view = given.view(query)
    assert spark.table(view).count() == 15 * 15

    spark.sql(f"DELETE FROM {bids} WHERE id = 7")
    refreshed(spark, view, query)
    assert spark.table(view).count() == 0

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(7, 'a', '00:28', 7))}")
    refreshed(spark, view, query)
    assert spark.table(view).count() == 15 * 15
