"""Windows and groups: the windows the changes touch (the view's own window function applied to
the changes), which of them are late, closed or final, and their new rows, recomputed from the
source over their time ranges or combined from the view's rows and the changes (mv/combine.py).

Example:
    >>> first = window_refresh.touched(run, {"bids": "changes_0"})
    >>> state, write = window_refresh.refresh_windows(run, {"bids": "changes_0"}, first)
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv import change_feed, estimate, open_windows, progress, time_keys, watermark, writes
from mv.combine import Combination, added, combinable, combine
from mv.history import write_late_rows
from mv.internal_columns import EMPTY, N, NEEDS, PART, SIGN, T, TOUCHED, WE, WS
from mv.query import Window, interval_micros, micros_sql, quote, sql_string, time_sql
from mv.run import INFINITY, Run, advanced, closed_bound, known_dearer
from mv.state import RefreshState
from mv.writes import Recomputed

if TYPE_CHECKING:
    from mv.strategies import Change, Step

# Affected windows are recomputed over at most this many time ranges (the closest ones joined).
MAX_RANGES = 64
# Groups recomputed after combining lie in at most this many time ranges: each source row is tested
# against every range, and at 10M rows 64 ranges cost 27 s where the whole recomputation took 2.6 s.
NEEDED_RANGES = 4
# Affected windows up to this many are named in the merge's SQL (a list of constants, which the merge
# can test each view row against); more are joined as a relation.
MAX_LISTED = 1000
# A change of at most this many bytes (its files in the log), times the windows a row falls in, has
# its touched windows grouped in the driver. Measured (1M Nexmark bids): grouping in the driver costs
# about 0.3 s + 8 µs a windowed row, in Spark 0.3-0.5 s; they meet near 10,000 rows (about 100 KB
# of Parquet), and a 20,000-bid CUMULATE(1 h, 1 day) change, 257,000 windowed rows, took 2.4 s in
# the driver against 0.4 s in Spark.
SMALL_CHANGE_BYTES = 64 * 1024
# A change under a window function that puts a row in at least this many windows (HOP, CUMULATE:
# Window.copies) is grouped by the period its windows start on before the function makes its copies
# (`_counted`). Measured, the touched-windows query over a cached 500,000-row change, grouped against
# row by row: HOP(2 s, 10 s), 5 copies, 1.06x; CUMULATE(1 h, 6 h), 6, 0.94x; HOP(1 s, 10 s), 10,
# 0.80x; CUMULATE(1 h, 1 day), 24, 0.43x (0.35 s against 0.81 s): the grouping costs a shuffle.
GROUPED_FROM_COPIES = 8
# Affected windows in more separate runs of time than this are combined rather than recomputed.
COMBINE_AFTER_RUNS = MAX_RANGES


@dataclass(frozen=True)
class Touched:
    """What the changes touch (`touched`): the window functions whose source changed (`parts`, each
    one's index its part), the windows with the latest time added to each (None where none is
    known: a window only deleted from, or one an append spans, `_spanned`), the changed rows per
    (part, window) (those of final windows at least: the late rows), the change rows read from all
    sources, and the windows a row of them retracts from (deleted, or an update's old image)."""
    parts: list[Window]
    windows: dict[tuple[int, int], int | None]
    counts: dict[tuple[int, int, int], int]
    rows_read: int
    retracting: frozenset[tuple[int, int]] = frozenset()


def touched(run: Run, changes: dict[str, str]) -> Touched:
    """The windows the changes touch, in one query, which is also the refresh's first read of the
    change feed (refresh.py reads it inside its check for a change feed that is gone)."""
    windows = [w for w in run.info.windows if w.sources[0] in changes]
    copies = max((w.copies for w in run.info.windows), default=1)
    small = run.sizes.change is not None and run.sizes.change * copies <= SMALL_CHANGE_BYTES
    if (spanned := _spanned(run, windows, changes, aggregate=not small)) is not None:
        return spanned
    counted = [_counted(run, w, changes[w.sources[0]], not small) for w in windows]
    found = touched_windows(run.spark, counted, list(changes.values()), small)
    return Touched(windows, *found)


def _spanned(run: Run, parts: list[Window], changes: dict[str, str], aggregate: bool = True) -> Touched | None:
    """The windows a large append at the end of time touches, without grouping it by window: every
    TUMBLE or HOP window from its earliest row's first to its latest row's last, found by one
    aggregation of the change's time column (no shuffle), where grouping shuffles a row per
    window and collects every window.
    The append must only add rows (its source not in `run.updated`), all at or after the latest
    event time the view has seen (`max_event_time`, which no row of the sources' previous versions
    passes): a window between two of its rows that none of them falls in then holds no source row
    at all, and recomputed it writes nothing. No row is late (a final window ends before the
    watermark, which is behind that time). None where it does not apply: another window function
    or several, a change that may retract, an earlier row, windows aligned in a zone whose offset
    changes (their lengths differ: `Window.fixed_offset`, the extension's `WindowSpec`), or more
    windows than rows (a sparse change, grouped).

    The aggregation is not run when the Delta statistics of the files the append added tell the
    same (`_statistics_span`), and a small change (`aggregate` false) is spanned only so: grouped
    in the driver, it costs one Spark job too, but the statistics none (bench.fixed_cost's
    1,000-row append: the refresh's only execution before its commit).

    Measured (TUMBLE 10 s, max and count, 500,000 rows appended onto 2M, in 50,000 windows): the
    grouping took 0.33 s, this 0.19-0.22 s; the whole refresh 1.65 s, then 1.58-1.6 s.

    Example: rows at 00:00:05 and 00:00:41 after a view that saw 00:00:03, TUMBLE(10 s): windows
    [0, 10), [10, 20), [20, 30), [30, 40) and [40, 50), the last one's latest time 00:00:41.
    """
    seen = run.previous.max_event_time if run.previous else None
    if seen is None or len(parts) != 1 or len(changes) != 1 or len(run.info.windows) != 1:
        return None
    w = parts[0]
    if not _spannable(run, w):
        return None
    name = changes[w.sources[0]]
    figures = _statistics_span(run, w, seen)
    if figures is None and not aggregate:
        return None
    read, low, high, earliest, latest, windowed, exact = figures or (*run.spark.sql(
        f"SELECT * FROM (SELECT count(*) FROM {name}) CROSS JOIN "
        f"(SELECT min({WS}), max({WE}), min({T}), max({T}), count(*) FROM {_windowed(run, w, name)})").first(), True)
    if not windowed:
        return Touched(parts, {}, {}, read)
    if earliest < seen or (high - low) // w.step > windowed:
        return None
    if not exact and run.view.definition.watermark_column:
        latest = _latest_exactly(run, w, name, latest)
    windows: dict[tuple[int, int], int | None] = {(s, s + w.size): None for s in _starts(w, low, high)}
    windows[(high - w.size, high)] = latest
    return Touched(parts, windows, {}, read)


def _latest_exactly(run: Run, w: Window, name: str, latest: int) -> int:
    """The latest time (µs) of the change `name` to window function `w`'s source, whose Delta
    statistics said `latest`, truncated to the millisecond, and whose files' Parquet footers did
    not tell the microsecond (INT96: `_statistics_span` takes it from them when they do, no job):
    a view's watermark is its latest event time's, to the microsecond (mv_refresh_history shows
    it; IDLE AFTER counts from it). Read from the rows at or after `latest` alone (a job: 0.05-0.15
    s of bench.appends' q7_on_close refresh); the windows themselves are the same.

    Example: bids appended up to 00:49:59.999999, their statistics' 00:49:59.999: 00:49:59.999999.
    """
    column, t = quote(w.time_column), run.time_type
    exact = run.spark.sql(f"SELECT max({micros_sql(column, t)}) FROM {name} "
                          f"WHERE {column} >= {time_sql(latest, t)}").first()[0]
    return latest if exact is None else max(exact, latest)


def _spannable(run: Run, w: Window) -> bool:
    """Whether an append's windows of `w` are every window from its earliest row's to its latest's
    (`_spanned`, `appended_windows`): a TUMBLE or HOP aligned in a zone of one offset, over a source
    the change only appended to."""
    return w.kind in ("TUMBLE", "HOP") and w.fixed_offset and w.sources[0] not in run.updated


def _starts(w: Window, low: int, high: int) -> range:
    """The starts (µs) of `w`'s windows from the one starting at `low` to the one ending at `high`:
    a step apart (TUMBLE's is its size), aligned as the rows' are."""
    return range(low, high - w.size + 1, w.step)


def _statistics_span(run: Run, w: Window, seen: int) -> tuple | None:
    """`_spanned`'s figures for window function `w` (rows read, the earliest window's start, the
    latest's end, the earliest and latest time, windowed rows, whether that latest time is exact
    rather than its millisecond) from the Delta statistics of the
    files the append added (change_feed.appended_span), without reading its rows: the windows come
    from the two times alone, by `Window.bounds` (a query of the window function over the two
    times, a Spark job, took 75 ms of bench.fixed_cost's 0.8 s refresh). None
    when the statistics do not tell or the earliest time may be before `seen`.

    Delta writes a TIMESTAMP's statistics truncated to the millisecond, so each time may be up to
    999 µs early: taken only when `w`'s windows and the view's watermark delay and grace are whole
    milliseconds, for then a time and its millisecond fall in the same windows, and a watermark
    from that latest time finalizes the same windows as the exact one would; it closes the same
    ones unless a window ends a millisecond after it (a window closes at its end less 1 µs: a row
    at 00:14:59.999999 closes [00:00, 00:10) under a 5-minute delay, its millisecond does not),
    which is then left to the exact path, unless the latest time is exact: a view with a watermark
    takes it from the Parquet footers of the files holding it, when they keep it
    (`change_feed.appended_span`), and otherwise reads it (`_latest_exactly`, one small job), for
    the watermark it records is that time's. Without one the view's latest event time may stay up
    to 999 µs behind the rows' own: it only bounds the next append's span, which starts in its window.

    Measured (bench.appends' one_percent, a 20,000-row append; q7, 500,000): the aggregation read
    the whole append, 0.24-0.36 s of a 1.1-1.5 s refresh, and nothing else read it.
    """
    d = run.view.definition
    delay = interval_micros(run.spark, d.watermark_delay)
    if any(micros % 1000 for micros in (w.size, w.step, w.offset, delay, interval_micros(run.spark, d.grace))):
        return None
    span = change_feed.appended_span(run, w.sources[0], w.time_column)
    if span is None:
        return None
    rows, timed, least, greatest, exact = span
    if run.time_type == "bigint":  # epoch milliseconds, written exactly
        least, greatest = least * 1000, greatest * 1000
    if not timed:
        return rows, None, None, None, None, 0, True
    if least < seen:
        return None
    shift = zone_shift(run.spark, w.time_zone)  # None for TIMESTAMP_NTZ, which aligns on its own value
    if d.watermark_column and not exact and w.ends_at(greatest - delay + 1000, shift):
        return None  # the latest time's microseconds may close the window ending a millisecond after its own
    low, high = w.bounds(least, greatest, shift)
    return rows, low, high, least, greatest, timed * w.copies, bool(exact)


def zone_shift(spark: SparkSession, zone: str | None) -> int:
    """Microseconds the clock of `zone`, an id of a zone with one offset from UTC, is ahead of UTC's
    (0 for None), as the extension's WindowSpec reads it: through java.time (Python's zone database
    is not the JVM's, nor are its names). Remembered per zone.

    Example: zone_shift(spark, "+05:30") == 19_800_000_000
    """
    if zone is None:
        return 0
    if zone not in _SHIFTS:
        java = spark._jvm.java.time
        _SHIFTS[zone] = java.ZoneId.of(zone).getRules().getOffset(java.Instant.EPOCH).getTotalSeconds() * 1_000_000
    return _SHIFTS[zone]


_SHIFTS: dict[str, int] = {}


def _counted(run: Run, w: Window, changes: str, large: bool) -> str:
    """Window function `w` over the changes `changes` for `touched_windows`: WS, WE, T, SIGN and N,
    the change rows each row stands for. A `large` change under HOP or CUMULATE (a row in several
    windows, `Window.copies`) is first grouped by the period its windows start on (TUMBLE of that
    step, which aligns as `w` does, time zone included): the rows of one period share every window,
    so one row of each, counted, with its latest time as T, goes through `w`, not every row
    `copies` times (from GROUPED_FROM_COPIES on).

    Example: CUMULATE(1 h, 1 day), rows at 00:10 and 00:50: one row at 00:10, N 2, T 00:50, in 24 windows.
    """
    t = run.time_type
    if not large or w.kind not in ("HOP", "CUMULATE") or w.copies < GROUPED_FROM_COPIES or w.size % w.step:
        return f"(SELECT {WS}, {WE}, {T}, {SIGN}, 1 AS {N} FROM {_windowed(run, w, changes)})"
    time = quote(w.time_column)
    period = replace(w, kind="TUMBLE", size=w.step, offset=w.offset % w.step, partition_by=[])
    periods = (f"(SELECT min({time}) AS {time}, max({micros_sql(time, t)}) AS {T}, {SIGN}, count(*) AS {N} "
               f"FROM {period.call(changes)} GROUP BY window_start, {SIGN})")
    return (f"(SELECT {micros_sql('window_start', t)} AS {WS}, {micros_sql('window_end', t)} AS {WE}, {T}, "
            f"{SIGN}, {N} FROM {w.call(periods)})")


def _windowed(run: Run, w: Window, changes: str) -> str:
    """Window function `w` over the changes `changes` (a relation in FROM), with WS, WE and T in µs."""
    t = run.time_type
    return (f"(SELECT *, {micros_sql('window_start', t)} AS {WS}, {micros_sql('window_end', t)} AS {WE}, "
            f"{micros_sql(quote(w.time_column), t)} AS {T} FROM {w.call(changes)})")


def _write_late(run: Run, w: Window, part: int, old_wm: int, grace: int) -> int:
    """The late rows of window function `w` (the touched part `part`) appended to the late table,
    and how many: the change's rows that may be late (`_maybe_late`), read again with every column
    (the late table keeps whole source rows) and netted whatever share cancels (an update that
    changes no column the query reads is no late row, whether `read` netted the change or not: it
    changes nothing the view shows), through the window function, those in a final window
    (its end + `grace` at most the previous watermark `old_wm`) kept and, if any, appended."""
    rows = run.temp_view(change_feed.whole_rows(run, w.sources[0], _maybe_late(run, w), net=True), f"whole_{part}")
    return write_late_rows(run, run.spark.sql(f"SELECT * EXCEPT ({WS}, {WE}, {T}) FROM {_windowed(run, w, rows)} "
                                              f"WHERE {WE} + {grace} <= {old_wm}"), part)


def _maybe_late(run: Run, w: Window) -> str:
    """SQL over a change of `w`'s source: its row may be late, its time at most the previous
    watermark (a final window ends by then, GRACE or not); false without one."""
    old_wm = run.previous.watermark
    return "false" if old_wm is None else f"({micros_sql(quote(w.time_column), run.time_type)} <= {old_wm})"


def full_ahead(run: Run) -> estimate.Estimate | None:
    """Under a WATERMARK, before the change is read: the full refresh that REFRESH POLICY AUTO runs
    when the view's refreshes of the change's kind say so (run.known_dearer), its late rows written
    first (a full refresh leaves them out), read alone (`write_late_changes`): not the whole change
    cached, netted and windowed to find its touched windows, all of which a full refresh does not use.
    None when the refresh goes on as incremental: the kind does not say full, no row of the change
    is after the previous watermark (all of it may be late: an incremental refresh writes its late
    rows and perhaps nothing else, `_on_time`; not asked of windows over joins, whose dimension's
    change an incremental refresh still joins and regroups), or SESSION windows (their late rows
    come from the classified change). Asked only for the estimate (EXPLAIN), it writes nothing:
    the estimate is the answer. Windows over joins kept by their groups (plan.late_rows_from_changes)
    ask it too: bench.joins' closed_per_minute at 1M bids read each change round's change and
    terms to switch, 3.3-3.5 s against 1.9-2.1 s for its full twin.

    Example: Nexmark's q7 (TUMBLE, EMIT ON WINDOW CLOSE) at 1M bids, repriced and withdrawn bids:
    such changes took 3 s incrementally, a full refresh 1.2 s: the next one writes its late rows and
    refreshes in full, its change not read whole.
    """
    if not run.view.definition.watermark_column or run.info.windows[0].kind == "SESSION":
        return None
    known = known_dearer(run)
    if known is None or not known.switches or (not run.info.keys_by_change and not _on_time(run)):
        return None
    if not run.dry:
        write_late_changes(run)
    return known


def _changed_parts(run: Run) -> list[Window]:
    """The window functions whose source has a new version, in `touched`'s order (their parts)."""
    return [w for w in run.info.windows if run.previous.sources.get(w.sources[0], -1) < run.targets[w.sources[0]]]


def _on_time(run: Run) -> bool:
    """Whether a row of the change is after the previous watermark, so surely not late (a job that
    stops at the first it finds). A change none of whose rows is, such as corrections of old rows
    only, is left to the incremental path, which may write nothing but its late rows."""
    if run.previous.watermark is None:
        return True
    return any(change_feed.whole_rows(run, w.sources[0], f"NOT {_maybe_late(run, w)}")
               .select(quote(w.time_column)).take(1) for w in _changed_parts(run))


def write_late_changes(run: Run) -> None:
    """The changes' late rows appended to the late table, as `refresh_windows` appends them (one
    append per window function whose source changed, its part, `_write_late`), found without the
    touched windows: ahead of a full refresh (`full_ahead`), and for windows over joins kept by
    their groups (row_refresh.refresh_groups_by_change)."""
    old_wm, grace = run.previous.watermark, interval_micros(run.spark, run.view.definition.grace)
    for part, w in enumerate(_changed_parts(run) if old_wm is not None else []):
        if (times := appended_times(run, w)) is not None and times[0] > old_wm:
            continue  # an append whose every row is after the watermark: none is late
        run.outcome.late_rows += _write_late(run, w, part, old_wm, grace)
    progress.checkpoint("late_rows_written")


def appended_times(run: Run, w: Window) -> tuple[int, int] | None:
    """The earliest and latest time (µs) of the rows an append to window function `w`'s source
    adds, from the Delta statistics of its files, on `_statistics_span`'s terms (whole
    milliseconds); None when they do not tell (not an append, no time, windows or delay not in
    milliseconds).

    Example: 1,000 bids of 10:05:00 to 10:21:39 appended: (1704103500000000, 1704104499000000)
    """
    span = _statistics_span(run, w, -INFINITY)
    return None if span is None or span[3] is None else (span[3], span[4])


def appended_windows(run: Run, w: Window) -> list[tuple[int, int]] | None:
    """Every window (start, end) in µs of window function `w` from the earliest time an append to
    its source adds to the latest, by the Delta statistics of the files it added
    (`_statistics_span`): each window holding one of its rows is among them. None when they do not
    tell (not an append; not TUMBLE or HOP in a zone of one offset), or when those windows outnumber
    its rows (a sparse append: its windows are better found from its rows).

    Example: TUMBLE(1 minute), 1,000 bids appended from 10:05:10 to 10:21:39: the 17 windows from
    [10:05, 10:06) to [10:21, 10:22).
    """
    if not _spannable(run, w):
        return None
    figures = _statistics_span(run, w, -INFINITY)
    if figures is None:
        return None
    rows, low, high, _, _, windowed, _ = figures
    if not windowed:  # no row with a time: no window
        return []
    starts = _starts(w, low, high)
    return [(s, s + w.size) for s in starts] if len(starts) <= rows else None


def refresh_windows(run: Run, change: Change) -> Step:
    """Windows: each window function applied to its own source's changes gives the affected windows
    (`change.touched`, from `touched`)."""
    spark, d, first = run.spark, run.view.definition, change.touched
    windows, counts = first.windows, first.counts
    old_wm, grace = run.previous.watermark, interval_micros(spark, d.grace)
    max_event, new_wm = advanced(run, list(windows.values()))
    live = watermark.not_final_of(windows, old_wm, grace)
    affected, newly_closed = live, None
    if d.emit == "WINDOW CLOSE":
        affected = watermark.closed_of(affected, new_wm)
        if new_wm is not None and new_wm != old_wm:
            newly_closed = (old_wm + 1 if old_wm is not None else None, new_wm + 1)
    combining = combinable(run.info) and scattered(run, affected)
    kept_open = run.open_state is not None and run.open_state.rows is not None
    how = kept_how(run, first, live) if kept_open else None
    from_source = None if how is None else live if how == "recomputed" else []  # of the kept windows
    weighed = weigh(run, affected, newly_closed, combining, from_source)
    if run.dry:  # EXPLAIN: the estimate, before any late row is written
        return estimate.Stopped(weighed)
    for i, w in enumerate(first.parts):
        if any(part == i and watermark.is_final(e, old_wm, grace) for (part, _, e), n in counts.items() if n):
            run.outcome.late_rows += _write_late(run, w, i, old_wm, grace)
    progress.checkpoint("late_rows_written")
    if stopped := estimate.stops(run.dry, weighed):  # late rows are written first: a full refresh leaves them out
        return stopped
    state, write = RefreshState(run.outcome.refresh_id, dict(run.targets), max_event, new_wm), writes.STATE_ONLY
    bound = new_wm + 1 if new_wm is not None else -INFINITY  # windows ending by then are closed
    if kept_open:
        if not live and not newly_closed:  # nothing opened, changed or closed: the kept windows stay
            return Recomputed(replace(state, open_id=run.previous.open_id), write)
        write, kept = with_open_windows(run, live, bound, change.view, how)
        return Recomputed(replace(state, open_id=kept), write)
    if affected or newly_closed:
        if combining:
            write = combine_windows(run, affected, newly_closed, change.view)
        else:
            write = merge_windows(run, affected, newly_closed)
    if run.open_state is not None:  # the kept windows are not the previous state's: built again
        state = replace(state, open_id=open_windows.rebuilt(run, bound))
    return Recomputed(state, write)


def kept_how(run: Run, first: Touched, live: list[tuple[int, int]]) -> str:
    """How with_open_windows brings the kept windows up to date: 'added' for a change that only
    inserts into them (its retractions, if any, are all in final windows: late rows, which the
    open windows never see), 'recomputed' for retractions in a few runs of time, else 'combined'."""
    if not first.retracting.intersection(live):
        return "added"
    return "combined" if scattered(run, live) or len(live) > MAX_LISTED else "recomputed"


def scattered(run: Run, windows: list[tuple[int, int]]) -> bool:
    """Whether changed windows are combined rather than recomputed. Windows in a few runs of time
    (recent changes) are cheapest recomputed: Delta reads just those files. Scattered over many,
    recomputing reads most of the source. A cumulative window reaches back to its day's start:
    recomputing it rereads the day so far."""
    return len(time_runs(windows)) > COMBINE_AFTER_RUNS or run.info.windows[0].kind == "CUMULATE"


def weigh(run: Run, affected, newly_closed, combining: bool,
          kept_open: list[tuple[int, int]] | None = None) -> estimate.Estimate | None:
    """REFRESH POLICY AUTO's estimate of the rest of this refresh, incrementally or in full
    (mv/estimate.py); None when no estimate is wanted: another policy, nothing to write, or a change
    too small to need one (under SMALL_CHANGE of its sources' bytes). Asked only for it (EXPLAIN),
    it always weighs (None: nothing to write). `kept_open`, when the open
    windows are kept: the windows recomputed from the source (kept_how's 'recomputed'); windows
    closing now come from the open-window table. Under a watermark, whatever the change's size, the
    view's refreshes of the change's kind may already say full (run.known_dearer)."""
    writes_windows = bool(affected or newly_closed)
    if not run.dry and (run.view.definition.policy != "AUTO" or not writes_windows):
        return None
    known = known_dearer(run) if run.view.definition.watermark_column else None
    if known is not None:
        return known
    if not writes_windows or (not run.dry and run.sizes.small_change):
        return None
    end, t = quote(run.info.window_end), run.time_type
    written = kept_windows(run, window_ranges(run, affected, ""), newly_closed, end, t)
    closing = just_closed(end, newly_closed, t)  # combined windows are not read from the source; closing ones are
    if kept_open is not None:  # closing windows come from the kept rows; only recomputed ones are read
        read = window_ranges(run, kept_open, "") if kept_open else None
    else:
        read = closing if combining else written
    source = f"SELECT * FROM ({run.query}) WHERE {read}" if read else None
    found = run.outcome.weighed(estimate.planned(
        run.spark, run.view.name, run.query, (source, f"SELECT * FROM {run.view.name} WHERE {written}"), run.sizes,
        spent=time.time() - run.outcome.started_at, previous=run.previous, previous_end=run.previous_end,
        retracts=bool(run.updated), over_appends=estimate.retracts_over_appends(run.info)))
    run.outcome.work_bytes = found.incremental_bytes + (run.sizes.change or 0)  # its rate covers the change too
    return found


def window_ranges(run: Run, windows: list[tuple[int, int]], alias: str) -> str:
    """SQL: a row's window (its columns prefixed `alias`: '' or 't.') lies in one of the time ranges
    covering `windows` (time_ranges); false for none."""
    t, start, end = run.time_type, alias + quote(run.info.window_start), alias + quote(run.info.window_end)
    parts = [f"({start} >= {time_sql(a, t)} AND {end} <= {time_sql(b, t)})" for a, b in time_ranges(windows)]
    return f"({' OR '.join(parts)})" if parts else "false"


def touched_windows(spark: SparkSession, windowed: list[str], changes: list[str],
                    small: bool = False) -> tuple[dict, dict, int, frozenset]:
    """One query over the windowed changes (`windowed`: WS, WE, T, SIGN and N, the change rows a row
    stands for; `_counted`): each touched window (start, end) with the latest time
    added to it (None for a window only deleted from), how many changed rows each part (index in
    `windowed`) has in each window, which tells how many are late without another pass, how
    many rows the `changes` hold, and the windows a retraction is in. A `small` change (its bytes
    in the log) is collected as it is and grouped here: one Spark job, where the grouping's
    shuffle costs a second.

    Example: one insert at t=5 into [0, 10) of part 0 gives ({(0, 10): 5}, {(0, 0, 10): 1}, 1, frozenset()).
    """
    parts = [f"SELECT {i} AS {PART}, {WS}, {WE}, {T}, {SIGN}, {N} FROM {name}" for i, name in enumerate(windowed)]
    parts += [f"SELECT -1 AS {PART}, NULL AS {WS}, NULL AS {WE}, NULL AS {T}, {SIGN}, 1 AS {N} FROM {name}"
              for name in changes]
    union = " UNION ALL ".join(parts)
    rows = _grouped(spark.sql(f"SELECT * FROM ({union})").collect()) if small else _tuples(spark.sql(
        f"SELECT {PART}, {WS}, {WE}, max(IF({SIGN} = 1, {T}, NULL)), sum({N}), sum(IF({SIGN} = -1, {N}, 0)) "
        f"FROM ({union}) GROUP BY {PART}, {WS}, {WE}"))
    windows: dict[tuple[int, int], int | None] = {}
    for part, s, e, latest, _, _ in rows:
        if part < 0:
            continue
        known = windows.get((s, e))
        windows[(s, e)] = latest if known is None else known if latest is None else max(known, latest)
    read = sum(row[4] for row in rows if row[0] < 0)
    retracting = frozenset((s, e) for part, s, e, _, _, r in rows if part >= 0 and r)
    return windows, {(part, s, e): n for part, s, e, _, n, _ in rows if part >= 0}, read, retracting


def _tuples(frame: DataFrame) -> list[tuple]:
    """A frame's rows as tuples, collected as Arrow columns: a 500,000-row append's 50,000 touched
    windows came in 0.1-0.15 s, where Row objects took 0.25-0.4 s (unpickled one by one)."""
    columns = frame.toArrow().columns
    return list(zip(*(column.to_pylist() for column in columns)))


def _grouped(rows) -> list[tuple]:
    """touched_windows' grouping of (part, start, end, time, sign, rows) rows, done here."""
    groups: dict[tuple, list] = {}
    for part, s, e, t, sign, n in rows:
        group = groups.setdefault((part, s, e), [None, 0, 0])
        if sign == 1 and t is not None:
            group[0] = t if group[0] is None else max(group[0], t)
        group[1] += n
        group[2] += n if sign == -1 else 0
    return [(*key, latest, count, retracted) for key, (latest, count, retracted) in groups.items()]


def time_runs(windows: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Windows merged into the time ranges they cover.

    A refresh asks for the runs of the same list of touched windows up to six times (scattered,
    tiled, the ranges of the view's and of the query's rows): the last list's runs are kept, by
    the list's identity (it is held, so no other list takes its id) and length. 50,000 windows
    cost 30 ms a time. A tuple: the kept runs are shared.

    Example: time_runs([(10, 20), (0, 10), (30, 40)]) == ((0, 20), (30, 40))
    """
    global _last_runs
    last = _last_runs  # one read: refreshes in other threads may replace it
    if last is not None and last[0] is windows and last[1] == len(windows):
        return last[2]
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(windows):
        if starts and start <= ends[-1]:
            if end > ends[-1]:
                ends[-1] = end
        else:
            starts.append(start)
            ends.append(end)
    runs = tuple(zip(starts, ends))
    _last_runs = (windows, len(windows), runs)
    return runs


_last_runs: tuple[list, int, tuple[tuple[int, int], ...]] | None = None


def time_ranges(windows: list[tuple[int, int]], limit: int = MAX_RANGES) -> list[tuple[int, int]]:
    """Windows merged into at most `limit` time ranges, joining the closest ones first: the
    `limit - 1` widest gaps between their runs stay (joining two runs leaves the other gaps as
    they are, so this is the same as joining the narrowest gap again and again, in n log n: a
    dimension change that touches 100,000 scattered windows once spent minutes here).

    Example: time_ranges([(0, 1), (2, 3), (10, 11)], limit=2) == [(0, 3), (10, 11)]
    """
    ranges = time_runs(windows)
    if len(ranges) <= limit:
        return list(ranges)
    gaps = sorted(range(len(ranges) - 1), key=lambda k: ranges[k + 1][0] - ranges[k][1])
    kept = sorted(gaps[len(ranges) - limit:])  # the gaps after which a new range begins
    starts = [0] + [k + 1 for k in kept]
    ends = kept + [len(ranges) - 1]
    return [(ranges[a][0], ranges[b][1]) for a, b in zip(starts, ends)]


def merge_windows(run: Run, affected, newly_closed) -> writes.Write:
    """Recompute the affected windows (and, for EMIT ON WINDOW CLOSE, those that just closed) and merge."""
    spark, t = run.spark, run.time_type
    end = quote(run.info.window_end)
    if run.info.group_by is None:  # rows, not groups: replace whole time ranges of windows
        return writes.replace_rows(run, kept_windows(run, window_ranges(run, affected, "t."), newly_closed,
                                                     f"t.{end}", t))
    listed = len(affected) <= MAX_LISTED or tiled(run, affected)

    def keep(alias: str) -> str:  # the windows to write, over the query's rows ('') or the view's ('t.')
        return kept_windows(run, in_windows(run, affected, alias), newly_closed, alias + end, t)

    recomputed = spark.sql(f"SELECT * FROM ({run.query}) WHERE {keep('')}")
    if all_new(run, affected):
        return writes.append(recomputed)
    bounds = [b for pair in affected for b in pair] + [b for b in (newly_closed or ()) if b is not None]
    span = (min(bounds), max(bounds)) if bounds and not newly_closed else None
    if listed:  # the view's rows of those windows that the recomputation lacks are deleted by the merge
        return writes.merge(run, recomputed, None, delete_missing=keep("t."), span=span)
    current = spark.sql(f"SELECT * FROM {run.view.name} WHERE {keep('')}")  # a subquery: found by a join
    return writes.merge(run, recomputed, current, span=span)


def in_windows(run: Run, windows: list[tuple[int, int]], alias: str) -> str:
    """SQL: a row's window (its columns prefixed `alias`: '' or 't.') is one of `windows`: within
    their time ranges (so Delta skips other files), and exactly one of them, listed in the SQL
    (up to MAX_LISTED) or found in a relation, unless their ranges hold no other (`tiled`); false
    for none."""
    if not windows:
        return "false"
    if tiled(run, windows):
        return window_ranges(run, windows, alias)
    t, s, e = run.time_type, alias + quote(run.info.window_start), alias + quote(run.info.window_end)
    pairs = ", ".join(f"({time_sql(a, t)}, {time_sql(b, t)})" for a, b in windows)
    exact = f"({s}, {e}) IN ({pairs})" if len(windows) <= MAX_LISTED else \
        f"({s}, {e}) IN (SELECT s, e FROM {windows_relation(run, windows)})"
    return f"({window_ranges(run, windows, alias)} AND {exact})"


def tiled(run: Run, windows: list[tuple[int, int]]) -> bool:
    """Whether the windows within the time ranges of `windows` are those windows: TUMBLE windows
    tile time, so each run of adjacent ones (time_runs) holds no other; HOP windows, a step apart,
    when each run holds every window that fits in it (an append's windows from its first row's to
    its last's, `_spanned`), as long as every run is a range of its own (at most MAX_RANGES).
    Their ranges alone then say which windows to recompute: no list of 50,000 windows in the SQL
    (a 500,000-row append in 10-second windows spent 0.5 s writing and parsing it, and its merge
    joined the view's rows to it; in HOP(2 s, 10 s), 250,000 windows, the open windows'
    aggregation joined to them took 7 s). A window within the ranges but not among `windows` (one
    whose local-time alignment a clock change moved) would only be recomputed too, and come out
    as it is in the view.

    Example: TUMBLE windows [0, 10), [10, 20), [40, 50) are tiled: ranges [0, 20) and [40, 50);
    HOP(2, 10) windows [0, 10), [2, 12), [4, 14) too (range [0, 14)), but not [0, 10), [4, 14).
    """
    w = run.info.windows[0]
    if w.kind not in ("TUMBLE", "HOP") or len(runs := time_runs(windows)) > MAX_RANGES:
        return False
    return w.kind == "TUMBLE" or sum((e - s - w.size) // w.step + 1 for s, e in runs) == len(windows)


def all_new(run: Run, affected) -> bool:
    """Whether no window to write can be in the view yet, so its rows are appended, not merged:
    under EMIT ON WINDOW CLOSE the view holds only windows closed by the previous watermark, and
    every affected window (like each that just closed) ends after those."""
    closed_end = closed_bound(run) + 1  # the latest end a window in the view can have
    return run.view.definition.emit == "WINDOW CLOSE" and all(e > closed_end for _, e in affected)


def windows_relation(run: Run, windows: list[tuple[int, int]]) -> str:
    """A relation in SQL's FROM, (s, e), of the windows given in microseconds, as values of the
    time column's type.

    One JSON literal, not createDataFrame: a plan built on constants, which Spark knows is small (so
    it broadcasts it into joins) and runs without a Python worker; text, not a temporary view, whose
    registration is a Spark SQL execution of its own.

    Example: [(0, 60_000_000)] gives one row (1970-01-01 00:00:00, 1970-01-01 00:01:00).
    """
    pairs = sql_string(json.dumps([{"s": s, "e": e} for s, e in windows]))
    t = run.time_type
    return (f"(SELECT {time_sql('s', t)} AS s, {time_sql('e', t)} AS e "
            f"FROM (SELECT inline(from_json({pairs}, 'array<struct<s: bigint, e: bigint>>'))))")


def just_closed(end: str, newly_closed, t: str) -> str | None:
    """SQL: the window ending at `end` is one that just closed (`newly_closed`: (low, high], low
    None for all before high); None when none did."""
    if not newly_closed:
        return None
    low, high = newly_closed
    return f"{end} <= {time_sql(high, t)}" + (f" AND {end} > {time_sql(low, t)}" if low is not None else "")


def kept_windows(run: Run, windows: str, newly_closed, end: str, t: str) -> str:
    """SQL: a row (its window ending at `end`) meets `windows` or is of a window that just closed;
    under EMIT ON WINDOW CLOSE, only closed windows."""
    keep = windows
    closing = just_closed(end, newly_closed, t)
    if closing:
        keep = f"({keep} OR ({closing}))"
    if run.view.definition.emit == "WINDOW CLOSE":
        bound = newly_closed[1] if newly_closed else closed_bound(run) + 1
        keep = f"({keep}) AND {end} <= {time_sql(bound, t)}"
    return keep


def combine_windows(run: Run, affected, newly_closed, changes: str) -> writes.Write:
    """Windows already in the view are combined with the changes; windows that just closed
    (EMIT ON WINDOW CLOSE) are computed from the source, as they were held out of the view."""
    t, start, end = run.time_type, quote(run.info.window_start), quote(run.info.window_end)
    in_view = [(s, e) for s, e in affected
               if run.view.definition.emit != "WINDOW CLOSE" or watermark.is_closed(e, run.previous.watermark)]
    closing = just_closed(end, newly_closed, t)
    windows = windows_relation(run, in_view)
    partials = f"({start}, {end}) IN (SELECT s, e FROM {windows})" if in_view else "false"
    bounds = [b for pair in in_view for b in pair] + [b for b in (newly_closed or ()) if b is not None]
    low_open = bool(newly_closed) and newly_closed[0] is None
    span = None if low_open or not bounds else (min(bounds), max(bounds))
    return combine_and_merge(run, changes, partials, span, closing)


def with_open_windows(run: Run, live, bound: int, changes: str, how: str) -> tuple[writes.Write, str]:
    """EMIT ON WINDOW CLOSE with its open windows kept (mv/open_windows.py): each touched group of
    a window that is not final gets its new row from its old one (in the view if its window was
    closed, in the open-window table if not) and the changes. Groups of windows closed by now
    (ending by `bound`) go to the view, with the kept groups of windows that just closed untouched;
    the rest replace the open-window table. The write, and the open-window table's new id.

    `how`: 'added', a change that only inserts: one aggregation over the kept rows and the
    changes' own (combine.added); 'combined', retractions: combine.combine's rules say which groups
    the source must settle; 'recomputed', retractions in a few runs of time: the touched windows
    recomputed from the source (Delta reads just their files)."""
    in_view = watermark.closed_of(live, run.previous.watermark)
    span = (min(s for s, _ in in_view), max(s for s, _ in in_view)) if in_view else None
    view_rows = f"SELECT * FROM {run.view.name} WHERE {writes.start_range(run, span, None)}" if in_view else None
    partials = in_windows(run, live, "")
    current, missing = None, False
    if how == "combined":
        to_view, still_open, current = combined_with_open(run, changes, partials, view_rows, bound)
    elif how == "recomputed":
        touched = in_windows(run, live, "")
        rows = run.spark.sql(f"SELECT * FROM ({run.query}) WHERE {touched}").cache()
        run.cached.append(rows)  # read twice: for the open-window table and for the view
        run.outcome.groups_recomputed = rows.count()
        kept = run.spark.sql(f"SELECT * FROM {run.open_state.rows} WHERE NOT {touched}")
        to_view, still_open = open_windows.split(run, rows.unionByName(kept), bound)
        missing = in_windows(run, in_view, "t.")  # the view's rows of those windows that the recomputation lacks
    else:
        rows, run.outcome.groups_combined = added(run.spark, combination(run, changes, partials),
                                                  run.open_state.rows, view_rows)
        to_view, still_open = open_windows.split(run, rows.drop(TOUCHED), bound)
    kept_id = open_windows.replace(run, still_open)
    if not in_view:  # every window written is new to the view
        return writes.append(to_view), kept_id
    return writes.merge(run, to_view, current, delete_missing=missing, span=span), kept_id


def combined_with_open(run: Run, changes: str, partials: str, view_rows: str | None, bound: int):
    """with_open_windows's rows under retractions: those for the view, those that stay open, and
    the touched groups of closed windows (which the view loses where the new rows lack them)."""
    old_rows = f"(SELECT * FROM {run.open_state.rows}" + (f" UNION ALL {view_rows})" if view_rows else ")")
    recomputed, touched, _ = combined(run, changes, partials, old_rows=old_rows)
    keys = [quote(k) for k in run.info.group_by]
    on = [F.col(f"o.{k}").eqNullSafe(F.col(f"k.{k}")) for k in keys]
    untouched = run.spark.sql(f"SELECT * FROM {run.open_state.rows}").alias("o").join(
        touched.select(*keys).alias("k"), on, "left_anti")
    closed, still_open = open_windows.split(run, recomputed, bound)
    closing, kept = open_windows.split(run, untouched, bound)
    return closed.unionByName(closing), still_open.unionByName(kept), open_windows.split(run, touched, bound)[0]


def combine_and_merge(run: Run, changes: str, partials: str | None = None, span: tuple[int, int] | None = None,
                      also: str | None = None, terms: tuple[str, str] | None = None) -> writes.Write:
    """Touched groups combined where their old row allows it and recomputed from the source where
    not, plus the query's rows meeting `also`; then one MERGE, or none when no group is touched
    and `also` adds none (a change its filters or joins drop). `terms`: the changes' aggregates
    as given (Combination.terms), not the query over `changes`."""
    recomputed, touched, reached = combined(run, changes, partials, span, also, terms=terms)
    if not also and not run.outcome.groups_combined + run.outcome.groups_recomputed:
        return writes.STATE_ONLY
    write = writes.merge(run, recomputed, touched, span=span)
    # The rows the merge reaches are the old rows combine read, unless `also` adds groups it did not touch.
    if reached is None or also:
        return write
    return replace(write, reached=reached)


def combined(run: Run, changes: str, partials: str | None = None, span: tuple[int, int] | None = None,
             also: str | None = None, old_rows: str | None = None,
             terms: tuple[str, str] | None = None) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """Touched groups combined where their old row (in the view, within `span`, or in the relation
    `old_rows`) allows it and recomputed from the source where not, plus the query's rows meeting
    `also`; the rows of every touched group, whose keys the new rows lack where it emptied; and the
    view's old rows of those groups as located for the merge (combine.combine), when read from it."""
    spark, info, keys = run.spark, run.info, run.info.group_by
    rows, reached = combine(spark, replace(
        combination(run, changes, partials, old_rows or run.view.name,
                    None if old_rows else writes.start_range(run, span, "v")),
        reached_version=None if old_rows else writes.read_version(run), terms=terms), run.cached)
    on = " AND ".join(f"q.{quote(k)} <=> n.{quote(k)}" for k in keys)
    needs = run.temp_view(rows.filter(NEEDS).select(*[quote(k) for k in keys]), "needs")
    parts = [rows.filter(f"NOT {NEEDS} AND NOT {EMPTY}").select(*[quote(c) for c in run.columns])]
    query = run.query
    touched, needed = rows.selectExpr("count(*)", f"count_if({NEEDS})").first()  # fills the cache
    run.outcome.groups_combined, run.outcome.groups_recomputed = touched - needed, needed
    if needed:
        where = needed_windows(run, needs) if info.window_start else "true"
        parts.append(spark.sql(f"SELECT /*+ BROADCAST(n) */ q.* FROM (SELECT * FROM ({query}) WHERE {where}) q "
                               f"LEFT SEMI JOIN {needs} n ON {on}"))
    if also:
        parts.append(spark.sql(f"SELECT * FROM ({query}) WHERE {also}"))
    recomputed = parts[0]
    for part in parts[1:]:  # cached: the MERGE reads them twice (rows to write, keys that vanished)
        run.cached.append(part.cache())
        recomputed = recomputed.unionByName(part)
    return recomputed, rows.select(*[quote(c) for c in run.columns]), reached


def combination(run: Run, changes: str, partials: str | None, old_rows: str | None = None,
                view_filter: str | None = None) -> Combination:
    """What combine.py combines for this refresh: the view's query over its one source's `changes`."""
    info = run.info
    return Combination(old_rows or run.view.name, run.view.definition.query, info.source_tables[0], changes,
                       info.output, info.group_by, partials, view_filter)


def needed_windows(run: Run, needs: str) -> str:
    """The time ranges of the windows of groups to recompute, so the source scan skips other files."""
    t, start, end = run.time_type, quote(run.info.window_start), quote(run.info.window_end)
    windows = run.spark.sql(f"SELECT DISTINCT {micros_sql(start, t)}, {micros_sql(end, t)} FROM {needs}").collect()
    parts = [f"({start} >= {time_sql(a, t)} AND {end} <= {time_sql(b, t)})"
             for a, b in time_ranges(windows, NEEDED_RANGES)]
    return " OR ".join(parts) or "false"


def refresh_groups(run: Run, change: Change) -> Step:
    """GROUP BY without windows: combine or recompute the groups whose keys changed."""
    if combinable(run.info):
        return Recomputed.carried(run, combine_and_merge(run, change.view))
    keys = ", ".join(quote(k) for k in run.info.group_by)
    return Recomputed.carried(run, recompute_groups(run, run.spark.sql(f"SELECT DISTINCT {keys} FROM {change.view}")))


def recompute_groups(run: Run, keys: DataFrame | None, windows: list[tuple[int, int]] | None = None,
                     closing: tuple[int, int] | None = None) -> writes.Write:
    """The groups whose keys `keys` lists (distinct rows of the group columns), recomputed from the
    sources and merged: the query's rows of those keys upserted, the view's rows of those keys it
    no longer has deleted. `windows`: the (start, end) in µs of those groups' windows, if grouped
    by windows: the rows are read within their time ranges, which Spark pushes down where a
    semi-join on the keys cannot go (below a join), and the merge within their span, skipping the
    view's other files. Without windows the keys' own ranges (`writes.value_range`) do that: a
    filter Spark pushes below the GROUP BY and through the joins to the source columns the keys
    are, where Delta skips the files outside them; a key that is a time column's day or hour
    (mv/time_keys.py) keeps that column to the time the keys span.

    Example: GROUP BY auction, day after new bids of auctions 900-950: the bid files whose auctions
    reach 900-950 are read, not all, and the view's files that can hold those auctions; GROUP BY
    DATE_FORMAT(dateTime, 'yyyy-MM-dd') after the day's bids: the bid files of that day, not the year's.
    `closing`: (after, upto) in µs, the windows ending after the one and by the other, whose every
    group is recomputed too (those that close at this refresh under EMIT ON WINDOW CLOSE), none of
    them in `windows`; with `keys` None, only those.
    """
    located = writes.located(run.spark, run.view.name, writes.read_version(run))
    if keys is None:
        return _merged(run, *_closing_rows(run, run.query, located, closing), None, _ending(run, closing, ""))
    ranges, query = None, run.query
    if windows is None:
        keys = keys.cache()  # read three times: its ranges, then by both semi-joins
        run.cached.append(keys)
        found = writes.value_ranges(keys)
        if found is None:  # no group reached (an offer of a lot not there): nothing to merge
            return writes.STATE_ONLY
        ranges, query = writes.value_range(keys, found), run.query_over(time_keys.kept_sources(run, found))
    name = run.temp_view(keys, "keys")
    on = " AND ".join(f"v.{quote(k)} <=> k.{quote(k)}" for k in run.info.group_by)
    within = window_ranges(run, windows, "v.") if windows is not None else "true"
    bounds = [b for pair in windows or () for b in pair]
    span = (min(bounds), max(bounds)) if bounds else None
    affected = f"LEFT SEMI JOIN {name} k ON {on} WHERE {within}"  # a semi join goes below the GROUP BY
    recomputed = run.spark.sql(f"SELECT /*+ BROADCAST(k) */ v.* FROM {writes.kept_to(f'({query})', ranges)} v "
                               f"{affected}")
    # The view's rows of those keys, located: every row the merge reaches, so the commit reads them once.
    current = run.spark.sql(f"SELECT /*+ BROADCAST(k) */ v.* FROM {writes.kept_to(located, ranges)} v {affected}")
    if closing is not None:  # every group of the closing windows, which `windows` leaves out
        closed, held = _closing_rows(run, query, located, closing)
        recomputed, current = recomputed.unionByName(closed), current.unionByName(held)
        span, ranges = None, f"({window_ranges(run, windows, '')}) OR ({_ending(run, closing, '')})"
    return _merged(run, recomputed, current, span, ranges)


def _merged(run: Run, recomputed: DataFrame, current: DataFrame, span: tuple[int, int] | None,
            within: str | None) -> writes.Write:
    """`recompute_groups`' merge of `recomputed` over `current`, the view's rows it reaches (cached:
    the commit takes them as the rows it reaches, `Write.reached`), within `span` or `within`."""
    current = current.cache()
    run.cached.append(current)
    return replace(writes.merge(run, recomputed, current, span=span, within=within), reached=current)


def _closing_rows(run: Run, query: str, located: str, closing: tuple[int, int]) -> tuple[DataFrame, DataFrame]:
    """Every row of the `closing` windows: the query's (`query`) and the view's (`located`)."""
    ending = _ending(run, closing, "v.")
    return (run.spark.sql(f"SELECT v.* FROM ({query}) v WHERE {ending}"),
            run.spark.sql(f"SELECT v.* FROM {located} v WHERE {ending}"))


def _ending(run: Run, closing: tuple[int, int], alias: str) -> str:
    """SQL: a row's window (its columns prefixed `alias`) ends after closing[0] and by closing[1] (µs)."""
    end, t = alias + quote(run.info.window_end), run.time_type
    return f"({end} > {time_sql(closing[0], t)} AND {end} <= {time_sql(closing[1], t)})"
