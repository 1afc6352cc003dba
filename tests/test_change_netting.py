"""A column the query does not read costs a refresh nothing (mv/change_feed.py): given a source
updated in columns its views do not read, or updated to the values it had, when the views
refresh, then the update's pre- and post-images cancel before any path sees them (no row read, no
window touched), while an update of a read column is kept, down to the values Spark groups as equal
but the query tells apart (0.0 and -0.0). And a change is read and cached with only the columns its
view reads, while the late rows it holds go to the late table whole.

Oracle: each view compared with its query recomputed in full.
"""
from __future__ import annotations

import re

import pytest

import mv
from bench.refresh import _executions_since, _status_store, execution_marker
from mv.internal_columns import SIGN
from test_mv_scenarios import Catalog, given, ts  # noqa: F401 - given: the fixture
from test_internal_columns import same

WINDOWED = """SELECT window_start, window_end, k, count(*) AS n, max(x) AS top
              FROM TUMBLE(TABLE({src}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end, k"""
ROWS = "SELECT id, k, CAST(x AS STRING) AS x FROM {src} WHERE k < 3"
GROUPED = "SELECT k, avg(id) AS mean, hex(min(c)) AS c FROM {src} GROUP BY k"


@pytest.fixture
def updated(spark, given: Catalog):
    """A source of 60 rows in six windows, and a view of each shape over it."""
    src = given.name("netted")
    spark.sql(f"CREATE TABLE {src} (id INT, k INT, ts TIMESTAMP, x DOUBLE, c STRING, "
              f"note STRING) USING delta")
    given.tables.append(src)
    spark.sql(f"INSERT INTO {src} SELECT id, id % 5, {ts('00:00')} + make_interval(0, 0, 0, 0, 0, id), "
              f"IF(id % 7 = 0, 0.0, id / 2), 'a', 'n' FROM range(60)")
    return src, {query: given.view(query.format(src=src), "REFRESH POLICY INCREMENTAL")
                 for query in (WINDOWED, ROWS, GROUPED)}


def refreshed(spark, src: str, views: dict[str, str]) -> list[int]:
    """Each view refreshed, incrementally, and checked against its query: the rows each read."""
    read = []
    for query, view in views.items():
        outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
        assert outcome.technique == "incremental", outcome
        same(spark, view, query.format(src=src))
        read.append(outcome.rows_read)
    return read


def test_an_update_of_columns_no_view_reads_is_read_by_none(spark, updated):
    src, views = updated
    spark.sql(f"UPDATE {src} SET note = 'changed' WHERE id % 2 = 0")
    spark.sql(f"UPDATE {src} SET k = k WHERE id < 10")              # to the values it had
    spark.sql(f"MERGE INTO {src} t USING (SELECT * FROM {src} WHERE id > 50) s ON t.id = s.id "
              f"WHEN MATCHED THEN UPDATE SET *")                      # an upsert of the same rows

    assert refreshed(spark, src, views) == [0, 0, 0]


def test_an_update_of_a_read_column_is_kept_down_to_values_grouped_as_equal(spark, updated):
    """-0.0 and 0.0 group together, but the query's text of them differs: the views show the new one."""
    src, views = updated
    spark.sql(f"UPDATE {src} SET note = 'changed', x = -x WHERE x = 0.0")   # x is read by two views
    spark.sql(f"UPDATE {src} SET c = 'A' WHERE id = 7")
    spark.sql(f"DELETE FROM {src} WHERE id = 5")

    read = refreshed(spark, src, views)

    assert read[0] > 0 and read[1] > 0, read
    assert spark.sql(f"SELECT count(*) FROM {views[ROWS]} WHERE x = '-0.0'").first()[0] > 0
    assert spark.sql(f"SELECT c FROM {views[GROUPED]} WHERE k = 2").first().c == "41"   # hex('A')


def test_a_change_of_which_few_rows_cancel_is_read_as_it_is(spark, updated):
    """Netting rebuilds the change without the cancelled rows: worth it only when a share of the
    change cancels (change_feed.NET_SHARE). Under the views that read x, 2 of 82 rows cancel; under
    the one that does not, all 80 of its update images do."""
    src, views = updated
    spark.sql(f"UPDATE {src} SET x = x + 1 WHERE id < 40")
    spark.sql(f"UPDATE {src} SET note = 'changed' WHERE id = 50")

    assert refreshed(spark, src, views) == [82, 82, 0]


def cached_columns(spark, marker: int) -> list[list[str]]:
    """The columns of each cache of a change feed (an InMemoryRelation with `_commit_version`) that
    the SQL executions after `marker` read."""
    store, found = _status_store(spark), []
    for e in _executions_since(spark, marker):
        plan = store.execution(e["id"]).get().physicalPlanDescription()
        for listed in re.findall(r"InMemoryRelation\s*\nArguments: \[([^\]]*)\]", plan):
            names = [a.strip().split("#")[0] for a in listed.split(",")]
            if "_commit_version" in names and names not in found:
                found.append(names)
    return found


def test_a_change_is_cached_with_the_columns_its_view_reads_and_late_rows_go_whole_to_the_late_table(spark, given):
    """bench.flink's q7 reads 2 of its source's 6 columns: its 500,000-bid change was read and grouped in
    0.68 s with them, 1.1 s with all six. Its late rows alone are read again with every column
    (netted, cached to be counted and written: window_refresh._write_late)."""
    src = given.name("narrowed")
    spark.sql(f"CREATE TABLE {src} (id INT, k INT, ts TIMESTAMP, x DOUBLE, c STRING, note STRING) USING delta")
    given.tables.append(src)
    spark.sql(f"INSERT INTO {src} SELECT id, id % 5, {ts('00:00')} + make_interval(0, 0, 0, 0, 0, id), id / 2, 'a', 'n' "
              f"FROM range(60)")
    view = given.view(WINDOWED.format(src=src),
                      "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTES EMIT ON WINDOW CLOSE REFRESH POLICY INCREMENTAL")
    marker = execution_marker(spark)

    spark.sql(f"INSERT INTO {src} VALUES (100, 1, {ts('00:03')}, 9.5, 'late', 'kept'), "
              f"(101, 2, {ts('01:05')}, 1.0, 'b', 'n')")
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()

    assert (outcome.technique, outcome.late_rows) == ("incremental", 1)
    change, *late = cached_columns(spark, marker)
    assert change == ["k", "ts", "x", "_change_type", "_commit_version", "_commit_timestamp", SIGN]
    assert late and all(columns[:6] == ["id", "k", "ts", "x", "c", "note"] for columns in late)  # read again whole
    assert [tuple(r) for r in spark.sql(f"SELECT id, k, x, c, note FROM {view}__late").collect()] == [
        (100, 1, 9.5, "late", "kept")]
    untouched = f"window_end <= {ts('01:04')} AND NOT (window_start = {ts('00:00')} AND k = 1)"
    actual = spark.sql(f"SELECT * FROM {view} WHERE {untouched}")
    expected = spark.sql(f"SELECT * FROM ({WINDOWED.format(src=src)}) WHERE {untouched}")
    assert actual.count() == 29 and actual.exceptAll(expected).count() == 0 and expected.exceptAll(actual).count() == 0
