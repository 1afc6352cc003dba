"""Views whose top is OVER (PARTITION BY ...): top-N, deduplication, running totals (shape
`partitions`), kept by recomputing the partitions a change reaches.

Given a top-two per auction, the winning bid of each auction over a join, and running totals per
auction, when bids and auctions get inserts, updates and deletes (the ROUNDS of
tests/test_row_views.py), then every REFRESH is incremental and the view is exactly its query
recomputed, a partition whose rows stay put is not touched, and EXPLAIN names the partition keys.
"""
from __future__ import annotations

import pytest

import mv
from bench.probe import reads_since
from bench.refresh import execution_marker
from tests.test_row_views import TABLES, each_round_refreshed_incrementally_and_equal_to_its_query, last_version
from tests.view_sources import Sources, bag

RANKED = {  # OVER (PARTITION BY ...) at the top: the partitions a change reaches, recomputed
    "top_two": """SELECT * FROM (SELECT b.*, row_number() OVER (PARTITION BY auction ORDER BY price DESC, id) AS r
                  FROM {bids} b) WHERE r <= 2""",
    "winning": """SELECT id, category, price, bidder FROM (SELECT a.id, a.category, b.price, b.id AS bidder,
                  row_number() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.id) AS rn
                  FROM {auctions} a JOIN {bids} b ON a.id = b.auction) WHERE rn = 1""",
    "running": """SELECT auction AS lot, id, sum(price) OVER (PARTITION BY auction ORDER BY id) AS so_far,
                  count(*) OVER (PARTITION BY auction) AS bids FROM {bids}""",
}


@pytest.fixture
def tables(spark):
    made = Sources(spark, "pv", TABLES, RANKED)
    yield made
    made.drop()


@pytest.mark.parametrize("kinds", [pytest.param(("winning",), marks=[pytest.mark.slow, pytest.mark.compat]),
                                   pytest.param(("top_two", "running"), marks=pytest.mark.slow)])
def test_top_n_deduplication_and_over_recompute_only_the_partitions_their_change_reaches(spark, tables, kinds):
    """The keys of the partitions a change reaches come from the query over the change (the rank's
    filter dropped); those partitions are recomputed and only their rows that differ are merged."""
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 1, 20), (3, 2, 15), (7, 1, 12), (8, 5, 3)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games'), (3, 'books'), (6, 'toys')")
    views = {kind: tables.view(kind) for kind in kinds}
    for what in each_round_refreshed_incrementally_and_equal_to_its_query(spark, tables, views):
        if what == "new bids and auctions" and "top_two" in views:  # auction 1 kept its top two bids
            assert all(r.auction != 1 for r in spark.sql(f"SELECT * FROM table_changes('{views['top_two']}', "
                                                         f"{last_version(spark, views['top_two'])})").collect())


def test_a_change_reads_only_the_source_files_that_can_hold_its_partitions(spark, tables):
    """The keys' ranges filter the recomputation below the OVER and the rank's filter (a semi-join
    on the keys goes there too, but skips no file), so Delta skips the source's files of other keys: a bid for
    auction 250 reads the file of auctions 200-299 and its own, not those of 0-199."""
    for first in (0, 100, 200):  # a file each, its own auctions
        tables.run(f"INSERT INTO {{bids}} SELECT id, id, id % 50 FROM range({first}, {first + 100}, 1, 1)")
    view = tables.view("top_two")
    tables.run("INSERT INTO {bids} VALUES (1000, 250, 99)")
    marker = execution_marker(spark)

    done = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()

    assert done.technique == "incremental"
    assert reads_since(spark, marker)[tables.names["bids"]]["files"] == 1 + 2  # the change feed; 200-299 and the new
    assert bag(spark, view) == bag(spark, f"({tables.query('top_two')})")


def test_auto_prices_the_recomputation_of_a_joins_partitions_at_the_whole_query(spark, tables):
    """A join's terms, kept to their change's bounds, read one file of the other table each, but
    the partitions they find are then recomputed from both tables: AUTO prices that at the whole
    query (row_refresh._weigh), so a new auction and its bid do not look cheaper than a full
    refresh of tables this small (Nexmark's q9 at 1M bids ran at 3.5 times one when they did)."""
    for first in (0, 100, 200):  # a file each, its own auctions
        tables.run(f"INSERT INTO {{bids}} SELECT id, id, id % 50 FROM range({first}, {first + 100}, 1, 1)")
        tables.run(f"INSERT INTO {{auctions}} SELECT id, 'books' FROM range({first}, {first + 100}, 1, 1)")
    view = tables.view("winning", "")  # AUTO
    tables.run("INSERT INTO {auctions} VALUES (1000, 'toys')")
    tables.run("INSERT INTO {bids} VALUES (5000, 1000, 42)")

    explained = dict((r[0], r[1]) for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect()
                     if r[0] != "operator")

    assert "full is cheaper" in explained["estimate"], explained


def test_explain_shows_a_top_n_kept_by_its_partitions(spark, tables):
    view = tables.view("top_two")
    explained = mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect()
    assert dict((r[0], r[1]) for r in explained if r[0] != "operator")["row_key"] == "auction"
    operators = [r[1] for r in explained if r[0] == "operator"]
    assert any("Window (OVER): the partitions the change reaches, recomputed" in o for o in operators), operators
    assert any("Filter: applied when the partitions are recomputed" in o for o in operators), operators
