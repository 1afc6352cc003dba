"""Windows newer than every window in the view's files are inserted by the refresh's commit
without being matched against the view's rows (RefreshCommit.scala's `freshRows`): given twin
views over twin sources, one refreshed with `mv.merge.freshInserts` off (every new row matched, as
before), when the same change reaches both (an append that continues the view's last window and
opens many later ones, with or without updates and deletes of older rows), then both views equal
their query and their change feeds are the same: the continued windows updated, the new ones
inserted, nothing else. Windows of TIMESTAMP and TIMESTAMP_NTZ time, TUMBLE and HOP.

Oracle: the query recomputed in full, and the twin refreshed with every row matched.
"""
from __future__ import annotations

import pytest

import mv
from test_mv_scenarios import given  # noqa: F401 - given: the fixture
from test_touched_windows import rows_from, same

START = "TIMESTAMP'2024-01-01 00:00:00'"
WINDOWS = {
    "tumble": "TUMBLE(TABLE({src}), DESCRIPTOR(ts), INTERVAL '1' MINUTES)",
    "hop": "HOP(TABLE({src}), DESCRIPTOR(ts), INTERVAL '1' MINUTES, INTERVAL '3' MINUTES)",
}
CORRECTIONS = [
    "UPDATE {src} SET price = price + 100 WHERE id % 11 = 0 AND id < 300",
    "DELETE FROM {src} WHERE id % 19 = 0 AND id < 300",
]


def query(kind: str, src: str) -> str:
    return (f"SELECT window_start, window_end, item, count(*) AS n, sum(price) AS total, max(price) AS top "
            f"FROM {WINDOWS[kind].format(src=src)} GROUP BY window_start, window_end, item")


def feed(spark, view: str) -> str:
    """The change feed of the view's last commit, without its version and time."""
    last = spark.sql(f"SELECT max(_commit_version) FROM table_changes('{view}', 0)").first()[0]
    return f"SELECT * EXCEPT (_commit_version, _commit_timestamp) FROM table_changes('{view}', {last})"


@pytest.fixture
def matched_twin(spark):
    """Sets whether new windows are inserted unmatched; changes of over 100 rows count as large
    (a change the driver can match whole, up to mv.localMergeRows, is matched whole)."""
    spark.conf.set("mv.localMergeRows", "100")
    yield lambda on: spark.conf.set("mv.merge.freshInserts", "true" if on else "false")
    spark.conf.unset("mv.merge.freshInserts")
    spark.conf.unset("mv.localMergeRows")


@pytest.mark.parametrize("kind, time_type, corrections", [
    ("tumble", "TIMESTAMP", []), ("tumble", "TIMESTAMP_NTZ", CORRECTIONS), ("hop", "TIMESTAMP", CORRECTIONS)],
    ids=["tumble_append", "tumble_ntz_with_corrections", "hop_with_corrections"])
def test_windows_newer_than_the_view_are_inserted_unmatched_as_a_merge_would(spark, given, matched_twin, kind,
                                                                             time_type, corrections):
    sources, views = [], []
    for _ in range(2):
        src = given.name("fresh")
        spark.sql(f"CREATE TABLE {src} (id BIGINT, item STRING, ts {time_type}, price INT) USING delta")
        given.tables.append(src)
        spark.sql(f"INSERT INTO {src} SELECT id, item, CAST(ts AS {time_type}), price "
                  f"FROM ({rows_from(START, 0, 300, 17)})")  # 85 minutes: the last window ends at 01:25
        sources.append(src)
        views.append(given.view(query(kind, src), "REFRESH POLICY INCREMENTAL"))
    outcomes = []
    for src, view, fresh in zip(sources, views, [True, False]):
        # from 01:24:40 every 7 s: the view's last window continued, then 23 minutes of new ones
        spark.sql(f"INSERT INTO {src} SELECT id, item, CAST(ts AS {time_type}) + INTERVAL '4' SECONDS, price "
                  f"FROM ({rows_from(START, 726, 200, 7)})")
        for statement in corrections:
            spark.sql(statement.format(src=src))
        matched_twin(fresh)
        outcomes.append(mv.sql(spark, f"REFRESH MATERIALIZED VIEW {views[0] if fresh else views[1]}").first())

    assert [o.technique for o in outcomes] == ["incremental", "incremental"], outcomes
    assert outcomes[0].rows_inserted == outcomes[1].rows_inserted > 20
    assert outcomes[0].rows_updated == outcomes[1].rows_updated > 0   # the continued windows
    same(spark, f"SELECT * FROM {views[0]}", query(kind, sources[0]))
    same(spark, f"SELECT * FROM {views[0]}", f"SELECT * FROM {views[1]}")
    same(spark, feed(spark, views[0]), feed(spark, views[1]))
    changes = spark.sql(feed(spark, views[0]))
    assert changes.where("_change_type = 'insert'").count() == outcomes[0].rows_inserted
    added = [int(spark.sql(f"DESCRIBE HISTORY {v} LIMIT 1").first().operationMetrics["numTargetFilesAdded"])
             for v in views]
    assert added == [1, 1]  # the new windows' rows written by the merge's own write, as the matched ones


@pytest.mark.parametrize("fresh_inserts", [True, False], ids=["inserted_unmatched", "setting_off"])
def test_a_merge_whose_view_rows_are_all_skipped_inserts_every_new_row(spark, given, matched_twin, fresh_inserts):
    """No file of the view can hold a touched window (an append after a gap): nothing is matched,
    and every new row is inserted, with `mv.merge.freshInserts` off too (there is nothing to match)."""
    src = given.name("fresh")
    spark.sql(f"CREATE TABLE {src} (id BIGINT, item STRING, ts TIMESTAMP, price INT) USING delta")
    given.tables.append(src)
    spark.sql(f"INSERT INTO {src} {rows_from(START, 0, 300, 17)}")
    view = given.view(query("tumble", src), "REFRESH POLICY INCREMENTAL")
    spark.sql(f"INSERT INTO {src} {rows_from(START, 3000, 100, 11)}")  # from 09:10, hours after the view's last
    matched_twin(fresh_inserts)
    outcome = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()

    assert (outcome.technique, outcome.rows_updated, outcome.rows_deleted) == ("incremental", 0, 0)
    assert outcome.rows_inserted == spark.sql(f"SELECT count(*) FROM {view} WHERE window_start >= "
                                              f"TIMESTAMP'2024-01-01 09:00:00'").first()[0] > 0
    same(spark, f"SELECT * FROM {view}", query("tumble", src))
    assert spark.sql(feed(spark, view)).where("_change_type = 'insert'").count() == outcome.rows_inserted
