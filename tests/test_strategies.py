"""Each query shape is kept incrementally by one strategy (mv/strategies.py), named on EXPLAIN's
`strategy` row; a query refreshed in full every time names none. The strategies' results are
checked elsewhere, each against the query recomputed in full (test_row_views, test_partition_views,
test_mv_combine, test_mv_scenarios, test_mv_window_rows)."""
import uuid

import pytest

import mv

SESSION = "SESSION(TABLE({bids}) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES)"
SHAPES = {
    "rows": "SELECT item, price FROM {bids} WHERE price > 10",
    "partitions": """SELECT item, price, ts FROM (
                       SELECT *, ROW_NUMBER() OVER (PARTITION BY item ORDER BY price DESC, ts) AS rn FROM {bids})
                     WHERE rn = 1""",
    "groups by change": "SELECT category, count(*) AS n FROM {bids} JOIN {items} USING (item) GROUP BY category",
    "groups": "SELECT item, count(*) AS n, sum(price) AS total FROM {bids} GROUP BY item",
    "session join": f"""SELECT l.window_start, l.window_end, l.item, l.price AS bid, r.price AS ask
                        FROM {SESSION.format(bids='{bids}')} l JOIN {SESSION.format(bids='{asks}')} r
                        ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.item = r.item""",
    "sessions": f"""SELECT item, window_start, window_end, count(*) AS n FROM {SESSION.format(bids='{bids}')}
                    GROUP BY item, window_start, window_end""",
    "windows": """SELECT window_start, window_end, count(*) AS n
                  FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
                  GROUP BY window_start, window_end""",
}


@pytest.fixture(scope="module")
def tables(spark):
    names = {t: f"strategy_{t}_{uuid.uuid4().hex[:8]}" for t in ("bids", "asks", "items")}
    for t in ("bids", "asks"):
        spark.sql(f"CREATE TABLE {names[t]} (item STRING, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql(f"CREATE TABLE {names['items']} (item STRING, category STRING) USING delta")
    yield names
    for name in names.values():
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def explained(spark, query: str) -> dict[str, str]:
    """EXPLAIN CREATE's rows for a view of `query` (nothing is created)."""
    view = f"strategy_view_{uuid.uuid4().hex[:8]}"
    return dict(map(tuple, mv.sql(spark, f"EXPLAIN CREATE MATERIALIZED VIEW {view} AS {query}").collect()))


@pytest.mark.parametrize("strategy", list(SHAPES))
def test_each_shape_is_kept_by_its_strategy_named_on_explain(spark, tables, strategy):
    plan = explained(spark, SHAPES[strategy].format(**tables))
    assert plan["technique"] == "incremental", plan
    assert plan["strategy"].split(": ")[0] == strategy, plan


@pytest.mark.parametrize("query, reason", [
    ("SELECT item, price, rand() AS r FROM {bids}", "NONDETERMINISTIC"),
    ("SELECT window_start, window_end, count(*) AS n FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) "
     "WHERE ts > current_timestamp() - INTERVAL 1 DAY GROUP BY window_start, window_end", "READS_CURRENT_TIME"),
], ids=["rand", "last_day"])
def test_a_query_refreshed_in_full_names_no_strategy(spark, tables, query, reason):
    """A query whose result is not its sources' alone (a random number; the clock, whose day moves
    on without a change) is recomputed by every refresh."""
    plan = explained(spark, query.format(**tables))
    assert (plan["technique"], plan["reason"]) == ("full", reason)
    assert plan["strategy"].startswith("none: every refresh is full"), plan
