"""A full refresh: the view's query over its sources as of the refresh's versions, written
keeping the rows' identity (so the view's change feed stays exact) and, under a watermark,
leaving final windows as they are.

Example:
    >>> full_refresh.full(run)   # Recomputed(state, write)
"""
from __future__ import annotations

from pyspark.sql import DataFrame

from mv import open_windows, session_lateness, session_refresh, writes
from mv.plan import own_time_column
from mv.query import Window, interval_micros, micros_sql, quote, sql_string, time_sql
from mv.run import INFINITY, Run, advanced
from mv.state import RefreshState

# Full refreshes that repair: the view may not be what its refreshes wrote (a write around the
# read-only rule, a lost state, another definition of a SQL view it reads, or the user asks), so
# every row is compared with the query, final windows included (`exact`).
REPAIRS = ("REQUESTED_FULL", "VIEW_CHANGED_OUTSIDE", "STATE_LOST", "QUERY_DEFINITION_CHANGED")

def full(run: Run) -> writes.Recomputed:
    """Recompute everything but final windows; the view keeps its rows' identity (MERGE), so its
    change feed stays exact. The watermark carries on from the previous refresh: it never goes back,
    and windows it made final keep their rows (their late changes are in __late). Under EMIT ON
    WINDOW CLOSE the windows still open are kept too, when the query allows (mv/open_windows.py).
    A repair (`REPAIRS`: REFRESH ... FULL, a write around the read-only rule...) compares every
    row of the view with the query, final windows recomputed without their late changes."""
    spark, d, info, previous = run.spark, run.view.definition, run.info, run.previous
    max_event = new_wm = None
    where, keep_final = [], None
    if info.windows and info.window_start and info.window_end:  # only window_start kept: no bounds to keep
        t, end = run.time_type, quote(info.window_end)
        max_event, new_wm = advanced(run, [_latest(run, i, w) for i, w in enumerate(info.windows)])
        if d.watermark_column and not run.replaces_schema:  # a new schema: final windows too are rewritten
            old_wm = previous.watermark if previous else None
            if old_wm is not None:  # final: old_wm >= window_end + grace
                keep_final = f"{end} > {time_sql(old_wm - interval_micros(spark, d.grace), t)}"
                where.append(keep_final)
        if d.emit == "WINDOW CLOSE":
            where.append(f"{end} <= {time_sql(new_wm + 1 if new_wm is not None else -INFINITY, t)}")
    query, open_from = run.query, None
    if session_refresh.late_sessions(run):
        query, open_from = session_refresh.full_sessions(run, new_wm)
    recomputed = spark.sql(f"SELECT * FROM ({query})" + (f" WHERE {' AND '.join(where)}" if where else ""))
    if info.window_start:  # written in time order, so later merges skip the view's other files
        recomputed = recomputed.repartitionByRange(quote(info.window_start))
    if run.replaces_schema:  # a new schema: the view overwritten whole, in the same commit (RefreshCommit)
        write = writes.overwrite(recomputed)
    elif run.outcome.reason in REPAIRS:
        write = writes.exact(run, _with_final_windows(run, recomputed, keep_final))
    elif info.group_by is not None:
        write = writes.merge(run, recomputed, None, delete_missing=f"t.{keep_final}" if keep_final else True)
    elif keep_final:  # rows of final windows stay as they are
        write = writes.replace_rows(run, "t." + " AND t.".join(where))
    else:
        write = writes.overwrite(recomputed)
    kept = None
    if run.open_state is not None:  # the windows held back, kept for the next refresh
        kept = open_windows.rebuilt(run, new_wm + 1 if new_wm is not None else -INFINITY, query)
    return writes.Recomputed(RefreshState(run.outcome.refresh_id, dict(run.targets), max_event, new_wm,
                                          open_from=open_from, open_id=kept), write)


def _latest(run: Run, index: int, w: Window) -> int | None:
    """The latest event time (µs) window function `w` (the query's `index`th) sees: its source's
    column, when that is its time column (plan.own_time_column), else its time column as the query
    computes it (`ts - INTERVAL 30 MINUTES AS ts`, a join's rows: mv_window_times), whose source
    column of that name, or none, would close windows early or never; without a WATERMARK, which
    alone needs that (the incremental paths take only own time columns), None, and no query run."""
    if own_time_column(run.info, w):
        relation, column = run.source(w.sources[0]), micros_sql(quote(w.time_column), run.time_type)
    elif not run.view.definition.watermark_column:
        return None
    else:
        relation, column = f"mv_window_times({sql_string(run.query)}, {index})", "event_time"
    return run.spark.sql(f"SELECT max({column}) FROM {relation}").first()[0]


def _with_final_windows(run: Run, recomputed: DataFrame, keep_final: str | None) -> DataFrame:
    """The rows the view must hold: `recomputed` and, when final windows are kept (`keep_final` is
    the condition of those that are not), the final windows recomputed from the source with the
    late changes undone (session_lateness.without_late): what the refreshes wrote there, since a
    change that came too late for a final window went to <view>__late and stays out of it.
    A query over several sources (their late changes in one table) keeps its final windows' rows
    as the view has them, and so do HOP and CUMULATE: there a row late for one window may have
    counted in another that was still open, and taking it out of the source would take it out of
    both (so a final window of theirs changed outside the engine is not repaired)."""
    if keep_final is None:
        return recomputed
    sources = run.info.source_tables
    one_window_a_row = all(w.kind in ("TUMBLE", "SESSION") for w in run.info.windows)
    if len(sources) == 1 and one_window_a_row:
        rows = session_lateness.without_late(run, run.source(sources[0]))
        final = run.spark.sql(f"SELECT * FROM ({run.query_over({sources[0]: rows})}) WHERE NOT ({keep_final})")
    else:
        final = run.spark.table(run.view.name).where(f"NOT ({keep_final})")
    return recomputed.unionByName(final.select(*recomputed.columns))
