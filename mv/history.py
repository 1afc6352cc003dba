"""What refreshes leave behind besides the view's rows: the refresh history, and the changes that
came too late for their window (<view>__late).

The history is the views' own commits: each refresh commits once (mv/jvm/RefreshCommit.scala),
its userMetadata saying what the refresh did, and the extension's `mv_refresh_history` reads
those commits back, one row per refresh (columns: docs/statements.md, "history"; the duration ends at the
commit). It needs no write of its own, so a refresh that committed always has its history row,
and it reaches back as far as Delta keeps the view's log (delta.logRetentionDuration).
Late rows are appended by the extension's commit (mv/jvm/LateRowsCommit.scala), once per refresh
and part: the late table's properties say which was appended last, so writing them twice writes once.

Example:
    >>> spark.sql("SELECT refresh_id, technique, reason FROM mv_refresh_history WHERE view = 'hourly'")
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv import catalog, errors, internal_columns
from mv.catalog import View
from mv.delta_tables import Table
from mv.names import TableName
from mv.query import sql_string

if TYPE_CHECKING:  # mv.run imports mv.estimate, which reads the history
    from mv.run import Run



def of_view(spark: SparkSession, name: str, newest: int | None = None) -> DataFrame:
    """The refreshes of the view `name` (as a catalog name: `v`, `db.v`), oldest first; only its
    `newest` ones if given (read from its newest commits alone)."""
    name = TableName.parse(name)
    args = [name.database or spark.catalog.currentDatabase(), name.table] + ([str(newest)] if newest is not None else [])
    return spark.sql(f"SELECT * FROM mv_refresh_history({', '.join(map(sql_string, args))}) "
                     "ORDER BY started_at, refresh_id")


def _incarnation(spark: SparkSession, view: View) -> str:
    """The view table's Delta id: a view dropped and created again starts its refresh ids anew."""
    if view.table_id:
        return view.table_id
    return spark.sql(f"DESCRIBE DETAIL {view.name}").first()["id"]


LATE_KEY = "mv_late"
# LateRowsCommit.scala's table properties: the newest refresh and part appended, and its note.
LATE_WRITTEN, LATE_NOTE = "mv.late.written", "mv.late.note"
BESIDE = "mv.beside"  # on a table beside a view: the view's name (mv/jvm/ReadOnlyViews.scala)
# A Delta checkpoint every this many commits of a view's table and the tables beside it, not Delta's
# 10: each rebuilds the table's state in Spark jobs (1.2-2.3 s on two cores), where replaying up to
# 99 small commit files costs far less (bench/RESULTS.md, "The fixed cost of a refresh").
CHECKPOINT_INTERVAL, CHECKPOINTS_EVERY = "delta.checkpointInterval", "100"


def write_late_rows(run: Run, late: DataFrame, part: int = 0) -> int:
    """Append the changes in `late` to <view>__late, once per refresh and part, and return how
    many: they are cached and counted first (one Spark job), and none appended is no commit. The
    extension's commit (mv/jvm/LateRowsCommit.scala) also records the refresh and its source
    versions (pinned_targets) in the table's properties. The source's columns keep their names,
    but for one the late table's own columns take (internal_columns.late_name)."""
    late = late.cache()  # read twice: counted, then appended
    run.cached.append(late)
    count = late.count()
    if not count:
        return 0
    spark, view, refresh_id = run.spark, run.view, run.outcome.refresh_id
    taken = {c: internal_columns.late_name(c) for c in late.columns if internal_columns.late_name(c) != c}
    late = (late.withColumnsRenamed(taken)
            .withColumnRenamed(internal_columns.SIGN, "_change_sign")
            .withColumn("refresh_id", F.lit(refresh_id))
            .withColumn("target_versions", F.lit(json.dumps(run.targets, sort_keys=True)))
            .withColumn("detected_at", F.current_timestamp()))
    table_id = _incarnation(spark, view)
    note = json.dumps({LATE_KEY: {"table_id": table_id, "refresh_id": refresh_id, "targets": run.targets}},
                      sort_keys=True)
    rows = run.temp_view(late, f"late_{part}")
    if not run.late_exists:  # as the refresh's lookup found it: no catalog round trip
        _create_late_table(spark, view, rows)
        run.late_exists = True
    spec = {"table": view.late_table, "rows": rows, "refresh_id": refresh_id, "part": part, "note": note,
            "legacy_app_id": f"mv-late:{table_id}:{part}"}
    # The commit takes the note as its user metadata from the spec, not from the session's settings,
    # which any other commit of the session would see meanwhile.
    row = spark.sql(f"MV_COMMIT_LATE_ROWS {sql_string(json.dumps(spec))}").first()
    if row.status == "conflict":  # a concurrent refresh of the view appended first
        raise errors.concurrent_refresh(view.name)
    return count


def _create_late_table(spark: SparkSession, view: View, rows: str) -> None:
    """The late table, empty, with the columns of the temporary view `rows`: nothing appended yet."""
    create_beside(spark, view, view.late_table, rows, {LATE_WRITTEN: "0:-1"})


def create_beside(spark: SparkSession, view: View, table: str, rows: str, properties: dict[str, str] | None = None) -> None:
    """A table beside the view that only its refresh writes (`<view>__late`, `<view>__open`),
    created empty with the columns of the temporary view `rows` unless it exists, with
    `properties` and BESIDE naming its view (so the read-only rule knows it however it is named,
    by a path too); two refreshes of the view creating it at once make the loser fail with
    MV_CONCURRENT_REFRESH. Like the view, it has a Delta checkpoint every CHECKPOINT_INTERVAL
    commits: `<view>__open` is replaced by every refresh, and at Delta's default of 10 every tenth
    refresh of a small EMIT ON WINDOW CLOSE view took 2.6-3.9 s against 1.6 s (its mean 1.86 s,
    1.59 s with the interval, over 30 refreshes)."""
    listed = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in
                       {BESIDE: view.name, CHECKPOINT_INTERVAL: CHECKPOINTS_EVERY, **(properties or {})}.items())
    try:
        catalog.create_empty(spark, table, f"SELECT * FROM {rows}", f"USING delta TBLPROPERTIES ({listed})",
                             if_not_exists=True)
    except Exception as e:  # noqa: BLE001 - Delta's conflicts reach Python as several exception types
        if errors.lost_race(e):
            raise errors.concurrent_refresh(view.name) from None
        raise


def pinned_targets(spark: SparkSession, view: View, refresh_id: int, late: Table) -> dict[str, int] | None:
    """Source versions an earlier, interrupted attempt at this refresh wrote late rows for.

    Only this view's refreshes write its late table, and an attempt that died before its commit
    left refresh `refresh_id` the next one: its late rows, if any, are the table's newest append,
    whose note the table's properties keep (`late`, as mv_delta_tables read it). A late table
    written before that property says so in its newest commit's userMetadata, or in its rows.
    """
    if not late.exists:
        return None
    note = _late_note(late.properties.get(LATE_NOTE))
    if note is None and LATE_WRITTEN not in late.properties:  # written before the properties were kept
        newest = spark.sql(f"DESCRIBE HISTORY {view.late_table} LIMIT 1").first()
        note = _late_note(newest.userMetadata if newest else None)
        if note is None:
            row = spark.table(view.late_table).where(F.col("refresh_id") == refresh_id).select("target_versions").first()
            return json.loads(row[0]) if row else None
    if note is None:  # created, nothing appended yet
        return None
    mine = note["refresh_id"] == refresh_id and note["table_id"] == _incarnation(spark, view)
    return note["targets"] if mine else None


def _late_note(user_metadata: str | None) -> dict | None:
    try:
        return json.loads(user_metadata).get(LATE_KEY) if user_metadata else None
    except (ValueError, AttributeError):  # not JSON, or not an object: another writer's note
        return None
