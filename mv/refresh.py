"""Refreshing a materialized view: from its sources' change feeds when it can, in full when it must.

The path of an incremental refresh (docs/design.md, "The path of a refresh"):
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
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from mv import catalog, change_feed, delta_tables, errors, estimate, full_refresh, progress, snapshots
from mv import internal_columns, open_windows, strategies, watermark, window_refresh, writes
from mv.catalog import View
from mv.estimate import Stopped
from mv.history import pinned_targets
from mv.plan import Plan, by_windows, kept_incrementally, late_rows_from_changes, plan, weighed
from mv.query import QueryInfo, describe, sql_string
from mv.run import Outcome, Run, clock_closes, known_dearer, seen_at
from mv.settings import session_settings
from mv.state import READ_VERSION_PROPERTY, REFRESH_ID_PROPERTY, STATE_PROPERTY, USER_METADATA, RefreshState, Stored
from mv.state import stored
from mv.strategies import Step
from mv.writes import Recomputed, Write


def refresh(spark: SparkSession, name: str, full: bool = False,
            refreshed: set[str] | None = None) -> Outcome:
    """Refresh the view `name`: its stale upstream views first, then itself (incrementally if it can).

    `refreshed` names the upstream views already refreshed in this pass (a pass over several views
    shares one set, so each upstream view refreshes once); the ones this call refreshes are added.
    It runs in a session of its own (same catalog, own settings and temporary views), so its time
    zone and commit metadata never leak into the caller's session or into a concurrent refresh.

    Example:
        >>> done = set()
        >>> [refresh(spark, name, refreshed=done).technique for name in ("hot_items", "hot_items_peak")]
        ['incremental', 'incremental']      # hot_items refreshed once, not again as an upstream
    """
    started = time.time()  # the statement's time, its lookups and the query's analysis included
    view = catalog.require(spark, name)
    quiet, looked_up = _idle(spark, view, started) if not full else (None, {})
    if quiet is not None:
        return quiet
    done = refreshed if refreshed is not None else set()
    with _own_session(spark, view) as work:
        info = _describe(work, view)
        for source in info.upstream_views:
            if source not in done and (upstream := catalog.load(work, source)) is not None:
                done.add(source)
                refresh(spark, upstream.definition.name, refreshed=done)
                started = time.time()  # the view's own refresh: its upstream views' are theirs
        return _refresh(work, view, info, full, looked_up=looked_up, started=started)


def estimated(spark: SparkSession, name: str) -> estimate.Estimate | None:
    """What REFRESH of the view `name` would cost now incrementally and in full (mv/estimate.py),
    for EXPLAIN: the refresh runs up to its estimate (it reads the changes) and writes nothing.
    None when there is nothing to weigh: no change, a refresh that is full anyway, a query shape
    other than windows.

    Example:
        >>> estimated(spark, "hourly_totals").describe()
        'incremental 12.0 MB (about 0.8 s), full 310.4 MB (about 9.6 s): incremental is cheaper'
    """
    view = catalog.require(spark, name)
    with _own_session(spark, view) as work:
        run = _prepared(work, view, _describe(work, view), False, dry=True)
        if isinstance(run, Outcome):  # nothing changed: nothing to weigh
            return None
        if run.outcome.technique != "incremental":
            return run.upfront
        try:
            step = _recomputed(run)
        finally:
            for frame in run.cached:
                frame.unpersist()
    return step.estimate if isinstance(step, Stopped) else None


def _idle(spark: SparkSession, view: View, started: float) -> tuple[Outcome | None, dict[str, delta_tables.Table]]:
    """NO_CHANGES, told from the view's state and one lookup of its sources (their versions, and
    their change bytes since the state's), without a session of its own or an analysis of its
    query: its last refresh found the query kept incrementally, reading no SQL view and no other
    materialized view; no source moved or was created again since; only refreshes changed the
    view; no interrupted attempt left late rows to finish (the late table's note, read in the same
    lookup) or open windows other than the state's (`open_windows.named`); the clock closes no
    window (IDLE AFTER). Else no outcome, and the tables looked up for the refresh to go on with
    (none when a source is a materialized view, which the refresh brings up to date first).

    Example:
        >>> _idle(spark, catalog.require(spark, "hourly"), time.time())[0]
        Outcome(view='hourly', technique='incremental', reason='NO_CHANGES', ...)
    """
    if view.table is None or view.table.changed_outside is not None or STATE_PROPERTY not in view.properties:
        return None, {}
    previous = stored(spark, view.name, view.properties).state
    if not previous.incremental or previous.views_fingerprint is not None:
        return None, {}
    kept = [view.open_table] if previous.open_id is not None else []
    tables = delta_tables.lookup(spark, [*previous.sources, view.late_table, *kept], after=previous.sources)
    if any(catalog.DEFINITION_PROPERTY in tables[s].properties for s in previous.sources):
        return None, {}
    if any(not (t := tables[s]).exists or t.version != v or t.id != previous.source_ids.get(s, t.id)
           for s, v in previous.sources.items()) \
            or pinned_targets(spark, view, previous.refresh_id + 1, tables[view.late_table]) is not None \
            or any(not open_windows.named(tables[t], previous.open_id) for t in kept) \
            or clock_closes(spark, view.definition, previous, watermark.now()):
        return None, tables
    return _unchanged(view, previous, started), tables


def _unchanged(view: View, previous: RefreshState, started: float) -> Outcome:
    """The outcome of a refresh that found no source moved since `previous` and committed nothing."""
    return Outcome(view.name, "incremental", "NO_CHANGES", previous.refresh_id, dict(previous.sources),
                   started_at=started, watermark=previous.watermark, duration_s=round(time.time() - started, 3))


@contextmanager
def _own_session(spark: SparkSession, view: View) -> Iterator[SparkSession]:
    """A session for one refresh with the caller's settings, catalog and database; afterwards the
    caller's session is the active one again and a Spark Connect clone is released on the server.
    Its Spark SQL executions are described by the refresh's phase in Spark's UI (`progress.labelled`)."""
    if hasattr(spark, "cloneSession"):  # Spark Connect has no newSession; a clone has the caller's settings
        work = spark.cloneSession()
    else:
        work = spark.newSession()
        for key, value in _settings(spark).items():  # Spark's session settings and the engine's own
            if key.startswith("mv.") or (key.startswith("spark.sql.") and work.conf.isModifiable(key)):
                work.conf.set(key, value)
    work.conf.set("spark.sql.session.timeZone", view.time_zone)
    work.catalog.setCurrentCatalog(spark.catalog.currentCatalog())
    # The query's names resolve in the database it was written in, as a Spark view's do (the view's
    # own name was qualified by catalog.require when that is not the caller's).
    work.catalog.setCurrentDatabase(view.database or spark.catalog.currentDatabase())
    try:
        with progress.labelled(work, view.name):
            yield work
    finally:
        _release(spark, work)


def _settings(spark: SparkSession) -> dict[str, str]:
    """The settings of `spark` (a session of this driver process), read from the JVM in one call:
    PySpark's `conf.getAll` reads them entry by entry, about a hundred calls (15-25 ms a refresh
    at 34 settings, against 3-6 ms)."""
    mapper = spark._jvm.com.fasterxml.jackson.databind.ObjectMapper()  # Jackson: one of Spark's own libraries
    return json.loads(mapper.writeValueAsString(spark._jsparkSession.conf().getAllAsJava()))


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


def described(spark: SparkSession, view: View) -> QueryInfo:
    """The view's query described as a refresh sees it: in the database it was written in."""
    with _own_session(spark, view) as work:
        return _describe(work, view)


def _describe(spark: SparkSession, view: View) -> QueryInfo:
    """The view's query described against its sources as they are now; a source that gained a
    column with the engine's reserved prefix since CREATE fails here, before anything is read."""
    try:
        info = describe(spark, view.definition.query)
    except AnalysisException as e:
        raise errors.query_broken(view.name, str(e).splitlines()[0]) from None
    internal_columns.check(view.name, info)
    return info


def _refresh(spark: SparkSession, view: View, info: QueryInfo, full: bool,
             looked_up: dict[str, delta_tables.Table] | None = None, started: float | None = None) -> Outcome:
    """The refresh of `view` (its query described as `info`), incremental unless `full` or its plan
    says otherwise: recomputed (`_recomputed`), then committed with its new state; timed from
    `started` (epoch seconds), the statement's start, when given."""
    run = _prepared(spark, view, info, full, looked_up=looked_up, started=started)
    if isinstance(run, Outcome):  # no source moved: nothing to commit
        return run
    view, outcome, started = run.view, run.outcome, run.outcome.started_at
    # A view too large for its checksum to list its files has them listed in the background meanwhile,
    # for the merge; a small view's files are read from its checksum without a Spark job.
    with snapshots.warming(spark, [] if run.view_small else [view.name]):
        try:
            step = _recomputed(run)
            new_state = replace(step.state, source_ids=run.source_ids, source_schemas=run.source_schemas,
                                views_fingerprint=info.views_fingerprint,
                                incremental=kept_incrementally(view, info, Plan(outcome.technique, outcome.reason)),
                                event_time_seen_at=seen_at(run, step.state.max_event_time))
            outcome.watermark = new_state.watermark
            outcome.duration_s = round(time.time() - started, 3)
            new_state = replace(new_state, metrics=_metrics(outcome), recent=estimate.recent(
                estimate.past(spark, view.name, run.previous, run.previous_end) if run.previous else [],
                outcome.technique, outcome.work_bytes, outcome.duration_s, outcome.reason, run.retracts,
                run.switched_s, run.near_full, cold=outcome.technique == "incremental"
                and not estimate.runs_warm(spark, view.name, outcome.technique)))
            progress.phase(view.name, "merging")
            outcome.rows_inserted, outcome.rows_updated, outcome.rows_deleted = _commit(run, new_state, step.write)
            estimate.warmed(spark, view.name, outcome.technique)
        finally:
            beside = run.waited()  # the open-window table's commit, run beside the view's (open_windows.replace)
            for frame in run.cached:
                frame.unpersist()
    if beside is not None:
        raise beside
    progress.checkpoint("committed")
    outcome.duration_s = round(time.time() - started, 3)  # the statement's, its commit included
    return outcome


def _prepared(spark: SparkSession, view: View, info: QueryInfo, full: bool, dry: bool = False,
              looked_up: dict[str, delta_tables.Table] | None = None, started: float | None = None) -> Run | Outcome:
    """The refresh about to recompute: its plan (incremental or full, and why), the versions it
    reads to, AUTO's estimate before reading the change (`Run.upfront`); or the outcome NO_CHANGES
    when no source moved. `dry`: only for EXPLAIN's estimate (`estimated`). Timed from `started`,
    else from now."""
    started = started if started is not None else time.time()
    progress.phase(view.name, "planning")
    found = stored(spark, view.name, view.properties, view.table.version if view.table else None)
    previous = found.state
    if previous is None:  # a view created (again): its refreshes so far are another view's
        estimate.warmed(spark, view.name, None)
    refresh_id = (previous.refresh_id if previous else _last_refresh_id(spark, view) if found.lost else 0) + 1
    # The view's version was read with its state (`found`); its sources' are read after it, here or
    # just before by `_idle` (`looked_up`), with their change bytes since then (from their logs):
    # AUTO's estimate weighs them, and under every policy a small change is cached uncompressed and
    # its touched windows grouped in the driver (change_feed.read, window_refresh.touched).
    # Only a Delta source has a change feed: a view whose last refresh could not be incremental
    # (a Parquet source) asks none, unless AUTO weighs it.
    weighs = dry or view.definition.policy == "AUTO"
    after = previous.sources if previous and (weighs or previous.incremental) else None
    known = dict(looked_up or {}) | ({view.name: view.table} if view.table else {})
    beside = [view.late_table] + ([view.open_table] if open_windows.applies(view, info) else [])
    wanted = [view.name, *info.source_tables, *beside]
    tables = {**known, **delta_tables.lookup(spark, [t for t in wanted if t not in known], after)}
    view = replace(view, table_id=tables[view.name].id)
    pinned = pinned_targets(spark, view, refresh_id, tables[view.late_table])
    targets = pinned or {s: tables[s].version for s in info.source_tables}
    chosen = _chosen(view, info, found, full, tables[view.name].changed_outside)
    if chosen.technique == "incremental" and any(v < previous.sources.get(s, -1) for s, v in targets.items()):
        chosen = replace(chosen, technique="full", reason="SOURCE_REPLACED")  # dropped and created again
    replaces_schema = _schema_replaced(tables[view.name], info)
    if chosen.technique == "incremental":
        chosen = _schema_checked(view, info, previous, tables, replaces_schema, chosen)
    now = watermark.now()
    open_state = open_windows.kept(view, info, previous, tables.get(view.open_table))
    # No source moved: nothing to do, unless the kept open windows are not the state's (a refresh
    # killed after the view's commit, before theirs): they are built again now, not at the next change.
    if chosen.technique == "incremental" and not pinned and targets == previous.sources \
            and not clock_closes(spark, view.definition, previous, now) and not open_windows.untrusted(open_state):
        return _unchanged(view, previous, started)
    # window by window (mv/window_refresh.py, or a window-local query of rows): the other reads are
    # read within the change's time range alone, not known before reading it
    sizes = estimate.Sizes.of(tables, view.name, info.reads, by_terms=not (by_windows(info) or info.window_local),
                              bounded=info.shape == "rows")
    previous_end = last_refresh_end(tables[view.name])
    updated = frozenset(s for s in info.source_tables if tables[s].change_retracts)
    retracts = bool(updated) if weighs else None  # the change's kind, for AUTO's estimate and the next ones
    chosen, upfront = _weighed_before_reading(spark, view, info, sizes, chosen, dry, previous, previous_end, retracts)
    outcome = Outcome(view.name, chosen.technique, chosen.reason, refresh_id, targets, started_at=started,
                      work_bytes=upfront.full_bytes if upfront and chosen.reason == estimate.FULL_CHEAPER else None)
    outcome.weighed(upfront)
    run = Run(spark, view, info, previous, targets, outcome, marker=found.marker,
              source_ids={s: tables[s].id for s in info.source_tables}, now=now, dry=dry, sizes=sizes,
              open_state=open_state,
              late_exists=tables[view.late_table].exists, replaces_schema=replaces_schema,
              source_schemas={s: types for s in info.source_tables if (types := tables[s].column_types)},
              previous_end=previous_end, updated=updated, upfront=upfront, retracts=retracts,
              view_small=tables[view.name].small,
              near_full=upfront is not None and chosen.reason == estimate.FULL_CHEAPER and upfront.near_full)
    return run


def _recomputed(run: Run) -> Step:
    """The state the refresh brings the view to, and how its new rows go into it: from the
    changes when its technique says so and the change feed allows, else in full. An incremental
    strategy that stops at its estimate (estimate.Stopped) is EXPLAIN's answer (`run.dry`), or
    under AUTO a full refresh that costs less, run instead (FULL_CHEAPER)."""
    outcome, view = run.outcome, run.view
    if outcome.technique != "incremental":
        _late_changes_first(run)
        return _full(run)
    progress.phase(view.name, "reading changes")
    try:
        step = _incremental(run)
        if isinstance(step, Recomputed) or run.dry:
            return step
        outcome.technique, outcome.reason, outcome.work_bytes = "full", estimate.FULL_CHEAPER, step.estimate.full_bytes
        run.switched_s = round(time.time() - outcome.started_at, 3)
        run.near_full = step.estimate.near_full
    except change_feed.ChangeFeedGone as gone:
        if view.definition.policy != "AUTO":
            raise errors.change_feed_gone(view.name, gone.source, gone.version) from None
        outcome.technique, outcome.reason = "full", "CHANGE_FEED_UNAVAILABLE"
    except change_feed.SchemaChanged as changed:
        if view.definition.policy != "AUTO":
            raise errors.source_schema_changed(view.name, changed.source) from None
        outcome.technique, outcome.reason = "full", "SOURCE_SCHEMA_CHANGED"
    except change_feed.SourceReplaced:
        outcome.technique, outcome.reason = "full", "SOURCE_REPLACED"  # dropped and created again
    return _full(run) if not run.dry else Stopped(None)  # EXPLAIN: nothing to weigh


def _late_changes_first(run: Run) -> None:
    """Before a full refresh planned as one (REFRESH POLICY FULL, REFRESH ... FULL, a query kept in
    full), under a WATERMARK: the changes' late rows appended to `<view>__late`, as an incremental
    refresh appends them (window_refresh.write_late_changes). The full refresh keeps final windows
    as they are, so a late change would be recorded nowhere, and a repair (REFRESH ... FULL, which
    recomputes final windows without the late table's changes) would put it into its final window.
    Not when the changes cannot be read as the view read its sources (their schema changed, a
    source created again, the change feed cleaned up: those late rows go unrecorded), nor for
    windows whose late rows the sources' changes do not tell (plan.late_rows_from_changes)."""
    previous = run.previous
    if run.dry or previous is None or previous.watermark is None or not run.view.definition.watermark_column \
            or run.outcome.reason in UNREADABLE_CHANGES or not late_rows_from_changes(run.info):
        return
    try:
        window_refresh.write_late_changes(run)
    except Exception as e:  # noqa: BLE001 - Delta reports a lost change feed in several ways
        if not (change_feed.is_gone(e) or change_feed.is_schema_change(e)):
            raise


# Full refreshes planned because the sources' changes cannot be read as the view read them.
UNREADABLE_CHANGES = ("SOURCE_SCHEMA_CHANGED", "SOURCE_REPLACED", "QUERY_DEFINITION_CHANGED", "STATE_LOST")


def _full(run: Run) -> Recomputed:
    """The full refresh, its work recorded for later estimates (mv/estimate.py) unless an estimate
    already planned it."""
    progress.phase(run.view.name, "recomputing")
    if run.outcome.work_bytes is None:
        known = run.sizes.full
        run.outcome.work_bytes = known if known is not None else estimate.full_work(run.spark, run.query, run.view.name)
    return full_refresh.full(run)


def _schema_replaced(view: delta_tables.Table, info: QueryInfo) -> bool:
    """Whether the query's columns (names, types) are no longer the view table's: a source's column
    type changed (replaced, widened). Then only a full refresh that replaces the view's schema fits."""
    return view.schema is not None and view.columns() != [(c.name.lower(), c.type) for c in info.output]


def _schema_checked(view: View, info: QueryInfo, previous: RefreshState, tables: dict[str, delta_tables.Table],
                    replaces_schema: bool, chosen: Plan) -> Plan:
    """`chosen` (incremental), or a full refresh (SOURCE_SCHEMA_CHANGED) when a source's schema
    changed since the previous refresh (a column dropped, renamed or retyped, read from the log: no Spark job) or the
    query's columns changed; under an INCREMENTAL policy that is MV_SOURCE_SCHEMA_CHANGED. A
    source created again (its table id changed) with the query's columns unchanged is left to
    SOURCE_REPLACED."""
    if not replaces_schema and any(previous.source_ids.get(s, tables[s].id) != tables[s].id
                                   for s in info.source_tables):
        return chosen
    changed = change_feed.schema_changed(previous, {s: tables[s].column_types for s in info.source_tables})
    changed = changed or (info.source_tables[0] if replaces_schema and info.source_tables else None)
    if changed is None:
        return chosen
    if view.definition.policy != "AUTO":
        raise errors.source_schema_changed(view.name, changed)
    return Plan("full", "SOURCE_SCHEMA_CHANGED")


def _weighed_before_reading(spark: SparkSession, view: View, info: QueryInfo, sizes: estimate.Sizes, chosen: Plan,
                            dry: bool, previous: RefreshState | None, previous_end: float | None,
                            retracts: bool | None) -> tuple[Plan, estimate.Estimate | None]:
    """Under REFRESH POLICY AUTO, a full refresh (FULL_CHEAPER) when the change alone, before it is
    read, costs more (mv/estimate.py), or the view's incremental refreshes of its kind (`retracts`:
    it takes rows away) took longer than a full one would; else `chosen`; with the estimate, if any.
    The change's size only for the shapes AUTO weighs (the others, sessions, by their kind alone),
    and neither under a watermark, whose late rows must reach `<view>__late` first: such a view
    asks its kind when its change is about to be read (window_refresh.full_ahead, which then reads
    only the late rows) or once it is read (run.known_dearer: sessions, and every view again).
    EXPLAIN (`dry`) stops after it when the refresh will not be incremental (`estimated`)."""
    auto = view.definition.policy == "AUTO"
    upfront = None
    if chosen.technique == "incremental" and (dry or auto) and not view.definition.watermark_column:
        over = estimate.retracts_over_appends(info)
        upfront = estimate.before_reading(spark, view.name, sizes, previous, previous_end, retracts, over) \
            if weighed(info) else estimate.by_kind(spark, view.name, sizes, previous, previous_end, retracts,
                                                   over_appends=over)
    if upfront is not None and upfront.switches and auto:
        chosen = Plan("full", estimate.FULL_CHEAPER)
    return chosen, upfront


def _chosen(view: View, info: QueryInfo, found: Stored, full: bool, changed_outside: int | None) -> Plan:
    """Incremental or full, and why (plan.py); a view whose state is lost says so."""
    if found.lost and not full:
        if view.definition.policy.startswith("INCREMENTAL"):
            raise errors.state_lost(view.name)
        return Plan("full", "STATE_LOST")
    return plan(view, info, found.state, full, changed_outside)


def _last_refresh_id(spark: SparkSession, view: View) -> int:
    """The highest refresh id the view's properties and late rows name: a view whose state is lost
    carries on after it, so late-row appends, idempotent per refresh id, still land."""
    late = (spark.sql(f"SELECT max(refresh_id) FROM {view.late_table}").first()[0]
            if spark.catalog.tableExists(view.late_table) else None)
    return max(late or 0, int(view.properties.get(REFRESH_ID_PROPERTY) or 0))


def _metrics(outcome: Outcome) -> dict:
    keys = ("technique", "reason", "rows_read", "late_rows", "groups_combined", "groups_recomputed",
            "started_at", "duration_s", "watermark_idle", "work_bytes", "estimated_incremental_s", "estimated_full_s")
    return {k: getattr(outcome, k) for k in keys}


def last_refresh_end(view: delta_tables.Table) -> float | None:
    """When the view's newest commit was made (epoch seconds), if the last refresh made it: the
    version after the one it read (READ_VERSION_PROPERTY). None after another commit (OPTIMIZE, ...)."""
    read = view.properties.get(READ_VERSION_PROPERTY)
    if view.committed_at is None or read is None or view.version != int(read) + 1:
        return None
    return view.committed_at / 1000


def _commit(run: Run, new_state: RefreshState, write: Write) -> tuple[int, int, int]:
    """Write the view's rows and its new state in one Delta commit (a state-only commit if there is
    nothing to write); the rows it inserted, updated and deleted. The commit is the extension's
    (mv/jvm/RefreshCommit.scala): it goes through only while the view's state is still `run.marker`."""
    spark, name = run.spark, run.view.name
    rows = run.temp_view(write.rows, "rows") if write.rows is not None else None
    reached = run.temp_view(write.reached, "reached") if write.reached is not None else None
    spec = {"view": name, "refresh_id": new_state.refresh_id, "expected": run.marker,
            "state": new_state.to_property(), **write.spec(rows, reached, writes.read_version(run))}
    with session_settings(spark, {USER_METADATA: new_state.to_json()}):
        row = spark.sql(f"MV_COMMIT_REFRESH {sql_string(json.dumps(spec))}").collect()[0]  # a command: ran already
    if row.status != "committed":  # another refresh committed since this one read the state
        raise errors.concurrent_refresh(name)
    return row.num_inserted_rows, row.num_updated_rows, row.num_deleted_rows


def _incremental(run: Run) -> Step:
    """The refresh from the sources' changes, by the strategy the query's shape calls for
    (mv/strategies.py); a Stopped when it stops at its estimate first."""
    previous = run.previous
    windows = by_windows(run.info)
    try:  # the first read of the change feed: the touched windows, or a count
        if (windows or late_rows_from_changes(run.info)) and (ahead := window_refresh.full_ahead(run)) is not None:
            return Stopped(ahead)  # its late rows written
        changes, counted = change_feed.read(run)  # its caches go to run.cached: the MERGE, run at commit, still reads them
        views = {source: run.temp_view(frame, f"changes_{i}") for i, (source, frame) in enumerate(changes.items())}
        first = window_refresh.touched(run, views) if windows and views else None
        signs = {source: counted[source] if source in counted else change_feed.signs(run, source, frame)
                 for source, frame in changes.items()} if not first else {}
        run.outcome.rows_read = first.rows_read if first else sum(sum(s.values()) for s in signs.values())
    except Exception as e:  # noqa: BLE001 - Delta reports a lost change feed in several ways
        change_feed.check_sources(run)  # a source created again has no change feed from where the view left off
        source = next((s for s, v in run.targets.items() if previous.sources.get(s, -1) < v), None)
        if change_feed.is_schema_change(e) and source:  # e.g. a column dropped from a column-mapped source
            raise change_feed.SchemaChanged(source) from None
        if not change_feed.is_gone(e) or not source:
            raise
        raise change_feed.ChangeFeedGone(source, previous.sources.get(source, -1) + 1) from None
    progress.checkpoint("changes_read")
    change_feed.check_sources(run)  # before anything is written
    if run.dry and not weighed(run.info):  # the shapes not weighed may write late rows next
        return Stopped(known_dearer(run))
    progress.phase(run.view.name, "recomputing")
    closes = not views and run.info.windows and clock_closes(run.spark, run.view.definition, previous, run.now)
    if closes:
        run.outcome.reason = "IDLE_WATERMARK"  # no change: the clock closes windows
    if closes or (not views and open_windows.untrusted(run.open_state)):  # or open windows to build again
        views = {source: run.temp_view(change_feed.none(run, source), f"changes_{i}")
                 for i, source in enumerate(run.info.source_tables)}
        first = window_refresh.touched(run, views) if windows else None
    if not views:
        return Recomputed.carried(run, writes.STATE_ONLY)
    return strategies.choose(run.info).refresh(run, strategies.Change(changes, views, signs, first))
