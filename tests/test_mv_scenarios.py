"""Materialized views, specified by example: given a small Delta table of bids, when it changes and
the view is refreshed, then the view holds these rows (and its change feed, history and late table
say what happened).

Times are minutes past midnight of 2024-01-01 ("00:12"); windows print as (start, end) minutes.
Errors are asserted by error class (tests/fixtures/mv/create_errors.txt), never by their prose.
"""
from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

import mv
from bench.refresh import _executions_since, execution_marker
from mv.errors import MvError

ERRORS = Path(__file__).parent / "fixtures" / "mv" / "create_errors.txt"

COUNTS = """SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total
            FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
            GROUP BY window_start, window_end, item"""
SESSIONS = """SELECT window_start, window_end, item, count(*) AS n
              FROM SESSION(TABLE({bids}) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
              GROUP BY window_start, window_end, item"""
# Sessions per item, without the item in the view: the engine cannot keep them incrementally.
SESSIONS_WITHOUT_KEY = """SELECT window_start, window_end, count(*) AS n
                          FROM SESSION(TABLE({bids}) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
                          GROUP BY window_start, window_end"""

_ids = itertools.count()


def bid(id: int, item: str, time: str, price: int) -> tuple:
    return id, item, time, price


def ts(time: str) -> str:
    """A minute past midnight ("00:12", or "00:12:59.999999") as a TIMESTAMP literal."""
    return f"TIMESTAMP'2024-01-01 {time if time.count(':') == 2 else time + ':00'}'"


def values(*bids: tuple) -> str:
    return ", ".join(f"({i}, '{item}', {ts(t)}, {price})" for i, item, t, price in bids)


class Catalog:
    """Tables and views one test creates, with unique names; dropped when the test ends."""

    def __init__(self, spark):
        self.spark = spark
        self.tables: list[str] = []
        self.views: list[str] = []

    def name(self, stem: str) -> str:
        return f"{stem}_{next(_ids)}"

    def bids(self, *rows: tuple, using: str = "delta") -> str:
        name = self.name("bids")
        self.spark.sql(f"CREATE TABLE {name} (id INT, item STRING, ts TIMESTAMP, price INT) USING {using}")
        self.tables.append(name)
        if rows:
            self.spark.sql(f"INSERT INTO {name} VALUES {values(*rows)}")
        return name

    def view(self, query: str, clauses: str = "", name: str | None = None) -> str:
        name = name or self.name("view")
        self.views.append(name)
        mv.sql(self.spark, f"CREATE MATERIALIZED VIEW {name} {clauses} AS {query}")
        return name

    def drop(self):
        for view in reversed(self.views):
            mv.sql(self.spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
        for table in self.tables:
            self.spark.sql(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture
def given(spark):
    catalog = Catalog(spark)
    yield catalog
    catalog.drop()


def run(spark, statement: str):
    return mv.sql(spark, statement).collect()


def refresh(spark, view: str, full: bool = False):
    return mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}" + (" FULL" if full else "")).first()


def clock(column: str) -> str:
    return f"date_format({column}, 'HH:mm')"


def rows(spark, view: str) -> list[tuple]:
    """The view's windows as (start, end, item, n, ...) with times as HH:MM, sorted."""
    columns = [c for c in spark.table(view).columns if c not in ("window_start", "window_end")]
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT {clock('window_start')}, {clock('window_end')}, {', '.join(columns)} FROM {view}").collect())


def version(spark, table: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first().version


def view_changes(spark, view: str, since: int = 0) -> list[tuple]:
    """The view's own change feed after version `since`: (change type, start, end, item, n), sorted."""
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT _change_type, {clock('window_start')}, {clock('window_end')}, item, n "
        f"FROM table_changes('{view}', {since + 1})").collect())


def history(spark, view: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(
        f"SELECT refresh_id, technique, reason FROM mv_refresh_history WHERE view = '{view}' "
        "ORDER BY refresh_id").collect()]


def full_query(spark, view_query: str) -> list[tuple]:
    spark.sql(f"CREATE OR REPLACE TEMP VIEW expected AS {view_query}")
    return rows(spark, "expected")


# --- incremental refresh -------------------------------------------------------------------------------

@pytest.mark.compat
def test_the_first_refresh_is_full_and_the_next_ones_read_only_the_changes(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids))
    assert history(spark, view) == [(1, "full", "FIRST_REFRESH")]

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2))}")
    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.reason, outcome.refresh_id) == ("incremental", "CHANGES_ONLY", 2)
    assert outcome.rows_read == 1
    assert (outcome.rows_inserted, outcome.rows_updated, outcome.rows_deleted) == (0, 1, 0)
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 6), ("00:10", "00:20", "b", 1, 7)]
    assert history(spark, view) == [(1, "full", "FIRST_REFRESH"), (2, "incremental", "CHANGES_ONLY")]


def test_a_refresh_is_one_commit_of_the_view_which_is_also_its_history_row(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids))
    before = version(spark, view)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(2, 'a', '00:05', 2), bid(3, 'b', '00:12', 7))}")

    started = time.time()
    outcome = refresh(spark, view)
    wall = time.time() - started

    assert version(spark, view) == before + 1  # the rows, the state and the history row: one commit
    row = spark.sql(f"SELECT * FROM mv_refresh_history WHERE view = '{view}' AND refresh_id = 2").first()
    assert (row.technique, row.rows_read, row.rows_inserted, row.rows_updated) == ("incremental", 2, 1, 1)
    state = json.loads(spark.sql(f"SHOW TBLPROPERTIES {view} ('mv.state')").first().value)
    assert state["refresh_id"] == 2 and row.source_versions == json.dumps(state["sources"], separators=(",", ":"))
    # The history's duration runs from the refresh's start to its commit, so it covers the
    # statement but for what follows the commit.
    assert state["metrics"]["duration_s"] <= row.duration_s <= wall
    assert outcome.duration_s >= row.duration_s
    # Each view's latest refresh alone, as `mv ls` and the scheduler read it: from its newest commits.
    latest = spark.sql(f"SELECT refresh_id FROM mv_refresh_history('', '{view}', '1')").collect()
    assert [r.refresh_id for r in latest] == [2]


def test_a_view_and_the_tables_beside_it_checkpoint_every_100_commits_unless_its_tblproperties_say_otherwise(
        spark, given):
    """`<view>__open` is replaced by every refresh: at Delta's 10, every tenth refresh rebuilt its state."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:30", 1))
    default = given.view(COUNTS.format(bids=bids), "WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE")
    own = given.view(COUNTS.format(bids=bids), "TBLPROPERTIES ('delta.checkpointInterval' = '5')")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:02', 1))}")   # late: the late table is made
    assert refresh(spark, default).late_rows == 1

    def interval(table):
        return spark.sql(f"SHOW TBLPROPERTIES {table} ('delta.checkpointInterval')").first().value

    assert [interval(t) for t in (default, f"{default}__open", f"{default}__late", own)] == ["100", "100", "100", "5"]


@pytest.mark.parametrize("layout", [pytest.param("PARTITIONED BY (item)", marks=pytest.mark.slow), "CLUSTER BY (item)",
                                    pytest.param("TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
                                                 marks=pytest.mark.slow)])
def test_a_partitioned_or_clustered_view_is_kept_exactly_with_its_change_feed(spark, given, layout):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:03", 2), bid(3, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids), layout)
    before = version(spark, view)

    spark.sql(f"DELETE FROM {bids} WHERE id = 3")
    spark.sql(f"UPDATE {bids} SET price = 5 WHERE id = 2")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'c', '00:25', 1))}")
    outcome = refresh(spark, view)

    assert outcome.technique == "incremental"
    assert rows(spark, view) == full_query(spark, COUNTS.format(bids=bids)) == [
        ("00:00", "00:10", "a", 2, 9), ("00:20", "00:30", "c", 1, 1)]
    assert view_changes(spark, view, since=before) == [
        ("delete", "00:10", "00:20", "b", 1), ("insert", "00:20", "00:30", "c", 1),
        ("update_postimage", "00:00", "00:10", "a", 2), ("update_preimage", "00:00", "00:10", "a", 2)]


def test_a_refresh_with_nothing_new_changes_nothing(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids))
    before = version(spark, view)

    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.reason, outcome.rows_read) == ("incremental", "NO_CHANGES", 0)
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]
    assert version(spark, view) == before  # nothing committed: no new version, no change feed


def test_a_name_a_temporary_view_holds_is_taken(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW taken_by_temp AS SELECT * FROM {bids}")
    try:
        with pytest.raises(MvError) as raised:
            run(spark, f"CREATE MATERIALIZED VIEW taken_by_temp AS SELECT item, count(*) AS n FROM {bids} GROUP BY item")
        assert raised.value.error_class == "MV_NAME_TAKEN"
    finally:
        spark.catalog.dropTempView("taken_by_temp")
    assert not spark.catalog.tableExists("taken_by_temp")


def test_a_refresh_with_nothing_new_reads_only_the_tables_logs(spark, given):
    """No session of its own, no analysis of the query: the view's state and one lookup of its
    sources' versions (mv_delta_tables) tell that nothing moved."""
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids))
    refresh(spark, view)  # the first change-free refresh: its state says the query is kept incrementally

    marker = execution_marker(spark)
    assert refresh(spark, view).reason == "NO_CHANGES"

    inside = [e for e in _executions_since(spark, marker) if e["id"] != e["root"]]
    assert len(inside) <= 2 and all("delta_tables.py" in e["description"] for e in inside), inside


def test_a_view_kept_in_full_refreshes_in_full_with_nothing_new(spark, given):
    """Its query is recomputed every time, new source versions or not (it may read the clock)."""
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(f"SELECT item, count(*) AS n, max(current_date()) AS day FROM {bids} GROUP BY item",
                      "REFRESH POLICY FULL")

    assert [refresh(spark, view).reason for _ in range(2)] == ["POLICY_FULL", "POLICY_FULL"]


@pytest.mark.compat
def test_a_delete_retracts_its_row_and_a_window_left_empty_is_deleted(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:03", 2), bid(3, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids))
    before = version(spark, view)

    spark.sql(f"DELETE FROM {bids} WHERE id IN (2, 3)")
    outcome = refresh(spark, view)

    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]
    assert (outcome.rows_updated, outcome.rows_deleted) == (1, 1)
    assert ("delete", "00:10", "00:20", "b", 1) in view_changes(spark, view, since=before)


@pytest.mark.compat
def test_an_update_of_the_event_time_moves_the_row_to_its_new_window(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:03", 2), bid(3, "a", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids))

    spark.sql(f"UPDATE {bids} SET ts = {ts('00:25')} WHERE id = 2")
    refresh(spark, view)

    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "a", 1, 7),
                                 ("00:20", "00:30", "a", 1, 2)]


@pytest.mark.parametrize("time, technique", [("ts", "incremental"), ("ts - INTERVAL 5 MINUTES", "full")],
                         ids=["own_time", "computed_under_its_name"])
def test_a_time_column_computed_under_the_sources_name_is_windowed_by_its_own_value(spark, given, time, technique):
    """Windows over `SELECT ..., ts - INTERVAL 5 MINUTES AS ts`: a new bid at 00:12 falls in
    [00:00, 00:10), not in the window of the source's own 00:12, which the change would say."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:14", 2))
    shifted = f"TABLE(SELECT id, item, price, {time} AS ts FROM {bids})"
    query = COUNTS.format(bids=bids).replace(f"TABLE({bids})", shifted)
    view = given.view(query, "REFRESH POLICY AUTO")

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:12', 7))}")
    outcome = refresh(spark, view)

    assert rows(spark, view) == full_query(spark, query)
    assert outcome.technique == technique


def test_an_update_of_a_price_and_an_item_retracts_the_old_values(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:03", 2))
    view = given.view(COUNTS.format(bids=bids))

    spark.sql(f"UPDATE {bids} SET price = 10, item = 'b' WHERE id = 2")
    refresh(spark, view)

    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:00", "00:10", "b", 1, 10)]


@pytest.mark.compat
def test_the_views_change_feed_shows_a_changed_window_as_pre_and_post_image(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids))
    before = version(spark, view)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2))}")
    refresh(spark, view)

    assert view_changes(spark, view, since=before) == [
        ("update_postimage", "00:00", "00:10", "a", 2),
        ("update_preimage", "00:00", "00:10", "a", 1),
    ]


def test_refresh_full_gives_the_same_rows_and_rewrites_none(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids))
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2), bid(4, 'c', '00:31', 1))}")
    spark.sql(f"DELETE FROM {bids} WHERE id = 2")
    refresh(spark, view)
    incremental, before = rows(spark, view), version(spark, view)

    outcome = refresh(spark, view, full=True)

    assert (outcome.technique, outcome.reason) == ("full", "REQUESTED_FULL")
    assert rows(spark, view) == incremental == full_query(spark, COUNTS.format(bids=bids))
    assert (outcome.rows_inserted, outcome.rows_updated, outcome.rows_deleted) == (0, 0, 0)
    assert view_changes(spark, view, since=before) == []


def test_a_source_dropped_and_created_again_is_read_again_not_skipped(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:02", 4), bid(3, "b", "00:03", 4))
    view = given.view(COUNTS.format(bids=bids))
    spark.sql(f"DROP TABLE {bids}")
    spark.sql(f"CREATE TABLE {bids} (id INT, item STRING, ts TIMESTAMP, price INT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(9, 'z', '00:09', 1))}")

    outcome = refresh(spark, view)

    assert outcome.technique == "full"
    assert rows(spark, view) == [("00:00", "00:10", "z", 1, 1)]


def test_a_source_recreated_with_more_versions_than_before_is_still_read_again(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids))
    spark.sql(f"DROP TABLE {bids}")
    spark.sql(f"CREATE TABLE {bids} (id INT, item STRING, ts TIMESTAMP, price INT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    for n in range(4):   # its versions now pass those the view processed
        spark.sql(f"INSERT INTO {bids} VALUES {values(bid(10 + n, 'z', '00:09', 1))}")

    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.reason) == ("full", "SOURCE_REPLACED")
    assert rows(spark, view) == [("00:00", "00:10", "z", 4, 4)]


def test_a_view_named_hourly_keeps_its_definition_though_spark_redacts_url_like_properties(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids), name=given.name("hourly_totals"))
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(2, 'a', '00:02', 1))}")

    assert refresh(spark, view).technique == "incremental"
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 5)]


def test_reading_a_view_leaves_the_sessions_own_redaction_pattern_in_force(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids), name=given.name("secret_totals"))
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(2, 'a', '00:02', 1))}")
    spark.conf.set("spark.sql.redaction.options.regex", "(?i)secret")
    try:
        assert refresh(spark, view).technique == "incremental"
        assert spark.conf.get("spark.sql.redaction.options.regex") == "(?i)secret"
        shown = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {view}").collect()}
        assert shown["mv.definition"] == "*********(redacted)"
    finally:
        spark.conf.unset("spark.sql.redaction.options.regex")
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 5)]


def test_a_view_in_another_database_reads_its_sources_there(spark, given):
    spark.sql("CREATE DATABASE IF NOT EXISTS mv_other")
    spark.sql("USE mv_other")
    try:
        bids = given.bids(bid(1, "a", "00:01", 4))
        view = given.view(COUNTS.format(bids=bids))
        spark.sql(f"INSERT INTO {bids} VALUES {values(bid(2, 'b', '00:02', 1))}")

        assert refresh(spark, view).technique == "incremental"
        assert rows(spark, f"mv_other.{view}") == [("00:00", "00:10", "a", 1, 4), ("00:00", "00:10", "b", 1, 1)]
        # The history of this database's views is read there too, from the views' own commits.
        recorded = spark.sql(f"SELECT refresh_id, technique FROM mv_other.mv_refresh_history WHERE view = '{view}' "
                             "ORDER BY refresh_id").collect()
        assert [tuple(r) for r in recorded] == [(1, "full"), (2, "incremental")]
    finally:
        given.drop()
        spark.sql("USE default")


# --- watermarks, EMIT ON WINDOW CLOSE, grace and late rows ------------------------------------------------

ON_CLOSE = "WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE"


def test_emit_on_window_close_writes_each_closed_window_once_and_never_an_empty_one(spark, given):
    # Watermark = latest event time - 5 minutes; [00:00, 00:10) closes when it reaches 00:09:59.999999.
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:04", 2), bid(3, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids), ON_CLOSE)
    assert rows(spark, view) == []  # watermark 00:07: nothing closed

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'b', '00:14:59.999999', 1))}")
    refresh(spark, view)
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 6)]  # watermark 00:09:59.999999

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(5, 'c', '00:23', 3))}")
    refresh(spark, view)  # watermark 00:18: [00:10, 00:20) still open
    spark.sql(f"DELETE FROM {bids} WHERE id = 5")  # [00:20, 00:30) is empty again before it closes
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(6, 'd', '00:37', 5))}")
    refresh(spark, view)  # watermark 00:32: [00:10, 00:20) and [00:20, 00:30) close

    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 6), ("00:10", "00:20", "b", 2, 8)]
    assert view_changes(spark, view) == [("insert", "00:00", "00:10", "a", 2),
                                         ("insert", "00:10", "00:20", "b", 2)]


@pytest.mark.parametrize("input", [
    "SELECT id, item, ts - INTERVAL 30 MINUTES AS ts, price FROM {bids}",
    "SELECT id, item, ts - INTERVAL 30 MINUTES AS ts2, price FROM {bids}",
    "SELECT b.id, b.item, b.ts - INTERVAL 30 MINUTES AS ts, b.price FROM {bids} b JOIN {bids} s ON b.id = s.id",
], ids=["under_the_sources_name", "under_a_new_name", "of_a_joins_rows"])
def test_a_computed_time_column_closes_windows_by_its_own_value(spark, given, input):
    """The watermark follows the time column as the query computes it, half an hour before the
    source's: the source's own `ts` would close [00:10, 00:20) at once, and no column (ts2) or a
    join's rows would close nothing, ever."""
    bids = given.bids(bid(1, "a", "00:35", 4), bid(2, "a", "00:46", 2))  # windows' times 00:05, 00:16
    time = "ts2" if "ts2" in input else "ts"
    query = COUNTS.format(bids=input.format(bids=bids)).replace("DESCRIPTOR(ts)", f"DESCRIPTOR({time})")
    view = given.view(query, ON_CLOSE.replace("ts", time))
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]  # watermark 00:11

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:48', 1))}")  # 00:18, on time
    refresh(spark, view)
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]  # watermark 00:13

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'b', '00:56', 8))}")  # 00:26
    refresh(spark, view)
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "a", 2, 3)]  # watermark 00:21


def test_windows_closing_for_the_first_time_are_appended_without_a_merge(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:04", 2))
    view = given.view(COUNTS.format(bids=bids), ON_CLOSE)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'b', '00:16', 1), bid(4, 'c', '00:27', 5))}")

    outcome = refresh(spark, view)  # watermark 00:22: [00:00, 00:10) and [00:10, 00:20) close

    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:00", "00:10", "b", 1, 2),
                                 ("00:10", "00:20", "b", 1, 1)]
    assert spark.sql(f"DESCRIBE HISTORY {view} LIMIT 1").first()["operation"] == "WRITE"
    assert (outcome.rows_inserted, outcome.rows_updated, outcome.rows_deleted) == (3, 0, 0)


@pytest.mark.compat
def test_a_late_row_within_grace_updates_its_closed_window(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    view = given.view(COUNTS.format(bids=bids),
                      "WATERMARK FOR ts AS ts - INTERVAL '0' MINUTES EMIT ON WINDOW CLOSE GRACE INTERVAL '10' MINUTES")
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4)]  # watermark 00:12: closed, final at 00:20
    before = version(spark, view)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2))}")
    outcome = refresh(spark, view)

    assert outcome.late_rows == 0
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 6)]
    assert view_changes(spark, view, since=before) == [("update_postimage", "00:00", "00:10", "a", 2),
                                                      ("update_preimage", "00:00", "00:10", "a", 1)]


@pytest.mark.compat
@pytest.mark.parametrize("policy, statement", [("REFRESH POLICY FULL", ""), ("", " FULL")],
                         ids=["policy_full", "refresh_full"])
def test_a_full_refresh_keeps_final_windows_and_records_their_late_rows(spark, given, policy, statement):
    """A full refresh leaves final windows as they are: a late bid goes to the late table there
    too, and a repair (REFRESH ... FULL), which recomputes final windows without the late table's
    changes, does not put it into its window."""
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:21", 7))
    view = given.view(COUNTS.format(bids=bids), "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES EMIT ON WINDOW CLOSE "
                                                f"GRACE INTERVAL '10' MINUTES {policy}")  # watermark 00:20: [00:00, 00:10) final

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2), bid(4, 'b', '00:15', 1))}")
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}{statement}").first()

    assert outcome.technique == "full" and outcome.late_rows == 1
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "b", 1, 1)]
    assert [tuple(r) for r in spark.sql(f"SELECT id, refresh_id FROM {view}__late").collect()] == [
        (3, outcome.refresh_id)]


def test_a_row_later_than_grace_goes_to_the_late_table_and_is_counted(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:21", 7))
    view = given.view(COUNTS.format(bids=bids),
                      "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES EMIT ON WINDOW CLOSE GRACE INTERVAL '10' MINUTES")
    # Watermark 00:20 >= 00:10 + 10 minutes of grace: [00:00, 00:10) is final.
    before = version(spark, view)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2), bid(4, 'b', '00:15', 1))}")
    outcome = refresh(spark, view)

    assert outcome.late_rows == 1
    assert rows(spark, view) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "b", 1, 1)]
    assert [tuple(r) for r in spark.sql(
        f"SELECT id, _change_type, _change_sign, {clock('window_start')}, refresh_id FROM {view}__late").collect()
    ] == [(3, "insert", 1, "00:00", outcome.refresh_id)]
    assert ("insert", "00:10", "00:20", "b", 1) in view_changes(spark, view, since=before)
    recorded = spark.sql(f"SELECT late_rows FROM mv_refresh_history WHERE view = '{view}' "
                         f"AND refresh_id = {outcome.refresh_id}").first()
    assert recorded.late_rows == 1
    # The late table's properties name the refresh that appended last and its source versions: a
    # rerun of an interrupted refresh reads to those, and appends nothing twice. Its commit says so too.
    properties = dict(spark.sql(f"SHOW TBLPROPERTIES {view}__late").collect())
    assert properties["mv.late.written"] == f"{outcome.refresh_id}:0"
    assert json.loads(properties["mv.late.note"])["mv_late"]["refresh_id"] == outcome.refresh_id
    note = spark.sql(f"DESCRIBE HISTORY {view}__late LIMIT 1").first().userMetadata
    assert json.loads(note)["mv_late"]["refresh_id"] == outcome.refresh_id


def test_a_late_delete_is_kept_in_the_late_table_and_leaves_the_final_window_alone(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:03", 2), bid(3, "b", "00:30", 7))
    view = given.view(COUNTS.format(bids=bids), ON_CLOSE)  # watermark 00:25: [00:00, 00:10) final

    spark.sql(f"DELETE FROM {bids} WHERE id = 2")
    outcome = refresh(spark, view)

    assert outcome.late_rows == 1
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 6)]
    assert [tuple(r) for r in spark.sql(f"SELECT id, _change_type, _change_sign FROM {view}__late").collect()] \
        == [(2, "delete", -1)]


def test_the_watermark_never_decreases_not_even_when_the_latest_row_is_deleted(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7), bid(3, "c", "00:30", 1))
    view = given.view(COUNTS.format(bids=bids), ON_CLOSE)  # watermark 00:25
    closed = [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "b", 1, 7)]
    assert rows(spark, view) == closed

    spark.sql(f"DELETE FROM {bids} WHERE id = 3")
    refresh(spark, view)
    assert rows(spark, view) == closed
    refresh(spark, view, full=True)

    assert rows(spark, view) == closed
    watermarks = [r[0] for r in spark.sql(f"SELECT watermark_micros FROM mv_refresh_history "
                                          f"WHERE view = '{view}' ORDER BY refresh_id").collect()]
    assert watermarks == sorted(watermarks), watermarks


def test_refresh_full_of_an_on_close_view_leaves_final_windows_final(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:21", 7))
    view = given.view(COUNTS.format(bids=bids), ON_CLOSE)  # watermark 00:16: [00:00, 00:10) final
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:05', 2))}")
    assert refresh(spark, view).late_rows == 1
    incremental = rows(spark, view)

    refresh(spark, view, full=True)

    assert rows(spark, view) == incremental == [("00:00", "00:10", "a", 1, 4)]  # bid 3 is in __late only


@pytest.mark.compat
def test_sessions_under_emit_on_window_close_appear_once_closed_and_late_rows_wait_in_the_late_table(spark, given):
    bids = given.bids(bid(1, "a", "00:00", 1), bid(2, "a", "00:03", 1), bid(3, "b", "00:01", 1))
    view = given.view(SESSIONS.format(bids=bids), ON_CLOSE)
    assert rows(spark, view) == []  # watermark 23:58 the day before: every session open

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'a', '00:20', 1))}")
    outcome = refresh(spark, view)  # watermark 00:15: a [00:00, 00:08) and b [00:01, 00:06) close
    assert outcome.technique == "incremental"
    assert rows(spark, view) == [("00:00", "00:08", "a", 2), ("00:01", "00:06", "b", 1)]

    # 00:02 would join a's final session: late. 00:12 + 5 minutes is after the watermark: on time.
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(5, 'a', '00:02', 1), bid(6, 'c', '00:12', 1))}")
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(7, 'a', '00:30', 1))}")
    outcome = refresh(spark, view)  # watermark 00:25: c [00:12, 00:17) and a [00:20, 00:25) close

    assert outcome.late_rows == 1
    assert rows(spark, view) == [("00:00", "00:08", "a", 2), ("00:01", "00:06", "b", 1),
                                 ("00:12", "00:17", "c", 1), ("00:20", "00:25", "a", 1)]
    assert [tuple(r) for r in spark.sql(f"SELECT id, _change_sign FROM {view}__late").collect()] == [(5, 1)]
    refresh(spark, view, full=True)
    assert rows(spark, view)[0] == ("00:00", "00:08", "a", 2)  # bid 5 stays out: final sessions stay final


@pytest.mark.parametrize("full", [True, False])
def test_a_late_row_inside_a_session_still_open_stays_out_of_it_when_it_closes(spark, given, full):
    """A recomputation undoes the late changes of the rows it reads (session_lateness.without_late):
    f at 00:01 is late by the watermark alone (00:01 + 5 minutes <= 00:25), yet inside f's session,
    open until 00:33; a full refresh recomputes that session from the source."""
    chain = [bid(i, "f", f"00:{4 * i:02d}", 1) for i in range(8)]   # f every 4 minutes, 00:00-00:28
    bids = given.bids(*chain, bid(8, "a", "00:30", 1))
    view = given.view(SESSIONS.format(bids=bids), ON_CLOSE)          # watermark 00:25: f still open
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(9, 'f', '00:01', 1))}")
    assert refresh(spark, view).late_rows == 1

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(10, 'a', '00:50', 1))}")   # watermark 00:45
    outcome = refresh(spark, view, full=full)

    assert outcome.technique == ("full" if full else "incremental"), outcome
    assert rows(spark, view) == [("00:00", "00:33", "f", 8), ("00:30", "00:35", "a", 1)]


def test_sessions_closing_for_the_first_time_are_appended_without_a_merge(spark, given):
    bids = given.bids(bid(1, "a", "00:00", 1), bid(2, "a", "00:03", 1), bid(3, "b", "00:01", 1))
    view = given.view(SESSIONS.format(bids=bids), ON_CLOSE)
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'a', '00:20', 1), bid(5, 'c', '00:12', 1))}")
    refresh(spark, view)  # watermark 00:15: a [00:00, 00:08) and b [00:01, 00:06) close

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(6, 'a', '00:21', 1), bid(7, 'b', '00:31', 1))}")
    outcome = refresh(spark, view)  # watermark 00:26: c [00:12, 00:17) and a [00:20, 00:26) close

    assert rows(spark, view) == [("00:00", "00:08", "a", 2), ("00:01", "00:06", "b", 1),
                                 ("00:12", "00:17", "c", 1), ("00:20", "00:26", "a", 2)]
    assert spark.sql(f"DESCRIBE HISTORY {view} LIMIT 1").first()["operation"] == "WRITE"
    assert (outcome.rows_inserted, outcome.rows_updated, outcome.rows_deleted) == (2, 0, 0)


def test_a_session_closed_but_not_final_still_takes_a_row_and_leaves_the_view_until_it_closes_again(spark, given):
    # Watermark 00:04:59.999999 closes a [00:00, 00:05) (watermark >= end - 1 µs); final only at 00:05.
    bids = given.bids(bid(1, "a", "00:00", 1), bid(2, "b", "00:09:59.999999", 1))
    view = given.view(SESSIONS.format(bids=bids), ON_CLOSE)
    assert rows(spark, view) == [("00:00", "00:05", "a", 1)]

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:04', 1))}")  # not late: joins it
    outcome = refresh(spark, view)

    assert (outcome.late_rows, rows(spark, view)) == (0, [])  # a [00:00, 00:09) is open again


def test_a_row_within_grace_merges_two_sessions_and_the_change_feed_shows_it(spark, given):
    bids = given.bids(bid(1, "a", "00:00", 1), bid(2, "a", "00:09", 1), bid(3, "b", "00:16", 1))
    view = given.view(SESSIONS.format(bids=bids),
                      "WATERMARK FOR ts AS ts - INTERVAL '0' MINUTES GRACE INTERVAL '20' MINUTES")
    assert rows(spark, view) == [("00:00", "00:05", "a", 1), ("00:09", "00:14", "a", 1), ("00:16", "00:21", "b", 1)]
    before = version(spark, view)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'a', '00:04', 1))}")  # within 5 minutes of both
    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.late_rows) == ("incremental", 0)
    assert rows(spark, view) == [("00:00", "00:14", "a", 3), ("00:16", "00:21", "b", 1)]
    assert sorted(view_changes(spark, view, since=before)) == [
        ("delete", "00:00", "00:05", "a", 1), ("delete", "00:09", "00:14", "a", 1),
        ("insert", "00:00", "00:14", "a", 3)]


# --- views of views, policies -----------------------------------------------------------------------------

def describe_extended(spark, view: str) -> dict:
    """DESCRIBE MATERIALIZED VIEW EXTENDED as {field: value}."""
    return dict(map(tuple, run(spark, f"DESCRIBE MATERIALIZED VIEW EXTENDED {view}")))


def last_refresh(spark, view: str) -> tuple:
    extended = describe_extended(spark, view)
    return int(extended["last_refresh_id"]), extended["last_refresh.technique"]


def test_refreshing_a_view_of_a_view_refreshes_the_upstream_first_and_a_delete_flows_through_both(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "b", "00:12", 7))
    per_window = given.view(COUNTS.format(bids=bids))
    per_item = given.view(f"SELECT item, sum(n) AS bids, sum(total) AS total FROM {per_window} GROUP BY item")
    upstream_refreshes, _ = last_refresh(spark, per_window)

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:15', 2), bid(4, 'b', '00:16', 1))}")
    outcome = refresh(spark, per_item)

    assert (outcome.view, outcome.technique) == (per_item, "incremental")
    assert last_refresh(spark, per_window) == (upstream_refreshes + 1, "incremental")
    assert rows(spark, per_window) == [("00:00", "00:10", "a", 1, 4), ("00:10", "00:20", "a", 1, 2),
                                       ("00:10", "00:20", "b", 2, 8)]
    assert sorted(map(tuple, spark.table(per_item).collect())) == [("a", 2, 6), ("b", 2, 8)]

    spark.sql(f"DELETE FROM {bids} WHERE id IN (1, 4)")
    refresh(spark, per_item)

    assert rows(spark, per_window) == [("00:10", "00:20", "a", 1, 2), ("00:10", "00:20", "b", 1, 7)]
    assert sorted(map(tuple, spark.table(per_item).collect())) == [("a", 1, 2), ("b", 1, 7)]


def test_the_history_names_an_upstream_view_as_its_user_named_it(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    per_window = given.view(COUNTS.format(bids=bids))
    per_item = given.view(f"SELECT item, sum(n) AS bids FROM {per_window} GROUP BY item")

    refresh(spark, per_item)

    refreshes, _ = last_refresh(spark, per_window)
    assert [r[0] for r in history(spark, per_window)] == list(range(1, refreshes + 1))
    assert spark.sql(f"SELECT * FROM mv_refresh_history WHERE view LIKE '%.{per_window}'").count() == 0


def test_a_view_dropped_and_created_again_records_its_refreshes_in_the_history(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids))
    refresh(spark, view)
    refresh(spark, view)
    run(spark, f"DROP MATERIALIZED VIEW {view}")

    given.view(COUNTS.format(bids=bids), "REFRESH POLICY FULL", name=view)

    assert (1, "full", "POLICY_FULL") in history(spark, view)


def test_refresh_policy_full_refreshes_in_full_every_time(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    view = given.view(COUNTS.format(bids=bids), "REFRESH POLICY FULL")

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(2, 'a', '00:02', 3))}")
    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.reason) == ("full", "POLICY_FULL")
    assert history(spark, view) == [(1, "full", "POLICY_FULL"), (2, "full", "POLICY_FULL")]
    assert rows(spark, view) == [("00:00", "00:10", "a", 2, 7)]


def test_a_row_bridging_two_sessions_merges_them_and_deleting_it_splits_them_again(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:04", 2), bid(3, "a", "00:12", 7),
                      bid(4, "b", "00:08", 1))
    view = given.view(SESSIONS.format(bids=bids))
    split = [("00:01", "00:09", "a", 2), ("00:08", "00:13", "b", 1), ("00:12", "00:17", "a", 1)]
    assert rows(spark, view) == split

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(5, 'a', '00:08', 1))}")  # 00:08 + 5 >= 00:12
    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")
    assert rows(spark, view) == [("00:01", "00:17", "a", 4), ("00:08", "00:13", "b", 1)]

    spark.sql(f"DELETE FROM {bids} WHERE id = 5")
    refresh(spark, view)

    assert rows(spark, view) == split


def test_a_session_view_without_its_key_is_refreshed_in_full_and_says_why(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:04", 2), bid(3, "b", "00:12", 7))
    view = given.view(SESSIONS_WITHOUT_KEY.format(bids=bids))

    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(4, 'b', '00:14', 1))}")
    outcome = refresh(spark, view)

    assert (outcome.technique, outcome.reason) == ("full", "SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS")
    assert rows(spark, view) == [("00:01", "00:09", 2), ("00:12", "00:19", 2)]


def test_incremental_strict_on_a_session_query_it_cannot_keep_fails_at_create_and_creates_nothing(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4))
    name = given.name("strict")

    with pytest.raises(MvError) as raised:
        given.view(SESSIONS_WITHOUT_KEY.format(bids=bids), "REFRESH POLICY INCREMENTAL STRICT", name=name)

    assert raised.value.getCondition() == "MV_NOT_INCREMENTAL"
    assert raised.value.params["reasons"] == "SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS"
    assert not spark.catalog.tableExists(name)


# --- SHOW, DESCRIBE, EXPLAIN, DROP ---------------------------------------------------------------------------

def test_show_describe_explain_and_drop(spark, given):
    bids = given.bids(bid(1, "a", "00:01", 4), bid(2, "a", "00:30", 4))
    view = given.view(COUNTS.format(bids=bids), ON_CLOSE + " GRACE INTERVAL '10' MINUTES")
    sessions = given.view(SESSIONS_WITHOUT_KEY.format(bids=bids))
    spark.sql(f"INSERT INTO {bids} VALUES {values(bid(3, 'a', '00:02', 1))}")
    refresh(spark, view)  # one late row: the late table exists

    assert {view, sessions} <= {r.name for r in run(spark, "SHOW MATERIALIZED VIEWS")}

    described = dict(map(tuple, run(spark, f"DESCRIBE MATERIALIZED VIEW {view}")))
    assert described["name"] == view
    assert described["emit"] == "WINDOW CLOSE"
    assert described["watermark_column"] == "ts" and described["grace"] == "INTERVAL '10' MINUTES"
    assert f"TABLE({bids})" in described["query"]
    extended = describe_extended(spark, view)
    assert extended["last_refresh_id"] == "2" and extended["last_refresh.late_rows"] == "1"
    assert extended["watermark_micros"] == str(1704068700 * 1_000_000)  # 00:25

    rows = [tuple(r) for r in run(spark, f"EXPLAIN MATERIALIZED VIEW {view}")]
    explained = dict(r for r in rows if r[0] != "operator")
    assert explained.pop("last_refresh").startswith("2: incremental (")   # with its seconds, which vary
    assert ("operator", "  Window TUMBLE: each changed row's windows, touched") in rows
    assert explained == {
        "technique": "incremental", "reason": "CHANGES_ONLY", "shape": "window",
        "strategy": "windows: the windows the change touches, combined or recomputed",
        "sources": f"spark_catalog.default.{bids}", "row_key": "window_start, window_end, item",
        "estimate": "none: nothing to weigh (no pending change, a full refresh, or not a window query)"}
    rows = [tuple(r) for r in run(spark, f"EXPLAIN MATERIALIZED VIEW {sessions}")]
    explained = dict(r for r in rows if r[0] != "operator")
    assert (explained["technique"], explained["reason"]) == ("full", "SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS")
    assert rows[-1] == ("operator", "query: SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS")  # a reason no operator gives

    run(spark, f"DROP MATERIALIZED VIEW {view}")

    assert view not in {r.name for r in run(spark, "SHOW MATERIALIZED VIEWS")}
    assert not spark.catalog.tableExists(view) and not spark.catalog.tableExists(f"{view}__late")
    with pytest.raises(MvError) as raised:
        run(spark, f"DROP MATERIALIZED VIEW {view}")
    assert raised.value.getCondition() == "MV_VIEW_NOT_FOUND"
    run(spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")


# --- CREATE errors: nothing changes --------------------------------------------------------------------------

def _error_cases():
    for line in ERRORS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            error_class, statement = (part.strip() for part in line.split("|", 1))
            yield pytest.param(error_class, statement, id=f"{error_class}: {statement[:60]}")


@pytest.fixture(scope="module")
def existing(spark):
    """What the failing CREATEs must leave alone: a Delta table without a change feed, a parquet table,
    and a materialized view over a third table (shared: the claim is that nothing changes)."""
    catalog = Catalog(spark)
    names = {"bids": catalog.bids(bid(1, "a", "00:01", 4)),
             "files": catalog.bids(bid(1, "a", "00:01", 4), using="parquet")}
    names["existing"] = catalog.view(COUNTS.format(bids=catalog.bids(bid(1, "a", "00:01", 4))))
    yield names
    catalog.drop()


def snapshot(spark, names: dict) -> tuple:
    return (run(spark, "SHOW MATERIALIZED VIEWS"), spark.sql("SHOW TABLES").collect(),
            version(spark, names["bids"]), spark.sql(f"SHOW TBLPROPERTIES {names['bids']}").collect(),
            version(spark, names["existing"]), rows(spark, names["existing"]))


@pytest.mark.parametrize("error_class, statement", list(_error_cases()))
def test_a_create_that_fails_changes_nothing(spark, existing, error_class, statement):
    name = f"failed_{next(_ids)}"
    before = snapshot(spark, existing)

    with pytest.raises((MvError, AnalysisException)) as raised:
        run(spark, statement.format(view=name, **existing))

    assert raised.value.getCondition() == error_class
    assert not spark.catalog.tableExists(name)
    assert snapshot(spark, existing) == before


def test_a_malformed_statement_points_at_the_fragment(spark):
    statement = ("CREATE MATERIALIZED VIEW v\n"
                 "  WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW\n"
                 "AS SELECT 1")

    with pytest.raises(MvError) as raised:
        run(spark, statement)

    assert raised.value.getCondition() == "MV_STATEMENT_SYNTAX"
    assert raised.value.params["fragment"] == "WINDOW"
    line = statement.splitlines()[1]
    column = line.index("WINDOW")
    assert str(raised.value).splitlines()[-3:] == [
        f"== Statement (line 2, position {column + 1}) ==", line, " " * column + "^" * len("WINDOW")]
