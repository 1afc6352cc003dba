"""The materialized-view statement wrapper: clauses in any order, anything else passes to Spark,
and a malformed statement names its error class and points at the fragment."""
import pytest

from mv.errors import MvError
from mv.statements import Create, Definition, Describe, Drop, Explain, Refresh, Show, SparkSql, parse

QUERY = "SELECT item, window_start, window_end, count(*) FROM TUMBLE(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' HOUR) GROUP BY ALL"


def test_create_with_every_clause_in_any_order():
    statement = parse(f"""create or replace materialized view db.hourly
        comment 'per hour' emit on window close grace interval '1' hour
        tblproperties ('owner' = 'me') cluster by (window_start)
        watermark for ts as ts - interval '5' minutes
        refresh policy incremental strict schedule cron '0 * * * *' at time zone 'Europe/Paris'
        as {QUERY};""")
    assert statement == Create(Definition(
        name="db.hourly", query=QUERY, watermark_column="ts", watermark_delay="interval '5' minutes",
        emit="WINDOW CLOSE", grace="interval '1' hour", policy="INCREMENTAL STRICT",
        schedule="schedule cron '0 * * * *' at time zone 'Europe/Paris'", cluster_by="(window_start)",
        comment="'per hour'", tblproperties="('owner' = 'me')"), or_replace=True)


@pytest.mark.parametrize("clause, field, value", [
    ("SCHEDULE EVERY 15 MINUTES", "schedule", "SCHEDULE EVERY 15 MINUTES"),
    ("TRIGGER ON UPDATE", "schedule", "TRIGGER ON UPDATE"),
    ("TRIGGER ON UPDATE AT MOST EVERY INTERVAL '10' MINUTES", "schedule",
     "TRIGGER ON UPDATE AT MOST EVERY INTERVAL '10' MINUTES"),
    ("REFRESH POLICY FULL", "policy", "FULL"),
    ("EMIT ON UPDATE", "emit", "UPDATE"),
    ("PARTITIONED BY (item)", "partitioned_by", "(item)"),
    ("WATERMARK FOR `ts` AS `ts` - INTERVAL '1:30' HOUR TO MINUTE", "watermark_delay", "INTERVAL '1:30' HOUR TO MINUTE"),
    ("WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES IDLE AFTER INTERVAL '30' MINUTES", "watermark_idle",
     "INTERVAL '30' MINUTES"),
    ("WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE", "watermark_delay", "INTERVAL 1 MINUTE"),  # as Spark SQL takes it
])
def test_each_clause_is_read(clause, field, value):
    statement = parse(f"CREATE MATERIALIZED VIEW IF NOT EXISTS v {clause} AS {QUERY}")
    assert getattr(statement.definition, field) == value and statement.if_not_exists


@pytest.mark.parametrize("text, expected", [
    ("REFRESH MATERIALIZED VIEW v", Refresh("v")),
    ("refresh materialized view db.v full;", Refresh("db.v", full=True)),
    ("DROP MATERIALIZED VIEW IF EXISTS v", Drop("v", if_exists=True)),
    ("SHOW MATERIALIZED VIEWS", Show()),
    ("DESCRIBE MATERIALIZED VIEW EXTENDED v", Describe("v", extended=True)),
    ("DESC MATERIALIZED VIEW v", Describe("v")),
    ("EXPLAIN MATERIALIZED VIEW v", Explain(name="v")),
    ("SELECT * FROM TUMBLE(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' HOUR)",
     SparkSql("SELECT * FROM TUMBLE(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' HOUR)")),
    ("CREATE TABLE t (a INT) USING delta", SparkSql("CREATE TABLE t (a INT) USING delta")),
    ("CREATE VIEW v AS SELECT 1", SparkSql("CREATE VIEW v AS SELECT 1")),
])
def test_other_statements(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["REFRESH MATERIALIZED VIEW v;", "REFRESH MATERIALIZED VIEW v ; -- done\n",
                                  "REFRESH MATERIALIZED VIEW v; /* a comment; with a ';' */  \n"])
def test_one_statement_may_end_with_a_semicolon_spaces_and_comments(text):
    assert parse(text) == Refresh("v")


def test_a_create_ends_at_its_semicolon_and_keeps_one_inside_a_string():
    statement = parse("CREATE MATERIALIZED VIEW v AS SELECT 'a;b' AS x ; -- done")
    assert statement.definition.query == "SELECT 'a;b' AS x"


def test_explain_create_parses_the_create():
    statement = parse(f"EXPLAIN CREATE MATERIALIZED VIEW v AS {QUERY}")
    assert statement.create.definition.query == QUERY


@pytest.mark.parametrize("text, error_class, fragment", [
    ("CREATE MATERIALIZED VIEW v EMIT ON WINDOW AS SELECT 1", "MV_STATEMENT_SYNTAX", "WINDOW"),
    ("CREATE MATERIALIZED VIEW v GRACE INTERVAL '1' HOUR GRACE INTERVAL '2' HOUR AS SELECT 1",
     "MV_STATEMENT_DUPLICATE_CLAUSE", "GRACE"),
    ("CREATE MATERIALIZED VIEW v SCHEDULE EVERY 0 MINUTES AS SELECT 1", "MV_STATEMENT_SYNTAX", "0"),
    ("CREATE MATERIALIZED VIEW v SCHEDULE EVERY 5 WEEKS AS SELECT 1", "MV_STATEMENT_SYNTAX", "WEEKS"),
    ("CREATE MATERIALIZED VIEW v WATERMARK FOR ts AS other - INTERVAL '1' MINUTE AS SELECT 1",
     "MV_STATEMENT_SYNTAX", "-"),
    ("CREATE MATERIALIZED VIEW v REFRESH POLICY SOMETIMES AS SELECT 1", "MV_STATEMENT_SYNTAX", "SOMETIMES"),
    ("CREATE MATERIALIZED VIEW v EVERY HOUR AS SELECT 1", "MV_STATEMENT_SYNTAX", "EVERY"),
    ("CREATE MATERIALIZED VIEW v AS", "MV_STATEMENT_SYNTAX", "end of statement"),
    ("CREATE MATERIALIZED VIEW AS SELECT 1", "MV_STATEMENT_SYNTAX", "SELECT"),
    ("CREATE OR REPLACE MATERIALIZED VIEW IF NOT EXISTS v AS SELECT 1", "MV_STATEMENT_UNSUPPORTED_COMBINATION", None),
    ("REFRESH MATERIALIZED VIEW v NOW", "MV_STATEMENT_SYNTAX", "NOW"),
    ("CREATE MATERIALIZED VIEW v WATERMARK FOR ts AS ts - 5 AS SELECT 1", "MV_STATEMENT_SYNTAX", "5"),
    ("CREATE MATERIALIZED VIEW v WATERMARK FOR ts AS ts - INTERVAL 5 AS SELECT 1", "MV_STATEMENT_SYNTAX", "AS"),
    ("CREATE MATERIALIZED VIEW v COMMENT per hour AS SELECT 1", "MV_STATEMENT_SYNTAX", "per"),
    # a second statement after ';' is refused, never run or dropped silently
    ("REFRESH MATERIALIZED VIEW v; DROP TABLE canary", "MV_STATEMENT_SYNTAX", "DROP"),
    ("DROP MATERIALIZED VIEW v;\n-- then\nDROP TABLE canary;", "MV_STATEMENT_SYNTAX", "DROP"),
    ("SHOW MATERIALIZED VIEWS; ;", "MV_STATEMENT_SYNTAX", ";"),
    ("CREATE MATERIALIZED VIEW v AS SELECT 1 AS x; DROP TABLE canary", "MV_STATEMENT_SYNTAX", "DROP"),
    (f"EXPLAIN CREATE MATERIALIZED VIEW v AS {QUERY}; SELECT 2", "MV_STATEMENT_SYNTAX", "SELECT"),
])
def test_malformed_statements_name_the_error_and_point_at_it(text, error_class, fragment):
    with pytest.raises(MvError) as raised:
        parse(text)
    assert raised.value.error_class == error_class
    message = str(raised.value)
    assert "Hint: " in message
    if fragment:
        assert raised.value.params["fragment"] == fragment
        pointer = message.splitlines()[-1]
        line = message.splitlines()[-2]
        assert line[pointer.index("^"):].startswith(fragment if fragment != "end of statement" else "")
