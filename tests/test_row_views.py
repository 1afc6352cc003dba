"""Views of rows: filters, projections, inner joins and UNION ALL kept by their changes, and
GROUP BY over them whose touched groups the changes give.

Given views without windows or GROUP BY whose every operator has a delta rule (mv/jvm/DeltaRules.scala),
or a GROUP BY over such operators (inner joins below it, keys computed from source columns),
when their sources get inserts, updates and deletes on every side (a fact and its dimension, two
feeds of a union), then every REFRESH is incremental and the view is exactly its query recomputed
(duplicates counted), a change that only adds rows appends them, and a view's change feed shows
net changes. Rows over outer, semi and anti joins also flip the other side's rows whose match
comes or goes (padded, kept, dropped). A GROUP BY or DISTINCT over outer, semi and anti joins, with
HAVING, or over another aggregate recomputes the groups the change reaches (a top OVER
(PARTITION BY ...): tests/test_partition_views.py). An aggregate or DISTINCT below rows (joined,
on an outer join's padded side, joined to its own source: a self-join) recomputes the groups its
change reaches at the new and the old version. Operators without a rule (OVER, an outer
self-join, a source on the padded side of two outer joins, an outer join on an aggregate's value)
refresh in full with their reason, EXPLAIN says so operator by operator, and INCREMENTAL STRICT
refuses them.
"""
from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import functions as F
from hypothesis import HealthCheck, given as examples, settings
from hypothesis import strategies as st

import mv
from bench.probe import reads_since
from bench.refresh import execution_marker
from mv import progress, refresh, writes
from mv.errors import MvError
from mv.query import describe, sql_string
from tests.view_sources import Sources, bag

VIEWS = {  # each view's query over {bids}, {auctions}, {asks}
    "joined": """SELECT b.id, b.price * 2 AS doubled, a.category FROM {bids} b JOIN {auctions} a
                 ON b.auction = a.id WHERE a.category <> 'junk' AND b.price > 10""",
    "unioned": "SELECT auction, price FROM {bids} UNION ALL SELECT auction, price FROM {asks} WHERE price < 50",
    "duplicates": "SELECT auction, category FROM {bids} b JOIN {auctions} a ON b.auction = a.id",
    "by_category": """SELECT a.category, count(*) AS n, sum(b.price) AS total, max(b.price) AS top
                      FROM {bids} b JOIN {auctions} a ON b.auction = a.id GROUP BY a.category""",
    "by_bucket": "SELECT price % 3 AS bucket, count(DISTINCT auction) AS auctions FROM {bids} GROUP BY price % 3",
}
GROUPED = {  # GROUP BY and DISTINCT over outer, semi and anti joins, HAVING, an aggregate over an aggregate
    "listed": """SELECT a.id, a.category, count(b.id) AS bids, max(b.price) AS top
                 FROM {auctions} a LEFT JOIN {bids} b ON b.auction = a.id GROUP BY a.id, a.category""",
    "padded": """SELECT a.category, count(*) AS n, sum(b.price) AS total
                 FROM {bids} b LEFT JOIN {auctions} a ON b.auction = a.id GROUP BY a.category""",
    "either": """SELECT coalesce(a.id, b.auction) AS auction, count(b.id) AS bids, count(a.id) AS listed
                 FROM {bids} b FULL JOIN {auctions} a ON b.auction = a.id GROUP BY coalesce(a.id, b.auction)""",
    "unsold": "SELECT a.category, count(*) AS n FROM {auctions} a LEFT ANTI JOIN {bids} b ON b.auction = a.id GROUP BY a.category",
    "distinct": "SELECT DISTINCT a.category, b.price > 15 AS high FROM {bids} b JOIN {auctions} a ON b.auction = a.id",
    "having": """SELECT a.category, count(*) AS n FROM {bids} b JOIN {auctions} a ON b.auction = a.id
                 GROUP BY a.category HAVING count(*) > 1""",
    "nested": """SELECT category, avg(top) AS average_top, count(*) AS n FROM (SELECT a.id, a.category, max(b.price) AS top
                 FROM {auctions} a JOIN {bids} b ON b.auction = a.id GROUP BY a.id, a.category) GROUP BY category""",
}
FLIPPED = {  # rows over outer, semi and anti joins: a match that comes or goes flips the other side's rows
    "unlisted": "SELECT b.id, b.price, a.category FROM {bids} b LEFT JOIN {auctions} a ON b.auction = a.id",
    "either_rows": """SELECT b.id, a.id AS listed, a.category FROM {bids} b FULL JOIN {auctions} a
                      ON b.auction = a.id AND b.price > 10""",
    "offered": "SELECT a.category, b.price FROM {bids} b RIGHT JOIN {auctions} a ON b.auction = a.id",
    "with_bids": "SELECT a.id, a.category FROM {auctions} a LEFT SEMI JOIN {bids} b ON b.auction = a.id",
    "without_bids": "SELECT a.id, a.category FROM {auctions} a LEFT ANTI JOIN {bids} b ON b.auction = a.id",
    "chained": """SELECT b.id, a.category, s.price AS ask FROM {bids} b LEFT JOIN {auctions} a ON b.auction = a.id
                  LEFT JOIN {asks} s ON s.auction = a.id""",
    "outer_union": """SELECT a.id, b.price FROM {auctions} a LEFT JOIN {bids} b ON b.auction = a.id
                      UNION ALL SELECT auction, price FROM {asks}""",
}
REGROUPED = {  # aggregates and DISTINCT below rows, self-joins: each read's touched groups, new and old
    "top_bids": """SELECT b.id, b.auction, b.price FROM {bids} b JOIN (SELECT auction, max(price) AS top FROM {bids}
                   GROUP BY auction) t ON b.auction = t.auction AND b.price = t.top""",
    "per_auction": """SELECT a.id, a.category, s.n, s.top FROM {auctions} a LEFT JOIN (SELECT auction, count(*) AS n,
                      max(price) AS top FROM {bids} GROUP BY auction) s ON s.auction = a.id""",
    "asked": "SELECT b.id, b.price FROM {bids} b JOIN (SELECT DISTINCT auction FROM {asks}) s ON b.auction = s.auction",
    "pairs": "SELECT x.id, y.id AS other FROM {bids} x JOIN {bids} y ON x.auction = y.auction AND x.id < y.id",
    "per_category": """SELECT s.category, s.n, c.asks FROM (SELECT a.category, count(*) AS n FROM {bids} b
                       JOIN {auctions} a ON b.auction = a.id GROUP BY a.category) s
                       JOIN (SELECT count(*) AS asks FROM {asks}) c ON true""",
    # a GROUP BY over an inner self-join (each read's term finds its groups), and rows over one
    "pair_counts": """SELECT x.auction, count(*) AS pairs, max(y.price - x.price) AS rise FROM {bids} x
                      JOIN {bids} y ON x.auction = y.auction AND x.id < y.id GROUP BY x.auction""",
    "above_pairs": """SELECT b.id, p.pairs FROM {bids} b JOIN (SELECT x.auction, count(*) AS pairs FROM {bids} x
                      JOIN {bids} y ON x.auction = y.auction AND x.id < y.id GROUP BY x.auction) p ON b.auction = p.auction""",
}
VIEWS.update(GROUPED)
VIEWS.update(FLIPPED)
VIEWS.update(REGROUPED)
# The views of the rounds below ("duplicates": the tests further down): rows, then groups.
SCENARIO_ROWS, SCENARIO_GROUPS = ("joined", "unioned"), ("by_category", "by_bucket")
# Where a refresh of rows can stop: after reading the changes, and after its one commit (it writes
# no late rows and keeps no open windows).
KILL_POINTS_OF_ROWS = ("changes_read", "committed")


# The three sources every view here reads: a fact, its dimension and a second feed.
TABLES = {"bids": "id INT, auction INT, price INT", "auctions": "id INT, category STRING",
          "asks": "id INT, auction INT, price INT"}


def sources(spark) -> Sources:
    """bids, auctions and asks, and views of VIEWS over them (INCREMENTAL by default, so AUTO's
    estimate never turns a small table's refresh into a full one: test_auto_... weighs it)."""
    return Sources(spark, "rv", TABLES, VIEWS)


@pytest.fixture
def tables(spark):
    made = sources(spark)
    yield made
    made.drop()


def refreshed(spark, view: str):
    return mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()


def last_version(spark, view: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY {view} LIMIT 1").first().version


def view_changes(spark, view: str) -> Counter:
    """The change types of the view's last commit, from its own change feed."""
    last = last_version(spark, view)
    return Counter(r[0] for r in spark.sql(
        f"SELECT _change_type FROM table_changes('{view}', {last}, {last})").collect())


ROUNDS = [  # (what happens, its statements)
    ("new bids and auctions", ["INSERT INTO {bids} VALUES (4, 2, 30), (5, 3, 8), (6, 9, 40), (7, 1, 12)",
                               "INSERT INTO {auctions} VALUES (9, 'toys')",
                               "INSERT INTO {asks} VALUES (3, 2, 20), (4, 2, 20)"]),
    ("prices updated across the filter, a bid and an ask deleted", [
        "UPDATE {bids} SET price = price + 5 WHERE id IN (1, 5)", "UPDATE {asks} SET price = 60 WHERE id = 3",
        "DELETE FROM {bids} WHERE id = 4", "DELETE FROM {asks} WHERE id = 4"]),
    ("categories renamed (one to junk), an auction deleted, a duplicate bid withdrawn", [
        "UPDATE {auctions} SET category = 'junk' WHERE id = 2", "UPDATE {auctions} SET category = 'games' WHERE id = 1",
        "DELETE FROM {auctions} WHERE id = 3", "DELETE FROM {bids} WHERE id = 7"]),
    ("both sides at once", ["INSERT INTO {auctions} VALUES (3, 'books'), (4, 'books')",
                            "INSERT INTO {bids} VALUES (8, 4, 99), (9, 3, 11)", "DELETE FROM {auctions} WHERE id = 9"]),
]


@pytest.mark.parametrize("kinds", [SCENARIO_ROWS, pytest.param(SCENARIO_GROUPS, marks=pytest.mark.slow)])
def test_filters_joins_and_unions_refresh_by_their_changes_and_equal_their_query(spark, tables, kinds):
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 1, 20), (3, 2, 15), (7, 1, 12)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games'), (3, 'books')")
    tables.run("INSERT INTO {asks} VALUES (1, 1, 5), (2, 3, 70)")
    views = {kind: tables.view(kind) for kind in kinds}
    for what in each_round_refreshed_incrementally_and_equal_to_its_query(spark, tables, views):
        if what == "new bids and auctions":  # only rows added: every view of rows appended them
            assert all(set(view_changes(spark, views[kind])) == {"insert"} for kind in views.keys() & set(SCENARIO_ROWS))


def each_round_refreshed_incrementally_and_equal_to_its_query(spark, tables, views: dict[str, str]):
    """Plays ROUNDS; after each, every view's REFRESH is incremental (NO_CHANGES: its sources did
    not move) and the view equals its query recomputed. Yields each round's name once checked."""
    for what, statements in ROUNDS:
        for statement in statements:
            tables.run(statement)
        for kind, view in views.items():
            outcome = refreshed(spark, view)
            assert (outcome.technique, outcome.reason in ("CHANGES_ONLY", "NO_CHANGES")) == ("incremental", True), \
                (what, kind, outcome.reason)
            tables.spark.sql(f"CREATE OR REPLACE TEMP VIEW rv_expected AS {tables.query(kind)}")
            assert bag(spark, view) == bag(spark, "rv_expected"), (what, kind)
        yield what


@pytest.mark.parametrize("kinds", [pytest.param(("padded", "nested"), marks=pytest.mark.slow),
                                   pytest.param(("listed", "either", "unsold", "distinct", "having"),
                                                marks=pytest.mark.slow)])
def test_groups_over_outer_and_anti_joins_having_and_nested_aggregates_refresh_by_their_changes(spark, tables, kinds):
    """The groups a change reaches are found by the query over the change, outer joins joined to the
    change's matches (matched and padded), HAVING dropped; those groups are recomputed."""
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 1, 20), (3, 2, 15), (7, 1, 12), (8, 5, 3)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games'), (3, 'books'), (6, 'toys')")
    views = {kind: tables.view(kind) for kind in kinds}
    for _ in each_round_refreshed_incrementally_and_equal_to_its_query(spark, tables, views):
        pass


@pytest.mark.parametrize("kinds", [pytest.param(("unlisted",), marks=[pytest.mark.slow, pytest.mark.compat]),  # Catalyst rewrites
                                   pytest.param(("either_rows", "offered", "with_bids", "without_bids", "chained", "outer_union"),
                                                marks=pytest.mark.slow)])
def test_rows_over_outer_semi_and_anti_joins_flip_as_matches_come_and_go(spark, tables, kinds):
    """A bid whose auction is deleted becomes padded with NULLs, and matched again when it comes
    back; an auction's first bid takes it out of an anti join and into a semi join. Each term adds
    the other side's rows whose match the change touches at the new version and takes them away at
    the old one; those that did not flip cancel."""
    seeded_then_each_round_checked(spark, tables, kinds)


def seeded_then_each_round_checked(spark, tables, kinds: tuple[str, ...]) -> None:
    """Bids, auctions (one listed twice) and asks, views of `kinds` over them, then ROUNDS played
    with every view checked after each (each_round_refreshed_incrementally_and_equal_to_its_query)."""
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 1, 20), (3, 2, 15), (7, 1, 12), (8, 5, 3)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games'), (3, 'books'), (6, 'toys'), (6, 'toys')")
    tables.run("INSERT INTO {asks} VALUES (1, 1, 5), (2, 3, 70)")
    views = {kind: tables.view(kind) for kind in kinds}
    for _ in each_round_refreshed_incrementally_and_equal_to_its_query(spark, tables, views):
        pass


# In make test-slow (a regroup term is about 5 s a refresh here: make test's 20 minutes; make test
# has tests/test_create_atomic.py's windowed one); top_bids and per_auction in make test-compat too
# (Catalyst copies of aggregates, the flips over them).
@pytest.mark.parametrize("kinds", [pytest.param(("top_bids", "per_auction"), marks=[pytest.mark.slow, pytest.mark.compat]),
                                   pytest.param(("asked", "pairs", "per_category", "pair_counts", "above_pairs"),
                                                marks=pytest.mark.slow)])
def test_aggregates_distinct_and_self_joins_below_rows_recompute_their_touched_groups(spark, tables, kinds):
    """A bid deleted, repriced or added moves its auction's maximum (top_bids joins the bids to it:
    a self-join, each side a read of its own); an auction's last bid going pads it with NULLs
    (per_auction: the aggregate on an outer join's padded side also flips; pair_counts groups a
    self-join, above_pairs joins the bids to that). Each changed read's
    term runs the query at the new version (+) and at the old (-) with its aggregates kept to the
    groups the change reaches; untouched groups cancel."""
    seeded_then_each_round_checked(spark, tables, kinds)


def test_a_group_key_renamed_to_another_source_columns_name_is_found_by_its_values(spark, tables):
    """The key `auction` is the price: the touched groups are the changed rows' prices, not their auctions."""
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 2, 20)")
    query = "SELECT price AS auction, count(DISTINCT id) AS n FROM {bids} GROUP BY price".format(**tables.names)
    view = tables.view("renamed", query=query)
    tables.run("INSERT INTO {bids} VALUES (3, 10, 20)")
    assert refreshed(spark, view).technique == "incremental"
    assert bag(spark, view) == Counter({(10, 1): 1, (20, 2): 1})


def test_a_change_that_leaves_a_row_as_it_was_does_not_touch_it(spark, tables):
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 1, 20)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books')")
    view = tables.view("duplicates")  # (auction, category): both bids give (1, 'books')
    tables.run("UPDATE {bids} SET price = 25 WHERE id = 2")  # no column of the view changes
    assert refreshed(spark, view).rows_deleted == 0
    assert view_changes(spark, view) == Counter()
    tables.run("DELETE FROM {bids} WHERE id = 1")  # one of two copies goes
    assert refreshed(spark, view).technique == "incremental"
    assert bag(spark, view) == Counter({(1, "books"): 1})


def test_a_small_append_adds_one_file_to_the_view_whatever_the_files_of_its_change(spark, tables):
    """An append of fewer than writes.ROWS_PER_FILE rows is written as one file, as a merge of as
    many rows is, not one per file its change added."""
    tables.run("INSERT INTO {auctions} VALUES (1, 'books')")
    view = tables.view("joined")
    before = spark.sql(f"DESCRIBE DETAIL {view}").first().numFiles
    tables.run("INSERT INTO {bids} SELECT /*+ REPARTITION(3) */ id, 1, id FROM range(10, 40)")  # three files

    assert refreshed(spark, view).technique == "incremental"
    assert spark.sql(f"DESCRIBE DETAIL {view}").first().numFiles == before + 1
    assert bag(spark, view) == bag(spark, f"({tables.query('joined')})")


def test_a_retraction_rewrites_the_small_files_it_reaches_and_leaves_the_others(spark, tables):
    """The commit classifies only the view rows the refresh found its retraction reaches
    (RefreshCommit.reachedRows): a small file holding one is copied but for it, by row index, and
    the files holding none are not touched; the change feed shows the retraction alone."""
    tables.run("INSERT INTO {auctions} VALUES (1, 'books')")
    tables.run("INSERT INTO {bids} VALUES (1, 1, 20), (2, 1, 30)")
    view = tables.view("joined")                                  # a file of bids 1 and 2
    for rows in ("(3, 1, 40), (4, 1, 50)", "(5, 1, 60)"):        # a file per append: 3 and 4, then 5
        tables.run(f"INSERT INTO {{bids}} VALUES {rows}")
        assert refreshed(spark, view).technique == "incremental"
    files = {r.id: r.f for r in spark.sql(f"SELECT id, input_file_name() AS f FROM {view}").collect()}
    tables.run("DELETE FROM {bids} WHERE id = 3")

    outcome = refreshed(spark, view)
    assert (outcome.technique, outcome.rows_deleted, outcome.rows_inserted) == ("incremental", 1, 0)
    metrics = spark.sql(f"DESCRIBE HISTORY {view} LIMIT 1").first().operationMetrics
    assert (metrics["numTargetFilesRemoved"], metrics["numTargetRowsCopied"], metrics["numTargetFilesAdded"]) == \
        ("1", "1", "1")                                           # bid 3's file, bid 4 copied
    after = {r.id: r.f for r in spark.sql(f"SELECT id, input_file_name() AS f FROM {view}").collect()}
    assert {i: after[i] for i in (1, 2, 5)} == {i: files[i] for i in (1, 2, 5)} and after[4] != files[4]
    assert bag(spark, view) == Counter({(1, 40, "books"): 1, (2, 60, "books"): 1, (4, 100, "books"): 1,
                                        (5, 120, "books"): 1})
    assert view_changes(spark, view) == Counter({"delete": 1})


def test_the_rows_a_change_retracts_bound_the_view_files_its_merge_reads(spark):
    """writes.value_range: every retracted row meets the condition, files of other values are
    skipped by Delta's statistics, floating point is left out, and no retraction reads nothing."""
    losing = spark.sql("""SELECT * FROM VALUES
        (7L, 'a', TIMESTAMP'2026-03-29 01:30:00', TIMESTAMP_NTZ'2026-01-01 00:00:00', DATE'2026-01-02',
         CAST(1.50 AS DECIMAL(5, 2)), 0.5D, CAST(NULL AS INT)),
        (9L, 'a', TIMESTAMP'2026-03-29 03:30:00', TIMESTAMP_NTZ'2026-01-01 00:00:01', DATE'2026-01-03',
         CAST(2.25 AS DECIMAL(5, 2)), CAST('NaN' AS DOUBLE), 3)
        AS t(id, name, at, local, day, amount, ratio, maybe)""") \
        .withColumn("name", F.when(F.col("id") == 7, F.lit("o'k\\")).otherwise(F.col("name")))  # a quote, a backslash
    condition = writes.value_range(losing)
    assert "`ratio`" not in condition and "`maybe` IS NULL OR" in condition
    assert losing.where(condition).count() == 2
    spark.sql("DROP TABLE IF EXISTS rv_bounded")
    losing.coalesce(1).write.format("delta").saveAsTable("rv_bounded")
    losing.withColumn("id", F.col("id") + 100).coalesce(1) \
        .write.format("delta").mode("append").saveAsTable("rv_bounded")  # a file of other ids
    files = spark.sql(f"SELECT files FROM mv_scan_bytes({sql_string(f'SELECT * FROM rv_bounded WHERE {condition}')})")
    assert files.first().files == 1
    assert writes.value_range(losing.limit(0)) == "FALSE"
    spark.sql("DROP TABLE rv_bounded")


def test_a_change_that_adds_and_retracts_reads_the_table_it_joins_once(spark):
    """Both sides of a dimension's change go through the join in one term, each row's sign carried
    to the output (DeltaRules.signed): the fact table it joins is scanned once, not once a side."""
    from test_local_merge import rows_out_of
    spark.sql("DROP TABLE IF EXISTS rv_facts")
    spark.sql("DROP TABLE IF EXISTS rv_kinds")
    spark.sql("CREATE TABLE rv_facts USING delta AS SELECT id, id % 50 AS kind, id * 3 AS amount FROM range(20000)")
    spark.sql("CREATE TABLE rv_kinds USING delta AS SELECT id, concat('k', id) AS label FROM range(50)")
    query = "SELECT f.id, f.amount, k.label FROM rv_facts f JOIN rv_kinds k ON f.kind = k.id WHERE f.amount % 2 = 0"
    view = "rv_labelled"
    mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} REFRESH POLICY INCREMENTAL AS {query}").collect()
    spark.sql("UPDATE rv_kinds SET label = 'renamed' WHERE id IN (3, 7)")   # a pre- and a post-image each

    read = rows_out_of(spark, f"REFRESH MATERIALIZED VIEW {view}",
                       lambda node: node.name().startswith("Scan parquet") and node.name().endswith(".rv_facts"))

    assert 0 < sum(read) <= 20000, read      # twice 20,000 with a term for each sign
    assert bag(spark, view) == bag(spark, f"({query})")
    mv.sql(spark, f"DROP MATERIALIZED VIEW {view}").collect()
    spark.sql("DROP TABLE rv_facts")
    spark.sql("DROP TABLE rv_kinds")


def test_a_change_is_bounded_on_the_columns_an_equality_joins(spark, tables):
    """mv_describe lists each read's columns that an equality of two columns names, through a
    rename and in a WHERE over a comma join; a column compared with an expression is not one:
    Spark infers no bounds through it."""
    bids, auctions, asks = (tables.names[t] for t in ("bids", "auctions", "asks"))
    info = describe(spark, f"SELECT b.id, a.category FROM (SELECT auction AS lot, id, price FROM {bids}) b, "
                           f"{auctions} a, {asks} s WHERE b.lot = a.id AND s.price + 1 = b.price")
    assert [read.equated for read in info.reads] == [("auction",), ("id",), ()]


@pytest.mark.parametrize("query, read", [
    ("SELECT o.id, o.price, l.label FROM rv_offers o JOIN rv_lots l ON o.lot = l.id",
     # the offers: their change and, joined to the new lot, the file of lot 1000; the lots: their
     # change, and none of the old three joined to the new offer
     {"rv_offers": 1 + 1, "rv_lots": 1 + 0}),
    ("SELECT l.id, l.label, o.price FROM rv_lots l LEFT JOIN rv_offers o ON o.lot = l.id",
     # the new offer also flips lot 1000's padded row, at each version: the lots' file of lot 1000
     # each time; the offers a flip's anti-join reads are whole (Spark infers no bounds across it)
     {"rv_offers": 1 + 0 + 4 + 3, "rv_lots": 1 + 1 + 1 + 1}),
])
def test_a_change_reads_only_the_files_of_the_table_it_joins_that_can_hold_its_keys(spark, query, read):
    """Each term's change is kept to the bounds of its own rows (row_refresh._value_bounds), which
    Spark carries through the join's equality to the other side, whose files outside them Delta
    skips: a new lot and its first offer read the other table's file of that lot, none of its
    three older files."""
    for table in ("rv_lots", "rv_offers"):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql("CREATE TABLE rv_lots (id BIGINT, label STRING) USING delta")
    spark.sql("CREATE TABLE rv_offers (id BIGINT, lot BIGINT, price BIGINT) USING delta")
    for first in (0, 100, 200):  # a file each, its own lots
        spark.sql(f"INSERT INTO rv_lots SELECT id, concat('lot ', id) FROM range({first}, {first + 100}, 1, 1)")
        spark.sql(f"INSERT INTO rv_offers SELECT id, id, id % 50 FROM range({first}, {first + 100}, 1, 1)")
    view = "rv_offered"
    mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} REFRESH POLICY INCREMENTAL AS {query}").collect()
    spark.sql("INSERT INTO rv_lots VALUES (1000, 'new lot')")
    spark.sql("INSERT INTO rv_offers VALUES (5000, 1000, 42)")
    marker = execution_marker(spark)

    done = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()

    assert done.technique == "incremental"
    files = reads_since(spark, marker)
    assert {t: files[t]["files"] for t in read} == read, files
    assert bag(spark, view) == bag(spark, f"({query})")
    mv.sql(spark, f"DROP MATERIALIZED VIEW {view}").collect()
    for table in ("rv_lots", "rv_offers"):
        spark.sql(f"DROP TABLE {table}")


@pytest.mark.parametrize("query, reason", [
    ("SELECT a.id, s.price FROM {auctions} a LEFT JOIN (SELECT b.auction, k.price FROM {bids} b LEFT JOIN {asks} k "
     "ON k.id = b.id) s ON s.auction = a.id", "STACKED_OUTER_JOINS"),
    ("SELECT id, rank() OVER (PARTITION BY auction ORDER BY price) AS r FROM {bids}", "OVER_WITHOUT_RULE"),
    ("SELECT x.id, y.id AS other FROM {bids} x LEFT JOIN {bids} y ON x.auction = y.auction", "SELF_JOIN"),
    ("SELECT a.id, s.n FROM {auctions} a LEFT JOIN (SELECT auction, count(*) AS n FROM {bids} GROUP BY auction) s "
     "ON s.auction = a.id AND s.n > 1", "OUTER_JOIN_ON_AGGREGATE_VALUE"),
    ("SELECT top DIV 10 AS bucket, count(*) AS n FROM (SELECT auction, max(price) AS top FROM {bids} "
     "GROUP BY auction) GROUP BY top DIV 10", "GROUP_BY_AGGREGATE_VALUE"),
    ("SELECT id, price, current_date() AS seen FROM {bids}", "READS_CURRENT_TIME"),  # old rows would keep old days
])
def test_an_operator_without_a_rule_refreshes_in_full_and_says_which(spark, tables, query, reason):
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books')")
    text = query.format(**tables.names)
    view = tables.view("other", "", query=text)
    tables.run("INSERT INTO {bids} VALUES (2, 1, 20)")
    outcome = refreshed(spark, view)
    assert (outcome.technique, reason in outcome.reason) == ("full", True)
    explained = mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect()
    assert any(r[0] == "operator" and r[1].split(": ")[-1].split(" at ")[0] == reason for r in explained)
    with pytest.raises(MvError) as refused:
        mv.sql(spark, f"CREATE MATERIALIZED VIEW rv_strict REFRESH POLICY INCREMENTAL STRICT AS {text}")
    assert refused.value.error_class == "MV_NOT_INCREMENTAL" and reason in str(refused.value)


def test_explain_lists_each_operator_with_its_rule(spark, tables):
    view = tables.view("joined")
    operators = [r[1] for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect() if r[0] == "operator"]
    assert any("Join INNER: dL JOIN R(new) + L(old) JOIN dR" in o for o in operators)
    assert any(o.startswith("  ") and "Filter: rows pass through" in o for o in operators)
    assert sum("its change feed, signed" in o for o in operators) == 2


STEPS = st.lists(st.sampled_from([
    "INSERT INTO {bids} VALUES ({k}, {a}, {p})", "INSERT INTO {auctions} VALUES ({a}, 'c{p}')",
    "INSERT INTO {asks} VALUES ({k}, {a}, {p})", "UPDATE {bids} SET price = {p} WHERE id % 3 = {k} % 3",
    "UPDATE {auctions} SET category = 'junk' WHERE id = {a}", "DELETE FROM {bids} WHERE auction = {a}",
    "DELETE FROM {auctions} WHERE id = {a}", "DELETE FROM {asks} WHERE id % 2 = {k} % 2",
]).flatmap(lambda s: st.tuples(st.just(s), st.integers(0, 9), st.integers(1, 3), st.integers(1, 60))),
    min_size=1, max_size=4)


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@examples(rounds=st.lists(STEPS, min_size=2, max_size=2))
def test_random_changes_on_both_sides_keep_every_view_its_query(spark, rounds):
    tables = sources(spark)
    try:
        tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 2, 20), (3, 1, 10)")
        tables.run("INSERT INTO {auctions} VALUES (1, 'a'), (2, 'b'), (2, 'b')")  # a duplicate dimension row
        tables.run("INSERT INTO {asks} VALUES (1, 3, 5)")
        views = {kind: tables.view(kind) for kind in ("joined", "unioned", "duplicates", "by_category", "unlisted",
                                                      "without_bids", "top_bids", "per_auction")}
        for steps in rounds:
            for statement, k, a, p in steps:
                tables.run(statement.replace("{k}", str(k)).replace("{a}", str(a)).replace("{p}", str(p)))
            for kind, view in views.items():
                assert refreshed(spark, view).technique == "incremental"
                spark.sql(f"CREATE OR REPLACE TEMP VIEW rv_expected AS {tables.query(kind)}")
                assert bag(spark, view) == bag(spark, "rv_expected"), (kind, rounds)
    finally:
        tables.drop()


def history(spark, view: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT refresh_id, count(*) FROM mv_refresh_history WHERE view = '{view}' GROUP BY refresh_id").collect())


@pytest.mark.slow
def test_a_refresh_stopped_at_each_kill_point_then_run_again_applies_its_change_once(spark, tables):
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 1, 20), (3, 2, 15)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games')")
    views = {kind: tables.view(kind) for kind in ("joined", "unioned")}
    for n, step in enumerate(KILL_POINTS_OF_ROWS, start=1):
        tables.run(f"INSERT INTO {{bids}} VALUES ({10 + n}, 2, {n}), ({20 + n}, 1, 30)")
        tables.run(f"UPDATE {{auctions}} SET category = 'c{n}' WHERE id = {n % 2 + 1}")
        tables.run(f"DELETE FROM {{bids}} WHERE id = {n}")
        tables.run(f"INSERT INTO {{asks}} VALUES ({n}, 1, {n})")
        for kind, view in views.items():
            with pytest.raises(progress.Crash), progress.crashing_at(step):
                refresh.refresh(spark, view)
            assert refreshed(spark, view).technique == "incremental"
            spark.sql(f"CREATE OR REPLACE TEMP VIEW rv_expected AS {tables.query(kind)}")
            assert bag(spark, view) == bag(spark, "rv_expected"), (step, kind)
            assert [count for _, count in history(spark, view)] == [1] * (n + 1), (step, kind)


def test_a_dimension_dropped_and_created_again_refreshes_in_full(spark, tables):
    tables.run("INSERT INTO {bids} VALUES (1, 1, 10), (2, 2, 20)")
    tables.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games')")
    view = tables.view("joined", "")
    tables.run("DROP TABLE {auctions}")
    tables.run("CREATE TABLE {auctions} (id INT, category STRING) USING delta")
    tables.run("INSERT INTO {auctions} VALUES (2, 'toys')")
    outcome = refreshed(spark, view)
    assert (outcome.technique, outcome.reason) == ("full", "SOURCE_REPLACED")
    assert bag(spark, view) == Counter({(2, 40, "toys"): 1})


def test_auto_weighs_a_join_view_and_refreshes_a_dimension_change_in_full_when_that_costs_less(spark, tables):
    tables.run("INSERT INTO {bids} VALUES " + ", ".join(f"({i}, {i % 3}, {i})" for i in range(200)))
    tables.run("INSERT INTO {auctions} VALUES (0, 'books'), (1, 'games'), (2, 'toys')")
    view = tables.view("joined", "")  # AUTO
    tables.run("INSERT INTO {bids} VALUES (1000, 1, 50)")  # the fact grows: its term reads the auctions only
    assert refreshed(spark, view).technique == "incremental"
    tables.run("UPDATE {auctions} SET category = 'junk' WHERE id = 1")  # its term joins every bid
    explained = dict(mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect())
    assert "full is cheaper" in explained["estimate"], explained
    outcome = refreshed(spark, view)
    assert (outcome.technique, outcome.reason) == ("full", "FULL_CHEAPER")
    spark.sql(f"CREATE OR REPLACE TEMP VIEW rv_expected AS {tables.query('joined')}")
    assert bag(spark, view) == bag(spark, "rv_expected")


# Nexmark q5's shape: each item's bids per HOP window, joined to each window's most bids on the bounds.
HOT_ITEMS = """SELECT c.item, c.n, c.window_start FROM (SELECT item, count(*) AS n, window_start, window_end
      FROM HOP(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
      GROUP BY item, window_start, window_end) c
    JOIN (SELECT max(n) AS top, window_start, window_end FROM (SELECT count(*) AS n, window_start, window_end
          FROM HOP(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
          GROUP BY item, window_start, window_end) GROUP BY window_start, window_end) m
    ON {on} AND c.n >= m.top"""


@pytest.mark.slow   # regroup terms, about 40 s here: with the other regroup tests in make test-slow
def test_windows_joined_on_their_bounds_read_each_other_only_around_the_change(spark):
    """Each read's regroup term recomputes the windows its change touches; the other read joins only
    those windows (equal bounds), so it too is read only around the change's times: a change at the
    end of time leaves the files of earlier days unread on both sides."""
    spark.sql("DROP TABLE IF EXISTS rv_hot")
    spark.sql("CREATE TABLE rv_hot (item STRING, ts TIMESTAMP, note STRING) USING delta")
    spark.sql("INSERT INTO rv_hot SELECT concat('i', id % 7), timestamp_seconds(1704067200 + id * 20), "
              "repeat(md5(CAST(id AS STRING)), 8) FROM range(3000)")   # a day of bids, in one file
    day = spark.sql("DESCRIBE DETAIL rv_hot").first().sizeInBytes
    spark.sql("INSERT INTO rv_hot VALUES ('i1', TIMESTAMP'2024-01-05 10:00:00', ''), "
              "('i2', TIMESTAMP'2024-01-05 10:01:00', '')")   # days later
    query = HOT_ITEMS.format(bids="rv_hot", on="c.window_start = m.window_start AND c.window_end = m.window_end")
    other_keys = HOT_ITEMS.format(bids="rv_hot", on="c.n = m.top")
    assert [r.partners for r in describe(spark, query).reads] == [(1,), (0,)]
    assert [r.partners for r in describe(spark, other_keys).reads] == [(), ()]   # not joined on the windows
    try:
        view = "rv_hot_items"
        mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} REFRESH POLICY INCREMENTAL AS {query}")
        spark.sql("INSERT INTO rv_hot VALUES ('i2', TIMESTAMP'2024-01-05 10:02:00', ''), "
                  "('i3', TIMESTAMP'2024-01-05 10:03:00', '')")
        assert refresh.estimated(spark, view).incremental_bytes < day   # no term reads the first day's file
        assert refreshed(spark, view).technique == "incremental"
        assert bag(spark, view) == Counter(tuple(r) for r in spark.sql(query).collect())
    finally:
        mv.sql(spark, "DROP MATERIALIZED VIEW IF EXISTS rv_hot_items")
        spark.sql("DROP TABLE IF EXISTS rv_hot")
