"""Names: a view or source named anything Spark's catalog accepts works in every statement, and a
view resolves its query in the database it was written in (mv/names.py)."""
from __future__ import annotations

import pytest

from mv.errors import MvError
from mv.names import TableName


@pytest.mark.parametrize("text, parts, shown", [
    ("daily", ("daily",), "daily"),
    ("db.daily", ("db", "daily"), "db.daily"),
    ("`select`", ("select",), "`select`"),
    ("Db.`123v`", ("Db", "123v"), "Db.`123v`"),
    ("`v@1`", ("v@1",), "`v@1`"),
    ("`a.b`.c", ("a.b", "c"), "`a.b`.c"),
    ("`x``y`", ("x`y",), "`x``y`"),
    ("`spark_catalog`.`default`.`bids`", ("spark_catalog", "default", "bids"), "spark_catalog.default.bids"),
])
def test_a_name_is_parsed_into_parts_and_shown_quoted_only_where_sql_needs_it(text, parts, shown):
    name = TableName.parse(text)

    assert (name.parts, name) == (parts, shown)
    assert TableName.parse(name) == name


def test_the_tables_beside_a_view_are_made_from_its_parts_not_its_text():
    assert TableName.parse("db.`select`").late == "db.select__late"
    assert TableName.parse("`123v`").open == "`123v__open`"
    assert TableName.parse("`v@1`").late.parts == ("v@1__late",)


@pytest.mark.parametrize("text", ["", "a..b", "a.", "`a", "a b", "a;DROP TABLE t"])
def test_a_text_that_is_no_name_is_refused(text):
    with pytest.raises(MvError) as raised:
        TableName.parse(text)
    assert raised.value.error_class == "MV_INVALID_NAME"


QUERY = """SELECT window_start, window_end, count(*) AS n, sum(price) AS total
    FROM TUMBLE(TABLE({source}), DESCRIPTOR(`bid-time`), INTERVAL '10' MINUTES) GROUP BY window_start, window_end"""


@pytest.mark.parametrize("view, source", [("`select`", "`789`"), ("`123v`", "`order`")])
def test_a_view_and_source_named_as_sql_must_quote_are_created_refreshed_late_and_dropped(spark, view, source):
    spark.sql(f"CREATE TABLE {source} (`bid-time` TIMESTAMP, price INT) USING delta")
    spark.sql(f"INSERT INTO {source} VALUES (TIMESTAMP'2024-01-01 00:01:00', 4), (TIMESTAMP'2024-01-01 00:31:00', 5)")
    query = QUERY.format(source=source)
    spark.sql(f"CREATE MATERIALIZED VIEW {view} WATERMARK FOR `bid-time` AS `bid-time` - INTERVAL '1' MINUTE "
              f"EMIT ON WINDOW CLOSE AS {query}")
    spark.sql(f"INSERT INTO {source} VALUES (TIMESTAMP'2024-01-01 00:02:00', 1), (TIMESTAMP'2024-01-01 00:45:00', 2)")

    outcome = spark.sql(f"REFRESH MATERIALIZED VIEW {view}").first()

    assert (outcome.technique, outcome.late_rows) == ("incremental", 1)   # 00:02 is past its window's close
    assert sorted((r.n, r.total) for r in spark.table(view).collect()) == [(1, 4), (1, 5)]  # closed, late row out
    assert spark.table(TableName.parse(view).late).count() == 1
    assert [r.name for r in spark.sql("SHOW MATERIALIZED VIEWS").collect()].count(TableName.parse(view)) == 1

    for table in (view, TableName.parse(view).late):   # only the refresh writes either
        with pytest.raises(Exception) as raised:
            spark.sql(f"INSERT INTO {table} SELECT * FROM {table}")
        assert raised.value.getCondition() == "MV_VIEW_READ_ONLY"

    spark.sql(f"DROP MATERIALIZED VIEW {view}")

    assert not spark.catalog.tableExists(view) and not spark.catalog.tableExists(TableName.parse(view).late)


def test_a_name_the_catalog_refuses_fails_create_with_the_catalogs_error_and_leaves_nothing(spark):
    with pytest.raises(Exception) as raised:
        spark.sql("CREATE MATERIALIZED VIEW `v@1` AS SELECT 1 AS one")

    assert raised.value.getCondition() == "INVALID_SCHEMA_OR_RELATION_NAME"
    assert "v@1" not in [r.name for r in spark.sql("SHOW MATERIALIZED VIEWS").collect()]


def test_a_view_in_another_database_resolves_its_query_where_it_was_written(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS names_elsewhere")
    spark.sql("CREATE TABLE names_elsewhere.bids (`bid-time` TIMESTAMP, price INT) USING delta")
    spark.sql("INSERT INTO names_elsewhere.bids VALUES (TIMESTAMP'2024-01-01 00:01:00', 4)")
    query = QUERY.format(source="bids")
    try:
        spark.catalog.setCurrentDatabase("names_elsewhere")
        spark.sql(f"CREATE MATERIALIZED VIEW totals AS {query}")
    finally:
        spark.catalog.setCurrentDatabase("default")
    spark.sql("INSERT INTO names_elsewhere.bids VALUES (TIMESTAMP'2024-01-01 00:02:00', 1)")

    outcome = spark.sql("REFRESH MATERIALIZED VIEW names_elsewhere.totals").first()

    assert (outcome.technique, outcome.reason) == ("incremental", "CHANGES_ONLY")
    assert spark.table("names_elsewhere.totals").collect()[0].n == 2
    explained = dict(map(tuple, spark.sql("EXPLAIN MATERIALIZED VIEW names_elsewhere.totals").collect()))
    assert explained["sources"] == "spark_catalog.names_elsewhere.bids"
