"""How far a view has been refreshed, committed in the same Delta commit as the data it describes.

The state is a table property of the view (`mv.state`, with `mv.refresh_id`), set by the very
commit that writes the view's rows (mv/jvm/RefreshCommit.scala). Delta keeps table properties in
every snapshot and checkpoint, so maintenance commits and log cleanup cannot lose it; a refresh
that dies before its commit leaves the previous state in force and a rerun repeats it, and one
that dies after leaves the new state: neither skips nor repeats a change. The commit's
userMetadata carries the state too, for the refresh history; views last refreshed before the
property existed are read from there.

Example:
    >>> state.read(spark, "hourly_totals").sources
    {'spark_catalog.default.bids': 7}
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from pyspark.sql import SparkSession

from mv.catalog import shown_properties

STATE_KEY = "mv_state"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
STATE_PROPERTY, REFRESH_ID_PROPERTY = "mv.state", "mv.refresh_id"
READ_VERSION_PROPERTY = "mv.read_version"  # the view's version its last refresh read (RefreshCommit.scala)


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
    # Wall-clock µs of the refresh that brought max_event_time: IDLE AFTER counts from it.
    event_time_seen_at: int | None = None
    # EMIT ON WINDOW CLOSE: the id of the <view>__open table holding the open windows' rows that
    # go with this state (mv/open_windows.py); None: none kept (the next refresh builds it)
    open_id: str | None = None
    # The hash of the definitions of the SQL views the query read (QueryInfo.views_fingerprint)
    views_fingerprint: str | None = None
    # Each source's columns and types (delta_tables.Table.column_types) as this refresh read them: a
    # next refresh finding one of them gone or retyped does not read changes across that
    source_schemas: dict[str, dict[str, str]] = field(default_factory=dict)
    # The view's newest refreshes, this one last: [technique, work bytes, seconds] each, so the next
    # refresh's estimate (estimate.past) needs no read of the view's history
    recent: list[list] = field(default_factory=list)
    # Whether the view's query is one the engine keeps incrementally (no blocker, policy not FULL):
    # then a refresh finding no source moved commits nothing, which the next REFRESH can tell from
    # this state and its sources' versions alone (refresh._idle)
    incremental: bool = False

    def to_json(self) -> str:
        return json.dumps({STATE_KEY: asdict(self)}, sort_keys=True)

    def to_property(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class Stored:
    """A view's refresh state as read, with the `mv.refresh_id` property it was read with: the next
    refresh commits only while that property is unchanged. `lost`: the view was refreshed, but
    its state is gone (a view last refreshed before the state was a property, its commits since
    removed by Delta's log cleanup)."""
    state: RefreshState | None
    marker: str | None = None
    lost: bool = False


def stored(spark: SparkSession, view: str, properties: dict[str, str], version: int | None = None) -> Stored:
    """The state of the view's latest refresh, from its table `properties` (as SHOW TBLPROPERTIES
    gives them, unredacted). A view at `version` 0 holds its creation alone: no refresh yet, and
    no history to read (a CREATE's first refresh reads none).

    Example:
        >>> stored(spark, "hourly", {"mv.definition": "..."}, version=0)
        Stored(state=None, marker=None, lost=False)
    """
    marker = properties.get(REFRESH_ID_PROPERTY)
    if STATE_PROPERTY in properties:
        return Stored(RefreshState(**json.loads(properties[STATE_PROPERTY])), marker)
    if version == 0:
        return Stored(None, marker)
    state, truncated = _from_commits(spark, view)
    return Stored(state, marker, lost=state is None and truncated)


def read(spark: SparkSession, view: str) -> RefreshState | None:
    """The state of the view's latest refresh, or None before its first refresh."""
    return stored(spark, view, shown_properties(spark, view)).state


def _from_commits(spark: SparkSession, view: str) -> tuple[RefreshState | None, bool]:
    """The state in the userMetadata of the view's newest commit carrying one, and whether the
    view's log no longer starts at its creation (Delta's log cleanup removed older commits)."""
    for limit in (20, None):
        history = spark.sql(f"DESCRIBE HISTORY {view}" + (f" LIMIT {limit}" if limit else ""))
        commits = history.select("version", "userMetadata").collect()  # sorted here: no Spark job
        for row in sorted(commits, key=lambda c: c.version, reverse=True):
            if row.userMetadata and STATE_KEY in row.userMetadata:
                return RefreshState(**json.loads(row.userMetadata)[STATE_KEY]), False
    return None, min((c.version for c in commits), default=0) > 0
