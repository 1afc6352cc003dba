"""The statements are Spark SQL, and a view is written only by its refresh.

Given a session from mv.session(), when the statement suite (tests/statement_suite.py) runs
through spark.sql and through mv.sql, then both give its expected transcript (test_connect.py runs
it from a Connect client without the engine's package). When anything but a refresh writes a view's
table or its late table, then it fails with MV_VIEW_READ_ONLY and the table is unchanged; when a
write gets around that rule, the next refresh notices.
"""
from __future__ import annotations

import pytest
from delta.tables import DeltaTable

import mv
from mv.errors import MvError
from tests import statement_suite
from tests.outside_writes import committed_outside


@pytest.mark.parametrize("way", ["spark_sql", "mv_sql"])
@pytest.mark.compat
def test_every_statement_gives_the_same_result_through_spark_sql_and_mv_sql(spark, way):
    run = spark.sql if way == "spark_sql" else (lambda text: mv.sql(spark, text))
    try:
        assert statement_suite.transcript(run, f"suite_{way}") == statement_suite.expected(f"suite_{way}")
    finally:
        spark.sql("USE default")


def test_mv_sql_raises_the_engine_errors_as_mv_errors(spark):
    with pytest.raises(MvError) as raised:
        mv.sql(spark, "DROP MATERIALIZED VIEW no_such_view")
    assert raised.value.error_class == "MV_VIEW_NOT_FOUND"
    assert raised.value.hint == "SHOW MATERIALIZED VIEWS lists them."


LATE_QUERY = """SELECT window_start, window_end, count(*) AS bids, sum(price) AS total
    FROM TUMBLE(TABLE(ro_bids), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES) GROUP BY window_start, window_end"""


@pytest.fixture(scope="module")
def guarded(spark):
    """A view with a late table: [00:00, 00:10) is final when the rows at 00:05 and 00:06 arrive."""
    spark.sql("CREATE TABLE ro_bids (bidtime TIMESTAMP, price INT) USING delta")
    spark.sql("INSERT INTO ro_bids VALUES (TIMESTAMP'2024-01-01 00:01:00', 4), (TIMESTAMP'2024-01-01 00:21:00', 7)")
    spark.sql("CREATE MATERIALIZED VIEW ro_view WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE "
              f"EMIT ON WINDOW CLOSE GRACE INTERVAL '10' MINUTES AS {LATE_QUERY}")
    for late in ("00:05", "00:06"):  # two late rows, two versions of the late table (RESTORE has one to go back to)
        spark.sql(f"INSERT INTO ro_bids VALUES (TIMESTAMP'2024-01-01 {late}:00', 2)")
        assert spark.sql("REFRESH MATERIALIZED VIEW ro_view").first().late_rows == 1
    yield "ro_view"
    spark.sql("DROP MATERIALIZED VIEW IF EXISTS ro_view")
    spark.sql("DROP TABLE IF EXISTS ro_bids")


def _frame(spark, table):
    return spark.table(table).limit(1)


WRITES = {
    "INSERT": lambda spark, t: spark.sql(f"INSERT INTO {t} SELECT * FROM {t}"),
    "INSERT OVERWRITE": lambda spark, t: spark.sql(f"INSERT OVERWRITE {t} SELECT * FROM {t} LIMIT 1"),
    "INSERT REPLACE WHERE": lambda spark, t: spark.sql(f"INSERT INTO {t} REPLACE WHERE true SELECT * FROM {t}"),
    "DELETE": lambda spark, t: spark.sql(f"DELETE FROM {t} WHERE true"),
    "UPDATE": lambda spark, t: spark.sql(f"UPDATE {t} SET window_start = window_end"),
    "MERGE": lambda spark, t: spark.sql(f"MERGE INTO {t} a USING {t} b ON a.window_start = b.window_start "
                                        "WHEN MATCHED THEN DELETE"),
    "TRUNCATE": lambda spark, t: spark.sql(f"TRUNCATE TABLE {t}"),
    "RESTORE": lambda spark, t: spark.sql(f"RESTORE TABLE {t} TO VERSION AS OF 0"),
    "REPLACE TABLE": lambda spark, t: spark.sql(f"CREATE OR REPLACE TABLE {t} USING delta AS SELECT 1 AS x"),
    "insertInto": lambda spark, t: _frame(spark, t).localCheckpoint().write.insertInto(t),
    "saveAsTable append": lambda spark, t: _frame(spark, t).write.format("delta").mode("append").saveAsTable(t),
    "saveAsTable overwrite": lambda spark, t: spark.range(1).write.format("delta").mode("overwrite").saveAsTable(t),
    "writeTo append": lambda spark, t: _frame(spark, t).writeTo(t).append(),
    "DeltaTable delete": lambda spark, t: DeltaTable.forName(spark, t).delete(),
    "DeltaTable update": lambda spark, t: DeltaTable.forName(spark, t).update(set={"window_start": "window_end"}),
}


@pytest.mark.parametrize("table", ["ro_view", "ro_view__late"])
@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_into_a_view_or_its_late_table_fails_and_changes_nothing(spark, guarded, table, write):
    before = (_version(spark, table), sorted(map(tuple, spark.table(table).collect())))

    with pytest.raises(Exception) as raised:
        WRITES[write](spark, table)

    assert getattr(raised.value, "getCondition", lambda: None)() == "MV_VIEW_READ_ONLY", str(raised.value)[:400]
    assert (_version(spark, table), sorted(map(tuple, spark.table(table).collect()))) == before


def test_maintenance_passes_and_the_next_refresh_stays_incremental(spark, guarded):
    for statement in (f"OPTIMIZE {guarded}", f"ALTER TABLE {guarded} SET TBLPROPERTIES ('team' = 'bids')",
                      f"REORG TABLE {guarded} APPLY (PURGE)", f"VACUUM {guarded}",
                      f"OPTIMIZE {guarded}__late"):
        spark.sql(statement)
    spark.sql("INSERT INTO ro_bids VALUES (TIMESTAMP'2024-01-01 00:35:00', 1)")

    outcome = spark.sql(f"REFRESH MATERIALIZED VIEW {guarded}").first()

    assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")


def _version(spark, table: str) -> int:
    return spark.sql(f"SELECT version FROM mv_delta_tables('{table}')").first().version


AROUND_QUERY = """SELECT window_start, window_end, count(*) AS bids, sum(price) AS total
    FROM TUMBLE(TABLE({bids}), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES) GROUP BY window_start, window_end"""


def _view_written_around_the_rule(spark, name: str, policy: str) -> str:
    """A view, then a row appended to its table by path, as another engine would: no rule sees it."""
    bids = f"{name}_bids"
    spark.sql(f"CREATE TABLE {bids} (bidtime TIMESTAMP, price INT) USING delta")
    spark.sql(f"INSERT INTO {bids} VALUES (TIMESTAMP'2024-01-01 00:01:00', 4)")
    spark.sql(f"CREATE MATERIALIZED VIEW {name} REFRESH POLICY {policy} AS {AROUND_QUERY.format(bids=bids)}")
    location = spark.sql(f"DESCRIBE DETAIL {name}").first().location
    committed_outside(spark, location, rows=spark.table(name).selectExpr(
        "window_start + INTERVAL 1 HOUR AS window_start", "window_end", "bids", "total"))
    return bids


def _equals_query(spark, name: str, bids: str) -> bool:
    return sorted(spark.table(name).collect()) == sorted(spark.sql(AROUND_QUERY.format(bids=bids)).collect())


def test_a_write_around_the_rule_makes_the_next_auto_refresh_full(spark):
    bids = _view_written_around_the_rule(spark, "around_auto", "AUTO")
    assert not _equals_query(spark, "around_auto", bids)
    explained = dict(map(tuple, spark.sql("EXPLAIN MATERIALIZED VIEW around_auto").collect()))
    assert explained["reason"] == "VIEW_CHANGED_OUTSIDE"

    outcome = spark.sql("REFRESH MATERIALIZED VIEW around_auto").first()

    assert (outcome.technique, outcome.reason) == ("full", "VIEW_CHANGED_OUTSIDE")
    assert _equals_query(spark, "around_auto", bids)
    assert spark.sql("SELECT reason FROM mv_refresh_history WHERE view = 'around_auto' "
                     f"AND refresh_id = {outcome.refresh_id}").first().reason == "VIEW_CHANGED_OUTSIDE"
    spark.sql(f"INSERT INTO {bids} VALUES (TIMESTAMP'2024-01-01 00:02:00', 1)")
    assert spark.sql("REFRESH MATERIALIZED VIEW around_auto").first().reason == "CHANGES_ONLY"
    assert _equals_query(spark, "around_auto", bids)


def test_a_write_around_the_rule_stops_a_strict_refresh_whose_hint_works(spark):
    bids = _view_written_around_the_rule(spark, "around_strict", "INCREMENTAL STRICT")
    spark.sql(f"INSERT INTO {bids} VALUES (TIMESTAMP'2024-01-01 00:02:00', 1)")

    with pytest.raises(Exception) as raised:
        spark.sql("REFRESH MATERIALIZED VIEW around_strict")

    assert raised.value.getCondition() == "MV_VIEW_CHANGED_OUTSIDE"
    hint = "REFRESH MATERIALIZED VIEW around_strict FULL"
    assert hint in str(raised.value)
    assert spark.sql(hint).first().reason == "REQUESTED_FULL"
    assert _equals_query(spark, "around_strict", bids)
    spark.sql(f"INSERT INTO {bids} VALUES (TIMESTAMP'2024-01-01 00:03:00', 2)")
    assert spark.sql("REFRESH MATERIALIZED VIEW around_strict").first().reason == "CHANGES_ONLY"


def test_without_a_maintainer_a_statement_says_how_to_start_one_and_reading_still_works(spark, guarded):
    spark._jvm.io.mvengine.Maintainer.unregister()  # as in a JVM-only session: spark-sql, a Scala notebook
    try:
        with pytest.raises(Exception) as raised:
            spark.sql(f"REFRESH MATERIALIZED VIEW {guarded}")
        assert raised.value.getCondition() == "MV_MAINTAINER_NOT_RUNNING"
        assert "mv.attach(spark)" in str(raised.value) and "python -m mv.connect_server" in str(raised.value)
        assert spark.table(guarded).count() > 0
    finally:
        mv.attach(spark)  # what the hint says
    assert spark.sql("SHOW MATERIALIZED VIEWS").count() >= 1


def test_a_malformed_statement_through_spark_sql_points_at_the_fragment_without_a_java_trace(spark):
    with pytest.raises(Exception) as raised:
        spark.sql("CREATE MATERIALIZED VIEW v EMIT ON WINDOW AS SELECT 1")

    assert raised.value.getCondition() == "MV_STATEMENT_SYNTAX"
    assert raised.value.getMessageParameters()["fragment"] == "WINDOW"
    text = str(raised.value)
    assert "== Statement (line 1, position 36) ==" in text and "^^" in text
    assert "at org.apache" not in text and "py4j" not in text.lower()
