"""SESSION windows: the regions of time and keys the changes can reach, and the sessions
recomputed from just their rows; joined sessions; sessions under a watermark with late changes
set aside (mv/session_lateness.py).

Example:
    >>> session_refresh.refresh_sessions(run, change)   # Recomputed(state, write)
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mv import change_feed, estimate, open_windows, progress, session_lateness, watermark, writes
from mv.combine import folded
from mv.history import write_late_rows
from mv.internal_columns import CHANGED, CHANGES, FIRST, GROUP, HI, LAST, LO, OP, SESSION, STARTS, T, TOUCHED
from mv.query import interval_micros, micros_sql, quote, time_sql
from mv.run import INFINITY, Run, advanced, known_dearer, source_time_type
from mv.state import RefreshState
from mv.writes import Recomputed

if TYPE_CHECKING:
    from mv.strategies import Change, Step

def refresh_sessions(run: Run, change: Change) -> Step:
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
    closing for the first time are appended, not merged. When the view also keeps its open
    sessions (mv/open_windows.py) and the changes only insert, those fold with the changes' own
    sessions instead (`folded_sessions`): the source is not read; when they also retract, every
    open session is recomputed from the source in one query (`recent_sessions`).
    """
    spark, w, info, changes, state = run.spark, run.info.windows[0], run.info, change.view, run.carried()
    open_from, settled = None, False
    if late_sessions(run):
        state, changes, retracted, earliest = session_watermark(run, changes)
        on_time = run.outcome.rows_read > run.outcome.late_rows  # else nothing but late rows to write
        if on_time and (stopped := estimate.stops(run.dry, known_dearer(run))):  # its late rows written
            return stopped
        if run.view.definition.emit == "WINDOW CLOSE":
            open_from = run.previous.open_from if run.previous.open_from is not None else -INFINITY
            settled = session_lateness.settled(run, run.previous.watermark,
                                               interval_micros(spark, run.view.definition.grace))
            kept = run.open_state is not None and run.open_state.rows is not None
            if settled and kept and not retracted:
                return folded_sessions(run, changes, state)
            if settled and kept:
                return recent_sessions(run, state, min(open_from, earliest) if earliest is not None else open_from)
    keys, source = [quote(k) for k in w.partition_by], info.source_tables[0]
    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] or ["true"])
    regions = session_regions(run, changes, open_from, touching_view=not settled)
    low, high = spark.sql(f"SELECT min({LO}), max({HI}) FROM {regions}").first()
    if low is None:  # no session open, none changed
        none_open = spark.sql(f"SELECT * FROM ({run.query}) WHERE false")
        return Recomputed(kept_again(run, state, none_open), writes.STATE_ONLY)
    rows = region_rows(run, regions, low, high)
    recomputed = spark.sql(run.query_over({source: rows}))
    end = quote(info.window_end)
    if open_from is not None:
        recomputed = recomputed.cache()
        run.cached.append(recomputed)
        state = replace(state, open_from=session_lateness.open_from(
            run, run.temp_view(recomputed, "recomputed"), state.watermark))
        closed = watermark.closed_sql(end, state.watermark, run.time_type)
        # Every session still open is among them: its key has rows from `open_from` on, or a change.
        state = kept_again(run, state, recomputed.where(f"NOT ({closed})"))
        recomputed = recomputed.where(closed)
    if settled:  # only sessions closing for the first time are new to the view
        closed = watermark.closed_sql(end, run.previous.watermark, run.time_type)
        return Recomputed(state, writes.append(recomputed.where(f"NOT ({closed})")))
    if info.group_by is None:
        return Recomputed(state, replace_sessions(run, recomputed, regions, (low, high)))
    start, t = f"a.{quote(info.window_start)}", run.time_type
    current = spark.sql(f"SELECT a.* FROM {run.view.name} a LEFT SEMI JOIN {regions} b ON {match} "
                        f"AND {micros_sql(start, t)} >= b.{LO} AND {micros_sql('a.' + end, t)} - {w.size} <= b.{HI}")
    return Recomputed(state, writes.merge(run, recomputed, current))


def folded_sessions(run: Run, changes: str, state: RefreshState) -> Recomputed:
    """Open sessions kept (mv/open_windows.py), changes that are not late and only insert, a settled
    view (`refresh_sessions`): the sessions of the inserted rows alone (the view's query over them)
    and the kept ones fold, per key, where one reaches the next (a row joins a session when
    t <= last + gap, and a session ends at last + gap): their bounds widen, count and sum add up,
    min and max compare (combine.folded). One aggregation; the source is not read. Sessions the new
    watermark closes go to the view, appended (a settled view holds none of them); the rest replace
    the kept ones.

    Example: kept a [00:01, 00:11) n=2; inserts a 00:09 and a 00:30 (gap 10 min) give
    a [00:01, 00:19) n=3, and a [00:30, 00:40) n=1.
    """
    return closed_and_kept(run, state, fold(run, changes, run.open_state.rows))


def recent_sessions(run: Run, state: RefreshState, since: int) -> Recomputed:
    """`folded_sessions` for a change that also retracts rows (not late): a retraction may split a
    session, so every key's sessions from `since` on are recomputed from the source, in one query:
    its rows from `since` on (µs: the earliest of the open sessions' start, `open_from`, and the
    changes that are not late), late changes undone, and without those a final session holds back
    (`session_lateness.after_final`), as a full recomputation reads them. Exact: the view being
    settled, a change that is not late reaches only open sessions or none, and every row of an
    open session is from `open_from` on; the sessions recomputed are the open ones and those the
    changes make, none that the view holds (their rows are held back). Closed ones are appended,
    the rest kept open (`closed_and_kept`).

    Example: open a [00:01, 00:11) n=2, b [00:02, 00:12) n=1; a's 00:01 deleted, b's 00:05
    inserted: both keys' sessions recomputed from their bids from 00:01 (open_from) on.
    """
    rows = rows_after_final(run, since if since > -INFINITY else None)
    names = [quote(c) for c in run.columns]
    recomputed = run.spark.sql(run.query_over({run.info.source_tables[0]: rows})).selectExpr(
        *names, f"CAST(NULL AS BOOLEAN) AS {TOUCHED}")
    return closed_and_kept(run, state, recomputed.localCheckpoint())


def rows_after_final(run: Run, since: int | None = None) -> str:
    """A temporary view of the source rows a recomputation of sessions under a watermark reads:
    those from `since` on (µs; None: all of them), with the late changes undone
    (session_lateness.without_late, only those of that time read) and without the rows a final
    session holds back (session_lateness.after_final; none is final before a first watermark).

    Example: the rows `recent_sessions` reads from the earliest open session's start on:
        >>> rows_after_final(run, state.open_from)
    """
    source, previous = run.info.source_tables[0], run.previous
    rows = run.source(source)
    if since is not None:  # a constant bound on the time column: Delta skips the files before it
        column, t = quote(run.info.windows[0].time_column), run.time_type
        rows = run.temp_view(run.spark.sql(f"SELECT * FROM {rows} WHERE {column} >= {time_sql(since, t)}"), "recent")
    rows = session_lateness.without_late(run, rows, None if since is None else (since, INFINITY))
    if previous is None or previous.watermark is None:
        return rows
    grace = interval_micros(run.spark, run.view.definition.grace)
    return session_lateness.after_final(run, rows, previous.watermark, grace, None if since is None else since - 1)


def fold(run: Run, changes: str, kept: str) -> DataFrame:
    """The sessions of the inserted rows `changes` (the view's query over them) folded with the kept
    open sessions `kept`, per key (`folded_sessions`); a column TOUCHED: whether a change is in it."""
    info = run.info
    keys = info.session_keys
    start, end = quote(info.window_start), quote(info.window_end)
    names = ", ".join(quote(c) for c in run.columns)
    order = (f"PARTITION BY {', '.join(map(quote, keys))} " if keys else "") + f"ORDER BY {start}, {end}"
    folding = folded(info.output, keys, {info.window_start: "min", info.window_end: "max"})
    return run.spark.sql(f"""
        WITH items AS (SELECT {names}, true AS {TOUCHED} FROM ({run.query_over({info.source_tables[0]: changes})})
                       UNION ALL SELECT {names}, false AS {TOUCHED} FROM {kept}),
        marked AS (SELECT *, CASE WHEN {start} <= max({end}) OVER ({order} ROWS BETWEEN UNBOUNDED PRECEDING
                   AND 1 PRECEDING) THEN 0 ELSE 1 END AS {STARTS} FROM items),
        grouped AS (SELECT *, sum({STARTS}) OVER ({order} ROWS UNBOUNDED PRECEDING) AS {SESSION} FROM marked)
        SELECT {', '.join(folding)}, bool_or({TOUCHED}) AS {TOUCHED}
        FROM grouped GROUP BY {', '.join([quote(k) for k in keys] + [SESSION])}""").localCheckpoint()


def closed_and_kept(run: Run, state: RefreshState, rows: DataFrame) -> Recomputed:
    """The sessions `rows` under the new watermark: the closed ones appended to the view (a settled
    view holds none of them), the others kept as the open sessions, and where the first of those
    starts (`open_from`). Their column TOUCHED: true for a session a change folded into, NULL for
    one recomputed from the source (counted as groups combined and recomputed)."""
    start, end, t = quote(run.info.window_start), quote(run.info.window_end), run.time_type
    closed = watermark.closed_sql(end, state.watermark, t)
    touched, recomputed, first = rows.selectExpr(f"count_if({TOUCHED})", f"count_if({TOUCHED} IS NULL)",
                                                 f"min(IF({closed}, NULL, {micros_sql(start, t)}))").first()
    run.outcome.groups_combined, run.outcome.groups_recomputed = touched, recomputed
    rows = rows.drop(TOUCHED)
    open_from = first if first is not None else state.watermark + 1 if state.watermark is not None else None
    state = kept_again(run, replace(state, open_from=open_from), rows.where(f"NOT ({closed})"))
    return Recomputed(state, writes.append(rows.where(closed)))


def region_rows(run: Run, regions: str, low: int, high: int) -> str:
    """A temporary view of the source rows whose key and time are in one of `regions` (keys, LO, HI),
    all within [low, high] (µs; -INFINITY, INFINITY: unbounded), with the late changes undone under
    a watermark (session_lateness.without_late)."""
    w, t, source = run.info.windows[0], run.time_type, run.info.source_tables[0]
    keys, column = [quote(k) for k in w.partition_by], f"a.{quote(w.time_column)}"
    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] or ["true"])
    within = " AND ".join([f"{column} >= {time_sql(low, t)}"] * (low > -INFINITY)
                          + [f"{column} <= {time_sql(high, t)}"] * (high < INFINITY))
    # Late changes are undone in the source (only those of the regions' time range, when bounded),
    # so the regions select from what that leaves (their time range still reaches the Delta scan).
    bounded = (low, high) if -INFINITY < low and high < INFINITY else None
    effective = (session_lateness.without_late(run, run.source(source), bounded)
                 if late_sessions(run) else run.source(source))
    # LEFT SEMI JOIN, not EXISTS: Spark decorrelates this EXISTS into a nested-loop join of every
    # distinct time with every region (the range alone), then matches keys; the join hashes the keys.
    return run.temp_view(run.spark.sql(
        f"SELECT a.* FROM {effective} a LEFT SEMI JOIN {regions} b "
        f"ON {match} AND {micros_sql(column, t)} BETWEEN b.{LO} AND b.{HI} WHERE {within or 'true'}"), "session_rows")


def kept_again(run: Run, state: RefreshState, still_open: DataFrame) -> RefreshState:
    """`state` naming the open sessions `still_open`, kept for the next refresh (mv/open_windows.py),
    if the view keeps them."""
    if run.open_state is None:
        return state
    return replace(state, open_id=open_windows.replace(run, still_open))


def session_regions(run: Run, changes: str, open_from: int | None, touching_view: bool) -> str:
    """A temporary view (keys, LO, HI): per key, the merged spans of the changed rows widened by
    gap, of the rows from `open_from` on (if not None), and, if `touching_view`, of the view's
    sessions those reach (`refresh_sessions`)."""
    w, info, t = run.info.windows[0], run.info, run.time_type
    gap, keys = w.size, [quote(k) for k in w.partition_by]

    def us(column: str, alias: str = "") -> str:
        return micros_sql(f"{alias}{quote(column)}", t)

    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] or ["true"])
    a_keys = "".join(f"a.{k}, " for k in keys)
    keys_ = "".join(f"{k}, " for k in keys)
    still_open = "" if open_from is None else (  # every key with a row where open sessions may be
        f" UNION SELECT DISTINCT {keys_}{open_from} AS {LO}, {INFINITY} AS {HI} FROM {run.source(info.source_tables[0])} "
        f"WHERE {quote(w.time_column)} >= {time_sql(open_from, t)}")
    touched = "" if not touching_view else f"""
        touched AS (SELECT DISTINCT {a_keys}{us(info.window_start, "a.")} AS {LO},
                           {us(info.window_end, "a.")} - {gap} AS {HI}
                    FROM {run.view.name} a JOIN changed b ON {match}
                    WHERE {us(info.window_start, "a.")} <= b.{HI} + {gap} AND {us(info.window_end, "a.")} >= b.{LO}),"""
    return run.temp_view(run.spark.sql(f"""
        WITH changed AS (SELECT DISTINCT {keys_}{us(w.time_column)} AS {LO}, {us(w.time_column)} AS {HI}
                         FROM {changes} WHERE {quote(w.time_column)} IS NOT NULL{still_open}),{touched}
        spans AS (SELECT {keys_}{LO} - {gap} AS {LO}, {HI} + {gap} AS {HI} FROM changed
                  {f"UNION ALL SELECT {keys_}{LO}, {HI} FROM touched" if touching_view else ""}),
        {merged_spans(keys)}""").localCheckpoint(), "regions")  # not cached: it reads the view (combine.py)


def session_watermark(run: Run, changes: str) -> tuple[RefreshState, str, int, int | None]:
    """The state after the changes (event time, watermark), the changes that are not late, how
    many of them retract a row and their earliest time (µs); the late ones written to the late
    table and counted."""
    d, previous = run.view.definition, run.previous
    grace = interval_micros(run.spark, d.grace)
    on_time, late_view, late, latest, retracted, earliest = session_lateness.split(
        run, changes, previous.watermark, grace)
    if late:  # netted again, whatever share cancels (change_feed.late_rows), and counted as written
        rows = change_feed.late_rows(run, run.info.windows[0].sources[0], run.spark.table(late_view))
        run.outcome.late_rows += write_late_rows(run, rows)
    progress.checkpoint("late_rows_written")
    return RefreshState(run.outcome.refresh_id, dict(run.targets), *advanced(run, [latest])), on_time, retracted, earliest


def merged_spans(keys: list[str]) -> str:
    """SQL after a CTE `spans` (keys, LO, HI): per key, the spans that overlap or touch merged.

    Example: spans a [1, 5], a [4, 9], a [12, 13] give a [1, 9] and a [12, 13].
    """
    keys_ = "".join(f"{k}, " for k in keys)
    partition = f"PARTITION BY {', '.join(keys)}" if keys else ""
    return f"""marked AS (SELECT *, CASE WHEN {LO} <= max({HI}) OVER ({partition} ORDER BY {LO}, {HI}
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS {STARTS} FROM spans),
        grouped AS (SELECT *, sum({STARTS}) OVER ({partition} ORDER BY {LO}, {HI} ROWS UNBOUNDED PRECEDING)
                    AS {GROUP} FROM marked)
        SELECT {keys_}min({LO}) AS {LO}, max({HI}) AS {HI} FROM grouped GROUP BY {keys_}{GROUP}"""


# Half-widths, in gaps, of the spans around the changes searched for the sessions they reach;
# None: all time (always enough).
SESSION_SEARCH = (4, 256, None)


def refresh_session_join(run: Run, change: Change) -> Step:
    """Joined SESSION windows: recompute both sides' sessions in the regions the changes reach.

    A joined row is one left and one right session of a key, overlapping in time. The regions are
    sessions over U, every row either side has now or had before (current rows and retracted ones):
    each side's old and new sessions lie inside one session of U, and a U-session without a changed
    row is the same before and after, and so are both sides' sessions in it. So the view's rows
    whose session lies in a U-session holding a change are replaced by the query recomputed over
    just those U-sessions' rows, which are exact there: no row of either side is within gap of them.
    """
    found = joined_session_regions(run, change.views)
    if found is None:
        return Recomputed.carried(run, writes.STATE_ONLY)
    regions, span = found
    sides = {w.sources[0]: w for w in run.info.windows}
    recomputed = run.spark.sql(run.query_over(
        {source: rows_in_regions(run, w, regions, span, i) for i, (source, w) in enumerate(sides.items())}))
    return Recomputed.carried(run, replace_sessions(run, recomputed, regions, span))


def rows_in_regions(run: Run, w, regions: str, span: tuple[int, int] | None, side: int) -> str:
    """A temporary view of `w`'s source rows whose key and time are in one of `regions`."""
    keys, t = [quote(k) for k in w.partition_by], source_time_type(run, w)
    us = micros_sql(f"a.{quote(w.time_column)}", t)
    match = " AND ".join([f"a.{k} <=> b.{k}" for k in keys] + [f"{us} BETWEEN b.{LO} AND b.{HI}"])
    where = (f" WHERE a.{quote(w.time_column)} BETWEEN {time_sql(span[0], t)} AND {time_sql(span[1], t)}"
             if span else "")  # a constant range on the time column: Delta skips other files
    rows = run.spark.sql(f"SELECT a.* FROM {run.source(w.sources[0])} a LEFT SEMI JOIN {regions} b ON {match}{where}")
    return run.temp_view(rows, f"side_{side}_rows")


def joined_session_regions(run: Run, changes: dict[str, str]) -> tuple[str, tuple[int, int] | None] | None:
    """The U-sessions (`refresh_session_join`) holding a change, per key, as a view (keys, LO, HI)
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
        f"SELECT {keys_}{micros_sql(quote(w.time_column), source_time_type(run, w))} AS {T} FROM {changes[w.sources[0]]} "
        f"WHERE {quote(w.time_column)} IS NOT NULL" for w in sides if w.sources[0] in changes)).cache()
    run.cached.append(frame)
    changed = run.temp_view(frame, "changed")
    low, high = spark.sql(f"SELECT min({T}), max({T}) FROM {changed}").first()
    if low is None:
        return None
    for width in SESSION_SEARCH:
        spans = run.temp_view(spark.sql(
            f"WITH spans AS (SELECT {keys_}{T} - {width * w0.size if width else INFINITY} AS {LO}, "
            f"{T} + {width * w0.size if width else INFINITY} AS {HI} FROM {changed}), {merged_spans(keys)}"), "spans")
        span = (low - width * w0.size, high + width * w0.size) if width else None
        sessions = sessions_of_u(run, sides, changed, spans, span)
        frame = spark.sql(f"SELECT * FROM {sessions} WHERE {CHANGES} > 0").cache()
        run.cached.append(frame)
        holding = run.temp_view(frame, "holding")
        if width is None or not spark.sql(f"SELECT 1 FROM {holding} WHERE {FIRST} - {w0.size} < {LO} "
                                          f"OR {LAST} + {w0.size} > {HI} LIMIT 1").collect():
            break
    regions = run.temp_view(spark.sql(f"SELECT {keys_}{FIRST} AS {LO}, {LAST} AS {HI} FROM {holding}"), "regions")
    bounds = spark.sql(f"SELECT min({LO}), max({HI}) FROM {regions}").first()
    return regions, (bounds[0], bounds[1])


def sessions_of_u(run: Run, sides, changed: str, spans: str, span: tuple[int, int] | None) -> str:
    """A temporary view: U's sessions within each of `spans` (keys, LO, HI, FIRST, LAST, CHANGES)."""
    keys = [quote(k) for k in run.info.windows[0].partition_by]
    keys_ = "".join(f"{k}, " for k in keys)
    match = " AND ".join([f"u.{k} <=> s.{k}" for k in keys] + [f"u.{T} BETWEEN s.{LO} AND s.{HI}"])
    rows = []
    for w in sides:
        t = source_time_type(run, w)
        where = (f" WHERE {quote(w.time_column)} BETWEEN {time_sql(span[0], t)} AND {time_sql(span[1], t)}"
                 if span else "")
        rows.append(f"SELECT {keys_}{micros_sql(quote(w.time_column), t)} AS {T}, 0 AS {CHANGED} "
                    f"FROM {run.source(w.sources[0])}{where}")
    rows.append(f"SELECT {keys_}{T}, 1 AS {CHANGED} FROM {changed}")  # the retracted rows among them
    partition, gap = ", ".join(keys + [LO]), run.info.windows[0].size
    return run.temp_view(run.spark.sql(f"""
        WITH u AS ({' UNION ALL '.join(rows)}),
        inside AS (SELECT /*+ BROADCAST(s) */ u.*, s.{LO}, s.{HI} FROM u JOIN {spans} s ON {match}),
        marked AS (SELECT *, CASE WHEN {T} - lag({T}) OVER (PARTITION BY {partition} ORDER BY {T}) <= {gap}
                   THEN 0 ELSE 1 END AS {STARTS} FROM inside),
        numbered AS (SELECT *, sum({STARTS}) OVER (PARTITION BY {partition} ORDER BY {T} ROWS UNBOUNDED PRECEDING)
                     AS {SESSION} FROM marked)
        SELECT {keys_}{LO}, {HI}, min({T}) AS {FIRST}, max({T}) AS {LAST}, sum({CHANGED}) AS {CHANGES}
        FROM numbered GROUP BY {keys_}{LO}, {HI}, {SESSION}"""), "u_sessions")


def replace_sessions(run: Run, recomputed: DataFrame, regions: str, span: tuple[int, int]) -> writes.Write:
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
    marked = run.spark.table(regions).selectExpr(*keys, LO, HI, f"'region' AS {OP}")
    source = recomputed.withColumn(OP, F.lit("insert")).unionByName(marked, allowMissingColumns=True)
    on = " AND ".join([f"t.{k} <=> s.{k}" for k in keys] + [
        f"s.{OP} = 'region'", f"{micros_sql('t.' + start, t)} >= s.{LO}",
        f"{micros_sql('t.' + end, t)} - {gap} <= s.{HI}",  # the session's last row
        f"t.{start} >= {time_sql(span[0], t)} AND t.{start} <= {time_sql(span[1], t)}"])
    return writes.delete_matched_insert_rest(run, source, on, span)


def late_sessions(run: Run) -> bool:
    """Whether the view keeps sessions under a watermark, late rows set aside (the kind plan.py
    lets refresh incrementally: one grouped SESSION)."""
    windows, d = run.info.windows, run.view.definition
    return (bool(d.watermark_column) and len(windows) == 1 and windows[0].kind == "SESSION"
            and run.info.group_by is not None)


def full_sessions(run: Run, new_wm: int | None) -> tuple[str, int | None]:
    """SESSION under a watermark, recomputed in full: the query over the source with the late
    changes undone and without the rows final sessions hold back (those stay as the view has them),
    and under EMIT ON WINDOW CLOSE where the earliest session still open starts."""
    query = run.query_over({run.info.source_tables[0]: rows_after_final(run)})
    if run.view.definition.emit != "WINDOW CLOSE":
        return query, None
    sessions = run.spark.sql(query).cache()  # computed once: for where open ones start, and for the MERGE
    run.cached.append(sessions)
    name = run.temp_view(sessions, "all_sessions")
    return f"SELECT * FROM {name}", session_lateness.open_from(run, name, new_wm)
