"""A refresh's merge classified in the driver (mv/jvm/LocalMerge.scala) writes exactly what the
distributed merge writes: the same view rows and the same change feed, so downstream views see
the same retractions. It is taken only when both sides are small and its keys hash exactly.

Oracle: a twin view refreshed in a session with `mv.localMergeRows=0`, where every merge is the
distributed full outer join (RefreshCommit.classify); and the view's query run in full.
"""
import time

import pytest

from bench.refresh import _executions_since, _scala_dict, _scala_list, execution_marker
from mv import progress
from mv.settings import session_settings

SOURCE = "lm_bids"
VIEWS = {
    "lm_windows": "SELECT k, window_start, window_end, count(*) AS n, sum(price) AS total "
                  f"FROM TUMBLE(TABLE({SOURCE}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY k, window_start, window_end",
    "lm_rows": f"SELECT id, k, price, window_start, window_end FROM TUMBLE(TABLE({SOURCE}), DESCRIPTOR(ts), "
               "INTERVAL '10' MINUTES)",
    "lm_sessions": "SELECT k, window_start, window_end, count(*) AS n FROM SESSION(TABLE(" + SOURCE + ") "
                   "PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES) GROUP BY k, window_start, window_end",
}
PRICES = f"SELECT price, count(*) AS n FROM {SOURCE} GROUP BY price"  # a DOUBLE key: not hashed
CHANGES = [
    "INSERT INTO {s} VALUES (1, 'a', 2.0, TIMESTAMP'2024-01-01 00:01:00'), (2, 'b', 3.0, TIMESTAMP'2024-01-01 00:02:00'),"
    " (3, 'a', 4.0, TIMESTAMP'2024-01-01 00:12:00'), (4, NULL, 1.0, TIMESTAMP'2024-01-01 00:13:00'),"
    " (5, 'a', 1.0, TIMESTAMP'2024-01-01 00:03:00'), (6, 'c', 8.0, TIMESTAMP'2024-01-01 00:31:00')",
    # a value changes in place (1, 6) and a row moves to another window (3)
    "UPDATE {s} SET price = IF(id = 3, price, price + 10), ts = IF(id = 3, TIMESTAMP'2024-01-01 00:22:00', ts) "
    "WHERE id IN (1, 3, 6)",
    "DELETE FROM {s} WHERE id IN (2, 4) OR k = 'c'",  # a group, a window and a session emptied
]


@pytest.fixture(scope="module")
def distributed(spark):
    """The oracle's session: every merge by the distributed join."""
    session = spark.newSession()
    session.conf.set("mv.localMergeRows", "0")
    return session


@pytest.fixture(scope="module")
def twins(spark, distributed):
    """Each view twice over one source: `<name>` merged in the driver, `<name>_d` by the distributed
    join; a view has its own change feed. And lm_prices, grouped by a DOUBLE."""
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")
    spark.sql(f"CREATE TABLE {SOURCE} (id BIGINT, k STRING, price DOUBLE, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    for name, query in VIEWS.items():
        for view in (name, f"{name}_d"):
            spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}")
            spark.sql(f"CREATE MATERIALIZED VIEW {view} AS {query}").collect()
    spark.sql(f"CREATE MATERIALIZED VIEW lm_prices AS {PRICES}").collect()
    yield list(VIEWS)
    for view in [*VIEWS, *(f"{name}_d" for name in VIEWS), "lm_prices"]:
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}")
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")


def rows(spark, query):
    return sorted((tuple(r) for r in spark.sql(query).collect()), key=repr)


def feed(spark, view):
    """The view's change feed since its creation, without versions and times: what downstream reads."""
    return rows(spark, f"SELECT * EXCEPT (_commit_version, _commit_timestamp) FROM table_changes('{view}', 0)")


def refresh_executions(spark, statement) -> list[int]:
    """Run the refresh `statement` and return the ids of the Spark SQL executions it ran. The status
    store's listener records them asynchronously: wait for the commit's own."""
    marker = execution_marker(spark)
    spark.sql(statement).collect()
    deadline = time.monotonic() + 30
    while True:
        executions = _executions_since(spark, marker)
        if any("RefreshCommitCommand" in e["plan"] for e in executions) or time.monotonic() > deadline:
            return [e["id"] for e in executions]
        time.sleep(0.2)


def merged_locally(spark, statement) -> bool:
    """Whether the refresh classified its merge in the driver, as the Spark UI's executions show:
    no full outer join of the view's rows and the source's."""
    store = spark._jsparkSession.sharedState().statusStore()
    plans = [store.execution(i).get().physicalPlanDescription() for i in refresh_executions(spark, statement)]
    return not any("FullOuter" in plan for plan in plans)


@pytest.mark.slow
def test_the_driver_merges_what_the_distributed_merge_merges(spark, distributed, twins):
    for change in CHANGES:
        spark.sql(change.format(s=SOURCE))
        for name in twins:
            spark.sql(f"REFRESH MATERIALIZED VIEW {name}").collect()
            distributed.sql(f"REFRESH MATERIALIZED VIEW {name}_d").collect()

            assert rows(spark, f"SELECT * FROM {name}") == rows(spark, VIEWS[name]), (change, name)
            assert rows(spark, f"SELECT * FROM {name}") == rows(spark, f"SELECT * FROM {name}_d"), (change, name)
    for name in twins:
        assert feed(spark, name) == feed(spark, f"{name}_d"), name


def test_a_small_merge_is_classified_in_the_driver_and_a_large_one_is_not(spark, twins):
    spark.sql(f"INSERT INTO {SOURCE} VALUES (7, 'a', 5.0, TIMESTAMP'2024-01-01 00:04:00')")
    assert merged_locally(spark, "REFRESH MATERIALIZED VIEW lm_windows")

    spark.sql(f"INSERT INTO {SOURCE} VALUES (8, 'a', 6.0, TIMESTAMP'2024-01-01 00:05:00')")
    spark.conf.set("mv.localMergeRows", "1")
    try:
        assert not merged_locally(spark, "REFRESH MATERIALIZED VIEW lm_windows")
    finally:
        spark.conf.unset("mv.localMergeRows")
    assert rows(spark, "SELECT * FROM lm_windows") == rows(spark, VIEWS["lm_windows"])


def test_keys_whose_equality_is_not_their_bytes_go_to_the_distributed_merge(spark, twins):
    spark.sql(f"INSERT INTO {SOURCE} VALUES (9, 'b', -0.0, TIMESTAMP'2024-01-01 00:06:00')")

    assert not merged_locally(spark, "REFRESH MATERIALIZED VIEW lm_prices")
    assert rows(spark, "SELECT * FROM lm_prices") == rows(spark, PRICES)


def test_a_limit_that_is_not_a_number_fails_the_refresh_by_name_and_changes_nothing(spark, twins):
    before = rows(spark, "SELECT * FROM lm_windows")
    spark.sql(f"INSERT INTO {SOURCE} VALUES (10, 'c', 2.0, TIMESTAMP'2024-01-01 00:07:00')")
    with session_settings(spark, {"mv.localMergeRows": "lots"}), \
            pytest.raises(Exception, match="mv.localMergeRows must be a whole number of rows"):
        spark.sql("REFRESH MATERIALIZED VIEW lm_windows").collect()
    assert rows(spark, "SELECT * FROM lm_windows") == before
    spark.sql("REFRESH MATERIALIZED VIEW lm_windows").collect()
    assert rows(spark, "SELECT * FROM lm_windows") == rows(spark, VIEWS["lm_windows"])


def test_a_large_file_under_deletion_vectors_counts_only_the_rows_its_filter_reads(spark):
    """A view file over the limit still merges in the driver when the touched windows' rows in it are
    few: it keeps its rows under a deletion vector, so only those rows are read (and counted)."""
    session = spark.newSession()
    session.conf.set("mv.merge.deletionVectorBytes", "1")    # every file keeps its rows
    query = ("SELECT k, window_start, window_end, count(*) AS n, sum(price) AS total "
             "FROM TUMBLE(TABLE(lm_dv), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY k, window_start, window_end")
    spark.sql("DROP TABLE IF EXISTS lm_dv")
    spark.sql("CREATE TABLE lm_dv (id BIGINT, k BIGINT, price DOUBLE, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO lm_dv SELECT id, id % 10, id, timestamp_seconds(1704067200 + id * 6) FROM range(600)")
    session.sql(f"CREATE MATERIALIZED VIEW lm_dv_windows AS {query}").collect()   # 6 windows x 10 keys, one file
    try:
        for limit, local in (("50", True), ("5", False)):   # the file holds 60 rows, the touched window 10
            session.conf.set("mv.localMergeRows", limit)
            spark.sql("UPDATE lm_dv SET price = price + 1 WHERE id IN (1, 2)")
            assert merged_locally(session, "REFRESH MATERIALIZED VIEW lm_dv_windows") == local, limit
            metrics = spark.sql("DESCRIBE HISTORY lm_dv_windows LIMIT 1").first().operationMetrics
            assert metrics["numTargetDeletionVectorsAdded"] == "1" or metrics["numTargetDeletionVectorsUpdated"] == "1"
            assert rows(spark, "SELECT * FROM lm_dv_windows") == rows(spark, query), limit
    finally:
        spark.sql("DROP MATERIALIZED VIEW IF EXISTS lm_dv_windows")
        spark.sql("DROP TABLE IF EXISTS lm_dv")


def rows_out_of(spark, statement, picked) -> list[int]:
    """Run the refresh `statement` and return the rows each plan node of its executions that
    `picked(node)` accepts produced (Spark's `number of output rows`)."""
    store = spark._jsparkSession.sharedState().statusStore()
    found = []
    for i in refresh_executions(spark, statement):
        values = _scala_dict(store.execution(i).get().metricValues() or {})
        for node in _scala_list(store.planGraph(i).allNodes()):
            if picked(node):
                found += [int(values.get(m.accumulatorId(), "0").replace(",", ""))
                          for m in _scala_list(node.metrics()) if m.name() == "number of output rows"]
    return found


def classified_rows(spark, statement) -> list[int]:
    """The rows each full outer join of the refresh `statement` produced: the distributed merge's
    classification of the view's candidate rows and the source's."""
    return rows_out_of(spark, statement, lambda node: "FullOuter" in node.desc())

@pytest.fixture
def scattered(spark):
    """A view of 15,000 one-minute windows (3,000 minutes x 5 keys, two rows a group) over
    lm_scatter, whose file keeps its rows under deletion vectors, and a session whose merges say
    so: (session, query). Dropped afterwards."""
    session = spark.newSession()
    session.conf.set("mv.merge.deletionVectorBytes", "1")    # the view's file keeps its rows: read filtered
    query = ("SELECT k, window_start, window_end, count(*) AS n, max(price) AS top "
             "FROM TUMBLE(TABLE(lm_scatter), DESCRIPTOR(ts), INTERVAL '1' MINUTE) GROUP BY k, window_start, window_end")
    spark.sql("DROP TABLE IF EXISTS lm_scatter")
    spark.sql("CREATE TABLE lm_scatter (id BIGINT, k BIGINT, price BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO lm_scatter SELECT id, id % 5, id, timestamp_seconds(1704067200 + (id DIV 10) * 60) "
              "FROM range(30000)")
    session.sql(f"CREATE MATERIALIZED VIEW lm_scatter_windows AS {query}").collect()
    yield session, query
    spark.sql("DROP MATERIALIZED VIEW IF EXISTS lm_scatter_windows")
    spark.sql("DROP TABLE IF EXISTS lm_scatter")


def test_a_scattered_change_classifies_only_the_view_rows_it_reaches(spark, scattered):
    """A change spread over many windows is combined with the view's rows (mv/combine.py); Spark
    estimates that merge source (joins of checkpointed rows) at gigabytes though it holds a few
    hundred rows. Its true size must decide, so the view's rows it does not reach are left out
    before the classifying join, not all sent through it (bench/refresh.py's 0.1% change over seven
    days: 2.9M view rows joined for 4,691 source rows, 15 of a 24 s refresh)."""
    session, query = scattered
    session.conf.set("mv.localMergeRows", "0")              # the distributed merge
    # each group's highest price withdrawn in every 30th minute: 500 groups in 100 separate windows
    spark.sql("DELETE FROM lm_scatter WHERE (id DIV 10) % 30 = 0 AND id % 10 >= 5")

    joined = classified_rows(session, "REFRESH MATERIALIZED VIEW lm_scatter_windows")

    assert joined and max(joined) <= 1000, joined       # the 500 touched groups' rows, not all 15,000
    assert rows(spark, "SELECT * FROM lm_scatter_windows") == rows(spark, query)

def parquet_rows_read(spark, statement, but: str = "") -> int:
    """The rows the refresh `statement` read from parquet files (a change feed's scan is not one),
    but the table `but`'s: a scan is named for its table (the commit's own scans of the view's
    files have no name)."""
    return sum(rows_out_of(spark, statement, lambda node: node.name().startswith("Scan parquet")
                           and not (but and node.name().endswith(f".{but}"))))

@pytest.fixture
def retracting(spark):
    """A view of rows (3,000, in three files that keep their rows under deletion vectors) over a
    source of prices, in a session of its own; dropped afterwards."""
    session = spark.newSession()
    session.conf.set("mv.merge.deletionVectorBytes", "1")
    spark.sql("DROP TABLE IF EXISTS lm_reach")
    spark.sql("CREATE TABLE lm_reach (id BIGINT, k BIGINT, price BIGINT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO lm_reach SELECT id, id % 7, id FROM range(1000)")
    session.sql("CREATE MATERIALIZED VIEW lm_reach_rows REFRESH POLICY INCREMENTAL AS SELECT id, k, price FROM lm_reach")\
        .collect()  # never full: AUTO may weigh a change of 5 rows in 3,000 and go full
    for start in (1000, 2000):
        spark.sql(f"INSERT INTO lm_reach SELECT id, id % 7, id FROM range({start}, {start + 1000})")
        session.sql("REFRESH MATERIALIZED VIEW lm_reach_rows").collect()
    yield session
    spark.sql("DROP MATERIALIZED VIEW IF EXISTS lm_reach_rows")
    spark.sql("DROP TABLE IF EXISTS lm_reach")


def test_a_retraction_reads_the_view_rows_it_reaches_once(spark, retracting):
    """The rows a change retracts are found in the view once: the read that counts their copies
    gives the commit the rows to mark deleted (writes.reached_rows), which it does not read again."""
    spark.sql("UPDATE lm_reach SET price = price + 1 WHERE id IN (0, 1500, 2999)")   # rows in every file

    read = parquet_rows_read(retracting, "REFRESH MATERIALIZED VIEW lm_reach_rows")

    assert 0 < read <= 3000, read          # twice 3,000 when the commit read the files again
    assert rows(spark, "SELECT * FROM lm_reach_rows") == rows(spark, "SELECT id, k, price FROM lm_reach")


@pytest.mark.parametrize("fresh", ["true", "false"])  # false: the copies to insert are classified too
def test_a_retraction_deletes_the_view_rows_it_reached_without_joining_them(spark, retracting, fresh):
    """The view's copies of the rows a change takes copies from, read with their files and row
    indexes, are the rows the commit deletes: the distributed merge classifies them, and the copies
    to insert, without a join (writes.counted). Duplicates keep their exact counts, and the view's
    change feed shows net changes."""
    retracting.conf.set("mv.localMergeRows", "0")  # not in the driver: the distributed merge
    retracting.conf.set("mv.merge.freshInserts", fresh)
    spark.sql("INSERT INTO lm_reach VALUES (7, 0, 7)")  # a second copy of row 7
    retracting.sql("REFRESH MATERIALIZED VIEW lm_reach_rows").collect()
    spark.sql("UPDATE lm_reach SET price = price + 1 WHERE id IN (0, 1500, 2999)")
    spark.sql("DELETE FROM lm_reach WHERE id = 7")
    version = spark.sql("DESCRIBE HISTORY lm_reach_rows LIMIT 1").first().version

    assert classified_rows(retracting, "REFRESH MATERIALIZED VIEW lm_reach_rows") == []

    assert rows(spark, "SELECT * FROM lm_reach_rows") == rows(spark, "SELECT id, k, price FROM lm_reach")
    feed = spark.sql(f"SELECT _change_type, count(*) FROM table_changes('lm_reach_rows', {version + 1}) GROUP BY 1")
    assert dict(map(tuple, feed.collect())) == {"delete": 5, "insert": 3}


def test_a_view_rewritten_while_a_refresh_merges_is_read_again_by_the_commit(spark, retracting):
    """OPTIMIZE may compact the view between the refresh's read of the rows it reaches and its
    commit: those rows' files are gone from the version the commit reads, so it reads them itself."""
    spark.sql("UPDATE lm_reach SET price = price + 1 WHERE id IN (0, 1500, 2999)")
    files = spark.sql("DESCRIBE DETAIL lm_reach_rows").first().numFiles

    def compact(view, phase):
        if view.endswith("lm_reach_rows") and phase == "merging":
            spark.sql("OPTIMIZE lm_reach_rows")
    with progress.watching(compact):
        retracting.sql("REFRESH MATERIALIZED VIEW lm_reach_rows").collect()

    assert files > 1 and spark.sql("DESCRIBE HISTORY lm_reach_rows LIMIT 2").collect()[1].operation == "OPTIMIZE"
    assert rows(spark, "SELECT * FROM lm_reach_rows") == rows(spark, "SELECT id, k, price FROM lm_reach")


def test_a_scattered_change_reads_the_view_rows_it_combines_once(spark, scattered):
    """The view rows a scattered change combines with (mv/combine.py) are the rows its merge
    reaches: read once, with their files and row indexes, and not read again by the commit."""
    session, query = scattered
    # each group's lower price withdrawn in every 30th minute: its row combined, not recomputed
    spark.sql("DELETE FROM lm_scatter WHERE (id DIV 10) % 30 = 0 AND id % 10 < 5")

    read = parquet_rows_read(session, "REFRESH MATERIALIZED VIEW lm_scatter_windows")

    assert 0 < read <= 15000, read       # twice 15,000 when the commit read the view's file again
    assert rows(spark, "SELECT * FROM lm_scatter_windows") == rows(spark, query)


def test_groups_recomputed_by_key_read_their_view_rows_once(spark):
    """A GROUP BY whose groups are recomputed (avg: not combined) finds the touched groups' rows in
    the view once: the commit takes them as the rows it marks deleted and does not read them again."""
    session = spark.newSession()
    session.conf.set("mv.merge.deletionVectorBytes", "1")    # the view's file keeps its rows
    query = "SELECT k, avg(price) AS mean, count(*) AS n FROM lm_means GROUP BY k"
    spark.sql("DROP TABLE IF EXISTS lm_means")
    spark.sql("CREATE TABLE lm_means (id BIGINT, k BIGINT, price BIGINT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO lm_means SELECT id, id % 1000, id FROM range(5000)")   # 1,000 groups, one file
    session.sql(f"CREATE MATERIALIZED VIEW lm_means_view AS {query}").collect()
    try:
        spark.sql("UPDATE lm_means SET price = price + 1 WHERE id IN (0, 500, 999)")

        read = parquet_rows_read(session, "REFRESH MATERIALIZED VIEW lm_means_view", but="lm_means")

        assert 0 < read <= 1000, read        # twice 1,000 when the commit read the view's file again
        assert rows(spark, "SELECT * FROM lm_means_view") == rows(spark, query)
    finally:
        spark.sql("DROP MATERIALIZED VIEW IF EXISTS lm_means_view")
        spark.sql("DROP TABLE IF EXISTS lm_means")
