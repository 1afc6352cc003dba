"""A query (a refresh's included) reads a small Delta table's files from the list in its checksum
and skips files by their statistics in the driver (mv/jvm/SmallDeltaScans.scala): the rows are
exactly those Delta's own scan returns, only fewer files are opened and no Spark job plans the scan.

Oracle: the same query in a session with `mv.smallTableScans=false`, where Delta plans the scan.
"""
import uuid
from datetime import date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TABLE = "sds_events"


@pytest.fixture(scope="module")
def checksum_session(spark):
    """The engine's way of reading, on by default."""
    return spark


@pytest.fixture(scope="module")
def delta_session(spark):
    """Delta's own scan planning: the oracle."""
    session = spark.newSession()
    session.conf.set("mv.smallTableScans", "false")
    return session


@pytest.fixture(scope="module")
def events(spark):
    """Three files, one per insert, each holding its own hour, id range and day."""
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
    spark.sql(f"CREATE TABLE {TABLE} (id BIGINT, n INT, day DATE, ts TIMESTAMP) USING delta")
    for hour in range(3):
        spark.sql(f"""INSERT INTO {TABLE} SELECT id, CAST(id % 7 AS INT), DATE'2024-01-01' + {hour},
                      TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, {hour}, 0, id)
                      FROM range({hour * 100}, {hour * 100 + 100}, 1, 1)""")
    yield TABLE
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")


def files_read(frame) -> int:
    """How many files the frame's scans opened (FileSourceScanExec's `numFiles`), after collecting it."""
    frame.collect()
    plan = frame._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    return sum(int(leaves.apply(i).metrics().apply("numFiles").value()) for i in range(leaves.size())
               if leaves.apply(i).metrics().contains("numFiles"))


def file_index(frame) -> str:
    """The class of the file index each scan of the optimized plan reads through."""
    leaves = frame._jdf.queryExecution().optimizedPlan().collectLeaves()
    return " ".join(leaves.apply(i).relation().location().getClass().getSimpleName() for i in range(leaves.size()))


def rows(session, query):
    return sorted(tuple(r) for r in session.sql(query).collect())


def test_a_filter_on_a_small_table_opens_only_the_files_its_statistics_allow(delta_session, checksum_session, events):
    query = f"SELECT * FROM {events} WHERE ts >= TIMESTAMP'2024-01-01 02:00:00'"

    frame = checksum_session.sql(query)

    assert "ChecksumFileIndex" in file_index(frame)
    assert files_read(frame) == 1
    assert rows(checksum_session, query) == rows(delta_session, query)


def test_conditions_it_cannot_judge_keep_every_file(delta_session, checksum_session, events):
    query = f"SELECT * FROM {events} WHERE n = 3 OR id * 2 = 410"

    assert files_read(checksum_session.sql(query)) == 3
    assert rows(checksum_session, query) == rows(delta_session, query)


def test_a_timestamp_the_statistics_truncated_to_milliseconds_still_finds_its_row(spark, checksum_session,
                                                                                delta_session):
    spark.sql("DROP TABLE IF EXISTS sds_micros")
    spark.sql("CREATE TABLE sds_micros (ts TIMESTAMP) USING delta")
    spark.sql("INSERT INTO sds_micros VALUES (TIMESTAMP'2024-01-01 00:00:00.000999')")  # max written as .000
    try:
        query = "SELECT * FROM sds_micros WHERE ts > TIMESTAMP'2024-01-01 00:00:00.0005'"
        assert rows(checksum_session, query) == rows(delta_session, query) == [(datetime(2024, 1, 1, 0, 0, 0, 999),)]
    finally:
        spark.sql("DROP TABLE IF EXISTS sds_micros")


def test_a_table_with_deletion_vectors_is_read_from_its_checksum_without_its_deleted_rows(spark, delta_session):
    spark.sql("DROP TABLE IF EXISTS sds_deleted")
    spark.sql("CREATE TABLE sds_deleted (id BIGINT) USING delta TBLPROPERTIES (delta.enableDeletionVectors = true)")
    spark.sql("INSERT INTO sds_deleted SELECT id FROM range(10)")
    spark.sql("DELETE FROM sds_deleted WHERE id = 4")
    spark.sql("DELETE FROM sds_deleted WHERE id > 7")                  # the file's deletion vector grows
    try:
        query = "SELECT * FROM sds_deleted WHERE id >= 2"
        assert "ChecksumFileIndex" in file_index(spark.sql(query))
        assert rows(spark, query) == rows(delta_session, query) == [(i,) for i in (2, 3, 5, 6, 7)]
    finally:
        spark.sql("DROP TABLE IF EXISTS sds_deleted")


def test_a_session_with_the_setting_off_plans_scans_as_delta_does(delta_session, events):
    assert "ChecksumFileIndex" not in file_index(delta_session.sql(f"SELECT * FROM {events} WHERE id > 5"))


def test_an_older_version_is_read_from_its_own_checksum(spark, delta_session, events):
    query = f"SELECT * FROM {events} VERSION AS OF 2 WHERE id >= 50"

    assert "ChecksumFileIndex" in file_index(spark.sql(query))
    assert rows(spark, query) == rows(delta_session, query) == [(i, i % 7, date(2024, 1, 1 + i // 100),
        datetime(2024, 1, 1, i // 100) + timedelta(seconds=i)) for i in range(50, 200)]


COLUMNS = {"id": (0, 300, lambda v: str(v)),
           "n": (0, 7, lambda v: str(v)),
           "day": (0, 3, lambda v: f"DATE'{(datetime(2024, 1, 1) + timedelta(days=v)).date()}'"),
           "ts": (0, 3 * 3600 + 400, lambda v: f"TIMESTAMP'{datetime(2024, 1, 1) + timedelta(seconds=v)}'")}


FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


def comparisons():
    """`column op constant`, or the same comparison written constant first (`5 < id` for `id > 5`)."""
    def one(column, op, value, flipped):
        low, high, literal = COLUMNS[column]
        constant = literal(min(max(value, low), high))
        return f"{constant} {FLIPPED[op]} {column}" if flipped else f"{column} {op} {constant}"
    return st.builds(one, st.sampled_from(sorted(COLUMNS)), st.sampled_from(sorted(FLIPPED)),
                     st.integers(-5, 3 * 3600 + 500), st.booleans())


conditions = st.recursive(comparisons(), lambda inner: st.builds(
    lambda a, b, op: f"({a} {op} {b})", inner, inner, st.sampled_from(["AND", "OR"])), max_leaves=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(condition=conditions)
def test_any_comparison_of_columns_with_constants_returns_what_delta_returns(delta_session, checksum_session,
                                                                            events, condition):
    query = f"SELECT * FROM {events} WHERE {condition}"
    assert rows(checksum_session, query) == rows(delta_session, query)


def planning_jobs(session, query) -> int:
    """The Spark jobs that planning `query` ran (Delta's "Filtering files for query", a listing)."""
    context = session.sparkContext
    group = f"planning-{uuid.uuid4().hex}"
    context.setJobGroup(group, "plan only")
    try:
        session.sql(query)._jdf.queryExecution().executedPlan()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return len(context.statusTracker().getJobIdsForGroup(group))


@pytest.mark.parametrize("deletion_vectors", [False, True])
def test_a_table_of_more_files_than_its_checksum_lists_is_listed_once_then_kept_up_to_date_in_the_driver(
        spark, delta_session, deletion_vectors):
    """Over 50 files, Delta's checksum lists none: mv/jvm/FileLists.scala lists the table once and
    applies each later commit (appends, a DELETE's rewrites or deletion vectors, OPTIMIZE) from the
    log; every version, older ones too, returns exactly Delta's rows, and the last few versions are
    kept, so a read of an older one (time travel to the last refresh's) needs no job either."""
    table = "sds_many"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP) USING delta "
              f"TBLPROPERTIES (delta.enableDeletionVectors = {str(deletion_vectors).lower()})")
    spark.range(0, 6000, 1, 60).selectExpr("id", "TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id)") \
        .toDF("id", "ts").write.insertInto(table)                       # version 1: 60 files in time order
    query = f"SELECT * FROM {table} WHERE ts >= TIMESTAMP'2024-01-01 01:30:00'"
    try:
        assert "ChecksumFileIndex" in file_index(spark.sql(query))     # listed by one job, then kept
        assert files_read(spark.sql(query)) < 60
        assert rows(spark, query) == rows(delta_session, query)
        # A condition it cannot judge: Delta's data skipping may open fewer files of a larger table.
        unjudged = f"SELECT * FROM {table} WHERE id * 2 = 410 AND ts > TIMESTAMP'2024-01-01 00:01:00'"
        assert "ChecksumFileIndex" not in file_index(spark.sql(unjudged))
        assert rows(spark, unjudged) == rows(delta_session, unjudged)
        changes = [f"INSERT INTO {table} SELECT id, TIMESTAMP'2024-01-01 03:00:00' + make_interval(0, 0, 0, 0, 0, 0, id)"
                   f" FROM range(6000, 6100)",
                   f"DELETE FROM {table} WHERE id % 100 = 7",             # rewrites or marks every file
                   f"UPDATE {table} SET id = id + 1000000 WHERE id BETWEEN 5000 AND 5050",
                   f"OPTIMIZE {table}"]
        for change in changes:
            spark.sql(change)
            assert planning_jobs(spark, query) == 0, change            # the new commit read from the log
            assert "ChecksumFileIndex" in file_index(spark.sql(query)), change
            assert rows(spark, query) == rows(delta_session, query), change
        older = f"SELECT * FROM {table} VERSION AS OF 2 WHERE id >= 5990"
        assert planning_jobs(spark, older) == 0  # a refresh's previous version: kept beside the newest
        assert rows(spark, older) == rows(delta_session, older)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def test_two_scans_of_the_same_files_of_a_version_share_one_exchange(delta_session, checksum_session, events):
    """A refresh's terms of both signs join the same other side: one broadcast of it, not one each,
    as Delta's own scans of one version share theirs. Other versions are other rows: no sharing."""
    side = f"SELECT id FROM {events} VERSION AS OF 2 WHERE n = 3"
    twice = f"""SELECT /*+ BROADCAST(s) */ a.id FROM range(10) a JOIN ({side}) s ON a.id = s.id
                UNION ALL SELECT /*+ BROADCAST(s) */ b.id FROM range(5, 300) b JOIN ({side}) s ON b.id = s.id"""
    other = twice.replace("VERSION AS OF 2 WHERE n = 3) s ON b.id", "VERSION AS OF 1 WHERE n = 3) s ON b.id")

    def executed(query) -> str:
        frame = checksum_session.sql(query)
        frame.collect()
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert "ChecksumFileIndex" in plan
        return plan

    assert "ReusedExchange" in executed(twice)
    assert "ReusedExchange" not in executed(other)
    assert rows(checksum_session, twice) == rows(delta_session, twice)
