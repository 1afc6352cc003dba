"""A refresh's merge marks the changed rows of a view's larger files deleted with deletion vectors
instead of rewriting those files (mv/jvm/DeletionVectors.scala): it writes only the new rows, the
view holds exactly its query's rows, and views reading it see every retraction in its change feed.

Oracles: the view's query run in full, for the view and for a view over it; Delta's own history
metrics say which files were marked and which rewritten. `mv.merge.deletionVectorBytes=1` makes
every file of these small views large enough to mark.
"""
import pytest

# Two 2,000-row views refreshed through five rounds each, about 70 s: make test-slow (CI runs it
# after make test); the merge's other paths are covered by the scenario and local-merge tests.
pytestmark = pytest.mark.slow

SOURCE = "dv_bids"
QUERY = ("SELECT k, window_start, window_end, count(*) AS n, sum(price) AS total "
         f"FROM TUMBLE(TABLE({SOURCE}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY k, window_start, window_end")
ROLLUP = "SELECT k, sum(n) AS n, sum(total) AS total FROM {view} GROUP BY k"
CHANGES = [
    "UPDATE {s} SET price = price + 1 WHERE id % 97 = 0",                     # a value changes in place
    "DELETE FROM {s} WHERE id % 89 = 0",
    "INSERT INTO {s} SELECT id, 'z', 1.0, timestamp_seconds(1704067200 + id * 7) FROM range(2000, 2100)",
    "UPDATE {s} SET ts = ts + INTERVAL 10 MINUTES WHERE id % 101 = 0",        # rows move to another window
    "DELETE FROM {s} WHERE id < 1500",                                          # most of the view's rows go
    "UPDATE {s} SET price = 0 WHERE id % 3 = 0",
]


@pytest.fixture(scope="module", params=["driver", "distributed"])
def marking(spark, request):
    """A session whose merges mark rows of any file deleted; classified in the driver (LocalMerge)
    or by the distributed join."""
    session = spark.newSession()
    session.conf.set("mv.merge.deletionVectorBytes", "1")
    session.conf.set("mv.localMergeRows", "100000" if request.param == "driver" else "0")
    return session


@pytest.fixture
def views(spark, marking):
    """The source (2,000 rows over four hours, five keys), dv_windows over it and dv_rollup over that."""
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")
    spark.sql(f"CREATE TABLE {SOURCE} (id BIGINT, k STRING, price DOUBLE, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(f"INSERT INTO {SOURCE} SELECT id, CAST(id % 5 AS STRING), id * 1.0, "
              "timestamp_seconds(1704067200 + id * 7) FROM range(2000)")
    marking.sql(f"CREATE MATERIALIZED VIEW dv_windows AS {QUERY}").collect()
    marking.sql(f"CREATE MATERIALIZED VIEW dv_rollup AS {ROLLUP.format(view='dv_windows')}").collect()
    yield marking
    for view in ("dv_rollup", "dv_windows"):
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}")
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")


def differences(spark, table, query) -> int:
    have, want = spark.table(table), spark.sql(query)
    return have.exceptAll(want).count() + want.exceptAll(have).count()


def merge_metrics(spark, view) -> dict:
    """The newest commit's metrics, as numbers: what Delta says the refresh's merge did."""
    return {k: int(v) for k, v in spark.sql(f"DESCRIBE HISTORY {view} LIMIT 1").first().operationMetrics.items()}


def test_changed_rows_are_marked_deleted_only_new_rows_are_written_and_views_over_it_see_the_retractions(views):
    marked = 0
    for change in CHANGES:
        views.sql(change.format(s=SOURCE))
        for view in ("dv_windows", "dv_rollup"):
            assert views.sql(f"REFRESH MATERIALIZED VIEW {view}").first().technique == "incremental"
        metrics = merge_metrics(views, "dv_windows")
        marked += metrics["numTargetDeletionVectorsAdded"]
        if metrics["numTargetFilesRemoved"] == 0:       # no file rewritten: nothing of its was copied
            assert metrics["numTargetRowsCopied"] == 0, change
        assert differences(views, "dv_windows", QUERY) == 0, change
        assert differences(views, "dv_rollup", ROLLUP.format(view=f"({QUERY})")) == 0, change
    assert marked >= 3


def test_a_file_mostly_deleted_already_is_rewritten_with_the_rows_it_keeps(views):
    views.sql(f"DELETE FROM {SOURCE} WHERE ts < TIMESTAMP'2024-01-01 03:00:00'")  # 75% of the view's rows go
    views.sql("REFRESH MATERIALIZED VIEW dv_windows").collect()
    assert merge_metrics(views, "dv_windows")["numTargetFilesRemoved"] == 0          # marked, not rewritten
    views.sql(f"UPDATE {SOURCE} SET price = price + 1 WHERE id = 1999")
    views.sql("REFRESH MATERIALIZED VIEW dv_windows").collect()
    metrics = merge_metrics(views, "dv_windows")
    assert metrics["numTargetFilesRemoved"] == 1 and metrics["numTargetRowsCopied"] > 0
    assert differences(views, "dv_windows", QUERY) == 0


def test_small_files_are_rewritten_under_the_default_size(spark, views):
    spark.sql(f"UPDATE {SOURCE} SET price = price + 1 WHERE id % 97 = 0")
    spark.sql("REFRESH MATERIALIZED VIEW dv_windows").collect()                   # the default session: 1 MiB
    metrics = merge_metrics(spark, "dv_windows")
    assert metrics["numTargetDeletionVectorsAdded"] == 0 and metrics["numTargetFilesRemoved"] == 1
    assert differences(spark, "dv_windows", QUERY) == 0


def test_an_invalid_size_fails_by_name(spark, views):
    session = spark.newSession()
    session.conf.set("mv.merge.deletionVectorBytes", "many")
    spark.sql(f"UPDATE {SOURCE} SET price = price + 1 WHERE id = 3")
    with pytest.raises(Exception, match="mv.merge.deletionVectorBytes must be a whole number of bytes"):
        session.sql("REFRESH MATERIALIZED VIEW dv_windows").collect()
    assert differences(spark, "dv_windows", QUERY) > 0                             # nothing applied
