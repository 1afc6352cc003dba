"""Windows over joins and unions: grouped windowed views whose groups the change finds.

Given a TUMBLE aggregate over bids joined to their auctions (the join outside the window), a HOP
over a join (the join inside it) and a TUMBLE over two feeds' UNION ALL, when bids, auctions and
asks get inserts, updates and deletes (a category renamed reaches every window of its auction),
then every REFRESH is incremental and the view is exactly its query recomputed. With a
WATERMARK (late rows, GRACE, EMIT ON WINDOW CLOSE) over a window of one source's own time column,
every REFRESH is incremental too and the view is what a full refresh of the same definition makes
of it (final windows kept, late bids in the late table, closed windows written once); over a
window of a join's own rows such a view refreshes in full, and says why.
"""
from __future__ import annotations

import pytest

import mv
from bench.refresh import _executions_since, execution_marker
from mv import watermark
from tests.view_sources import Sources, bag

VIEWS = {  # each view's query over {bids}, {auctions}, {asks}
    "category_per_minute": """
        SELECT window_start, window_end, a.category, count(*) AS n, sum(b.price) AS total
        FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '1' MINUTE) b JOIN {auctions} a ON b.auction = a.id
        GROUP BY window_start, window_end, a.category""",
    "top_of_joined": """
        SELECT window_start, window_end, category, max(price) AS top
        FROM HOP(TABLE(SELECT b.ts, b.price, a.category FROM {bids} b JOIN {auctions} a ON b.auction = a.id),
                 DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTES)
        GROUP BY window_start, window_end, category""",
    "both_feeds": """
        SELECT window_start, window_end, count(*) AS n
        FROM TUMBLE(TABLE(SELECT ts FROM {bids} UNION ALL SELECT ts FROM {asks}), DESCRIPTOR(ts), INTERVAL '1' MINUTE)
        GROUP BY window_start, window_end""",
}

ROUNDS = [  # (what happens, its statements)
    ("new bids in new and old windows, a new auction", [
        "INSERT INTO {bids} VALUES (4, 2, 30, TIMESTAMP'2024-01-01 10:05:10'), (5, 3, 8, TIMESTAMP'2024-01-01 10:00:40')",
        "INSERT INTO {auctions} VALUES (3, 'toys')", "INSERT INTO {asks} VALUES (2, TIMESTAMP'2024-01-01 10:01:00')"]),
    ("a price updated, a bid moved to another minute, a bid and an ask deleted", [
        "UPDATE {bids} SET price = 99 WHERE id = 1", "UPDATE {bids} SET ts = TIMESTAMP'2024-01-01 10:03:30' WHERE id = 2",
        "DELETE FROM {bids} WHERE id = 3", "DELETE FROM {asks} WHERE id = 1"]),
    ("a category renamed, an auction deleted", [
        "UPDATE {auctions} SET category = 'games' WHERE id = 1", "DELETE FROM {auctions} WHERE id = 3"]),
]


TABLES = {"bids": "id INT, auction INT, price INT, ts TIMESTAMP", "auctions": "id INT, category STRING",
          "asks": "id INT, ts TIMESTAMP"}


@pytest.fixture
def joined(spark):
    """bids (with a time), auctions and asks with a few rows, and views of VIEWS over them."""
    made = Sources(spark, "wj", TABLES, VIEWS)
    made.run("INSERT INTO {bids} VALUES (1, 1, 10, TIMESTAMP'2024-01-01 10:00:05'), "
             "(2, 1, 20, TIMESTAMP'2024-01-01 10:00:50'), (3, 2, 15, TIMESTAMP'2024-01-01 10:02:00')")
    made.run("INSERT INTO {auctions} VALUES (1, 'books'), (2, 'games')")
    made.run("INSERT INTO {asks} VALUES (1, TIMESTAMP'2024-01-01 10:00:30')")
    yield made
    made.drop()


@pytest.mark.parametrize("kinds", [("category_per_minute",),
                                   pytest.param(("top_of_joined", "both_feeds"), marks=pytest.mark.slow)])
def test_windows_over_joins_and_unions_refresh_by_their_groups_and_equal_their_query(spark, joined, kinds):
    views = {kind: joined.view(kind) for kind in kinds}
    for what, statements in ROUNDS:
        for statement in statements:
            joined.run(statement)
        for kind, view in views.items():
            outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
            assert (outcome.technique, outcome.reason in ("CHANGES_ONLY", "NO_CHANGES")) == ("incremental", True), \
                (what, kind, outcome.reason)
            spark.sql(f"CREATE OR REPLACE TEMP VIEW wj_expected AS {joined.query(kind)}")
            assert bag(spark, view) == bag(spark, "wj_expected"), (what, kind)


def test_explain_shows_the_window_over_a_join_kept_by_its_groups(spark, joined):
    view = joined.view("category_per_minute")
    operators = [r[1] for r in mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {view}").collect() if r[0] == "operator"]
    assert any("Window TUMBLE: each changed row's windows" in o for o in operators), operators


WATERMARKED_ROUNDS = [  # (what happens, its statements) under a watermark 1 minute behind the latest bid
    ("a bid at 10:05:10 moves the watermark to 10:04:10; a late bid in a final window; a new auction", [
        "INSERT INTO {bids} VALUES (4, 2, 30, TIMESTAMP'2024-01-01 10:05:10'), (5, 3, 8, TIMESTAMP'2024-01-01 10:00:40')",
        "INSERT INTO {auctions} VALUES (3, 'toys')"]),
    ("a price updated, a bid moved into a closed window, a bid deleted", [
        "UPDATE {bids} SET price = 99 WHERE id = 4", "UPDATE {bids} SET ts = TIMESTAMP'2024-01-01 10:03:30' WHERE id = 2",
        "DELETE FROM {bids} WHERE id = 3"]),
    ("a category renamed (its final windows keep theirs), an auction deleted, the watermark to 10:08", [
        "UPDATE {auctions} SET category = 'games' WHERE id = 1", "DELETE FROM {auctions} WHERE id = 3",
        "INSERT INTO {bids} VALUES (6, 2, 5, TIMESTAMP'2024-01-01 10:09:00')"]),
    ("nothing but the sources' own rows: no change reaches a window", [
        "INSERT INTO {auctions} VALUES (4, 'music')"]),
    ("bids after the watermark only: no closed window touched, [10:09, 10:10) closed by them", [
        "INSERT INTO {bids} VALUES (7, 2, 40, TIMESTAMP'2024-01-01 10:10:30'), (8, 1, 12, TIMESTAMP'2024-01-01 10:11:10')"]),
]


@pytest.mark.parametrize("clauses, late_bids", [  # late: the changes of bids in final windows
    ("WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE GRACE INTERVAL '2' MINUTES", [2]),
    ("WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE", [2, 2, 3, 5])])
def test_a_watermark_on_windows_over_a_join_is_kept_by_their_groups_as_a_full_refresh_keeps_it(
        spark, joined, clauses, late_bids):
    view = joined.view("category_per_minute", f"{clauses} REFRESH POLICY INCREMENTAL")
    twin = joined.view("category_per_minute", f"{clauses} REFRESH POLICY FULL")
    late = 0
    for what, statements in WATERMARKED_ROUNDS:
        for statement in statements:
            joined.run(statement)
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
        mv.sql(spark, f"REFRESH MATERIALIZED VIEW {twin}").collect()
        assert (outcome.technique, outcome.reason in ("CHANGES_ONLY", "NO_CHANGES")) == ("incremental", True), \
            (what, outcome.reason)
        assert bag(spark, view) == bag(spark, twin), what
        late += outcome.late_rows
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {view}__late").collect()) == late_bids
    assert late == len(late_bids)


def test_a_watermark_on_windows_of_a_joins_rows_refreshes_in_full_and_says_why(spark, joined):
    view = joined.view("top_of_joined", "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE")
    joined.run("INSERT INTO {bids} VALUES (9, 2, 5, TIMESTAMP'2024-01-01 10:09:00')")
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    assert (outcome.technique, outcome.reason) == ("full", "WATERMARK_ON_JOINED_WINDOWS")


def test_the_clock_closes_windows_over_a_join_of_quiet_sources_as_a_full_refresh_does(spark, joined):
    ten = 1_704_103_200  # 2024-01-01 10:00 UTC: the bids are 10:00:05 to 10:02:00
    clauses = "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE IDLE AFTER INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE"
    with watermark.clock(lambda: ten + 3 * 60.0):  # watermark 10:01: [10:00, 10:01) closed
        view = joined.view("category_per_minute", f"{clauses} REFRESH POLICY INCREMENTAL")
        twin = joined.view("category_per_minute", f"{clauses} REFRESH POLICY FULL")
    with watermark.clock(lambda: ten + 10 * 60.0):  # quiet for 7 minutes: the clock closes [10:02, 10:03)
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
        mv.sql(spark, f"REFRESH MATERIALIZED VIEW {twin}").collect()
    assert (outcome.technique, outcome.reason) == ("incremental", "IDLE_WATERMARK")
    assert bag(spark, view) == bag(spark, twin)
    assert sorted(r.window_start.minute for r in spark.table(view).collect()) == [0, 2]


def test_an_append_of_bids_recomputes_its_windows_whole_without_seeking_their_groups(spark, joined):
    """New bids only, under a window of the bids' own time joined to auctions: their windows come
    from the statistics of the files they were written to, and each is recomputed whole in the
    commit, with no query before it to find the groups they reach; bids later than every other,
    and bids into old windows, equal the query after each. (A window over a join's or union's
    rows still seeks its groups.)"""
    kind = "category_per_minute"
    view = joined.view(kind)
    for bids in ["(6, 1, 7, TIMESTAMP'2024-01-01 10:07:10'), (7, 2, 9, TIMESTAMP'2024-01-01 10:08:59')",
                 "(8, 2, 4, TIMESTAMP'2024-01-01 10:00:20'), (9, 1, 6, TIMESTAMP'2024-01-01 10:01:40')"]:
        joined.run(f"INSERT INTO {{bids}} VALUES {bids}")
        marker = execution_marker(spark)
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()

        assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")
        phases = [e["description"].rsplit(": ", 1)[-1] for e in _executions_since(spark, marker) if e["id"] != e["root"]]
        assert "recomputing" not in phases, phases  # the groups were sought there (row_refresh._touched_windows)
        spark.sql(f"CREATE OR REPLACE TEMP VIEW wj_expected AS {joined.query(kind)}")
        assert bag(spark, view) == bag(spark, "wj_expected")
