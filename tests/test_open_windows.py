"""An EMIT ON WINDOW CLOSE view keeps the rows of the windows it holds back in <view>__open, so a
refresh combines the change with them, and a window that closes goes to the view from there, not
from the source (mv/open_windows.py).

Every refresh here is checked against the query recomputed from scratch: the view holds exactly
the query's rows of windows the watermark closed, and the open-window table exactly the others.
"""
from __future__ import annotations

import json

import pytest

import mv
from mv import state
from mv.names import TableName
from mv import refresh as maintainer
from test_mv_scenarios import Catalog, bid, values
from tests.outside_writes import committed_outside

WINDOWS = {
    "TUMBLE": "TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
    "HOP": "HOP(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
    "CUMULATE": "CUMULATE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '30' MINUTES)",
}
CLOSE = "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE GRACE INTERVAL '2' HOURS"


@pytest.fixture
def given(spark):
    catalog = Catalog(spark)
    yield catalog
    catalog.drop()


def windowed(bids: str, kind: str = "TUMBLE", columns: str = "count(*) AS n, sum(price) AS total, max(price) AS high"):
    return (f"SELECT window_start, window_end, item, {columns} FROM {WINDOWS[kind].format(bids=bids)} "
            f"GROUP BY window_start, window_end, item")


def check(spark, view: str, query: str) -> None:
    """The view holds the query's rows of closed windows; the open-window table, with the id the
    view's state names, holds the rest."""
    found = state.read(spark, view)
    closed = f"window_end <= timestamp_micros({found.watermark + 1})"
    for table, where in ((view, closed), (TableName.parse(view).open, f"NOT ({closed})")):
        actual, expected = spark.table(table), spark.sql(f"SELECT * FROM ({query}) WHERE {where}")
        assert actual.exceptAll(expected).count() == 0 and expected.exceptAll(actual).count() == 0, \
            (table, sorted(actual.collect()), sorted(expected.collect()))
    assert found.open_id == kept_id(spark, view)


def kept_id(spark, view: str) -> str:
    properties = spark.sql(f"SHOW TBLPROPERTIES {TableName.parse(view).open}").collect()
    return {row.key: row.value for row in properties}[state.STATE_PROPERTY]


def refreshed(spark, view: str, query: str):
    outcome = maintainer.refresh(spark, view)
    assert outcome.technique == "incremental", outcome
    check(spark, view, query)
    return outcome


@pytest.mark.parametrize("kind", [k if k == "TUMBLE" else pytest.param(k, marks=pytest.mark.slow)
                                  for k in WINDOWS])  # HOP, CUMULATE: make test-slow (a minute each)
def test_open_windows_are_kept_through_inserts_updates_deletes_and_late_rows(spark, given, kind):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:12", 7), bid(3, "b", "00:31", 1))
    query = windowed(bids, kind)
    view = given.view(query, CLOSE)
    check(spark, view, query)   # the first refresh keeps them too
    rounds = [
        f"INSERT INTO {bids} VALUES {values(bid(4, 'a', '00:03', 2), bid(5, 'b', '00:45', 3))}",  # late; closes 00:40
        f"UPDATE {bids} SET price = price + 10 WHERE id IN (3, 5)",   # one row in a closed window, one in an open one
        f"DELETE FROM {bids} WHERE id = 2",
        f"INSERT INTO {bids} VALUES {values(bid(6, 'c', '00:52', 5), bid(7, 'b', '00:58', 1))}",
        f"DELETE FROM {bids} WHERE id = 5",   # an open window's maximum retracted: recomputed from the source
        f"INSERT INTO {bids} VALUES {values(bid(8, 'b', '01:20', 6))}",   # closes windows the change does not touch
    ]
    combined = {}
    for i, statement in enumerate(rounds):
        spark.sql(statement)
        outcome = refreshed(spark, view, query)
        combined[i] = (outcome.groups_combined, outcome.groups_recomputed)
    if kind == "TUMBLE":  # inserts alone (round 4): c's and b's rows of the open 00:50-01:00 window combined
        assert combined[3] == (2, 0)


SESSIONS = ("SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total, max(price) AS high "
            "FROM SESSION(TABLE({bids}) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '10' MINUTES) "
            "GROUP BY item, window_start, window_end")


@pytest.mark.slow  # a minute; the retraction test below keeps sessions' kept state in make test
def test_open_sessions_are_kept_and_fold_with_inserts(spark, given):
    """Inserts fold with the kept sessions (groups combined) while every session in the view is
    final (without GRACE, always); under a retraction, the sessions are recomputed from the source
    and the kept ones built again. (With GRACE, a view holding a session not final yet does so too:
    test_mv_exactly_once and the Nexmark check run such views.)"""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:08", 7), bid(3, "b", "00:31", 1))
    query = SESSIONS.format(bids=bids)
    view = given.view(query, "WATERMARK FOR ts AS ts - INTERVAL '30' MINUTES EMIT ON WINDOW CLOSE")
    check(spark, view, query)
    rounds = [   # (change, folded)
        (f"INSERT INTO {bids} VALUES {values(bid(4, 'b', '00:48', 2), bid(5, 'c', '00:40', 3))}", True),
        (f"INSERT INTO {bids} VALUES {values(bid(6, 'b', '00:39', 9), bid(7, 'd', '01:10', 1))}", True),
        (f"UPDATE {bids} SET price = 1 WHERE id = 6", False),    # a retraction: recomputed
        (f"INSERT INTO {bids} VALUES {values(bid(8, 'e', '01:30', 5))}", True),   # b and c close untouched
        (f"DELETE FROM {bids} WHERE id = 7", False),             # an open session goes
        (f"INSERT INTO {bids} VALUES {values(bid(9, 'a', '01:45', 6), bid(10, 'e', '01:38', 1))}", True),
    ]   # the first closes a's session; the second joins b's two (00:31, 00:48) by a row between them
    for statement, folded in rounds:
        spark.sql(statement)
        outcome = refreshed(spark, view, query)
        assert (outcome.groups_combined > 0) == folded, statement


def test_a_retraction_recomputes_the_open_sessions_from_the_source_without_the_final_ones(spark, given):
    """A retraction may split a session, so every key's sessions from the earliest open one on are
    recomputed from the source in one query; a final session's rows in that time (a's, after b's
    open session starts) are held back, so the view keeps that session once."""
    bids = given.bids(bid(1, "a", "00:22", 4), *[bid(2 + i, "b", f"00:{m}", i + 1) for i, m in
                                                  enumerate(("20", "29", "38", "47", "56"))],
                      bid(8, "b", "01:05", 9), bid(9, "x", "01:05", 2))
    query = SESSIONS.format(bids=bids)
    view = given.view(query, "WATERMARK FOR ts AS ts - INTERVAL '30' MINUTES EMIT ON WINDOW CLOSE")
    assert spark.table(view).count() == 1   # a's [00:22, 00:32) is final at 00:35; b's [00:20, 01:15) open
    spark.sql(f"DELETE FROM {bids} WHERE id = 5")   # b's 00:47: splits its session at 00:48
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(10, 'c', '01:20', 5))}")   # the watermark to 00:50
    outcome = refreshed(spark, view, query)
    assert (outcome.groups_recomputed, outcome.groups_combined) == (4, 0)   # b's two, x's, c's; not a's
    assert spark.table(view).count() == 2   # b's [00:20, 00:48) closed


def test_a_window_that_closes_untouched_comes_from_the_kept_rows(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:05", 7))
    query = windowed(bids)
    view = given.view(query, CLOSE)
    assert spark.table(view).count() == 0 and spark.table(TableName.parse(view).open).count() == 2
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'c', '00:30', 1))}")
    outcome = refreshed(spark, view, query)
    assert spark.table(view).count() == 2   # 00:00-00:10 closed, its two groups moved from the kept rows
    assert (outcome.groups_combined, outcome.groups_recomputed) == (1, 0)   # only c's new window


def test_retractions_of_final_windows_leave_the_open_ones_combined_with_the_inserts(spark, given):
    """A retraction in a window that is final is a late row (kept in <view>__late, the view's row
    stays): the open windows see only the change's inserts, so they are combined, not recomputed."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:31", 1))
    query = windowed(bids)
    view = given.view(query, "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE")
    spark.sql(f"DELETE FROM {bids} WHERE id = 1")   # 00:00-00:10 is final: a late retraction
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:35', 6))}")
    outcome = maintainer.refresh(spark, view)
    assert (outcome.technique, outcome.late_rows) == ("incremental", 1)
    assert (outcome.groups_combined, outcome.groups_recomputed) == (1, 0)
    assert [tuple(r) for r in spark.sql(f"SELECT item, n, high FROM {view}").collect()] == [("a", 1, 4)]
    open_rows = spark.sql(f"SELECT item, n, total, high FROM {TableName.parse(view).open}").collect()
    assert [tuple(r) for r in open_rows] == [("b", 2, 7, 6)]


def test_the_late_rows_commit_names_its_refresh_and_versions_and_no_other_commit_does(spark, given):
    """The late rows' commit says in its own user metadata which refresh wrote it and the source
    versions it read to (what a rerun after a crash reads back); the open windows' and the view's
    commits never carry that note."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:31", 1))
    view = given.view(windowed(bids), "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:02', 5), bid(4, 'b', '00:35', 6))}")
    outcome = maintainer.refresh(spark, view)   # 00:02 is late: the view's 00:00-00:10 row stays
    assert (outcome.technique, outcome.late_rows) == ("incremental", 1)
    names = TableName.parse(view)

    def newest_note(table: str) -> str:
        return spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first().userMetadata or ""
    late_note = json.loads(newest_note(names.late))["mv_late"]
    assert (late_note["refresh_id"], late_note["targets"]) == (outcome.refresh_id, outcome.source_versions)
    assert "mv_late" not in newest_note(names.open) and "mv_late" not in newest_note(view)


def test_auto_counts_the_source_read_of_the_open_windows_it_recomputes(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:15", 7))
    view = given.view(windowed(bids), CLOSE)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:16', 1), bid(4, 'c', '00:31', 2))}")
    inserted = maintainer.estimated(spark, view)   # kept rows and inserts: the source is not read

    spark.sql(f"UPDATE {bids} SET price = 9 WHERE id = 4")   # a retraction in an open window
    retracted = maintainer.estimated(spark, view)   # its window is recomputed from the source

    assert retracted.incremental_bytes > inserted.incremental_bytes


def test_a_table_that_is_not_the_states_is_built_again_from_the_source(spark, given):
    """As a refresh that died between its open-window commit and the view's would leave it."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:15", 7))
    query = windowed(bids)
    view = given.view(query, CLOSE)
    # Its rows gone and another refresh's id, written by path as another engine would: no rule sees it.
    location = spark.sql(f"DESCRIBE DETAIL {TableName.parse(view).open}").first().location
    committed_outside(spark, location, replace=True, properties={state.STATE_PROPERTY: "another"})
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:16', 1), bid(4, 'c', '00:25', 2))}")
    refreshed(spark, view, query)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(5, 'b', '00:40', 3))}")
    refreshed(spark, view, query)


def test_a_full_refresh_keeps_the_open_windows_too(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:15", 7))
    query = windowed(bids)
    view = given.view(query, CLOSE)
    before = kept_id(spark, view)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:16', 1))}")
    assert maintainer.refresh(spark, view, full=True).technique == "full"
    check(spark, view, query)
    assert kept_id(spark, view) != before


def test_only_the_refresh_writes_the_open_window_table_and_drop_removes_it(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(windowed(bids), CLOSE)
    with pytest.raises(Exception, match="MV_VIEW_READ_ONLY"):
        spark.sql(f"DELETE FROM {TableName.parse(view).open}")
    mv.sql(spark, f"DROP MATERIALIZED VIEW {view}")
    assert not spark.catalog.tableExists(TableName.parse(view).open)


@pytest.mark.parametrize("columns, clauses", [
    ("avg(price) AS mean", CLOSE),                                     # an average is not combined
    ("count(*) AS n", "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE"),  # EMIT ON UPDATE: open windows are in the view
])
def test_views_that_cannot_or_need_not_keep_open_windows_have_no_table(spark, given, columns, clauses):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:22", 4))
    view = given.view(windowed(bids, columns=columns), clauses)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:40', 1))}")
    maintainer.refresh(spark, view)
    assert not spark.catalog.tableExists(TableName.parse(view).open)
    assert state.read(spark, view).open_id is None
