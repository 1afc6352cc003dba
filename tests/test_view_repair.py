"""A view whose rows are no longer its query is repaired by the next full refresh.

Given a view whose table was written around the read-only rule (an append, delete or
update by another engine), when REFRESH ... FULL runs, or a plain REFRESH that notices the
write (VIEW_CHANGED_OUTSIDE), then the view is exactly its query again, and its change feed shows
only the rows that changed. Final windows of an EMIT ON WINDOW CLOSE view are repaired too, without
the late rows (<view>__late keeps them out). Given a view over a SQL view, when that view gets
another definition, then the next REFRESH is full (QUERY_DEFINITION_CHANGED), never NO_CHANGES.
"""
from __future__ import annotations

import pytest

from tests.outside_writes import committed_outside
from tests.test_mv_scenarios import COUNTS, ON_CLOSE, bid, full_query, refresh, rows, values


def location(spark, view: str) -> str:
    return spark.sql(f"DESCRIBE DETAIL {view}").first().location


def rewritten(spark, view: str, select: str, where: str = "true") -> None:
    """The view's table overwritten, as another engine would, with its rows `where` holds, as `select` gives them."""
    path = location(spark, view)
    committed_outside(spark, path, rows=spark.sql(f"SELECT {select} FROM delta.`{path}` WHERE {where}"), replace=True)


def written_around_the_rule(spark, view: str) -> None:
    """Writes into the view's files, as another engine would: no rule sees them. Item a's row
    appended again and once more an hour later, b's row deleted, c's changed; d's untouched."""
    a = spark.table(view).where("item = 'a'")
    committed_outside(spark, location(spark, view), rows=a.unionByName(a.selectExpr(
        "window_start + INTERVAL 1 HOUR AS window_start", "window_end + INTERVAL 1 HOUR AS window_end", "item", "n",
        "total")))
    rewritten(spark, view, "window_start, window_end, item, IF(item = 'c', n + 10, n) AS n, total", "item != 'b'")


@pytest.mark.parametrize("statement", ["REFRESH FULL", "REFRESH"])
def test_a_view_written_around_the_rule_is_its_query_after_the_refresh(spark, statement):
    bids, view = f"repair_bids_{len(statement)}", f"repair_{len(statement)}"
    spark.sql(f"CREATE TABLE {bids} (id INT, item STRING, ts TIMESTAMP, price INT) USING delta")
    try:
        four = values(bid(1, "a", "00:01", 4), bid(2, "b", "00:02", 7), bid(3, "c", "00:12", 1), bid(4, "d", "00:13", 2))
        spark.sql(f"INSERT INTO {bids} VALUES {four}")
        spark.sql(f"CREATE MATERIALIZED VIEW {view} AS {COUNTS.format(bids=bids)}")
        expected = full_query(spark, COUNTS.format(bids=bids))
        written_around_the_rule(spark, view)
        repairing = spark.sql(f"SELECT version FROM mv_delta_tables('{view}')").first().version + 1
        assert rows(spark, view) != expected

        outcome = refresh(spark, view, full=statement == "REFRESH FULL")

        assert (outcome.technique, outcome.reason) == (
            "full", "REQUESTED_FULL" if statement == "REFRESH FULL" else "VIEW_CHANGED_OUTSIDE")
        assert rows(spark, view) == expected
        # The refresh's change feed holds only what the writes changed: d's row is not deleted and inserted again.
        changed = sorted(tuple(r) for r in spark.sql(
            f"SELECT item, _change_type, n FROM table_changes('{view}', {repairing}, {repairing})").collect())
        assert changed == [("a", "delete", 1), ("a", "delete", 1), ("a", "delete", 1), ("a", "insert", 1),
                           ("b", "insert", 1), ("c", "delete", 11), ("c", "insert", 1)]
    finally:
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}")
        spark.sql(f"DROP TABLE IF EXISTS {bids}")


def test_a_final_window_changed_outside_is_recomputed_without_its_late_rows(spark):
    bids = "repair_late_bids"
    spark.sql(f"CREATE TABLE {bids} (id INT, item STRING, ts TIMESTAMP, price INT) USING delta")
    try:
        spark.sql(f"INSERT INTO {bids} VALUES {values(bid(1, 'a', '00:01', 4), bid(2, 'b', '00:21', 7))}")
        spark.sql(f"CREATE MATERIALIZED VIEW repair_late {ON_CLOSE} AS {COUNTS.format(bids=bids)}")
        spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2))}")
        assert refresh(spark, "repair_late").late_rows == 1  # watermark 00:16: [00:00, 00:10) is final
        rewritten(spark, "repair_late", "window_start, window_end, item, IF(item = 'a', 7, n) AS n, total")

        outcome = refresh(spark, "repair_late")

        assert outcome.reason == "VIEW_CHANGED_OUTSIDE"
        on_time = f"(SELECT * FROM {bids} WHERE id NOT IN (SELECT id FROM repair_late__late))"
        closed = f"SELECT * FROM ({COUNTS.format(bids=on_time)}) WHERE window_end <= TIMESTAMP'2024-01-01 00:16:00'"
        assert rows(spark, "repair_late") == full_query(spark, closed) == [("00:00", "00:10", "a", 1, 4)]
    finally:
        spark.sql("DROP MATERIALIZED VIEW IF EXISTS repair_late")
        spark.sql(f"DROP TABLE IF EXISTS {bids}")


@pytest.mark.parametrize("kind", ["GLOBAL TEMPORARY VIEW", "VIEW"])
def test_a_view_over_a_sql_view_follows_its_new_definition(spark, kind):
    bids, sv = f"sv_bids_{kind[0]}", ("global_temp." if kind.startswith("GLOBAL") else "") + f"sv_{kind[0]}"
    spark.sql(f"CREATE TABLE {bids} (id INT, item STRING, ts TIMESTAMP, price INT) USING delta")
    try:
        spark.sql(f"INSERT INTO {bids} VALUES {values(bid(1, 'a', '00:01', 4), bid(2, 'b', '00:02', 7))}")
        spark.sql(f"CREATE {kind} {sv.split('.')[-1]} AS SELECT * FROM {bids} WHERE price > 1")
        query = COUNTS.format(bids=sv)
        spark.sql(f"CREATE MATERIALIZED VIEW over_{kind[0]} AS {query}")
        spark.sql(f"CREATE OR REPLACE {kind} {sv.split('.')[-1]} AS SELECT * FROM {bids} WHERE price > 5")

        outcome = refresh(spark, f"over_{kind[0]}")

        assert (outcome.technique, outcome.reason) == ("full", "QUERY_DEFINITION_CHANGED")
        assert rows(spark, f"over_{kind[0]}") == full_query(spark, query) == [("00:00", "00:10", "b", 1, 7)]
        assert refresh(spark, f"over_{kind[0]}").reason == "NO_CHANGES"
    finally:
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS over_{kind[0]}")
        spark.sql(f"DROP VIEW IF EXISTS {sv}")
        spark.sql(f"DROP TABLE IF EXISTS {bids}")
