"""What refreshes leave behind besides the view: a history row per refresh (mv_refresh_history) and
the changes that came too late for their window (<view>__late). Both are written with Delta
transaction ids (one app id per view, the refresh id as version), so writing them twice writes once.

Example:
    >>> spark.sql("SELECT refresh_id, technique, reason FROM mv_refresh_history WHERE view = 'hourly'")
"""
from __future__ import annotations

import datetime as dt
import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv.catalog import View
from mv.settings import session_settings
from mv.state import USER_METADATA, RefreshState


HISTORY_SCHEMA = ("view STRING, refresh_id BIGINT, started_at TIMESTAMP, duration_s DOUBLE, technique STRING, "
                  "reason STRING, source_versions STRING, rows_read BIGINT, rows_inserted BIGINT, "
                  "rows_updated BIGINT, rows_deleted BIGINT, late_rows BIGINT, watermark_micros BIGINT")


def _state_commit(spark: SparkSession, view: View, refresh_id: int):
    """The DESCRIBE HISTORY row of the commit that carries refresh `refresh_id`'s state (recent ones first)."""
    marker = f'"refresh_id": {refresh_id},'
    for limit in (10, None):
        for row in spark.sql(f"DESCRIBE HISTORY {view.name}" + (f" LIMIT {limit}" if limit else "")).collect():
            if row.userMetadata and marker in row.userMetadata:
                return row
    return None


def written(spark: SparkSession, view: View, refresh_id: int) -> tuple[int, int, int]:
    """The rows refresh `refresh_id` inserted, updated and deleted, as its commit's metrics say."""
    commit = _state_commit(spark, view, refresh_id)
    return commit_rows((commit.operationMetrics or {}) if commit else {})


def commit_rows(metrics: dict[str, str]) -> tuple[int, int, int]:
    """The rows inserted, updated and deleted by a view's commit, from its Delta operationMetrics:
    a MERGE's; an append or overwrite counts its rows as inserted."""
    if "numTargetRowsInserted" not in metrics:
        return int(metrics.get("numOutputRows", 0)), 0, 0
    return tuple(int(metrics.get(k, 0)) for k in
                 ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted"))


def _incarnation(spark: SparkSession, view: View) -> str:
    """The view table's Delta id: a view dropped and created again starts its refresh ids anew."""
    if view.table_id:
        return view.table_id
    return spark.sql(f"DESCRIBE DETAIL {view.name}").first()["id"]


def _marker(spark: SparkSession, view: View, refresh_id: int) -> str:
    """The userMetadata of the commit that appends refresh `refresh_id`'s history row."""
    return f"mv-history:{_incarnation(spark, view)}:{refresh_id}"


def in_history(spark: SparkSession, view: View, refresh_id: int, recent: int = 20) -> bool:
    """Whether refresh `refresh_id` wrote its history row. The history table's last `recent`
    commits are read first (their userMetadata names the row they appended), which is much cheaper
    than a query of the table; the table itself only when they neither show it nor cover it all."""
    if not spark.catalog.tableExists(view.history_table):
        return False
    commits = spark.sql(f"DESCRIBE HISTORY {view.history_table} LIMIT {recent}").select("userMetadata").collect()
    marker = _marker(spark, view, refresh_id)
    if any(c.userMetadata == marker for c in commits):
        return True
    if len(commits) < recent:  # every commit of the table seen
        return False
    return spark.table(view.history_table).where(
        (F.col("view") == view.name) & (F.col("refresh_id") == refresh_id)).limit(1).count() > 0


def record_history(spark: SparkSession, view: View, state: RefreshState | None,
                   rows: tuple[int, int, int] | None = None) -> tuple[int, int, int]:
    """Append the history row of the refresh that committed `state`; Delta skips it if already there.
    Returns the rows that refresh inserted, updated and deleted in the view: `rows` if its commit
    said, else as the view's Delta history says."""
    if state is None or not state.metrics:
        return 0, 0, 0
    m = state.metrics
    inserted, updated, deleted = rows if rows is not None else written(spark, view, state.refresh_id)
    row = (view.name, state.refresh_id, _utc(m["started_at"]), float(m["duration_s"]), m["technique"],
           m["reason"], json.dumps(state.sources, sort_keys=True), m["rows_read"], inserted, updated, deleted,
           m["late_rows"], state.watermark)
    _append(spark, spark.createDataFrame([row], HISTORY_SCHEMA), view.history_table,
            _marker(spark, view, state.refresh_id), f"mv-history:{_incarnation(spark, view)}", state.refresh_id)
    return inserted, updated, deleted


def _append(spark: SparkSession, frame: DataFrame, table: str, note: str, app_id: str, version: int,
            **options: str) -> None:
    """Append `frame` to the Delta table `table` (created if absent) at most once per (`app_id`,
    `version`), its commit's userMetadata `note`. The note goes in as the session setting: the
    writer's userMetadata option reaches appends but not the commit that creates the table."""
    writer = frame.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", version)
    for key, value in options.items():
        writer = writer.option(key, value)
    with session_settings(spark, {USER_METADATA: note}):
        writer.saveAsTable(table)


def _utc(epoch_seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_seconds, dt.timezone.utc)


LATE_KEY = "mv_late"


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


def pinned_targets(spark: SparkSession, view: View, refresh_id: int) -> dict[str, int] | None:
    """Source versions an earlier, interrupted attempt at this refresh wrote late rows for.

    Only this view's refreshes write its late table, and an attempt that died before its commit
    left refresh `refresh_id` the next one: its late rows, if any, are the table's newest commit.
    That commit's userMetadata says so without reading the table; the table is queried only when
    the newest commit carries no such note (written before notes were kept).
    """
    if not spark.catalog.tableExists(view.late_table):
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
