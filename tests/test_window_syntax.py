"""Every accepted way of calling a window function means the same thing.

Given the same small table, Flink's verbatim form, RisingWave's bare form, named arguments in any
order and table subqueries all give the rows of the canonical `TUMBLE(TABLE(t), DESCRIPTOR(c), size)`.
"""
import pytest


@pytest.fixture(scope="module")
def bids(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW Bid AS SELECT * FROM VALUES
        (TIMESTAMP_NTZ'2020-04-15 08:05:00', 4.00, 'C'), (TIMESTAMP_NTZ'2020-04-15 08:07:00', 2.00, 'A'),
        (TIMESTAMP_NTZ'2020-04-15 08:09:00', 5.00, 'D'), (TIMESTAMP_NTZ'2020-04-15 08:11:00', 3.00, 'B'),
        (TIMESTAMP_NTZ'2020-04-15 08:13:00', 1.00, 'E'), (TIMESTAMP_NTZ'2020-04-15 08:17:00', 6.00, 'F')
        AS t(bidtime, price, item)""")


def rows(spark, query):
    return sorted(tuple(r) for r in spark.sql(query).collect())


CANONICAL = {
    "TUMBLE": "SELECT * FROM TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)",
    "HOP": "SELECT * FROM HOP(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
    "CUMULATE": "SELECT * FROM CUMULATE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)",
    "SESSION": "SELECT * FROM SESSION(TABLE(Bid) PARTITION BY (item), DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)",
}

EQUIVALENT = [
    ("TUMBLE", "SELECT * FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))"),
    ("TUMBLE", "select * from table(tumble(table Bid, descriptor(bidtime), interval '10' minutes))"),
    ("TUMBLE", "SELECT * FROM TABLE(TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))"),
    ("TUMBLE", "SELECT * FROM TABLE(TUMBLE(DATA => TABLE Bid, TIMECOL => DESCRIPTOR(bidtime), SIZE => INTERVAL '10' MINUTES))"),
    ("TUMBLE", "SELECT * FROM (SELECT * FROM TABLE(TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)))"),
    ("TUMBLE", "SELECT * FROM TUMBLE(Bid, bidtime, INTERVAL '10 MINUTES')"),
    ("TUMBLE", "SELECT * FROM TUMBLE(DATA => TABLE(Bid), TIMECOL => DESCRIPTOR(bidtime), SIZE => INTERVAL '10' MINUTES)"),
    ("TUMBLE", "SELECT * FROM TUMBLE(SIZE => INTERVAL '10' MINUTES, TIMECOL => DESCRIPTOR(bidtime), DATA => TABLE(Bid))"),
    ("TUMBLE", "SELECT * FROM TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES, INTERVAL '0' MINUTES)"),
    ("TUMBLE", "SELECT * FROM TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES, INTERVAL '-20' MINUTES)"),
    ("TUMBLE", "SELECT * FROM TUMBLE(TABLE(SELECT * FROM Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)"),
    ("TUMBLE", "SELECT * FROM TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '5' MINUTES * 2)"),
    ("TUMBLE", "SELECT * FROM TUMBLE(TABLE(Bid), bidtime, INTERVAL '600' SECONDS)"),
    ("HOP", "SELECT * FROM TABLE(HOP(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))"),
    ("HOP", "SELECT * FROM HOP(DATA => TABLE(Bid), TIMECOL => DESCRIPTOR(bidtime), SLIDE => INTERVAL '5' MINUTES, SIZE => INTERVAL '10' MINUTES)"),
    ("HOP", "SELECT * FROM HOP(Bid, bidtime, INTERVAL '5 MINUTES', INTERVAL '10 MINUTES')"),
    ("CUMULATE", "SELECT * FROM TABLE(CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))"),
    ("CUMULATE", "SELECT * FROM CUMULATE(DATA => TABLE(Bid), TIMECOL => DESCRIPTOR(bidtime), STEP => INTERVAL '2' MINUTES, SIZE => INTERVAL '10' MINUTES)"),
    ("SESSION", "SELECT * FROM TABLE(SESSION(TABLE Bid PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))"),
    ("SESSION", "SELECT * FROM SESSION(TABLE(Bid) PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)"),
    ("SESSION", "SELECT * FROM SESSION(DATA => TABLE(Bid) PARTITION BY item, TIMECOL => DESCRIPTOR(bidtime), GAP => INTERVAL '5' MINUTES)"),
]


@pytest.mark.parametrize("kind, query", EQUIVALENT)
def test_accepted_forms_mean_the_canonical_call(spark, bids, kind, query):
    assert rows(spark, query) == rows(spark, CANONICAL[kind])


def test_output_is_every_input_column_then_the_window_columns(spark, bids):
    schema = spark.sql(CANONICAL["HOP"]).schema
    assert [f.name for f in schema] == ["bidtime", "price", "item", "window_start", "window_end", "window_time"]
    assert {f.dataType.simpleString() for f in schema.fields[3:]} == {"timestamp_ntz"}
    assert not any(f.nullable for f in schema.fields[3:])


def test_window_functions_compose_with_joins_aliases_and_subqueries(spark, bids):
    query = """SELECT w.item, w.window_start FROM TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES) AS w
        JOIN (SELECT item FROM Bid WHERE price > 4) AS expensive ON w.item = expensive.item
        WHERE w.window_start IN (SELECT min(window_start) FROM HOP(TABLE(Bid), DESCRIPTOR(bidtime),
                                 INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))"""
    assert rows(spark, query) == [("D",) + rows(spark, "SELECT TIMESTAMP_NTZ'2020-04-15 08:00:00'")[0]]


def test_flink_rewrite_leaves_strings_comments_and_other_statements_alone(spark, bids):
    query = """SELECT item, 'TABLE(TUMBLE(TABLE x' AS s -- TABLE Bid
        FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) /* TABLE(HOP( */"""
    assert {r[1] for r in spark.sql(query).collect()} == {"TABLE(TUMBLE(TABLE x"}
    spark.sql("CREATE TABLE IF NOT EXISTS syntax_plain (a INT) USING delta")
    assert spark.sql("SELECT count(*) FROM syntax_plain").first()[0] == 0
    spark.sql("DROP TABLE syntax_plain")


def test_a_statement_spark_rejects_keeps_sparks_own_error(spark):
    from pyspark.errors import ParseException
    with pytest.raises(ParseException) as raised:
        spark.sql("SELECT * FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) WHERE price >")
    assert "TABLE(TUMBLE(TABLE Bid" in str(raised.value), "the error shows the statement as written"


def test_window_functions_are_listed_and_described(spark):
    names = {r[0] for r in spark.sql("SHOW FUNCTIONS").collect()}
    assert {"tumble", "hop", "cumulate", "session", "descriptor"} <= names
    usage = " ".join(r[0] for r in spark.sql("DESCRIBE FUNCTION hop").collect())
    assert "HOP(TABLE(data), DESCRIPTOR(timecol), slide, size [, offset])" in usage


@pytest.mark.compat
@pytest.mark.parametrize("kind", ["TEMP VIEW", "VIEW"])
@pytest.mark.parametrize("query", [CANONICAL["TUMBLE"], CANONICAL["SESSION"], EQUIVALENT[0][1]])
def test_a_view_over_a_window_function_reads_back_as_its_query(spark, bids, kind, query):
    # Spark parses a view's text again when the view is read (Spark 4.0 and 4.1 look its functions
    # up before any rule binds the window call); a persistent view cannot read a temp view's rows.
    source = "Bid" if kind == "TEMP VIEW" else "bid_table"
    if kind == "VIEW":
        spark.sql("CREATE TABLE IF NOT EXISTS bid_table USING delta AS SELECT * FROM Bid")
    spark.sql(f"CREATE OR REPLACE {kind} windowed AS {query.replace('Bid', source)}")
    try:
        assert rows(spark, "SELECT * FROM windowed") == rows(spark, query)
    finally:
        spark.sql("DROP VIEW IF EXISTS windowed")
