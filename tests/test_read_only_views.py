"""Only the engine writes a view: a property of its own statements, not of a setting anyone can flip.

Given a view, when a user sets the old `mv.internal.engineWrite` flag, then writes into the view are
still refused. When threads of one session create views at once, then each CREATE succeeds or fails
with a clean MV_ error, and afterwards every view is still read-only. When an ALTER TABLE would
change the columns of a view or of a table beside it, or the engine's own `mv.*` properties, then
it fails with MV_VIEW_READ_ONLY and changes nothing, and the next REFRESH still gives the query's
rows; other properties and column comments pass (mv/jvm/ReadOnlyViews.scala). The engine creates
its tables by MV_CREATE_TABLE (mv/jvm/EngineCreate.scala), which only ever creates.
"""
from __future__ import annotations

import json
import threading

import pytest

from mv.query import sql_string

SOURCE = "ro_alter_bids"
QUERY = f"SELECT item, count(*) AS n, max(price) AS high FROM {SOURCE} GROUP BY item"
WINDOWED = (f"SELECT window_start, window_end, item, count(*) AS n, max(price) AS high "
            f"FROM TUMBLE(TABLE({SOURCE}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) "
            "GROUP BY window_start, window_end, item")
CLOSE = "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE GRACE INTERVAL '1' HOUR"


@pytest.fixture(scope="module")
def views(spark):
    """`ro_alter` (a view), and `ro_alter_w`, whose open windows are in `ro_alter_w__open`."""
    spark.sql(f"CREATE TABLE {SOURCE} (item STRING, ts TIMESTAMP, price INT) USING delta")
    spark.sql(f"INSERT INTO {SOURCE} VALUES ('a', TIMESTAMP'2024-01-01 00:01:00', 4), "
              "('b', TIMESTAMP'2024-01-01 00:21:00', 7)")
    spark.sql(f"CREATE MATERIALIZED VIEW ro_alter AS {QUERY}")
    spark.sql(f"CREATE MATERIALIZED VIEW ro_alter_w {CLOSE} AS {WINDOWED}")
    yield "ro_alter", "ro_alter_w"
    for view in ("ro_alter", "ro_alter_w"):
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}")
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")


def condition(error: Exception) -> str | None:
    return getattr(error, "getCondition", lambda: None)()


def snapshot(spark, table: str) -> tuple:
    """What a refused statement must leave as it was: the table's version (any write or ALTER
    commits one) and its properties, read from Delta's log in one query."""
    row = spark.sql(f"SELECT version, properties FROM mv_delta_tables('{table}')").first()
    return row.version, row.properties


def refused(spark, table: str, statement: str) -> None:
    before = snapshot(spark, table)
    with pytest.raises(Exception) as raised:
        spark.sql(statement)
    assert condition(raised.value) == "MV_VIEW_READ_ONLY", str(raised.value)[:400]
    assert snapshot(spark, table) == before


def equals_query(spark, view: str, query: str) -> bool:
    return sorted(spark.table(view).collect()) == sorted(spark.sql(query).collect())


def test_setting_the_old_engine_write_flag_lets_no_write_through(spark, views):
    spark.conf.set("mv.internal.engineWrite", "true")
    try:
        refused(spark, "ro_alter", "INSERT INTO ro_alter VALUES ('z', 1, 1)")
        refused(spark, "ro_alter", "CREATE OR REPLACE TABLE ro_alter USING delta AS SELECT 1 AS x")
        refused(spark, "ro_alter_w__open", "DELETE FROM ro_alter_w__open")
    finally:
        spark.conf.unset("mv.internal.engineWrite")


COLUMN_CHANGES = {
    "ADD COLUMN": "ADD COLUMN note STRING",
    "ADD COLUMNS": "ADD COLUMNS (a INT, b INT)",
    "DROP COLUMN": "DROP COLUMN high",
    "RENAME COLUMN": "RENAME COLUMN high TO highest",
    "ALTER COLUMN TYPE": "ALTER COLUMN high TYPE BIGINT",
    "CHANGE COLUMN": "CHANGE COLUMN high high BIGINT",
    "ALTER COLUMN FIRST": "ALTER COLUMN high FIRST",
    "REPLACE COLUMNS": "REPLACE COLUMNS (item STRING)",
}


@pytest.mark.parametrize("table", ["ro_alter", "ro_alter_w__open"])
def test_an_alter_table_that_changes_the_columns_of_a_view_or_its_side_table_is_refused(spark, views, table):
    for change in COLUMN_CHANGES.values():
        refused(spark, table, f"ALTER TABLE {table} {change}")


@pytest.mark.parametrize("table", ["ro_alter", "ro_alter_w__open"])
def test_a_view_or_its_side_table_named_by_its_path_is_refused_too(spark, views, table):
    """A path names no view: the table's own properties say whose it is (`mv.beside` on a side table)."""
    path = "delta.`" + spark.sql(f"DESCRIBE DETAIL {table}").first().location + "`"
    refused(spark, table, f"ALTER TABLE {path} {COLUMN_CHANGES['ADD COLUMN']}")
    refused(spark, table, f"INSERT INTO {path} SELECT * FROM {table}")
    refused(spark, table, f"DELETE FROM {path}")
    with pytest.raises(Exception, match="MV_VIEW_READ_ONLY"):  # the DataFrame writer's save(path)
        spark.table(table).write.format("delta").mode("append").save(path[len("delta.`"):-1])


def test_after_refused_column_changes_the_next_refresh_gives_the_query(spark, views):
    for change in ("ADD COLUMN", "RENAME COLUMN", "ALTER COLUMN TYPE"):
        with pytest.raises(Exception, match="MV_VIEW_READ_ONLY"):
            spark.sql(f"ALTER TABLE ro_alter {COLUMN_CHANGES[change]}")
    spark.sql(f"INSERT INTO {SOURCE} VALUES ('a', TIMESTAMP'2024-01-01 00:31:00', 9)")

    outcome = spark.sql("REFRESH MATERIALIZED VIEW ro_alter").first()

    assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")
    assert equals_query(spark, "ro_alter", QUERY)


@pytest.mark.parametrize("table, change", [
    ("ro_alter", "SET TBLPROPERTIES ('mv.definition' = '{}')"),
    ("ro_alter", "UNSET TBLPROPERTIES ('mv.definition')"),
    ("ro_alter", "SET TBLPROPERTIES ('MV.State' = 'forged')"),
    ("ro_alter_w__open", "SET TBLPROPERTIES ('mv.state' = 'another')"),
])
def test_setting_or_unsetting_the_engines_own_properties_is_refused(spark, views, table, change):
    refused(spark, table, f"ALTER TABLE {table} {change}")


def test_a_users_own_properties_and_column_comments_pass(spark, views):
    spark.sql("ALTER TABLE ro_alter SET TBLPROPERTIES ('team' = 'bids', 'delta.logRetentionDuration' = '60 days')")
    spark.sql("ALTER TABLE ro_alter ALTER COLUMN high COMMENT 'the highest bid'")
    spark.sql("ALTER TABLE ro_alter UNSET TBLPROPERTIES ('team')")
    properties = snapshot(spark, "ro_alter")[1]
    assert properties["delta.logRetentionDuration"] == "60 days" and "team" not in properties
    assert spark.table("ro_alter").schema["high"].metadata["comment"] == "the highest bid"


def engine_create(spark, table: str, query: str, clauses: str, if_not_exists: bool = False):
    spec = {"table": table, "query": query, "clauses": clauses, "if_not_exists": if_not_exists}
    return spark.sql(f"MV_CREATE_TABLE {sql_string(json.dumps(spec))}")


def test_the_engines_create_statement_only_creates(spark, views):
    """MV_CREATE_TABLE, called by a user, neither replaces nor writes into a table that exists."""
    before = snapshot(spark, "ro_alter")
    for clauses in ("USING delta", "USING delta AS SELECT 'z' AS item --"):
        with pytest.raises(Exception) as raised:
            engine_create(spark, "ro_alter", "SELECT 1 AS x", clauses)
        assert condition(raised.value) == "TABLE_OR_VIEW_ALREADY_EXISTS"
    engine_create(spark, "ro_alter", "SELECT 1 AS x", "USING delta", if_not_exists=True)
    assert snapshot(spark, "ro_alter") == before


@pytest.mark.slow  # make test-slow runs it alone, after its two workers: under their load the
@pytest.mark.serial  # loser of the race sometimes gets MV_NAME_TAKEN (docs/design.md, "The test suite")
def test_creates_in_threads_of_one_session_stay_independent_and_views_stay_read_only(spark):
    """Two threads create one view, a third another, over a source whose change feed is off."""
    spark.sql("CREATE TABLE ro_race_bids (item STRING, price INT) USING delta")
    spark.sql("INSERT INTO ro_race_bids VALUES ('a', 4), ('b', 7)")
    query = "SELECT item, count(*) AS n, sum(price) AS total FROM ro_race_bids GROUP BY item"
    outcomes: dict[int, str] = {}

    def create(i: int, name: str) -> None:
        try:
            spark.sql(f"CREATE MATERIALIZED VIEW {name} AS {query}")
            outcomes[i] = "created"
        except Exception as e:  # noqa: BLE001 - the outcome is asserted below
            outcomes[i] = condition(e) if len(str(e)) < 1000 and "\tat " not in str(e) else str(e)[:400]
    threads = [threading.Thread(target=create, args=(i, name))
               for i, name in enumerate(["ro_race_same", "ro_race_same", "ro_race_other"])]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        same = {outcomes[0], outcomes[1]}   # one wins; the other fails cleanly, without a JVM trace
        assert len(same) == 2 and "created" in same, outcomes
        assert same - {"created"} <= {"MV_VIEW_ALREADY_EXISTS", "MV_CONCURRENT_REFRESH"}, outcomes
        assert outcomes[2] == "created", outcomes
        assert spark.sql("SHOW TBLPROPERTIES ro_race_bids ('delta.enableChangeDataFeed')").first().value == "true"
        for view in ("ro_race_same", "ro_race_other"):
            assert equals_query(spark, view, query)
            refused(spark, view, f"INSERT OVERWRITE {view} SELECT * FROM {view} LIMIT 0")
            refused(spark, view, f"CREATE OR REPLACE TABLE {view} USING delta AS SELECT 1 AS x")
    finally:
        for view in ("ro_race_same", "ro_race_other"):
            spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}")
        spark.sql("DROP TABLE ro_race_bids")
