"""An aggregate over a small read of one Delta table reads it in one task, so its groups need no
shuffle (mv/jvm/OneTaskAggregates.scala): the rows are exactly those of Spark's own plan, only the
second stage is gone.

Oracle: the same query in a session with `mv.oneTaskAggregates=false`, planned as Spark plans it.
"""
import pytest

TABLE = "ota_events"


@pytest.fixture(scope="module")
def spark_plan(spark):
    """Spark's own plan of every aggregate: the oracle."""
    session = spark.newSession()
    session.conf.set("mv.oneTaskAggregates", "false")
    return session


@pytest.fixture(scope="module")
def events(spark):
    """Three small files, one per insert, each holding its own hour."""
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
    spark.sql(f"CREATE TABLE {TABLE} (id BIGINT, k INT, v BIGINT, ts TIMESTAMP) USING delta")
    for hour in range(3):
        spark.sql(f"""INSERT INTO {TABLE} SELECT id, CAST(id % 7 AS INT), id * 3,
                      TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, {hour}, 0, id)
                      FROM range({hour * 100}, {hour * 100 + 100}, 1, 1)""")
    yield TABLE
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")


def executed(session, query) -> tuple[list, str]:
    """The query's rows, sorted, and its executed physical plan (AQE's final plan)."""
    frame = session.sql(query)
    rows = sorted(tuple(r) for r in frame.collect())
    return rows, frame._jdf.queryExecution().executedPlan().toString()


QUERIES = [
    f"SELECT k, count(*), sum(v), max(ts) FROM {TABLE} GROUP BY k",
    f"SELECT k, window_start, count(*) FROM TUMBLE(TABLE({TABLE}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) "
    "WHERE window_start >= TIMESTAMP'2024-01-01 01:00:00' GROUP BY k, window_start",
    f"SELECT window_start, window_end, sum(v) FROM HOP(TABLE({TABLE}), DESCRIPTOR(ts), INTERVAL '10' MINUTES, "
    "INTERVAL '30' MINUTES) GROUP BY window_start, window_end",
    f"SELECT k, count(DISTINCT v % 5), count(*) FILTER (WHERE v > 100) FROM {TABLE} WHERE ts < "
    "TIMESTAMP'2024-01-01 02:00:00' GROUP BY k",
    f"SELECT count(*), min(v) FROM {TABLE}",
]


@pytest.mark.parametrize("query", QUERIES)
def test_an_aggregate_over_a_small_table_runs_in_one_stage_with_the_rows_of_sparks_plan(spark, spark_plan, events,
                                                                                     query):
    rows, plan = executed(spark, query)
    expected, spark_own = executed(spark_plan, query)
    assert rows == expected
    assert "Coalesce 1" in plan and "Exchange" not in plan, plan
    assert "Exchange" in spark_own


def test_a_read_larger_than_one_split_is_left_to_spark(spark, events):
    session = spark.newSession()
    session.conf.set("spark.sql.files.openCostInBytes", "1024")  # each file is a few KB: more than one split
    _, plan = executed(session, QUERIES[0])
    assert "Coalesce 1" not in plan and "Exchange" in plan


def test_an_aggregate_over_a_join_is_left_to_spark(spark, spark_plan, events):
    query = f"SELECT a.k, count(*) FROM {TABLE} a JOIN {TABLE} b ON a.id = b.id GROUP BY a.k"
    rows, plan = executed(spark, query)
    assert rows == executed(spark_plan, query)[0]
    assert "Coalesce 1" not in plan
