"""A semi- or anti-join on a top-N's partition keys goes below its rank (mv/jvm/SemiJoinsBelowRankFilters.scala):
only the partitions it keeps are ranked, and the rows are exactly those of Spark's own plan.

Oracle: the same query in a session with `mv.semiJoinsBelowRankFilters=false`, planned as Spark plans it.
"""
import pytest

TABLE = "sjr_bids"
RANKED = (f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY bidder, auction ORDER BY ts DESC, price) AS rn "
          f"FROM {TABLE}) WHERE rn <= {{n}}")
KEYS = "SELECT * FROM VALUES (1, 2), (3, 4), (5, NULL) AS k(bidder, auction)"


@pytest.fixture(scope="module")
def spark_plan(spark):
    """Spark's own plan of every query: the oracle."""
    session = spark.newSession()
    session.conf.set("mv.semiJoinsBelowRankFilters", "false")
    return session


@pytest.fixture(scope="module")
def bids(spark):
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
    spark.sql(f"""CREATE TABLE {TABLE} USING delta AS SELECT id % 7 AS bidder,
                  IF(id % 11 = 0, NULL, id % 5) AS auction, id * 13 % 100 AS price,
                  TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 50) AS ts FROM range(500)""")
    yield TABLE
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")


def optimized(session, query) -> tuple[list, str]:
    """The query's rows, sorted, and its optimized logical plan."""
    frame = session.sql(query)
    return sorted((tuple(r) for r in frame.collect()), key=repr), frame._jdf.queryExecution().optimizedPlan().toString()


def below_the_rank(plan: str) -> bool:
    """Whether the plan's semi- or anti-join is under its Window operator."""
    lines = plan.splitlines()
    window = next(i for i, line in enumerate(lines) if "Window [" in line)
    join = next(i for i, line in enumerate(lines) if "Join LeftSemi" in line or "Join LeftAnti" in line)
    return join > window


@pytest.mark.parametrize("join", ["LEFT SEMI", "LEFT ANTI"])
@pytest.mark.parametrize("n", [1, 3])
def test_a_join_on_the_partition_keys_ranks_only_the_partitions_it_keeps(spark, spark_plan, bids, join, n):
    query = (f"SELECT /*+ BROADCAST(k) */ v.* FROM ({RANKED.format(n=n)}) v {join} JOIN ({KEYS}) k "
             "ON v.bidder <=> k.bidder AND v.auction <=> k.auction")
    rows, plan = optimized(spark, query)
    expected, spark_own = optimized(spark_plan, query)
    assert rows == expected and rows
    assert below_the_rank(plan), plan
    assert not below_the_rank(spark_own)


@pytest.mark.parametrize("on", [
    "v.bidder <=> k.bidder AND v.price > k.auction",  # reads a column that is not a partition key
    "v.rn = k.bidder",  # reads the rank itself
])
def test_a_join_on_other_columns_stays_above_the_rank(spark, spark_plan, bids, on):
    query = f"SELECT v.* FROM ({RANKED.format(n=2)}) v LEFT SEMI JOIN ({KEYS}) k ON {on}"
    rows, plan = optimized(spark, query)
    assert rows == optimized(spark_plan, query)[0]
    assert not below_the_rank(plan), plan


def test_a_partition_by_an_expression_of_the_key_stays_above_the_rank(spark, spark_plan, bids):
    """Partitioned by bidder % 3, one partition holds several bidders: a join on bidder would cut it."""
    query = (f"SELECT v.* FROM (SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY bidder % 3 ORDER BY ts, "
             f"price, auction) AS rn FROM {TABLE}) WHERE rn <= 2) v LEFT SEMI JOIN ({KEYS}) k ON v.bidder = k.bidder")
    rows, plan = optimized(spark, query)
    assert rows == optimized(spark_plan, query)[0]
    assert not below_the_rank(plan), plan
