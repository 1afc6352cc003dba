"""Refreshing a materialized view: from its sources' change feeds when it can, in full when it must.

The path of an incremental refresh (DESIGN.md, "The path of a refresh"):
    changes since the versions last processed (Delta Change Data Feed, signed +1 / -1)
      -> affected windows (the view's own window function applied to the changes) or groups
      -> watermark and emit policy: which windows are closed, which changes are too late
      -> each touched group combined from its view row and the changes' own aggregates where that
         is exact (count, sum, min, max: mv/combine.py), the rest recomputed from the sources,
         restricted to their time ranges (Delta skips the other files) and keys
      -> one commit into the view carrying the new state, which is also the refresh's history
         row (mv_refresh_history); late rows to <view>__late
The view's rows and its new state go in one Delta commit (mv/jvm/RefreshCommit.scala), which
goes through only while the view's state is the one the refresh started from: a rerun after a
crash, or a concurrent refresh, cannot apply a change twice (docs/design.md).

Example:
    >>> refresh.refresh(spark, "hourly_totals")
    Outcome(view='hourly_totals', technique='incremental', reason='CHANGES_ONLY', ...)

A refresh that finds no source moved since the view's state commits nothing (reason NO_CHANGES).
"""
from __future__ import annotations

import json
import os
import signal
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv import catalog, delta_tables, errors, session_lateness, snapshots, watermark
from mv.catalog import View
from mv.combine import Combination, combine
from mv.history import pinned_targets, write_late_rows
from mv.plan import Plan, plan
from mv.query import QueryInfo, describe, micros_sql, quote, sql_string, time_sql
from mv.settings import session_settings
from mv.state import REFRESH_ID_PROPERTY, USER_METADATA, RefreshState, Stored, stored

MAX_RANGES = 64
INFINITY = 2 ** 62  # µs: later than any time, and still room to add a gap
# Groups recomputed after combining lie in at most this many time ranges: each source row is tested
# against every range, and at 10M rows 64 ranges cost 27 s where the whole recomputation took 2.6 s.
NEEDED_RANGES = 4
# Affected windows in more separate runs of time than this are combined rather than recomputed.
COMBINE_AFTER_RUNS = MAX_RANGES
# How Delta says the change feed of a version range can no longer be read (not recorded, vacuumed, expired).
CHANGE_FEED_GONE = ("DELTA_MISSING_CHANGE_DATA", "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
                    "DELTA_VERSIONS_NOT_CONTIGUOUS", "DELTA_FILE_NOT_FOUND", "VersionNotFound")


@dataclass
class Outcome:
    """What one refresh did; also the refresh history row."""
    view: str
    technique: str
    reason: str
    refresh_id: int = 0
    source_versions: dict = field(default_factory=dict)
    rows_read: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    late_rows: int = 0
    groups_combined: int = 0
    groups_recomputed: int = 0
    watermark: int | None = None
    started_at: float = 0.0
    duration_s: float = 0.0


KILL_POINTS = ("changes_read", "late_rows_written", "committed")


def checkpoint(step: str) -> None:
    """Crash-safety tests set MV_KILL_AT to one of KILL_POINTS: the process dies there as by kill -9."""
    if os.environ.get("MV_KILL_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


PHASES = ("planning", "reading changes", "recomputing", "merging")
_watchers: list[Callable[[str, str], None]] = []


@contextmanager
def watching(watcher: Callable[[str, str], None]) -> Iterator[None]:
    """Call `watcher(view, phase)` as each refresh in the block enters one of PHASES.

    Example:
        >>> with refresh.watching(lambda view, phase: print(view, phase)):
        ...     refresh.refresh(spark, "hourly")
        hourly planning
        hourly reading changes
        ...
    """
    _watchers.append(watcher)
    try:
        yield
    finally:
        _watchers.remove(watcher)


def _phase(view: str, phase: str) -> None:
    for watcher in list(_watchers):
        watcher(view, phase)


_INTERVALS: dict[str, int] = {}  # literal -> microseconds: Spark parses each literal once per process


def interval_micros(spark: SparkSession, text: str | None) -> int:
    """An interval literal of a statement (INTERVAL '5' MINUTES) in microseconds; 0 for None."""
    if text is None:
        return 0
    if text not in _INTERVALS:
        _INTERVALS[text] = _parse_interval(spark, text)
    return _INTERVALS[text]


def _parse_interval(spark: SparkSession, text: str) -> int:
    try:
        value = spark.sql(f"SELECT {text}").first()[0]
    except AnalysisException as e:
        raise errors.interval(text, str(e).splitlines()[0]) from None
    if not hasattr(value, "total_seconds") or value.total_seconds() < 0:
        raise errors.interval(text, "it is not a non-negative day-time interval")
    return round(value.total_seconds() * 1_000_000)


@dataclass
class _Run:
    """One refresh in progress: the view, what its query means, where it starts and ends."""
    spark: SparkSession
    view: View
    info: QueryInfo
    previous: RefreshState | None
    targets: dict[str, int]
    outcome: Outcome
    temp: str = field(default_factory=lambda: "__mv_" + uuid.uuid4().hex[:12])
    marker: str | None = None  # the view's mv.refresh_id property the refresh started from
    pending_merge: dict | None = None  # RefreshCommit's merge: rows, on, delete_matched, ...
    pending_rows: DataFrame | None = None  # appended, or with `overwrite` replacing the view's: no MERGE
    overwrite: bool = False
    cached: list[DataFrame] = field(default_factory=list)
    pinned: dict[str, str] = field(default_factory=dict)  # source table -> its view at the target version
    source_ids: dict[str, str] = field(default_factory=dict)  # Delta table ids, read with the target versions

    @property
    def columns(self) -> list[str]:
        return [c["name"] for c in self.info.output]

    @property
    def time_type(self) -> str:
        return next(c["type"] for c in self.info.output if c["window_role"] == "window_start")

    def temp_view(self, df: DataFrame, suffix: str) -> str:
        name = f"{self.temp}_{suffix}"
        df.createOrReplaceTempView(name)
        return name

    def source(self, table: str) -> str:
        """A temporary view of the source `table` as of the version this refresh reads to. A row a
        writer adds while the refresh runs belongs to the next refresh, which reads it from the
        change feed: read here too, it would be counted twice."""
        if table not in self.pinned:
            frame = self.spark.sql(f"SELECT * FROM {table} VERSION AS OF {self.targets[table]}")
            self.pinned[table] = self.temp_view(frame, f"source_{len(self.pinned)}")
        return self.pinned[table]

    @property
    def query(self) -> str:
        """The view's query over its sources as of this refresh's versions (`source`)."""
        return self.query_over({})

    def query_over(self, replaced: dict[str, str]) -> str:
        """The view's query reading each source in `replaced` from the view named there, and the
        others as of this refresh's versions."""
        pairs = [x for table in self.info.source_tables for x in (table, replaced.get(table) or self.source(table))]
        return "SELECT * FROM mv_substitute(" + ", ".join(
            sql_string(x) for x in [self.view.definition.query] + pairs) + ")"


def refresh(spark: SparkSession, name: str, full: bool = False, _upstream_done: set | None = None) -> Outcome:
    """Refresh the view `name`: its stale upstream views first, then itself (incrementally if it can).

    It runs in a session of its own (same catalog, own settings and temporary views), so its time
    zone and commit metadata never leak into the caller's session or into a concurrent refresh.
    """
    view = catalog.require(spark, name)
    done = _upstream_done if _upstream_done is not None else set()
    with _own_session(spark, view) as work:
        info = _describe(work, view)
        for source in info.upstream_views:
            if source not in done and (upstream := catalog.load(work, source)) is not None:
                done.add(source)
                refresh(spark, upstream.definition.name, _upstream_done=done)
        return _refresh(work, view, info, full)


@contextmanager
def _own_session(spark: SparkSession, view: View) -> Iterator[SparkSession]:
    """A session for one refresh with the caller's settings, catalog and database; afterwards the
    caller's session is the active one again and a Spark Connect clone is released on the server."""
    if hasattr(spark, "cloneSession"):  # Spark Connect has no newSession; a clone has the caller's settings
        work = spark.cloneSession()
    else:
        work = spark.newSession()
        for key, value in spark.conf.getAll.items():
            if key.startswith("spark.sql.") and work.conf.isModifiable(key):
                work.conf.set(key, value)
    work.conf.set("spark.sql.session.timeZone", view.time_zone)
    work.catalog.setCurrentCatalog(spark.catalog.currentCatalog())   # names resolve as in the caller's
    work.catalog.setCurrentDatabase(spark.catalog.currentDatabase())
    try:
        yield work
    finally:
        _release(spark, work)


def _release(spark: SparkSession, work: SparkSession) -> None:
    if hasattr(work, "cloneSession"):
        try:  # best effort, as SparkSession.stop is: the clone's server session, then its channel
            work.client.release_session()
            work.client.close()
        except Exception:  # noqa: BLE001 - the refresh's own outcome matters, not the cleanup's
            pass
    elif SparkSession._activeSession is work:  # createDataFrame made it PySpark's active session
        SparkSession._activeSession = spark  # what SparkSession.createDataFrame does, for the caller
        spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)


def _describe(spark: SparkSession, view: View) -> QueryInfo:
    try:
        return describe(spark, view.definition.query)
    except AnalysisException as e:
        raise errors.query_broken(view.name, str(e).splitlines()[0]) from None


def _refresh(spark: SparkSession, view: View, info: QueryInfo, full: bool) -> Outcome:
    started = time.time()
    _phase(view.name, "planning")
    found = stored(spark, view.name, view.properties)
    previous = found.state
    refresh_id = (previous.refresh_id if previous else _last_refresh_id(spark, view) if found.lost else 0) + 1
    tables = delta_tables.lookup(spark, [view.name, *info.source_tables])  # read after `found`
    view = replace(view, table_id=tables[view.name].id)
    pinned = pinned_targets(spark, view, refresh_id)
    targets = pinned or {s: tables[s].version for s in info.source_tables}
    chosen = _chosen(spark, view, info, found, full)
    if chosen.technique == "incremental" and any(v < previous.sources.get(s, -1) for s, v in targets.items()):
        chosen = replace(chosen, technique="full", reason="SOURCE_REPLACED")  # dropped and created again
    if chosen.technique == "incremental" and not pinned and targets == previous.sources:
        return Outcome(view.name, "incremental", "NO_CHANGES", previous.refresh_id, targets, started_at=started,
                       watermark=previous.watermark, duration_s=round(time.time() - started, 3))
    outcome = Outcome(view.name, chosen.technique, chosen.reason, refresh_id, targets, started_at=started)
    run = _Run(spark, view, info, previous, targets, outcome, marker=found.marker,
               source_ids={s: tables[s].id for s in info.source_tables})
    # The view's files, which a merge reads, are listed in the background meanwhile.
    with snapshots.warming(spark, [view.name]):
        try:
            new_state = replace(_recomputed(run, chosen.technique), source_ids=run.source_ids)
            outcome.watermark = new_state.watermark
            outcome.duration_s = round(time.time() - started, 3)
            new_state = replace(new_state, metrics=_metrics(outcome))
            _phase(view.name, "merging")
            outcome.rows_inserted, outcome.rows_updated, outcome.rows_deleted = _commit(run, new_state)
        finally:
            for frame in run.cached:
                frame.unpersist()
    checkpoint("committed")
    outcome.duration_s = round(time.time() - started, 3)  # the statement's, its commit included
    return outcome


def _recomputed(run: _Run, technique: str) -> RefreshState:
    """The view's new rows, pending in `run`, and the state they bring it to: from the changes
    when `technique` says so and the change feed allows, else in full."""
    outcome, view = run.outcome, run.view
    _phase(view.name, "reading changes" if technique == "incremental" else "recomputing")
    if technique != "incremental":
        return _full(run)
    try:
        return _incremental(run)
    except _ChangeFeedGone as gone:
        if view.definition.policy != "AUTO":
            raise errors.change_feed_gone(view.name, gone.source, gone.version) from None
        outcome.technique, outcome.reason = "full", "CHANGE_FEED_UNAVAILABLE"
    except _SourceReplaced:
        outcome.technique, outcome.reason = "full", "SOURCE_REPLACED"  # dropped and created again
    return _full(run)


def _chosen(spark: SparkSession, view: View, info: QueryInfo, found: Stored, full: bool) -> Plan:
    """Incremental or full, and why (plan.py); a view whose state is lost says so."""
    if found.lost and not full:
        if view.definition.policy.startswith("INCREMENTAL"):
            raise errors.state_lost(view.name)
        return Plan("full", "STATE_LOST")
    return plan(spark, view, info, found.state, full)


def _last_refresh_id(spark: SparkSession, view: View) -> int:
    """The highest refresh id the view's properties and late rows name: a view whose state is lost
    carries on after it, so late-row appends, idempotent per refresh id, still land."""
    late = (spark.sql(f"SELECT max(refresh_id) FROM {view.late_table}").first()[0]
            if spark.catalog.tableExists(view.late_table) else None)
    return max(late or 0, int(view.properties.get(REFRESH_ID_PROPERTY) or 0))


def _metrics(outcome: Outcome) -> dict:
    keys = ("technique", "reason", "rows_read", "late_rows", "groups_combined", "groups_recomputed",
            "started_at", "duration_s")
    return {k: getattr(outcome, k) for k in keys}


def _commit(run: _Run, new_state: RefreshState) -> tuple[int, int, int]:
    """Write the view's rows and its new state in one Delta commit (a state-only commit if there is
    nothing to write); the rows it inserted, updated and deleted. The commit is the extension's
    (mv/jvm/RefreshCommit.scala): it goes through only while the view's state is still `run.marker`."""
    spark, name = run.spark, run.view.name
    spec = {"view": name, "refresh_id": new_state.refresh_id, "expected": run.marker,
            "state": new_state.to_property()}
    if run.pending_merge:
        spec |= {"mode": "merge", **run.pending_merge}
    elif run.pending_rows is None:
        spec["mode"] = "state"
    else:
        spec |= {"mode": "overwrite" if run.overwrite else "append", "rows": run.temp_view(run.pending_rows, "rows")}
    with session_settings(spark, {USER_METADATA: new_state.to_json()}):
        row = spark.sql(f"MV_COMMIT_REFRESH {sql_string(json.dumps(spec))}").first()
    if row.status != "committed":  # another refresh committed since this one read the state
        raise errors.concurrent_refresh(name)
    return row.num_inserted_rows, row.num_updated_rows, row.num_deleted_rows


class _SourceReplaced(Exception):
    """A source's Delta table id is not the one the previous refresh read: its versions start anew."""


def _check_sources(run: _Run) -> None:
    """Raise _SourceReplaced when a source's table id is not the one the previous refresh read:
    the changes read are not changes of what the view holds."""
    if any(run.previous.source_ids.get(s, i) != i for s, i in run.source_ids.items()):
        raise _SourceReplaced


class _ChangeFeedGone(Exception):
    def __init__(self, source: str, version: int):
        super().__init__(source)
        self.source, self.version = source, version


def _changes(run: _Run) -> dict[str, DataFrame]:
    """Each source's changes since the version last processed, signed: +1 insert/postimage, -1 delete/preimage."""
    changes = {}
    for source, target in run.targets.items():
        start = run.previous.sources.get(source, -1) + 1
        if start <= target:
            frame = (run.spark.read.format("delta").option("readChangeFeed", "true")
                     .option("startingVersion", start).option("endingVersion", target).table(source))
            changes[source] = frame.withColumn("__sign", F.when(
                F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(-1)).cache()
    return changes


def _incremental(run: _Run) -> RefreshState:
    previous = run.previous
    try:
        changes = _changes(run)
        run.cached += changes.values()  # the MERGE, run at commit, still reads them
        run.outcome.rows_read = sum(frame.count() for frame in changes.values())
    except Exception as e:  # noqa: BLE001 - Delta reports a lost change feed in several ways
        _check_sources(run)  # a source created again has no change feed from where the view left off
        if not any(marker in str(e) for marker in CHANGE_FEED_GONE):
            raise
        source = next(s for s, v in run.targets.items() if previous.sources.get(s, -1) < v)
        raise _ChangeFeedGone(source, previous.sources.get(source, -1) + 1) from None
    checkpoint("changes_read")
    _check_sources(run)  # before anything is written
    _phase(run.view.name, "recomputing")
    views = {source: run.temp_view(frame, f"changes_{i}") for i, (source, frame) in enumerate(changes.items())}
    state = replace(previous, refresh_id=run.outcome.refresh_id, sources=dict(run.targets))
    if not views:
        return state
    if run.info.shape == "aggregate":
        _refresh_groups(run, next(iter(views.values())))
    elif run.info.windows[0].kind == "SESSION" and len(run.info.windows) > 1:
        _refresh_session_join(run, views)
    elif run.info.windows[0].kind == "SESSION":
        return _refresh_sessions(run, next(iter(views.values())), state)
    else:
        return _refresh_windows(run, views)
    return state


def _refresh_windows(run: _Run, changes: dict[str, str]) -> RefreshState:
    """Windows: each window function applied to its own source's changes gives the affected windows."""
    spark, d, t = run.spark, run.view.definition, run.time_type
    windowed = [run.temp_view(spark.sql(
        f"SELECT *, {micros_sql('window_start', t)} AS __ws, {micros_sql('window_end', t)} AS __we, "
        f"{micros_sql(quote(w.time_column), t)} AS __t FROM {w.call(changes[w.sources[0]])}"), f"windowed_{i}")
        for i, w in enumerate(run.info.windows) if w.sources[0] in changes]
    old_wm, grace = run.previous.watermark, interval_micros(spark, d.grace)
    windows, counts = _touched_windows(spark, windowed)
    max_event, new_wm = _advanced(run, list(windows.values()))
    for i, name in enumerate(windowed):
        count = sum(n for (part, _, e), n in counts.items() if part == i and watermark.is_final(e, old_wm, grace))
        if count:
            late = spark.sql(f"SELECT * EXCEPT (__ws, __we, __t) FROM {name} WHERE __we + {grace} <= {old_wm}")
            write_late_rows(spark, run.view, late, run.outcome.refresh_id, run.targets, i)
            run.outcome.late_rows += count
    checkpoint("late_rows_written")
    affected = [(s, e) for s, e in windows if not watermark.is_final(e, old_wm, grace)]
    newly_closed = None
    if d.emit == "WINDOW CLOSE":
        affected = [(s, e) for s, e in affected if watermark.is_closed(e, new_wm)]
        if new_wm is not None and new_wm != old_wm:
            newly_closed = (old_wm + 1 if old_wm is not None else None, new_wm + 1)
    if affected or newly_closed:
        # Windows in a few runs of time (recent changes) are cheapest recomputed: Delta reads just
        # those files. Scattered over many, recomputing reads most of the source: combine instead.
        # A cumulative window reaches back to its day's start: recomputing it rereads the day so far.
        scattered = len(_runs(affected)) > COMBINE_AFTER_RUNS or run.info.windows[0].kind == "CUMULATE"
        if _combinable(run) and scattered:
            _combine_windows(run, affected, newly_closed, next(iter(changes.values())))
        else:
            _merge_windows(run, affected, newly_closed, run.info.window_start, run.info.window_end, t)
    return RefreshState(run.outcome.refresh_id, dict(run.targets), max_event, new_wm)


def _advanced(run: _Run, latest: list[int | None]) -> tuple[int | None, int | None]:
    """The max event time after the previous refresh's and the new event times `latest` (None for
    none), and the watermark it brings (None without a WATERMARK): neither ever goes back."""
    previous, d = run.previous, run.view.definition
    max_event = max(filter(None, latest + [previous.max_event_time if previous else None]), default=None)
    if not d.watermark_column:
        return max_event, None
    return max_event, watermark.advance(previous.watermark if previous else None, max_event,
                                        interval_micros(run.spark, d.watermark_delay))


def _touched_windows(spark: SparkSession, windowed: list[str]) -> tuple[dict, dict]:
    """One query over the windowed changes: each touched window (start, end) with the latest time
    added to it (None for a window only deleted from), and how many changed rows each part (index
    in `windowed`) has in each window, which tells how many are late without another pass.

    Example: one insert at t=5 into [0, 10) of part 0 gives ({(0, 10): 5}, {(0, 0, 10): 1}).
    """
    touched = " UNION ALL ".join(f"SELECT {i} AS __part, __ws, __we, __t, __sign FROM {name}"
                                 for i, name in enumerate(windowed))
    rows = spark.sql(f"SELECT __part, __ws, __we, max(IF(__sign = 1, __t, NULL)), count(*) FROM ({touched}) "
                     "GROUP BY __part, __ws, __we").collect()
    windows: dict[tuple[int, int], int | None] = {}
    for _, s, e, latest, _ in rows:
        known = windows.get((s, e))
        windows[(s, e)] = latest if known is None else known if latest is None else max(known, latest)
    return windows, {(part, s, e): n for part, s, e, _, n in rows}


def _runs(windows: list[tuple[int, int]]) -> list[list[int]]:
    """Windows merged into the time ranges they cover."""
    ranges: list[list[int]] = []
    for start, end in sorted(windows):
        if ranges and start <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([start, end])
    return ranges


def _ranges(windows: list[tuple[int, int]], limit: int = MAX_RANGES) -> list[tuple[int, int]]:
    """Windows merged into at most `limit` time ranges, joining the closest ones first."""
    ranges = _runs(windows)
    while len(ranges) > limit:
        i = min(range(len(ranges) - 1), key=lambda k: ranges[k + 1][0] - ranges[k][1])
        ranges[i:i + 2] = [[ranges[i][0], ranges[i + 1][1]]]
    return [(a, b) for a, b in ranges]


def _merge_windows(run: _Run, affected, newly_closed, ws: str, we: str, t: str) -> None:
    """Recompute the affected windows (and, for EMIT ON WINDOW CLOSE, those that just closed) and merge."""
    spark = run.spark
    start, end = quote(ws), quote(we)
    if run.info.group_by is None:  # rows, not groups: replace whole time ranges of windows
        ranges = " OR ".join(f"(t.{start} >= {time_sql(a, t)} AND t.{end} <= {time_sql(b, t)})"
                             for a, b in _ranges(affected))
        _replace_rows(run, _kept(run, f"({ranges or 'false'})", newly_closed, f"t.{end}", t))
        return
    parts = [f"({start} >= {time_sql(a, t)} AND {end} <= {time_sql(b, t)})" for a, b in _ranges(affected)]
    exact = f"({start}, {end}) IN (SELECT s, e FROM {_windows_view(run, affected, 'affected')})"
    keep = _kept(run, f"(({' OR '.join(parts)}) AND {exact})" if parts else "false", newly_closed, end, t)
    recomputed = spark.sql(f"SELECT * FROM ({run.query}) WHERE {keep}")
    if _all_new(run, affected):
        run.pending_rows = recomputed
        return
    current = spark.sql(f"SELECT * FROM {run.view.name} WHERE {keep}")
    bounds = [b for pair in affected for b in pair] + [b for b in (newly_closed or ()) if b is not None]
    _merge(run, recomputed, current, span=(min(bounds), max(bounds)) if bounds and not newly_closed else None)


def _all_new(run: _Run, affected) -> bool:
    """Whether no window to write can be in the view yet, so its rows are appended, not merged:
    under EMIT ON WINDOW CLOSE the view holds only windows closed by the previous watermark, and
    every affected window (like each that just closed) ends after those."""
    closed_end = _closed_bound(run) + 1  # the latest end a window in the view can have
    return run.view.definition.emit == "WINDOW CLOSE" and all(e > closed_end for _, e in affected)


def _windows_view(run: _Run, windows: list[tuple[int, int]], suffix: str) -> str:
    """A temporary view (s, e) of the windows given in microseconds, as values of the time column's type.

    One JSON literal, not createDataFrame: a plan built on constants, which Spark knows is small (so
    it broadcasts it into joins) and runs without a Python worker.

    Example: [(0, 60_000_000)] gives one row (1970-01-01 00:00:00, 1970-01-01 00:01:00).
    """
    pairs = F.inline(F.from_json(F.lit(json.dumps([{"s": s, "e": e} for s, e in windows])),
                                 "array<struct<s: bigint, e: bigint>>"))
    t = run.time_type
    frame = run.spark.range(1).select(pairs).selectExpr(f"{time_sql('s', t)} AS s", f"{time_sql('e', t)} AS e")
    return run.temp_view(frame, suffix)


def _closing(end: str, newly_closed, t: str) -> str | None:
    """SQL: the window ending at `end` is one that just closed (`newly_closed`: (low, high], low
    None for all before high); None when none did."""
    if not newly_closed:
        return None
    low, high = newly_closed
    return f"{end} <= {time_sql(high, t)}" + (f" AND {end} > {time_sql(low, t)}" if low is not None else "")


def _kept(run: _Run, windows: str, newly_closed, end: str, t: str) -> str:
    """SQL: a row (its window ending at `end`) meets `windows` or is of a window that just closed;
    under EMIT ON WINDOW CLOSE, only closed windows."""
    keep = windows
    closing = _closing(end, newly_closed, t)
    if closing:
        keep = f"({keep} OR ({closing}))"
    if run.view.definition.emit == "WINDOW CLOSE":
        bound = newly_closed[1] if newly_closed else _closed_bound(run) + 1
        keep = f"({keep}) AND {end} <= {time_sql(bound, t)}"
    return keep


def _replace_rows(run: _Run, kept: str) -> None:
    """One MERGE that deletes the view's rows meeting `kept` (on alias t) and inserts the query's
    rows meeting it: exact for any rows, duplicates included.

    The view's rows to delete match one marker row of the source, on a key the join can hash
    (`kept` turned into the marker's value); `kept` in ON also lets Delta skip the view's other
    files, which a NOT MATCHED BY SOURCE clause would not (it reads the whole view).
    """
    rows = run.spark.sql(f"SELECT *, 'insert' AS __op FROM ({run.query}) t WHERE {kept}")
    marker = run.spark.sql("SELECT 'region' AS __op")
    source = run.temp_view(rows.unionByName(marker, allowMissingColumns=True), "rows")
    _delete_matched_insert_rest(run, source, f"s.__op = IF({kept}, 'region', NULL) AND {kept}")


def _delete_matched_insert_rest(run: _Run, source: str, on: str, span: tuple[int, int] | None = None) -> None:
    """The merge of a replacement: view rows that match a source row `on` are deleted; the source's
    rows marked 'insert' (which `on` never matches) are inserted. `span`: window starts the
    matched rows lie in, so the view's other files are skipped."""
    run.pending_merge = {"rows": source, "on": on, "delete_matched": True, "target_filter": _span(run, span, None)}


def _closed_bound(run: _Run) -> int:
    return run.previous.watermark if run.previous.watermark is not None else -INFINITY


def _combinable(run: _Run) -> bool:
    """Whether changed groups can be combined from their view rows and the changes (mv/combine.py)."""
    info = run.info
    # A float sum added in another order differs in its last bits from the sum recomputed: not combined.
    exact = all(c.get("aggregate") != "sum_float" for c in info.output)
    return info.combinable and exact and len(info.sources) == 1 and all(w.kind != "SESSION" for w in info.windows)


def _combine_windows(run: _Run, affected, newly_closed, changes: str) -> None:
    """Windows already in the view are combined with the changes; windows that just closed
    (EMIT ON WINDOW CLOSE) are computed from the source, as they were held out of the view."""
    t, start, end = run.time_type, quote(run.info.window_start), quote(run.info.window_end)
    in_view = [(s, e) for s, e in affected
               if run.view.definition.emit != "WINDOW CLOSE" or watermark.is_closed(e, run.previous.watermark)]
    closing = _closing(end, newly_closed, t)
    windows = _windows_view(run, in_view, "in_view")
    partials = f"({start}, {end}) IN (SELECT s, e FROM {windows})" if in_view else "false"
    bounds = [b for pair in in_view for b in pair] + ([b for b in newly_closed if b is not None] if newly_closed else [])
    low_open = bool(newly_closed) and newly_closed[0] is None
    span = None if low_open or not bounds else (min(bounds), max(bounds))
    _combine_and_merge(run, changes, partials, span, closing)


def _span(run: _Run, span: tuple[int, int] | None, alias: str | None) -> str | None:
    """A window_start range condition on `alias`'s rows (the view's own with None), so Delta
    skips the view's other files."""
    if span is None:
        return None
    start, t = (f"{alias}." if alias else "") + quote(run.info.window_start), run.time_type
    return f"{start} >= {time_sql(span[0], t)} AND {start} <= {time_sql(span[1], t)}"


def _combine_and_merge(run: _Run, changes: str, partials: str | None = None, span: tuple[int, int] | None = None,
                       also: str | None = None) -> None:
    """Touched groups combined where their old row allows it and recomputed from the source where
    not, plus the query's rows meeting `also`; then one MERGE."""
    spark, info, keys = run.spark, run.info, run.info.group_by
    rows = combine(spark, Combination(run.view.name, run.view.definition.query, info.source_tables[0], changes,
                                      info.output, keys, partials, _span(run, span, "v")), run.cached)
    on = " AND ".join(f"q.{quote(k)} <=> n.{quote(k)}" for k in keys)
    needs = run.temp_view(rows.filter("__needs").select(*[quote(k) for k in keys]), "needs")
    parts = [rows.filter("NOT __needs AND NOT __empty").select(*[quote(c) for c in run.columns])]
    query = run.query
    touched, needed = rows.selectExpr("count(*)", "count_if(__needs)").first()  # fills the cache
    run.outcome.groups_combined, run.outcome.groups_recomputed = touched - needed, needed
    if needed:
        where = _needed_windows(run, needs) if info.window_start else "true"
        parts.append(spark.sql(f"SELECT /*+ BROADCAST(n) */ q.* FROM (SELECT * FROM ({query}) WHERE {where}) q "
                               f"LEFT SEMI JOIN {needs} n ON {on}"))
    if also:
        parts.append(spark.sql(f"SELECT * FROM ({query}) WHERE {also}"))
    recomputed = parts[0]
    for part in parts[1:]:  # cached: the MERGE reads them twice (rows to write, keys that vanished)
        run.cached.append(part.cache())
        recomputed = recomputed.unionByName(part)
    # Every touched group is in `rows`: those missing from `recomputed` are deleted.
    _merge(run, recomputed, rows.select(*[quote(c) for c in run.columns]), span=span)


def _needed_windows(run: _Run, needs: str) -> str:
    """The time ranges of the windows of groups to recompute, so the source scan skips other files."""
    t, start, end = run.time_type, quote(run.info.window_start), quote(run.info.window_end)
    windows = run.spark.sql(f"SELECT DISTINCT {micros_sql(start, t)}, {micros_sql(end, t)} FROM {needs}").collect()
    parts = [f"({start} >= {time_sql(a, t)} AND {end} <= {time_sql(b, t)})" for a, b in _ranges(windows, NEEDED_RANGES)]
    return " OR ".join(parts) or "false"


def _refresh_groups(run: _Run, changes: str) -> None:
    """GROUP BY without windows: combine or recompute the groups whose keys changed."""
    if _combinable(run):
        return _combine_and_merge(run, changes)
    keys = ", ".join(quote(k) for k in run.info.group_by)
    run.spark.sql(f"SELECT DISTINCT {keys} FROM {changes}").createOrReplaceTempView(f"{run.temp}_keys")
    on = " AND ".join(f"v.{quote(k)} <=> k.{quote(k)}" for k in run.info.group_by)
    affected = f"LEFT SEMI JOIN {run.temp}_keys k ON {on}"  # a semi join goes below the GROUP BY
    recomputed = run.spark.sql(f"SELECT /*+ BROADCAST(k) */ v.* FROM ({run.query}) v {affected}")
    current = run.spark.sql(f"SELECT /*+ BROADCAST(k) */ v.* FROM {run.view.name} v {affected}")
    _merge(run, recomputed, current)


def _refresh_sessions(run: _Run, changes: str, state: RefreshState) -> RefreshState:
    """SESSION: recompute the sessions of the regions the changes can reach, from just their rows.

    Per key, a region joins each changed row's [t - gap, t + gap] with every session of the view
    it touches. In the view's (previous) sessions consecutive rows of different sessions are more
    than gap apart, so no row outside a region can join a session inside it: recomputing from the
    region's rows alone gives the exact new sessions. Under a watermark, late changes are set aside
    first (mv/session_lateness.py); under EMIT ON WINDOW CLOSE the sessions not yet in the view,
    every row from `state.open_from` on, form a region of their own.

    Under EMIT ON WINDOW CLOSE, when every session in the view is final (`session_lateness.
    settled`: always so without GRACE, but for an end 1 µs past the watermark), no change that is
    not late reaches one: the regions need not read the view, a recomputed session closed before
    is one the view holds as it is (or a part of one, cut at `open_from`), and the sessions
    closing for the first time are appended, not merged.
    """
    spark, w, info = run.spark, run.info.windows[0], run.info
    open_from, settled = None, False
    if _late_sessions(run):
        state, changes = _session_watermark(run, changes)
        if run.view.definition.emit == "WINDOW CLOSE":
            open_from = run.previous.open_from if run.previous.open_from is not None else -INFINITY
            settled = session_lateness.settled(run, run.previous.watermark,
                                               interval_micros(spark, run.view.definition.grace))
    keys, source = [quote(k) for k in w.partition_by], info.source_tables[0]
    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] or ["true"])
    regions = _session_regions(run, changes, open_from, touching_view=not settled)
    low, high = spark.sql(f"SELECT min(lo), max(hi) FROM {regions}").first()
    if low is None:
        return state
    within = " AND ".join([f"a.{quote(w.time_column)} >= {time_sql(low, run.time_type)}"] * (low > -INFINITY)
                          + [f"a.{quote(w.time_column)} <= {time_sql(high, run.time_type)}"] * (high < INFINITY))
    # Late changes are undone in the whole source, so the regions select from what that leaves
    # (their time range still reaches the Delta scan).
    effective = session_lateness.without_late(run, run.source(source)) if _late_sessions(run) else run.source(source)
    # LEFT SEMI JOIN, not EXISTS: Spark decorrelates this EXISTS into a nested-loop join of every
    # distinct time with every region (the range alone), then matches keys; the join hashes the keys.
    time_us = micros_sql(f"a.{quote(w.time_column)}", run.time_type)
    rows = run.temp_view(spark.sql(
        f"SELECT a.* FROM {effective} a LEFT SEMI JOIN {regions} b "
        f"ON {match} AND {time_us} BETWEEN b.lo AND b.hi WHERE {within or 'true'}"), "session_rows")
    recomputed = spark.sql(run.query_over({source: rows}))
    end = quote(info.window_end)
    if open_from is not None:
        recomputed = recomputed.cache()
        run.cached.append(recomputed)
        state = replace(state, open_from=session_lateness.open_from(
            run, run.temp_view(recomputed, "recomputed"), state.watermark))
        recomputed = recomputed.where(watermark.closed_sql(end, state.watermark, run.time_type))
    if settled:  # only sessions closing for the first time are new to the view
        run.pending_rows = recomputed.where(f"NOT ({watermark.closed_sql(end, run.previous.watermark, run.time_type)})")
        return state
    if info.group_by is None:
        _replace_sessions(run, recomputed, regions, (low, high))
        return state
    start, t = f"a.{quote(info.window_start)}", run.time_type
    current = spark.sql(f"SELECT a.* FROM {run.view.name} a LEFT SEMI JOIN {regions} b ON {match} "
                        f"AND {micros_sql(start, t)} >= b.lo AND {micros_sql('a.' + end, t)} - {w.size} <= b.hi")
    _merge(run, recomputed, current)
    return state


def _session_regions(run: _Run, changes: str, open_from: int | None, touching_view: bool) -> str:
    """A temporary view (keys, lo, hi): per key, the merged spans of the changed rows widened by
    gap, of the rows from `open_from` on (if not None), and, if `touching_view`, of the view's
    sessions those reach (`_refresh_sessions`)."""
    w, info, t = run.info.windows[0], run.info, run.time_type
    gap, keys = w.size, [quote(k) for k in w.partition_by]

    def us(column: str, alias: str = "") -> str:
        return micros_sql(f"{alias}{quote(column)}", t)

    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] or ["true"])
    a_keys = "".join(f"a.{k}, " for k in keys)
    keys_ = "".join(f"{k}, " for k in keys)
    still_open = "" if open_from is None else (  # every key with a row where open sessions may be
        f" UNION SELECT DISTINCT {keys_}{open_from} AS lo, {INFINITY} AS hi FROM {run.source(info.source_tables[0])} "
        f"WHERE {quote(w.time_column)} >= {time_sql(open_from, t)}")
    touched = "" if not touching_view else f"""
        touched AS (SELECT DISTINCT {a_keys}{us(info.window_start, "a.")} AS lo,
                           {us(info.window_end, "a.")} - {gap} AS hi
                    FROM {run.view.name} a JOIN changed b ON {match}
                    WHERE {us(info.window_start, "a.")} <= b.hi + {gap} AND {us(info.window_end, "a.")} >= b.lo),"""
    return run.temp_view(run.spark.sql(f"""
        WITH changed AS (SELECT DISTINCT {keys_}{us(w.time_column)} AS lo, {us(w.time_column)} AS hi
                         FROM {changes} WHERE {quote(w.time_column)} IS NOT NULL{still_open}),{touched}
        spans AS (SELECT {keys_}lo - {gap} AS lo, hi + {gap} AS hi FROM changed
                  {f"UNION ALL SELECT {keys_}lo, hi FROM touched" if touching_view else ""}),
        {_merged_spans(keys)}""").localCheckpoint(), "regions")  # not cached: it reads the view (combine.py)


def _session_watermark(run: _Run, changes: str) -> tuple[RefreshState, str]:
    """The state after the changes (event time, watermark) and the changes that are not late;
    the late ones written to the late table and counted."""
    d, previous = run.view.definition, run.previous
    grace = interval_micros(run.spark, d.grace)
    on_time, late_view, late, latest = session_lateness.split(run, changes, previous.watermark, grace)
    if late:
        write_late_rows(run.spark, run.view, run.spark.table(late_view), run.outcome.refresh_id, run.targets)
        run.outcome.late_rows += late
    checkpoint("late_rows_written")
    return RefreshState(run.outcome.refresh_id, dict(run.targets), *_advanced(run, [latest])), on_time


def _merged_spans(keys: list[str]) -> str:
    """SQL after a CTE `spans` (keys, lo, hi): per key, the spans that overlap or touch merged.

    Example: spans a [1, 5], a [4, 9], a [12, 13] give a [1, 9] and a [12, 13].
    """
    keys_ = "".join(f"{k}, " for k in keys)
    partition = f"PARTITION BY {', '.join(keys)}" if keys else ""
    return f"""marked AS (SELECT *, CASE WHEN lo <= max(hi) OVER ({partition} ORDER BY lo, hi
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS starts FROM spans),
        grouped AS (SELECT *, sum(starts) OVER ({partition} ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS grp
                    FROM marked)
        SELECT {keys_}min(lo) AS lo, max(hi) AS hi FROM grouped GROUP BY {keys_}grp"""


# Half-widths, in gaps, of the spans around the changes searched for the sessions they reach;
# None: all time (always enough).
SESSION_SEARCH = (4, 256, None)


def _refresh_session_join(run: _Run, changes: dict[str, str]) -> None:
    """Joined SESSION windows: recompute both sides' sessions in the regions the changes reach.

    A joined row is one left and one right session of a key, overlapping in time. The regions are
    sessions over U, every row either side has now or had before (current rows and retracted ones):
    each side's old and new sessions lie inside one session of U, and a U-session without a changed
    row is the same before and after, and so are both sides' sessions in it. So the view's rows
    whose session lies in a U-session holding a change are replaced by the query recomputed over
    just those U-sessions' rows, which are exact there: no row of either side is within gap of them.
    """
    found = _joined_session_regions(run, changes)
    if found is None:
        return
    regions, span = found
    sides = {w.sources[0]: w for w in run.info.windows}
    recomputed = run.spark.sql(run.query_over(
        {source: _rows_in_regions(run, w, regions, span, i) for i, (source, w) in enumerate(sides.items())}))
    _replace_sessions(run, recomputed, regions, span)


def _rows_in_regions(run: _Run, w, regions: str, span: tuple[int, int] | None, side: int) -> str:
    """A temporary view of `w`'s source rows whose key and time are in one of `regions`."""
    keys, t = [quote(k) for k in w.partition_by], _time_type(run, w)
    us = micros_sql(f"a.{quote(w.time_column)}", t)
    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] + [f"{us} BETWEEN b.lo AND b.hi"])
    where = (f" WHERE a.{quote(w.time_column)} BETWEEN {time_sql(span[0], t)} AND {time_sql(span[1], t)}"
             if span else "")  # a constant range on the time column: Delta skips other files
    rows = run.spark.sql(f"SELECT a.* FROM {run.source(w.sources[0])} a LEFT SEMI JOIN {regions} b ON {match}{where}")
    return run.temp_view(rows, f"side_{side}_rows")


def _time_type(run: _Run, w) -> str:
    return next(f.dataType.simpleString() for f in run.spark.table(w.sources[0]).schema
                if f.name.lower() == w.time_column.lower())


def _joined_session_regions(run: _Run, changes: dict[str, str]) -> tuple[str, tuple[int, int] | None] | None:
    """The U-sessions (`_refresh_session_join`) holding a change, per key, as a view (keys, lo, hi)
    with their overall time span; None without changes.

    U's sessions are computed over its rows within spans around the changes, which is exact for
    those with no row of U within gap of a span's edge; the spans widen until every session holding
    a change is one of those (SESSION_SEARCH).
    """
    spark, w0 = run.spark, run.info.windows[0]
    keys = [quote(k) for k in w0.partition_by]
    keys_ = "".join(f"{k}, " for k in keys)
    sides = list({w.sources[0]: w for w in run.info.windows}.values())
    frame = spark.sql(" UNION ".join(
        f"SELECT {keys_}{micros_sql(quote(w.time_column), _time_type(run, w))} AS t FROM {changes[w.sources[0]]} "
        f"WHERE {quote(w.time_column)} IS NOT NULL" for w in sides if w.sources[0] in changes)).cache()
    run.cached.append(frame)
    changed = run.temp_view(frame, "changed")
    low, high = spark.sql(f"SELECT min(t), max(t) FROM {changed}").first()
    if low is None:
        return None
    for width in SESSION_SEARCH:
        spans = run.temp_view(spark.sql(
            f"WITH spans AS (SELECT {keys_}t - {width * w0.size if width else INFINITY} AS lo, "
            f"t + {width * w0.size if width else INFINITY} AS hi FROM {changed}), {_merged_spans(keys)}"), "spans")
        span = (low - width * w0.size, high + width * w0.size) if width else None
        sessions = _sessions_of_u(run, sides, changed, spans, span)
        frame = spark.sql(f"SELECT * FROM {sessions} WHERE changes > 0").cache()
        run.cached.append(frame)
        holding = run.temp_view(frame, "holding")
        if width is None or not spark.sql(f"SELECT 1 FROM {holding} WHERE first - {w0.size} < lo "
                                          f"OR last + {w0.size} > hi LIMIT 1").collect():
            break
    regions = run.temp_view(spark.sql(f"SELECT {keys_}first AS lo, last AS hi FROM {holding}"), "regions")
    bounds = spark.sql(f"SELECT min(lo), max(hi) FROM {regions}").first()
    return regions, (bounds[0], bounds[1])


def _sessions_of_u(run: _Run, sides, changed: str, spans: str, span: tuple[int, int] | None) -> str:
    """A temporary view: U's sessions within each of `spans` (keys, lo, hi, first, last, changes)."""
    keys = [quote(k) for k in run.info.windows[0].partition_by]
    keys_ = "".join(f"{k}, " for k in keys)
    match = " AND ".join([f"u.{k} <=> s.{k}" for k in keys] + ["u.t BETWEEN s.lo AND s.hi"])
    rows = []
    for w in sides:
        t = _time_type(run, w)
        where = (f" WHERE {quote(w.time_column)} BETWEEN {time_sql(span[0], t)} AND {time_sql(span[1], t)}"
                 if span else "")
        rows.append(f"SELECT {keys_}{micros_sql(quote(w.time_column), t)} AS t, 0 AS changed "
                    f"FROM {run.source(w.sources[0])}{where}")
    rows.append(f"SELECT {keys_}t, 1 AS changed FROM {changed}")  # the retracted rows among them
    partition, gap = ", ".join(keys + ["lo"]), run.info.windows[0].size
    return run.temp_view(run.spark.sql(f"""
        WITH u AS ({' UNION ALL '.join(rows)}),
        inside AS (SELECT /*+ BROADCAST(s) */ u.*, s.lo, s.hi FROM u JOIN {spans} s ON {match}),
        marked AS (SELECT *, CASE WHEN t - lag(t) OVER (PARTITION BY {partition} ORDER BY t) <= {gap}
                   THEN 0 ELSE 1 END AS starts FROM inside),
        numbered AS (SELECT *, sum(starts) OVER (PARTITION BY {partition} ORDER BY t ROWS UNBOUNDED PRECEDING) AS sid
                     FROM marked)
        SELECT {keys_}lo, hi, min(t) AS first, max(t) AS last, sum(changed) AS changes
        FROM numbered GROUP BY {keys_}lo, hi, sid"""), "u_sessions")


def _replace_sessions(run: _Run, recomputed: DataFrame, regions: str, span: tuple[int, int]) -> None:
    """Rows over SESSION (Top-N, deduplication) and joined sessions: one MERGE deletes the view's
    rows whose session lies in a region and inserts the regions' recomputed rows; exact for
    duplicates, as no new row matches.

    The regions join as source rows matching the view's rows to delete: per key they are disjoint,
    so each view row matches at most one (Delta allows no more), and unlike a subquery in a
    NOT MATCHED BY SOURCE condition the join hashes the keys.

    Example: regions [("a", 00:01, 00:12)] delete a's rows of 00:01-00:17 (gap 5) and insert a's
    rows recomputed from its bids of 00:01-00:12.
    """
    w, t, gap = run.info.windows[0], run.time_type, run.info.windows[0].size
    start, end = quote(run.info.window_start), quote(run.info.window_end)
    keys = [quote(k) for k in w.partition_by]
    marked = run.spark.table(regions).selectExpr(*keys, "lo AS __lo", "hi AS __hi", "'region' AS __op")
    source = run.temp_view(recomputed.withColumn("__op", F.lit("insert"))
                           .unionByName(marked, allowMissingColumns=True), "replace")
    on = " AND ".join([f"t.{k} <=> s.{k}" for k in keys] + [
        "s.__op = 'region'", f"{micros_sql('t.' + start, t)} >= s.__lo",
        f"{micros_sql('t.' + end, t)} - {gap} <= s.__hi",  # the session's last row
        f"t.{start} >= {time_sql(span[0], t)} AND t.{start} <= {time_sql(span[1], t)}"])
    _delete_matched_insert_rest(run, source, on, span)


def _merge(run: _Run, recomputed: DataFrame, current: DataFrame | None, delete_missing: bool | str = False,
           span: tuple[int, int] | None = None) -> None:
    """One merge: recomputed rows upserted, `current` rows whose key vanished deleted.

    `delete_missing` also deletes view rows the recomputation lacks (those meeting it, if a condition).
    `span` bounds the window starts of the view rows that can match, so the view's other files are skipped.
    """
    on = " AND ".join([f"t.{quote(k)} <=> s.{quote(k)}" for k in run.info.group_by]
                      + ([_span(run, span, "t")] if span else []))
    run.pending_merge = {"rows": run.temp_view(_upserts_and_deletes(run, recomputed, current), "merge"), "on": on,
                         "delete_missing": delete_missing if isinstance(delete_missing, str) else
                         "true" if delete_missing else None, "target_filter": _span(run, span, None)}


def _upserts_and_deletes(run: _Run, recomputed: DataFrame, current: DataFrame | None) -> DataFrame:
    """The MERGE's source: each recomputed row to upsert, and each key of `current` the
    recomputation lacks to delete (`__op`). One full outer join on the group keys, so the
    recomputation, the costly side, is evaluated once.

    Example: recomputed {a: 3}, current {a: 2, b: 1} give (a, 3, 'upsert') and (b, NULL, 'delete').
    """
    if current is None:
        return recomputed.withColumn("__op", F.lit("upsert"))
    key = run.info.group_by
    r = recomputed.withColumn("__r", F.lit(True)).alias("r")
    c = current.select(*[quote(k) for k in key]).alias("c")
    joined = r.join(c, [F.col(f"r.{quote(k)}").eqNullSafe(F.col(f"c.{quote(k)}")) for k in key], "full_outer")
    present = F.col("r.__r").isNotNull()
    return joined.select(*[
        (F.when(present, F.col(f"r.{quote(name)}")).otherwise(F.col(f"c.{quote(name)}")) if name in key
         else F.col(f"r.{quote(name)}")).alias(name) for name in run.columns],
        F.when(present, F.lit("upsert")).otherwise(F.lit("delete")).alias("__op"))


def _full(run: _Run) -> RefreshState:
    """Recompute everything but final windows; the view keeps its rows' identity (MERGE), so its
    change feed stays exact. The watermark carries on from the previous refresh: it never goes back,
    and windows it made final keep their rows (their late changes are in __late)."""
    spark, d, info, previous = run.spark, run.view.definition, run.info, run.previous
    max_event = new_wm = None
    where, keep_final = [], None
    if info.windows and info.window_start:
        t, end = run.time_type, quote(info.window_end)
        times = [spark.sql(f"SELECT max({micros_sql(quote(w.time_column), t)}) FROM {run.source(w.sources[0])}")
                 .first()[0]
                 for w in info.windows if len(w.sources) == 1
                 and w.time_column.lower() in {c.lower() for c in spark.table(w.sources[0]).columns}]
        max_event, new_wm = _advanced(run, times)
        if d.watermark_column:
            old_wm = previous.watermark if previous else None
            if old_wm is not None:  # final: old_wm >= window_end + grace
                keep_final = f"{end} > {time_sql(old_wm - interval_micros(spark, d.grace), t)}"
                where.append(keep_final)
        if d.emit == "WINDOW CLOSE":
            where.append(f"{end} <= {time_sql(new_wm + 1 if new_wm is not None else -INFINITY, t)}")
    query, open_from = run.query, None
    if _late_sessions(run):
        query, open_from = _full_sessions(run, new_wm)
    recomputed = spark.sql(f"SELECT * FROM ({query})" + (f" WHERE {' AND '.join(where)}" if where else ""))
    if info.window_start:  # written in time order, so later merges skip the view's other files
        recomputed = recomputed.repartitionByRange(quote(info.window_start))
    if info.group_by is not None:
        _merge(run, recomputed, None, delete_missing=f"t.{keep_final}" if keep_final else True)
    elif keep_final:  # rows of final windows stay as they are
        _replace_rows(run, "t." + " AND t.".join(where))
    else:
        run.pending_merge = None
        run.pending_rows, run.overwrite = recomputed, True
    return RefreshState(run.outcome.refresh_id, dict(run.targets), max_event, new_wm, open_from=open_from)


def _late_sessions(run: _Run) -> bool:
    """Whether the view keeps sessions under a watermark, late rows set aside (the kind plan.py
    lets refresh incrementally: one grouped SESSION)."""
    windows, d = run.info.windows, run.view.definition
    return (bool(d.watermark_column) and len(windows) == 1 and windows[0].kind == "SESSION"
            and run.info.group_by is not None)


def _full_sessions(run: _Run, new_wm: int | None) -> tuple[str, int | None]:
    """SESSION under a watermark, recomputed in full: the query over the source with the late
    changes undone and without the rows final sessions hold back (those stay as the view has them),
    and under EMIT ON WINDOW CLOSE where the earliest session still open starts."""
    source, previous = run.info.source_tables[0], run.previous
    rows = session_lateness.without_late(run, run.source(source))
    if previous is not None and previous.watermark is not None:
        rows = session_lateness.after_final(run, rows, previous.watermark,
                                            interval_micros(run.spark, run.view.definition.grace))
    query = run.query_over({source: rows})
    if run.view.definition.emit != "WINDOW CLOSE":
        return query, None
    sessions = run.spark.sql(query).cache()  # computed once: for where open ones start, and for the MERGE
    run.cached.append(sessions)
    name = run.temp_view(sessions, "all_sessions")
    return f"SELECT * FROM {name}", session_lateness.open_from(run, name, new_wm)

