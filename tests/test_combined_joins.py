"""Aggregates over joins and unions are combined from their change: a GROUP BY without windows of
count, sum, min and max whose changed sources reach it row by row adds what the change's own rows
aggregate to (the change joined to the other sources) to each touched group's row in the view,
without reading the rest of the fact table; a retracted maximum or minimum recomputes that group
alone. (Windowed groups over joins are recomputed within their windows: test_windows_over_joins.)

Given bids joined to auctions, grouped by category, and two feeds' UNION ALL counted per key,
when either side gets inserts, updates and deletes (a category renamed moves an auction's bids
between groups), then every REFRESH is incremental,
combines the groups it touches, reads of the bids only the change's file when only new bids
came, and leaves the view exactly its query recomputed. A source on an outer join's padded
side is not combined: its groups are recomputed, and the view stays exact.
"""
from __future__ import annotations

import pytest

import mv
from bench.probe import reads_since
from bench.refresh import execution_marker
from mv.query import describe
from tests.view_sources import Sources, bag

VIEWS = {  # each view's query over {bids}, {auctions}, {asks}
    "per_category": """
        SELECT a.category, count(*) AS n, sum(b.price) AS total, max(b.price) AS top, min(b.price) AS low
        FROM {bids} b JOIN {auctions} a ON b.auction = a.id GROUP BY a.category""",
    "both_feeds": """
        SELECT auction, count(*) AS n, sum(price) AS total
        FROM (SELECT auction, price FROM {bids} UNION ALL SELECT auction, price FROM {asks}) GROUP BY auction""",
    "bids_per_auction": """
        SELECT a.id, count(b.id) AS bids, sum(b.price) AS total
        FROM {auctions} a LEFT JOIN {bids} b ON b.auction = a.id GROUP BY a.id""",
}

TABLES = {"bids": "id INT, auction INT, price INT, ts TIMESTAMP", "auctions": "id INT, category STRING",
          "asks": "id INT, auction INT, price INT"}

ROUNDS = [  # (what happens, its statements)
    ("new bids, a new auction, a new ask", [
        "INSERT INTO {bids} VALUES (10, 2, 30, TIMESTAMP'2024-01-01 10:05:10'), (11, 3, 8, TIMESTAMP'2024-01-01 10:00:40')",
        "INSERT INTO {auctions} VALUES (3, 'toys')", "INSERT INTO {asks} VALUES (2, 3, 12)"]),
    ("a top price lowered, a low one raised, a bid deleted, an ask updated", [
        "UPDATE {bids} SET price = 1 WHERE id = 2", "UPDATE {bids} SET price = 40 WHERE id = 1",
        "DELETE FROM {bids} WHERE id = 3", "UPDATE {asks} SET price = 5 WHERE id = 1"]),
    ("a category renamed, an auction deleted, an ask deleted", [
        "UPDATE {auctions} SET category = 'games' WHERE id = 1", "DELETE FROM {auctions} WHERE id = 3",
        "DELETE FROM {asks} WHERE id = 2"]),
    ("every bid of a category deleted", ["DELETE FROM {bids} WHERE auction = 2"]),
]


@pytest.fixture
def joined(spark):
    """bids, auctions and asks with a few rows, and views of VIEWS over them."""
    made = Sources(spark, "cj", TABLES, VIEWS)
    made.run("INSERT INTO {bids} VALUES (1, 1, 10, TIMESTAMP'2024-01-01 10:00:05'), "
             "(2, 1, 20, TIMESTAMP'2024-01-01 10:00:50'), (3, 2, 15, TIMESTAMP'2024-01-01 10:02:00')")
    made.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games')")
    made.run("INSERT INTO {asks} VALUES (1, 1, 9)")
    yield made
    made.drop()


def refreshed(spark, made: Sources, view: str, kind: str):
    """REFRESH of `view`, checked equal to its query; its result row."""
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    assert bag(spark, view) == bag(spark, f"({made.query(kind)})"), kind
    return outcome


@pytest.mark.parametrize("kinds", [("per_category",), pytest.param(("both_feeds",), marks=pytest.mark.slow)])
def test_aggregates_over_joins_and_unions_combine_their_touched_groups_and_equal_their_query(spark, joined, kinds):
    views = {kind: joined.view(kind) for kind in kinds}
    for what, statements in ROUNDS:
        for statement in statements:
            joined.run(statement)
        for kind, view in views.items():
            outcome = refreshed(spark, joined, view, kind)
            assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY"), (what, kind)
            assert outcome.groups_combined + outcome.groups_recomputed > 0, (what, kind, outcome)


def test_a_retracted_maximum_recomputes_its_group_alone(spark, joined):
    view = joined.view("per_category")
    joined.run("INSERT INTO {bids} VALUES (4, 2, 5, TIMESTAMP'2024-01-01 10:03:00')")
    joined.run("DELETE FROM {bids} WHERE id = 2")   # books' maximum 20 goes; games gains a bid
    outcome = refreshed(spark, joined, view, "per_category")
    assert (outcome.groups_combined, outcome.groups_recomputed) == (1, 1)


def test_new_bids_are_joined_and_added_without_reading_the_other_bids(spark, joined):
    """Three more files of bids: a refresh after a fourth reads the bids' change alone (the view's
    files and the auctions' aside), where recomputing the touched categories read every bid file."""
    view = joined.view("per_category")
    for first in (100, 200, 300):
        joined.run(f"INSERT INTO {{bids}} SELECT id, id % 2 + 1, id, TIMESTAMP'2024-01-01 11:00:00' "
                   f"FROM range({first}, {first + 50}, 1, 1)")
    refreshed(spark, joined, view, "per_category")
    joined.run("INSERT INTO {bids} VALUES (900, 1, 7, TIMESTAMP'2024-01-01 12:00:00')")
    marker = execution_marker(spark)
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    files = reads_since(spark, marker)[joined.names["bids"]]["files"]
    assert (outcome.technique, outcome.groups_combined, outcome.groups_recomputed, files) == ("incremental", 1, 0, 1)
    assert bag(spark, view) == bag(spark, f"({joined.query('per_category')})")


def test_a_change_that_joins_nothing_leaves_the_view_untouched(spark, joined):
    view = joined.view("per_category")
    joined.run("INSERT INTO {bids} VALUES (12, 99, 9, TIMESTAMP'2024-01-01 10:00:00')")   # no auction 99
    outcome = refreshed(spark, joined, view, "per_category")
    assert (outcome.technique, outcome.groups_combined) == ("incremental", 0)
    assert spark.sql(f"DESCRIBE HISTORY {view} LIMIT 1").first().operation == "WRITE"


def test_a_source_on_an_outer_joins_padded_side_is_recomputed_not_combined(spark, joined):
    """auctions LEFT JOIN bids: an auction's rows reach the aggregate on their own (combined); a bid
    can turn an auction's padded row into a matched one, which only recomputing its group sees."""
    reads = {read.table.split(".")[-1]: read.linear for read in describe(spark, joined.query("bids_per_auction")).reads}
    assert reads == {joined.names["auctions"]: True, joined.names["bids"]: False}
    view = joined.view("bids_per_auction")
    joined.run("INSERT INTO {auctions} VALUES (4, 'toys')")
    assert refreshed(spark, joined, view, "bids_per_auction").groups_combined == 1
    joined.run("INSERT INTO {bids} VALUES (13, 4, 6, TIMESTAMP'2024-01-01 10:00:00')")   # auction 4's first bid
    outcome = refreshed(spark, joined, view, "bids_per_auction")
    assert (outcome.technique, outcome.groups_combined) == ("incremental", 0)


def test_explain_says_which_sources_changes_combine(spark, joined):
    view = joined.view("bids_per_auction")
    rows = dict(r for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect() if r[0] == "terms")
    assert rows["terms"] == (f"groups combined with a change of spark_catalog.default.{joined.names['auctions']}: "
                             f"its rows' aggregates added to their groups' rows (a retracted minimum or maximum "
                             f"recomputes its group); a change of spark_catalog.default.{joined.names['bids']} "
                             f"recomputes the groups it reaches")
