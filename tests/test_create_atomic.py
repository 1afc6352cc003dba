"""CREATE MATERIALIZED VIEW is all or nothing, and its errors never mislead (issue 40, items 6 and 7).

Given a small Delta source, when CREATE fails at any of its steps (checks, the table's creation, the
first refresh stopped at each kill point it reaches), then nothing of the view is left: no table, no
`__late` or `__open` table, no definition (SHOW MATERIALIZED VIEWS). Queries that used to leave a
half-made view (only window_start kept; REFRESH POLICY FULL over parquet) now work and equal their
query; a temporary-view source is refused before anything changes; a forged definition is a clean
error naming the view, which DROP still removes.
"""
from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

import mv
from mv import commands, progress
from mv.errors import MvError
from mv.progress import KILL_POINTS

SOURCE = "atomic_bids"
WINDOWED = """SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
    FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY item, window_start, window_end"""
# EMIT ON WINDOW CLOSE: the first refresh also keeps the open windows (`__open`, kill point open_windows_kept).
CLOSING = "WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE"


@pytest.fixture(scope="module")
def source(spark):
    spark.sql(f"CREATE TABLE {SOURCE} (item STRING, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql(f"""INSERT INTO {SOURCE} VALUES ('a', 1, TIMESTAMP'2024-01-01 00:01:00'),
        ('b', 2, TIMESTAMP'2024-01-01 00:12:00'), ('a', 3, TIMESTAMP'2024-01-01 00:31:00')""")
    yield SOURCE
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")


def left_of(spark, view: str) -> dict:
    """What exists of the view `view`: listed by SHOW, and which of its tables the catalog has."""
    return {"listed": view in {r[0] for r in spark.sql("SHOW MATERIALIZED VIEWS").collect()},
            **{t: spark.catalog.tableExists(t) for t in (view, f"{view}__late", f"{view}__open")}}


NOTHING = {"listed": False}


def nothing_of(view: str) -> dict:
    return {**NOTHING, view: False, f"{view}__late": False, f"{view}__open": False}


def assert_view_equals_query(spark, view: str, query: str) -> None:
    assert sorted(spark.table(view).collect()) == sorted(spark.sql(query).collect())


# A whole EMIT ON WINDOW CLOSE view after CREATE: listed, its table and its open windows (no late row yet).
WHOLE = {"listed": True, "atomic_v": True, "atomic_v__late": False, "atomic_v__open": True}


def test_create_stopped_at_each_of_its_steps_leaves_nothing_behind(spark, source):
    statement = f"CREATE MATERIALIZED VIEW atomic_v {CLOSING} AS {WINDOWED.format(source=source)}"
    reached = []
    for step in KILL_POINTS:
        try:
            with progress.crashing_at(step):
                commands.run(spark, statement)
        except progress.Crash:
            reached.append(step)
            assert left_of(spark, "atomic_v") == nothing_of("atomic_v"), step
        else:  # CREATE's first refresh does not pass this point: the view was made whole
            assert left_of(spark, "atomic_v") == WHOLE, step
            commands.run(spark, "DROP MATERIALIZED VIEW atomic_v")
    assert reached == ["open_windows_keeping", "open_windows_kept", "committed"]  # a full first refresh: no change read, no late row

    # the table's creation fails (Delta refuses the property): nothing either
    with pytest.raises(Exception):
        commands.run(spark, statement.replace(" AS SELECT", " TBLPROPERTIES ('delta.checkpointInterval' = 'often') "
                                              "AS SELECT", 1))
    assert left_of(spark, "atomic_v") == nothing_of("atomic_v")


def test_a_failed_create_or_replace_keeps_the_old_view(spark, source):
    """The new definition is checked in full before anything changes, and the old view's tables are
    set aside (renamed) while the new one is made: a failure of the new one's first refresh (here
    stopped at its commit) brings the old view back as it was, rows, open windows and history."""
    old = WINDOWED.format(source=source)
    commands.run(spark, f"CREATE MATERIALIZED VIEW atomic_r {CLOSING} AS {old}")
    try:
        before = (sorted(spark.table("atomic_r").collect()), sorted(spark.table("atomic_r__open").collect()))
        with pytest.raises(MvError) as raised:  # refused by its checks
            commands.run(spark, f"CREATE OR REPLACE MATERIALIZED VIEW atomic_r SCHEDULE CRON '61 * * * *' AS {old}")
        assert raised.value.error_class == "MV_SCHEDULE_INVALID"

        with pytest.raises(progress.Crash), progress.crashing_at("committed"):
            commands.run(spark, f"CREATE OR REPLACE MATERIALIZED VIEW atomic_r AS {old.replace('sum', 'max')}")
        assert (sorted(spark.table("atomic_r").collect()), sorted(spark.table("atomic_r__open").collect())) == before
        assert {r[0] for r in spark.sql("SHOW MATERIALIZED VIEWS").collect() if r[0].startswith("atomic_r")} \
            == {"atomic_r"}  # nothing set aside is left
        assert mv.MaterializedView.for_name(spark, "atomic_r").describe()["emit"] == "WINDOW CLOSE"
        assert mv.sql(spark, "REFRESH MATERIALIZED VIEW atomic_r").first().refresh_id == 1  # its own state

        commands.run(spark, f"CREATE OR REPLACE MATERIALIZED VIEW atomic_r AS {old}")  # and replaced when it works
        assert left_of(spark, "atomic_r") == {"listed": True, "atomic_r": True, "atomic_r__late": False,
                                              "atomic_r__open": False}
        assert_view_equals_query(spark, "atomic_r", old)
    finally:
        commands.run(spark, "DROP MATERIALIZED VIEW IF EXISTS atomic_r")


def test_a_query_keeping_window_start_but_not_window_end_is_kept_by_its_change(spark, source):
    """Nexmark q8's shape: it crashed CREATE (MV_INTERNAL_ERROR) and left an empty view; its rows are
    now those of an aggregate whose touched groups a change recomputes (DeltaRules.regroups)."""
    query = f"""SELECT item, window_start, count(*) AS n
        FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY item, window_start, window_end"""
    mv.sql(spark, f"CREATE MATERIALIZED VIEW atomic_q8 REFRESH POLICY INCREMENTAL AS {query}")
    try:
        assert_view_equals_query(spark, "atomic_q8", query)
        spark.sql(f"INSERT INTO {source} VALUES ('c', 4, TIMESTAMP'2024-01-01 00:02:00')")
        outcome = mv.sql(spark, "REFRESH MATERIALIZED VIEW atomic_q8").first()
        assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")
        assert_view_equals_query(spark, "atomic_q8", query)
        spark.sql(f"DELETE FROM {source} WHERE item = 'c'")  # its window's group goes: a row retracted
        outcome = mv.sql(spark, "REFRESH MATERIALIZED VIEW atomic_q8").first()
        assert (outcome.technique, outcome.rows_deleted) == ("incremental", 1)
        assert_view_equals_query(spark, "atomic_q8", query)
    finally:
        spark.sql(f"DELETE FROM {source} WHERE item = 'c'")
        mv.sql(spark, "DROP MATERIALIZED VIEW IF EXISTS atomic_q8")


def test_refresh_policy_full_over_a_parquet_source_creates_and_refreshes(spark, source):
    spark.sql(f"CREATE TABLE atomic_files USING parquet AS SELECT * FROM {source}")
    query = WINDOWED.format(source="atomic_files")
    try:
        mv.sql(spark, f"CREATE MATERIALIZED VIEW atomic_p REFRESH POLICY FULL AS {query}")
        assert_view_equals_query(spark, "atomic_p", query)
        spark.sql("INSERT INTO atomic_files VALUES ('d', 5, TIMESTAMP'2024-01-01 00:45:00')")
        assert mv.sql(spark, "REFRESH MATERIALIZED VIEW atomic_p").first().reason == "POLICY_FULL"
        assert_view_equals_query(spark, "atomic_p", query)
    finally:
        mv.sql(spark, "DROP MATERIALIZED VIEW IF EXISTS atomic_p")
        spark.sql("DROP TABLE IF EXISTS atomic_files")


def test_a_temporary_view_as_source_is_refused_before_anything_changes(spark, source):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW atomic_recent AS SELECT * FROM {source} WHERE price > 1")
    try:
        with pytest.raises(MvError) as raised:
            mv.sql(spark, f"CREATE MATERIALIZED VIEW atomic_t AS {WINDOWED.format(source='atomic_recent')}")
        assert raised.value.error_class == "MV_SOURCE_TEMPORARY"
        assert "atomic_recent" in str(raised.value) and raised.value.hint
        assert left_of(spark, "atomic_t") == nothing_of("atomic_t")
    finally:
        spark.sql("DROP VIEW IF EXISTS atomic_recent")


def test_an_unusable_interval_says_why(spark, source):
    with pytest.raises(MvError) as raised:
        mv.sql(spark, f"CREATE MATERIALIZED VIEW atomic_i WATERMARK FOR ts AS ts - INTERVAL 'soon' MINUTES "
                      f"AS {WINDOWED.format(source=source)}")
    assert raised.value.error_class == "MV_STATEMENT_INTERVAL"
    reason = str(raised.value).split("is not a usable interval:", 1)[1].split(" Hint:")[0].strip(" .")
    assert "soon" in reason


@pytest.mark.parametrize("forged", ["{bad json", '{"time_zone": "UTC"}', "[1, 2]"])  # not JSON, fields missing, not an object
def test_a_forged_definition_is_a_clean_error_naming_the_view_and_drop_still_drops_it(spark, forged):
    # A view's own properties cannot be changed (the read-only rule); a table can be made with any.
    spark.sql(f"CREATE TABLE atomic_f (x INT) USING delta TBLPROPERTIES ('mv.definition' = '{forged}')")
    for statement in ("REFRESH MATERIALIZED VIEW atomic_f", "DESCRIBE MATERIALIZED VIEW atomic_f"):
        with pytest.raises(MvError) as raised:
            mv.sql(spark, statement)
        assert raised.value.error_class == "MV_VIEW_DEFINITION_INVALID", statement
        assert "atomic_f" in str(raised.value) and "DROP MATERIALIZED VIEW atomic_f" in raised.value.hint

    assert mv.sql(spark, "DROP MATERIALIZED VIEW atomic_f").first()[0] == "dropped atomic_f"
    assert left_of(spark, "atomic_f") == nothing_of("atomic_f")


def test_a_second_statement_is_refused_not_silently_dropped(spark, source):
    spark.sql("CREATE TABLE atomic_canary (x INT) USING delta")
    try:
        mv.sql(spark, f"CREATE MATERIALIZED VIEW atomic_s AS {WINDOWED.format(source=source)}")
        with pytest.raises((MvError, AnalysisException)) as raised:
            spark.sql("REFRESH MATERIALIZED VIEW atomic_s; DROP TABLE atomic_canary")
        assert raised.value.getCondition() == "MV_STATEMENT_SYNTAX"
        assert "DROP" in str(raised.value)
        assert spark.catalog.tableExists("atomic_canary")
    finally:
        mv.sql(spark, "DROP MATERIALIZED VIEW IF EXISTS atomic_s")
        spark.sql("DROP TABLE IF EXISTS atomic_canary")
