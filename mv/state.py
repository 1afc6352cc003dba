"""How far a view has been refreshed, committed in the same Delta commit as the data it describes.

The state travels in the commit's userMetadata (the MERGE that writes the view's rows), so a
refresh that dies before its commit leaves the previous state in force and a rerun repeats it,
and one that dies after leaves the new state: neither skips nor repeats a change.

Example:
    >>> state.read(spark, "hourly_totals").sources
    {'spark_catalog.default.bids': 7}
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from pyspark.sql import SparkSession

STATE_KEY = "mv_state"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@dataclass(frozen=True)
class RefreshState:
    """What refresh `refresh_id` processed: source versions, event times, and what it did."""
    refresh_id: int
    sources: dict[str, int]
    max_event_time: int | None = None
    watermark: int | None = None
    metrics: dict = field(default_factory=dict)
    source_ids: dict[str, str] = field(default_factory=dict)  # Delta table ids: a recreated source differs
    # SESSION under EMIT ON WINDOW CLOSE: no session still open (not in the view) starts before this;
    # None: unknown (the next refresh reads every row)
    open_from: int | None = None

    def to_json(self) -> str:
        return json.dumps({STATE_KEY: asdict(self)}, sort_keys=True)


def read(spark: SparkSession, view: str) -> RefreshState | None:
    """The state of the view's latest refresh commit, or None before its first refresh."""
    for limit in (20, None):
        history = spark.sql(f"DESCRIBE HISTORY {view}" + (f" LIMIT {limit}" if limit else ""))
        commits = history.select("version", "userMetadata").collect()  # sorted here: no Spark job
        for row in sorted(commits, key=lambda c: c.version, reverse=True):
            if row.userMetadata and STATE_KEY in row.userMetadata:
                return RefreshState(**json.loads(row.userMetadata)[STATE_KEY])
    return None


# Delta's idempotent DML: a commit carrying (app id, version) is skipped if the table already has
# that version for the app id, and two concurrent commits with the same pair conflict.
TXN_APP_ID, TXN_VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"
REFRESH_APP_ID = "mv-refresh"


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]):
    """`settings` in force in the session inside the block only; afterwards each key is as it was.

    Example:
        >>> with session_settings(spark, {USER_METADATA: "note"}):
        ...     frame.write.format("delta").mode("append").saveAsTable("t")   # its commit says "note"
    """
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextmanager
def committing(spark: SparkSession, state: RefreshState):
    """Delta commits made inside carry `state` as their userMetadata, and the refresh id as an
    idempotent transaction version: the view's rows of one refresh are written at most once."""
    with session_settings(spark, {USER_METADATA: state.to_json(), TXN_APP_ID: REFRESH_APP_ID,
                                  TXN_VERSION: str(state.refresh_id)}):
        yield
