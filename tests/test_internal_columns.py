"""A user's columns never collide with the engine's helper columns (mv/internal_columns.py): given
a source whose columns are named like the helpers the engine used to add (`__op`, `__sign`,
`__touched`, `__t`, `__row`, `__file`) and like the late table's own (`refresh_id`, `detected_at`),
when it is inserted into, updated, deleted from and refreshed in full, then every view is its query,
whichever way a refresh goes: combined groups, recomputed groups, open windows and sessions kept,
late rows, the local merge and the distributed one. Only the reserved prefix `__mv_` is refused.
A view column named like Spark's file metadata column (`_metadata`) is kept as exactly.

Oracle: each view compared with its query recomputed in full (for EMIT ON WINDOW CLOSE views, over
the source without the late rows: test_open_windows.check).
"""
from __future__ import annotations

import pytest

import mv
from mv.errors import MvError
from mv.settings import session_settings
from test_mv_scenarios import Catalog, given, ts  # noqa: F401 - given: the fixture
from test_open_windows import check

# Debezium's unwrap transform writes `__op`; the others are helper names the engine used itself.
COLUMNS = ("id INT, ts TIMESTAMP, `__op` STRING, `__sign` INT, `__touched` STRING, `__t` INT, `__row` INT, "
           "`__file` STRING, refresh_id INT, detected_at STRING")
GROUPED = """SELECT `__op`, `__file`, count(*) AS `__action`, sum(refresh_id) AS refresh_id
             FROM {src} GROUP BY `__op`, `__file`"""
HOPPED = """SELECT window_start, window_end, `__op`, count(*) AS `__touched`, sum(`__sign`) AS `__sign`,
                   max(`__t`) AS `__t`, min(`__row`) AS `__row`
            FROM HOP(TABLE({src}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
            GROUP BY window_start, window_end, `__op`"""
SESSIONED = """SELECT window_start, window_end, `__op`, count(*) AS `__n`, max(`__file`) AS `__file`
               FROM SESSION(TABLE({src}) PARTITION BY `__op`, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
               GROUP BY window_start, window_end, `__op`"""
ON_CLOSE = {HOPPED: "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE GRACE INTERVAL '10' MINUTES",
            SESSIONED: "WATERMARK FOR ts AS ts - INTERVAL '30' MINUTES EMIT ON WINDOW CLOSE"}
LATE = 99   # the id of a row too late for both EMIT ON WINDOW CLOSE views


def row(id: int, time: str, op: str) -> str:
    """A source row whose other columns derive from its id."""
    return f"({id}, {ts(time)}, '{op}', {id}, 'x{id % 2}', {2 * id}, {3 * id}, 'f{id % 2}', {100 + id}, 'd{id}')"


def source(spark, given: Catalog, *rows: str) -> str:
    name = given.name("cdc")
    spark.sql(f"CREATE TABLE {name} ({COLUMNS}) USING delta")
    given.tables.append(name)
    spark.sql(f"INSERT INTO {name} VALUES {', '.join(rows)}")
    return name


def same(spark, view: str, query: str) -> None:
    actual, expected = spark.table(view), spark.sql(query)
    assert actual.exceptAll(expected).count() == 0 and expected.exceptAll(actual).count() == 0, \
        (view, sorted(actual.collect()), sorted(expected.collect()))


def refreshed_all(spark, src: str, views: dict[str, str], full: bool = False) -> None:
    for view in views.values():
        mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}" + (" FULL" if full else "")).collect()
    checked(spark, src, views)


def checked(spark, src: str, views: dict[str, str]) -> None:
    """Each view compared with its query (EMIT ON WINDOW CLOSE ones over the source's rows that
    were not late)."""
    spark.sql(f"CREATE OR REPLACE TEMP VIEW on_time AS SELECT * FROM {src} WHERE id <> {LATE}")
    for template, view in views.items():
        if template in ON_CLOSE:
            check(spark, view, template.format(src="on_time"))
        else:
            same(spark, view, template.format(src=src))


@pytest.mark.slow  # a view of every kind over such a source (a minute)
def test_source_columns_named_like_the_engines_helpers_are_kept_exactly_everywhere(spark, given):
    src = source(spark, given, row(1, "00:01", "c"), row(2, "00:03", "c"), row(3, "00:12", "u"),
                 row(4, "00:20", "c"), row(5, "00:33", "u"), row(6, "00:40", "c"))
    views = {query: given.view(query.format(src=src), ON_CLOSE.get(query, "")) for query in (GROUPED, HOPPED, SESSIONED)}
    checked(spark, src, views)   # CREATE's own refresh
    # Not late: the watermarks are 00:39 and 00:10, then 00:54 and 00:25; GRACE 10 minutes, no GRACE.
    spark.sql(f"INSERT INTO {src} VALUES {row(7, '00:55', 'c')}, {row(8, '00:44', 'u')}, {row(LATE, '00:02', 'c')}")
    refreshed_all(spark, src, views)   # the local merge
    spark.sql(f"UPDATE {src} SET `__op` = 'u', `__sign` = `__sign` + 10, refresh_id = 0 WHERE id IN (6, 7)")
    spark.sql(f"DELETE FROM {src} WHERE id = 8")
    with session_settings(spark, {"mv.localMergeRows": "0"}):   # the distributed merge
        refreshed_all(spark, src, views)
    late = spark.sql(f"SELECT id, _change_sign, __mv_source_refresh_id, __mv_source_detected_at, refresh_id, "
                     f"typeof(detected_at) FROM {views[HOPPED]}__late").collect()
    assert [tuple(r) for r in late] == [(LATE, 1, 100 + LATE, f"d{LATE}", 2, "timestamp")] * 2   # one per window
    refreshed_all(spark, src, views, full=True)
    assert spark.table(views[GROUPED]).where("`__op` IN ('upsert', 'delete', 'insert')").count() == 0


def test_a_column_with_the_reserved_prefix_is_refused_at_create_and_at_refresh(spark, given):
    src = source(spark, given, row(1, "00:01", "c"), row(2, "00:12", "u"))
    name = given.name("reserved")
    other = given.name("debezium")
    spark.sql(f"CREATE TABLE {other} (id INT, `__MV_op` STRING) USING delta")   # any case: Delta's names ignore it
    given.tables.append(other)
    for query, column in ((f"SELECT `__op` AS `__mv_op`, count(*) AS n FROM {src} GROUP BY `__op`", "__mv_op"),
                          (f"SELECT id, count(*) AS n FROM {other} GROUP BY id", "__MV_op")):   # not in the output
        with pytest.raises(MvError) as raised:
            given.view(query, name=name)
        assert (raised.value.getCondition(), raised.value.params["column"]) == ("MV_RESERVED_COLUMN_NAME", column)
        assert not spark.catalog.tableExists(name)

    query = GROUPED.format(src=src)
    view = given.view(query)
    spark.sql(f"ALTER TABLE {src} ADD COLUMN `__mv_note` STRING")   # a source that gained one since
    spark.sql(f"INSERT INTO {src} VALUES {row(3, '00:20', 'c')[:-1]}, 'n')")
    with pytest.raises(MvError) as raised:
        mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").collect()
    assert raised.value.getCondition() == "MV_RESERVED_COLUMN_NAME" and raised.value.params["source"].endswith(src)
    assert spark.sql(f"SELECT sum(`__action`) FROM {view}").first()[0] == 2   # the refresh changed nothing

    spark.sql(f"ALTER TABLE {src} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")   # the hint
    spark.sql(f"ALTER TABLE {src} RENAME COLUMN `__mv_note` TO note")
    mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view} FULL").collect()
    same(spark, view, query)


def test_session_keys_named_like_the_session_regions_bounds_are_kept_exactly(spark, given):
    """The regions a SESSION refresh recomputes carry their own bounds and counts beside the
    session's keys: keys named `lo`, `hi` or `first` (and a time column `t`) do not collide."""
    name = given.name("spans")
    spark.sql(f"CREATE TABLE {name} (lo STRING, hi INT, `first` INT, t TIMESTAMP) USING delta")
    given.tables.append(name)
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 1, {ts('00:01')}), ('a', 1, 2, {ts('00:03')}), "
              f"('b', 2, 3, {ts('00:02')}), ('a', 1, 4, {ts('00:30')})")
    query = f"""SELECT window_start, window_end, lo, hi, count(*) AS n, max(`first`) AS `first`
                FROM SESSION(TABLE({name}) PARTITION BY (lo, hi), DESCRIPTOR(t), INTERVAL '5' MINUTES)
                GROUP BY window_start, window_end, lo, hi"""
    view = given.view(query)
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 5, {ts('00:06')}), ('b', 2, 6, {ts('00:04')})")
    spark.sql(f"DELETE FROM {name} WHERE `first` = 2")   # splits a's first session again

    assert mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first().technique == "incremental"
    same(spark, view, query)


def test_columns_named_like_sparks_file_metadata_column_are_kept_exactly(spark, given):
    """A merge locates the view rows it reaches by Spark's file metadata column (`_metadata.row_index`):
    a view with its own `_metadata` column (which Spark then reads in place of the metadata
    column's name) is kept exactly, its rows retracted, combined and recomputed."""
    name = given.name("metadata")
    spark.sql(f"CREATE TABLE {name} (id INT, k INT, ts TIMESTAMP, `_metadata` STRING) USING delta")
    given.tables.append(name)
    spark.sql(f"INSERT INTO {name} SELECT id, id % 7, {ts('00:00')} + make_interval(0, 0, 0, 0, 0, id), "
              f"CAST(id AS STRING) FROM range(300)")
    queries = [f"SELECT id, k, `_metadata` FROM {name}",                                    # retracted rows
               f"""SELECT window_start, window_end, k AS `_metadata`, min(id) AS low, count(*) AS n
                   FROM TUMBLE(TABLE({name}), DESCRIPTOR(ts), INTERVAL '1' HOUR)
                   GROUP BY window_start, window_end, k""",                                  # combined groups
               f"SELECT `_metadata`, avg(id) AS mean FROM {name} GROUP BY `_metadata`"]      # recomputed groups
    views = {query: given.view(query) for query in queries}
    spark.sql(f"UPDATE {name} SET k = k + 1, `_metadata` = 'moved' WHERE id IN (0, 150, 299)")
    spark.sql(f"DELETE FROM {name} WHERE id % 50 = 1")
    for query, view in views.items():
        assert mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first().technique == "incremental"
        same(spark, view, query)
