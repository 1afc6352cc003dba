"""Refreshes that meet trouble: a concurrent refresh, a change feed that is gone, a source whose
schema no longer fits the query. Each ends in a clear error or a recorded fallback, never a
wrong view."""
import json
import threading
from pathlib import Path

import pytest

import mv
from mv import progress
from mv.errors import MvError
from mv.query import sql_string

QUERY = """SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
    FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY item, window_start, window_end"""


@pytest.fixture
def source(spark, request):
    name = f"rel_{request.node.name[5:30]}"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (item STRING, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql(f"INSERT INTO {name} VALUES ('A', 1, TIMESTAMP'2024-01-01 00:01:00'), ('B', 2, TIMESTAMP'2024-01-01 00:12:00')")
    yield name
    for table in (f"{name}_v", f"{name}_v__late", f"{name}_v__open", name):
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def rows(spark, query):
    return sorted(tuple(r) for r in spark.sql(query).collect())


def create_view(spark, source, clauses=""):
    mv.sql(spark, f"CREATE MATERIALIZED VIEW {source}_v {clauses} AS {QUERY.format(source=source)}")
    return f"{source}_v"


CLOSE = "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE GRACE INTERVAL '1' HOUR"


@pytest.mark.parametrize("clauses", ["", CLOSE])   # EMIT ON WINDOW CLOSE: open windows kept in <view>__open too
def test_two_refreshes_at_once_apply_each_change_once(spark, source, clauses):
    view = create_view(spark, source, clauses)
    closed = "SELECT * FROM ({}) WHERE window_end <= TIMESTAMP'2024-01-01 {}'" if clauses else "{}"
    spark.sql(f"INSERT INTO {source} VALUES ('A', 5, TIMESTAMP'2024-01-01 00:03:00'), ('C', 7, TIMESTAMP'2024-01-01 00:25:00')")
    outcomes, failures = [], []

    def refresh():
        try:
            outcomes.append(mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first())
        except MvError as e:
            failures.append(e.error_class)

    threads = [threading.Thread(target=refresh) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes, failures
    assert set(failures) <= {"MV_CONCURRENT_REFRESH"}
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, closed.format(QUERY.format(source=source), "00:24"))
    history = rows(spark, f"SELECT refresh_id, count(*) FROM mv_refresh_history WHERE view = '{view}' GROUP BY 1")
    assert all(count == 1 for _, count in history)
    spark.sql(f"INSERT INTO {source} VALUES ('C', 1, TIMESTAMP'2024-01-01 00:45:00')")   # closes 00:20-00:30
    mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").collect()
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, closed.format(QUERY.format(source=source), "00:44"))


GROUPS = "SELECT item, count(*) AS n, max(price) AS top FROM {source} GROUP BY item"


@pytest.mark.parametrize("during", ["CREATE", "REFRESH"])
def test_a_row_written_to_a_source_during_a_refresh_is_counted_once(spark, source, during):
    """Writers do not wait for refreshes. A row added while a refresh runs belongs to the next one,
    which reads it from the change feed; the running refresh reads its sources as of the versions
    it recorded, so the row is not counted by both. Here the write lands just before the MERGE,
    where the view's groups are recomputed from the source (a full refresh; a retracted maximum)."""
    written = []

    def write_once(_view, phase):
        if phase == "merging" and not written:
            written.append(phase)
            spark.sql(f"INSERT INTO {source} VALUES ('A', 3, TIMESTAMP'2024-01-01 00:05:00')")

    view = f"{source}_v"
    statement = f"CREATE MATERIALIZED VIEW {view} AS {GROUPS.format(source=source)}"
    if during == "REFRESH":
        mv.sql(spark, statement)
        spark.sql(f"DELETE FROM {source} WHERE item = 'A'")  # its maximum retracted: recomputed
        statement = f"REFRESH MATERIALIZED VIEW {view}"
    with progress.watching(write_once):
        mv.sql(spark, statement)
    assert written
    mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}")
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, GROUPS.format(source=source))


def test_a_change_feed_that_is_gone_fails_clearly_under_incremental_policy(spark, source):
    view = create_view(spark, source, "REFRESH POLICY INCREMENTAL")
    spark.sql(f"ALTER TABLE {source} SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    spark.sql(f"INSERT INTO {source} VALUES ('A', 5, TIMESTAMP'2024-01-01 00:03:00')")
    before = rows(spark, f"SELECT * FROM {view}")
    with pytest.raises(MvError) as raised:
        mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}")
    assert raised.value.error_class == "MV_CHANGE_FEED_UNAVAILABLE"
    assert "REFRESH MATERIALIZED VIEW" in raised.value.hint and "FULL" in raised.value.hint
    assert rows(spark, f"SELECT * FROM {view}") == before
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view} FULL").first()
    assert outcome.technique == "full"
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, QUERY.format(source=source))


def test_auto_policy_falls_back_to_full_when_the_change_feed_is_gone(spark, source):
    view = create_view(spark, source)
    spark.sql(f"ALTER TABLE {source} SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    spark.sql(f"INSERT INTO {source} VALUES ('A', 5, TIMESTAMP'2024-01-01 00:03:00')")
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    assert (outcome.technique, outcome.reason) == ("full", "CHANGE_FEED_UNAVAILABLE")
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, QUERY.format(source=source))
    recorded = spark.sql(f"SELECT reason FROM mv_refresh_history WHERE view = '{view}' "
                         "ORDER BY refresh_id DESC LIMIT 1").first()[0]
    assert recorded == "CHANGE_FEED_UNAVAILABLE"


def test_a_source_schema_change_that_breaks_the_query_is_reported_and_changes_nothing(spark, source):
    view = create_view(spark, source)
    before = rows(spark, f"SELECT * FROM {view}")
    spark.sql(f"CREATE OR REPLACE TABLE {source} (item STRING, amount BIGINT, ts TIMESTAMP) USING delta")
    with pytest.raises(MvError) as raised:
        mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}")
    assert raised.value.error_class == "MV_QUERY_NO_LONGER_VALID"
    assert "price" in str(raised.value)
    assert rows(spark, f"SELECT * FROM {view}") == before


def test_building_snapshots_ahead_skips_missing_tables_and_swallows_their_errors(spark, source):
    from mv import snapshots
    spark.sql("CREATE OR REPLACE TEMP VIEW rel_not_delta AS SELECT 1 AS x")
    with snapshots.warming(spark, ["rel_no_such_table", "rel_not_delta", source]):
        pass  # the thread met a missing table and one DESCRIBE DETAIL rejects, and carried on
    assert rows(spark, f"SELECT item, price FROM {source}") == [("A", 1), ("B", 2)]


def _clean_up_log(spark, table, maintenance_commits=12):
    """What Delta's log cleanup does to a table whose nightly jobs commit to it: a checkpoint after
    the maintenance commits, then every commit file before that checkpoint removed (as cleanup
    does once they are older than delta.logRetentionDuration). A view checkpoints every 100 commits;
    Delta's default of 10 brings the checkpoint within the maintenance commits."""
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.checkpointInterval' = '10')")
    for i in range(maintenance_commits):
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('team.nightly' = '{i}')")
    spark.sql(f"OPTIMIZE {table}")
    log = Path(spark.sql(f"DESCRIBE DETAIL {table}").first()["location"].removeprefix("file:")) / "_delta_log"
    def version(path):
        return int(path.name.split(".")[0]) if path.name.split(".")[0].isdigit() else None

    checkpoint = max(version(p) for p in log.glob("*.checkpoint.parquet"))
    for file in [*log.glob("*.json"), *log.glob("*.crc")]:
        if version(file) is not None and version(file) < checkpoint:
            file.unlink()
    spark.sql(f"REFRESH TABLE {table}")


def test_a_view_keeps_refreshing_incrementally_after_maintenance_and_log_cleanup(spark, source):
    view = create_view(spark, source, "REFRESH POLICY INCREMENTAL STRICT")
    spark.sql(f"INSERT INTO {source} VALUES ('A', 5, TIMESTAMP'2024-01-01 00:03:00')")
    mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}")
    _clean_up_log(spark, view)
    spark.sql(f"INSERT INTO {source} VALUES ('C', 7, TIMESTAMP'2024-01-01 00:25:00')")
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    assert (outcome.technique, outcome.reason, outcome.refresh_id) == ("incremental", "CHANGES_ONLY", 3)
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, QUERY.format(source=source))


def _unset_around_the_rule(spark, table: str, key: str) -> None:
    """Unset a table property as a session without the extension would: Delta's own command, run
    without analysis, so the read-only rule (which refuses ALTERs of `mv.*` keys) never sees it."""
    jvm, session = spark._jvm, spark._jsparkSession
    delta = jvm.org.apache.spark.sql.delta
    target = delta.catalog.DeltaTableV2.apply(session, jvm.org.apache.spark.sql.catalyst.TableIdentifier(table), "test")
    keys = jvm.scala.jdk.javaapi.CollectionConverters.asScala([key]).toSeq()
    delta.commands.AlterTableUnsetPropertiesDeltaCommand(target, keys, False, False).run(session)


@pytest.mark.parametrize("policy", ["AUTO", "INCREMENTAL STRICT"])
def test_a_view_whose_state_is_gone_refreshes_in_full_once_and_never_loops(spark, source, policy):
    """A view last refreshed before its state was a table property kept the state only in commits
    that log cleanup removes: under AUTO it refreshes in full (STATE_LOST), under an incremental
    policy the error's hint (REFRESH ... FULL) works, and the refresh ids carry on."""
    view = create_view(spark, source, f"REFRESH POLICY {policy}")
    last = spark.sql(f"SELECT max(refresh_id) FROM mv_refresh_history WHERE view = '{view}'").first()[0]
    _unset_around_the_rule(spark, view, "mv.state")  # as such a view's table was
    _clean_up_log(spark, view)
    spark.sql(f"INSERT INTO {source} VALUES ('C', 7, TIMESTAMP'2024-01-01 00:25:00')")
    if policy == "AUTO":
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
        assert (outcome.technique, outcome.reason) == ("full", "STATE_LOST")
    else:
        before = rows(spark, f"SELECT * FROM {view}")
        with pytest.raises(MvError) as raised:
            mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}")
        assert raised.value.error_class == "MV_STATE_LOST"
        assert f"REFRESH MATERIALIZED VIEW {view} FULL" in raised.value.hint
        assert rows(spark, f"SELECT * FROM {view}") == before
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view} FULL").first()
    assert outcome.refresh_id == last + 1  # refresh ids carry on: late rows keyed by them still land
    spark.sql(f"INSERT INTO {source} VALUES ('D', 9, TIMESTAMP'2024-01-01 00:31:00')")
    again = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    assert (again.technique, again.refresh_id) == ("incremental", last + 2)
    assert rows(spark, f"SELECT * FROM {view}") == rows(spark, QUERY.format(source=source))
    # The history is the view's commits: refresh `last` went with the cleaned-up log, the rest are there once.
    history = rows(spark, f"SELECT refresh_id, count(*) FROM mv_refresh_history WHERE view = '{view}' GROUP BY 1")
    assert history == [(last + 1, 1), (last + 2, 1)]


def test_late_rows_are_appended_once_per_refresh_and_part_even_in_a_late_table_of_the_transaction_id_days(spark):
    """MV_COMMIT_LATE_ROWS (mv/jvm/LateRowsCommit.scala) appends a refresh's part once: its table's
    `mv.late.written` says what was appended last; a late table without it (written with Delta
    transaction ids before) is checked by the transaction id the engine used then."""
    table = "rel_legacy_late"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql("SELECT 1 AS id, 7 AS refresh_id").write.format("delta").option("txnAppId", "mv-late:x:0") \
        .option("txnVersion", 7).saveAsTable(table)
    spark.sql("SELECT 2 AS id, 'new' AS extra").createOrReplaceTempView("rel_late_rows")

    def commit(refresh_id: int, part: int) -> str:
        spec = {"table": table, "rows": "rel_late_rows", "refresh_id": refresh_id, "part": part, "note": "{}",
                "legacy_app_id": f"mv-late:x:{part}"}
        return spark.sql(f"MV_COMMIT_LATE_ROWS {sql_string(json.dumps(spec))}").first().status

    try:
        assert commit(7, 0) == "written"            # the transaction id says refresh 7's part 0 is in
        assert commit(7, 1) == "committed"          # its part 1 is not
        assert commit(7, 1) == "written"            # now the property says so
        assert commit(7, 0) == "written"
        assert commit(8, 0) == "committed"
        assert rows(spark, f"SELECT id, refresh_id, extra FROM {table}") == [
            (1, 7, None), (2, None, "new"), (2, None, "new")]  # a part's new column joins the table's
        assert dict(spark.sql(f"SHOW TBLPROPERTIES {table}").collect())["mv.late.written"] == "8:0"
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
