"""The keys a change reaches, read off the changed rows alone when each key is one of their columns
(mv/jvm/ChangedKeys.scala, through mv_substitute_keys): an auction moved reaches its own id and
category without joining every bid; a bid still finds its auction's through the join.

Oracle: the same term not cut (no key columns given), whose keys the cut term's must contain; and
the keys expected from the changed rows themselves.
"""
import json

import pytest

from mv.query import sql_string

AUCTIONS, BIDS = "ck_auctions", "ck_bids"
TOP_BID = (f"SELECT * FROM (SELECT a.id, a.category, b.price, row_number() OVER (PARTITION BY a.id ORDER BY b.price DESC) "
           f"AS rn FROM {AUCTIONS} a, {BIDS} b WHERE a.id = b.auction AND b.price > 10) WHERE rn = 1")
PER_CATEGORY = (f"SELECT a.category, count(*) AS bids FROM {AUCTIONS} a JOIN {BIDS} b ON a.id = b.auction "
                "GROUP BY a.category")


@pytest.fixture(scope="module")
def tables(spark):
    spark.sql(f"CREATE OR REPLACE TABLE {AUCTIONS} USING delta AS "
              "SELECT id, id % 4 AS category FROM range(20)")
    spark.sql(f"CREATE OR REPLACE TABLE {BIDS} USING delta AS "
              "SELECT id % 15 AS auction, id * 7 % 50 AS price FROM range(200)")
    # Auctions 3 and 18 (18 has no bid) moved; bids of auctions 5 and 7, one too cheap to rank.
    spark.sql("CREATE OR REPLACE TEMP VIEW ck_auction_change AS SELECT * FROM VALUES (3L, 2L), (18L, 1L) AS t(id, category)")
    spark.sql("CREATE OR REPLACE TEMP VIEW ck_bid_change AS SELECT * FROM VALUES (5L, 40L), (7L, 3L) AS t(auction, price)")
    yield
    for table in (AUCTIONS, BIDS):
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def keys_term(spark, query: str, changed: str, keys: list[str]):
    """The keys term of `query` through `changed`'s change, cut to `keys` where it can be ([]: never cut)."""
    change = {AUCTIONS: "ck_auction_change", BIDS: "ck_bid_change"}[changed]
    other = BIDS if changed == AUCTIONS else AUCTIONS
    args = [query, changed, json.dumps(keys), changed, change, other, other]
    return spark.sql(f"SELECT * FROM mv_substitute_keys({', '.join(sql_string(a) for a in args)})")


def found(spark, query: str, changed: str, keys: list[str]) -> tuple[set, bool]:
    """The keys the cut term outputs, checked against the uncut term's, and whether it reads the other table."""
    cut = keys_term(spark, query, changed, keys)
    rows = {tuple(r) for r in cut.select(*keys).collect()}
    assert rows >= {tuple(r) for r in keys_term(spark, query, changed, []).select(*keys).collect()}
    other = BIDS if changed == AUCTIONS else AUCTIONS
    return rows, other in cut._jdf.queryExecution().analyzed().toString()


def test_a_moved_auction_reaches_its_own_partition_without_reading_the_bids(spark, tables):
    keys, reads_other = found(spark, TOP_BID, AUCTIONS, ["id"])
    assert keys == {(3,), (18,)} and not reads_other  # 18 has no bid: a key too many, recomputed to nothing


def test_a_moved_auction_reaches_its_category_without_reading_the_bids(spark, tables):
    keys, reads_other = found(spark, PER_CATEGORY, AUCTIONS, ["category"])
    assert keys == {(2,), (1,)} and not reads_other


@pytest.mark.parametrize("query, key, expected", [
    (TOP_BID, "id", {(5,)}),  # the bid at 3 fails the query's filter on the bids' side
    (PER_CATEGORY, "category", {(1,), (3,)}),  # auctions 5 and 7's categories
])
def test_a_key_of_the_other_side_is_found_by_the_join(spark, tables, query, key, expected):
    """Read off its equal (b.auction), a bid of an auction that is not there would reach a key."""
    keys, reads_other = found(spark, query, BIDS, [key])
    assert keys == expected and reads_other


@pytest.mark.parametrize("join", ["LEFT OUTER", "LEFT ANTI"])
def test_an_outer_or_anti_joins_condition_does_not_filter_the_rows_it_keeps(spark, tables, join):
    """Auction 3 (category 2 now) is kept by either join whatever its bids: its key is found."""
    query = (f"SELECT a.id, count(*) AS n FROM {AUCTIONS} a {join} JOIN {BIDS} b "
             "ON a.id = b.auction AND a.category = 1 GROUP BY a.id")
    keys, reads_other = found(spark, query, AUCTIONS, ["id"])
    assert keys == {(3,), (18,)} and not reads_other


def test_a_filter_above_a_rank_does_not_filter_the_changed_rows_that_move_it(spark, tables):
    """The bid at 40 fails `price < 20`, but as auction 5's top bid it decides which bid ranks first."""
    query = (f"SELECT r.auction, count(*) AS n FROM (SELECT auction, price, row_number() OVER (PARTITION BY auction "
             f"ORDER BY price DESC) AS rn FROM {BIDS}) r JOIN {AUCTIONS} a ON r.auction = a.id AND r.price < 20 "
             "AND r.rn = 1 GROUP BY r.auction")
    keys, reads_other = found(spark, query, BIDS, ["auction"])
    assert keys == {(5,), (7,)} and not reads_other


def test_a_key_from_the_side_an_outer_join_pads_is_not_cut(spark, tables):
    query = f"SELECT b.auction, count(*) AS n FROM {AUCTIONS} a LEFT JOIN {BIDS} b ON a.id = b.auction GROUP BY b.auction"
    keys, reads_other = found(spark, query, AUCTIONS, ["auction"])
    assert keys == {(3,), (None,)} and reads_other  # 18 has no bid: padded, its key NULL


def test_an_aggregates_value_is_not_a_key_of_the_changed_rows(spark, tables):
    query = (f"SELECT top, count(*) AS n FROM (SELECT a.id, max(b.price) AS top FROM {AUCTIONS} a JOIN {BIDS} b "
             "ON a.id = b.auction GROUP BY a.id) GROUP BY top")
    keys, reads_other = found(spark, query, AUCTIONS, ["top"])
    assert reads_other and (None,) not in keys
