"""Each query shape is kept incrementally by one strategy (mv/strategies.py), named on EXPLAIN's
`strategy` row; a query refreshed in full every time names none. The strategies' results are
checked elsewhere, each against the query recomputed in full (test_row_views, test_partition_views,
test_mv_combine, test_mv_scenarios, test_mv_window_rows)."""
import uuid

import pytest

import mv
from mv.errors import MvError

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


def operators(spark, query: str) -> list[str]:
    """EXPLAIN CREATE's `operator` rows for a view of `query`, top first, indented by depth."""
    view = f"strategy_view_{uuid.uuid4().hex[:8]}"
    return [r[1] for r in mv.sql(spark, f"EXPLAIN CREATE MATERIALIZED VIEW {view} AS {query}").collect()
            if r[0] == "operator"]


def test_a_view_kept_window_by_window_lists_each_operator_with_its_rule(spark, tables):
    """From the window function down rows pass through and each changed row touches its windows;
    above it, operators are recomputed over the windows touched."""
    found = operators(spark, """SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
                                FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
                                GROUP BY item, window_start, window_end""".format(**tables))
    assert found[0] == "Aggregate: the touched windows' groups: the change's aggregates combined into theirs, or recomputed"
    assert "  Window TUMBLE: each changed row's windows, touched" in found
    assert found[-1].strip().startswith(f"Source `spark_catalog`.`default`.`{tables['bids']}`: its change feed, signed")
    assert not [line for line in found if line.split(": ")[-1].isupper()], found  # no reason code


def test_a_view_kept_session_by_session_lists_its_sessions(spark, tables):
    found = operators(spark, SHAPES["sessions"].format(**tables))
    assert found[:2] == ["Aggregate: the reached sessions' groups, recomputed from their rows",
                         "  Window SESSION: the sessions a change can reach, recomputed from their rows"]


WINDOWED_IN_FULL = [
    ("SELECT item, window_start, window_end, price, ROW_NUMBER() OVER (PARTITION BY item ORDER BY price) AS r "
     "FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
     'Window (OVER): OVER_NOT_BY_WINDOW at "ROW_NUMBER() OVER (PARTITION BY item ORDER BY price) AS r"'),
    (f"SELECT item, window_start, window_end, price FROM {SESSION} WHERE price > 2",
     'Filter: SESSION_ROWS_FILTERED at "price > 2"'),
    ("SELECT ts, window_start, window_end FROM TUMBLE(TABLE(SELECT ts FROM {bids} UNION ALL SELECT ts FROM {asks}), "
     "DESCRIPTOR(ts), INTERVAL '10' MINUTES)", 'Union: SET_OPERATION at "SELECT ts FROM {bids} UNION ALL SELECT ts FROM {asks}"'),
    ("SELECT item, window_start, window_end, count(*) AS n FROM TUMBLE(TABLE({bids}), DESCRIPTOR(ts), "
     "INTERVAL '10' MINUTES) WHERE rand() > 0.5 GROUP BY item, window_start, window_end",
     'Filter: NONDETERMINISTIC at "rand()"'),
]


@pytest.mark.parametrize("query, at_fault", WINDOWED_IN_FULL,
                         ids=["over_not_by_window", "session_rows_filtered", "union_under_window", "rand"])
def test_a_windowed_view_refreshed_in_full_names_the_operator_at_fault(spark, tables, query, at_fault):
    """EXPLAIN points at the operator whose reason makes every refresh full, and at its fragment of
    the query's text; every reason the view has (the first is the refresh's) is on an operator's row."""
    query, at_fault = query.format(**tables), at_fault.format(**tables)
    reasons = explained(spark, query)["reason"].split(",")
    assert at_fault.split(": ")[1].startswith(reasons[0] + " ")
    found = operators(spark, query)
    assert at_fault in [line.strip() for line in found], found
    assert {line.split(": ")[1].split(" at ")[0] for line in found} >= set(reasons), found


def test_incremental_strict_refuses_naming_the_operator_and_its_fragment(spark, tables):
    """The error says where in the query the reason is, as EXPLAIN's operator row does; nothing is created."""
    query, at_fault = WINDOWED_IN_FULL[0]
    view = f"strategy_strict_{uuid.uuid4().hex[:8]}"
    with pytest.raises(MvError) as refused:
        mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} REFRESH POLICY INCREMENTAL STRICT AS {query.format(**tables)}")
    assert refused.value.error_class == "MV_NOT_INCREMENTAL"
    operator, fault = at_fault.split(": ")
    reason, fragment = fault.split(" at ")
    assert f"{reason} ({operator} at {fragment})" in str(refused.value)
    assert view not in [r[0] for r in mv.sql(spark, "SHOW MATERIALIZED VIEWS").collect()]
