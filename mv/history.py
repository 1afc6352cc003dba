"""What refreshes leave behind besides the view's rows: the refresh history, and the changes that
came too late for their window (<view>__late).

The history is the views' own commits: each refresh commits once (mv/jvm/RefreshCommit.scala),
its userMetadata saying what the refresh did, and the extension's `mv_refresh_history` reads
those commits back, one row per refresh (columns: docs/statements.md, "history"; the duration ends at the
commit). It needs no write of its own, so a refresh that committed always has its history row,
and it reaches back as far as Delta keeps the view's log (delta.logRetentionDuration).
Late rows are appended with Delta transaction ids (one app id per view and part, the refresh id
as version), so writing them twice writes once.

Example:
    >>> spark.sql("SELECT refresh_id, technique, reason FROM mv_refresh_history WHERE view = 'hourly'")
"""
from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv.catalog import View
from mv.query import sql_string
from mv.settings import session_settings
from mv.state import USER_METADATA



def of_view(spark: SparkSession, name: str, newest: int | None = None) -> DataFrame:
    """The refreshes of the view `name` (as a catalog name: `v`, `db.v`), oldest first; only its
    `newest` ones if given (read from its newest commits alone)."""
    database, _, table = name.rpartition(".")
    database = database.rsplit(".", 1)[-1].strip("`") or spark.catalog.currentDatabase()
    args = [database, table.strip("`")] + ([str(newest)] if newest is not None else [])
    return spark.sql(f"SELECT * FROM mv_refresh_history({', '.join(map(sql_string, args))}) "
                     "ORDER BY started_at, refresh_id")


def _incarnation(spark: SparkSession, view: View) -> str:
    """The view table's Delta id: a view dropped and created again starts its refresh ids anew."""
    if view.table_id:
        return view.table_id
    return spark.sql(f"DESCRIBE DETAIL {view.name}").first()["id"]


def _append(spark: SparkSession, frame: DataFrame, table: str, note: str, app_id: str, version: int,
            **options: str) -> None:
    """Append `frame` to the Delta table `table` (created if absent) at most once per (`app_id`,
    `version`), its commit's userMetadata `note`. The note goes in as the session setting: the
    writer's userMetadata option reaches appends but not the commit that creates the table."""
    writer = frame.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", version)
    for key, value in options.items():
        writer = writer.option(key, value)
    with session_settings(spark, {USER_METADATA: note, ENGINE_WRITE: "true"}):  # past the read-only rule
        writer.saveAsTable(table)


LATE_KEY = "mv_late"
ENGINE_WRITE = "mv.internal.engineWrite"  # ReadOnlyViews.scala lets this session's writes into views' tables pass


def write_late_rows(spark: SparkSession, view: View, late: DataFrame, refresh_id: int,
                    targets: dict[str, int], part: int = 0) -> None:
    """Append the changes in `late` to <view>__late, once per refresh and part (the caller counts
    them). The commit's userMetadata names the refresh and its source versions (pinned_targets)."""
    late = (late.withColumnRenamed("__sign", "_change_sign")
            .withColumn("refresh_id", F.lit(refresh_id))
            .withColumn("target_versions", F.lit(json.dumps(targets, sort_keys=True)))
            .withColumn("detected_at", F.current_timestamp()))
    table_id = _incarnation(spark, view)
    note = json.dumps({LATE_KEY: {"table_id": table_id, "refresh_id": refresh_id, "targets": targets}},
                      sort_keys=True)
    _append(spark, late, view.late_table, note, f"mv-late:{table_id}:{part}", refresh_id, mergeSchema="true")


def pinned_targets(spark: SparkSession, view: View, refresh_id: int, late: bool | None = None) -> dict[str, int] | None:
    """Source versions an earlier, interrupted attempt at this refresh wrote late rows for.

    Only this view's refreshes write its late table, and an attempt that died before its commit
    left refresh `refresh_id` the next one: its late rows, if any, are the table's newest commit.
    That commit's userMetadata says so without reading the table; the table is queried only when
    the newest commit carries no such note (written before notes were kept). `late`: whether the
    late table exists, if known.
    """
    if not (late if late is not None else spark.catalog.tableExists(view.late_table)):
        return None
    newest = spark.sql(f"DESCRIBE HISTORY {view.late_table} LIMIT 1").first()
    note = _late_note(newest.userMetadata if newest else None)
    if note is not None:
        mine = note["refresh_id"] == refresh_id and note["table_id"] == _incarnation(spark, view)
        return note["targets"] if mine else None
    row = spark.table(view.late_table).where(F.col("refresh_id") == refresh_id).select("target_versions").first()
    return json.loads(row[0]) if row else None


def _late_note(user_metadata: str | None) -> dict | None:
    try:
        return json.loads(user_metadata).get(LATE_KEY) if user_metadata else None
    except (ValueError, AttributeError):  # not JSON, or not an object: another writer's note
        return None
