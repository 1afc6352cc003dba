"""Views of rows (filters, projections, inner, outer, semi and anti joins, UNION ALL; no window, no
GROUP BY) kept from their sources' changes by the delta rules the extension checked
(mv/jvm/DeltaRules.scala).

Each rule is linear in each source, so the view's change is, over its changed sources S in order,
the view's query run over S's change with the sources before S at this refresh's versions and the
ones after it at the previous refresh's (a join: dL JOIN R(new) + L(old) JOIN dR, each side read at
exactly the versions the refresh pins, by Delta time travel), and the UNION branches that do not
read S empty (mv_substitute_change: they did not change in that term). S's inserted rows count +1 and its
deleted ones -1, each run separately, so no sign has to travel through the query's operators.
A source on an outer join's padded side (a semi or anti join's right side) adds two terms: the
other side's rows its change may flip (mv_substitute_flips), at its new version +1, at its old -1.
A source read under an aggregate (or DISTINCT; Nexmark's q8 joins two windowed ones) has those two
terms instead, each aggregate over it kept to the groups its change reaches (mv_substitute_regroups):
the touched groups' old rows go, their new ones come.

The view keeps the query's columns only. A row's copies are its identity: a change that only adds
rows appends them; otherwise the change is netted per distinct row, and each row it takes copies
from has its copies in the view replaced by the number left (writes.counted).

Example:
    >>> refresh_rows(run, {"bids": signed_changes}, {"bids": {1: 1000}})
    Write(mode='append', rows=DataFrame[...])          # new bids joined to their auctions
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mv import change_feed, estimate, open_windows, watermark, window_refresh, writes
from mv.combine import by_terms, combinable_by_terms
from mv.estimate import Stopped
from mv.internal_columns import N, SIGN
from mv.plan import alike_windows, own_time_column
from mv.query import Read, Window, interval_micros, micros_sql, quote, time_sql
from mv.run import INFINITY, Run, advanced
from mv.writes import Recomputed, Write

if TYPE_CHECKING:
    from mv.strategies import Change, Step

# A term's sign that is each row's own, its last column (SIGN): both sides of a change in one term.
BOTH = 0

# A window term reads the padding-wide buckets of time around each changed row, listed in its SQL,
# when they are at most this many (coarser buckets otherwise): _near_buckets.
MAX_BUCKETS = 2_000


def refresh_rows(run: Run, change: Change) -> Step:
    """The write that brings the view from the previous refresh's sources to this one's."""
    parts = window_terms(run, change.frames) if run.info.window_local else _parts(run, change.frames, change.signs)
    retracts = any(sign < 0 or sign == BOTH for sign, _, _ in parts)
    if stopped := _weigh(run, parts, reads_view=retracts):
        return stopped
    return Recomputed.carried(run, _rows_write(run, parts, retracts) if parts else writes.STATE_ONLY)


def _rows_write(run: Run, parts: list[tuple[int, str, str]], retracts: bool) -> Write:
    if not retracts:  # only rows added: appended as they are, duplicates too; a small change as one file
        rows = _union([_frame(run, source, query) for _, source, query in parts])
        return writes.append(rows.coalesce(1) if run.outcome.rows_read < writes.ROWS_PER_FILE else rows)
    signed = _union([_frame(run, source, query if sign == BOTH else f"SELECT *, {sign} AS {SIGN} FROM ({query}) q")
                     for sign, source, query in parts])
    return writes.counted(run, _netted(run, signed))


def refresh_groups_by_change(run: Run, change: Change) -> Step:
    """A GROUP BY (or DISTINCT) over joins, other aggregates, or by keys computed from source
    columns, windowed or not: the query over each changed source's rows (the terms of
    `refresh_rows`, rewritten by mv_substitute_keys) outputs the keys of every group those rows
    fall in; those groups are recomputed and merged (window_refresh.recompute_groups), windows
    only within the touched windows' time ranges, which Spark pushes to the time column.

    Example: bids JOIN auctions GROUP BY category, an auction recategorized from books to toys:
    the term over the auctions' change outputs books and toys, both recomputed.
    """
    changes, signs = change.frames, change.signs
    if not run.info.windows and combinable_by_terms(run.info, {t for t, s in signs.items() if any(s.values())}):
        return _combined_groups(run, changes, signs)
    watermarked = bool(run.view.definition.watermark_column)
    if not watermarked and (windows := _appended_windows(run, changes)) is not None:
        return _whole_windows(run, windows)
    parts = _parts(run, changes, signs, keys=True, live=_not_final(run) if watermarked else None)
    if watermarked and not run.dry:  # before the estimate: a full refresh leaves them out
        window_refresh.write_late_changes(run)
    if stopped := _weigh(run, parts, reads_view=True, recomputes=not run.info.windows):
        return stopped
    if watermarked:
        return _watermarked_groups(run, changes, parts)
    return Recomputed.carried(run, _recomputed_groups(run, parts) if parts else writes.STATE_ONLY)


def _appended_windows(run: Run, changes: dict[str, DataFrame]) -> list[tuple[int, int]] | None:
    """The windows of a change that only appends to windowed sources, each read once by the query
    and windowed by its own time column, as the Delta statistics of the files it added tell them
    (window_refresh.appended_windows): every window that can hold an appended row. None when
    another source changed (a dimension's change reaches windows by its keys), the statistics do
    not tell, or the view's window functions differ or leave their bounds out of its output."""
    info = run.info
    if not (info.window_start and info.window_end) or not alike_windows(info.windows):
        return None
    windowed = {w.sources[0]: w for w in info.windows if own_time_column(info, w)}
    if not set(changes) <= windowed.keys() & _read_once(run):
        return None
    found: set[tuple[int, int]] = set()
    for source in changes:
        if (windows := window_refresh.appended_windows(run, windowed[source])) is None:
            return None
        found.update(windows)
    return sorted(found)


def _whole_windows(run: Run, windows: list[tuple[int, int]]) -> Step:
    """An append's windows (`_appended_windows`) recomputed whole, every group of each, and merged
    (window_refresh.merge_windows): no query to find the groups it reaches first. bench.joins'
    per_minute (a TUMBLE over bids JOIN auctions per category) at 1M bids, 1,000 new bids: that
    query was six small jobs, 0.4 s of a 1.6 s refresh."""
    if stopped := estimate.stops(run.dry, window_refresh.weigh(run, windows, None, False)):
        return stopped
    return Recomputed.carried(run, window_refresh.merge_windows(run, windows, None) if windows else writes.STATE_ONLY)


def _recomputed_groups(run: Run, parts: list[tuple[int, str, str]]) -> Write:
    touched = _touched(run, parts, run.info.group_by)
    if not run.info.windows:
        return window_refresh.recompute_groups(run, touched)
    touched, windows = _touched_windows(run, touched)
    return window_refresh.recompute_groups(run, touched, windows)


def _touched_windows(run: Run, touched: DataFrame) -> tuple[DataFrame, list[tuple[int, int]]]:
    """`touched` keys, cached, and their windows' (start, end) in µs."""
    touched = touched.cache()  # read twice: for the windows' time ranges, then by the semi-join
    run.cached.append(touched)
    name, t = run.temp_view(touched, "keys"), run.time_type
    start, end = (micros_sql(quote(c), t) for c in (run.info.window_start, run.info.window_end))
    return touched, [tuple(r) for r in run.spark.sql(f"SELECT DISTINCT {start}, {end} FROM {name}").collect()]


def _watermarked_groups(run: Run, changes: dict[str, DataFrame], parts: list[tuple[int, str, str]]) -> Recomputed:
    """Windows over joins or unions under a WATERMARK (plan.late_rows_from_changes), kept as a full
    refresh keeps them (full_refresh.full): the watermark moves with the event times the change
    adds; final windows keep their rows (their late changes went to <view>__late first); under
    EMIT ON WINDOW CLOSE only closed windows are written. So the touched groups of windows that
    are not final (and, under EMIT ON WINDOW CLOSE, were closed already) are recomputed, and
    every group of the windows the new watermark closes.

    Example: TUMBLE(TABLE bids, ...) JOIN auctions GROUP BY window_start, window_end, category,
    EMIT ON WINDOW CLOSE: new bids up to 10:07 close 10:05's window, which is written whole; a
    renamed category changes its closed windows that are not final, and none of the final ones.
    """
    d, old_wm = run.view.definition, run.previous.watermark
    grace = interval_micros(run.spark, d.grace)
    appended = [(w, window_refresh.appended_times(run, w)) for w in run.info.windows if w.sources[0] in changes]
    max_event, new_wm = advanced(run, [times[1] if times else _latest(run, w, changes[w.sources[0]])
                                       for w, times in appended])
    state = replace(run.carried(), max_event_time=max_event, watermark=new_wm)
    close = d.emit == "WINDOW CLOSE"
    ahead = close and _after_closed(run, changes, appended, old_wm)  # no closed window touched: no keys sought
    touched, windows = _touched_windows(run, _touched(run, parts, run.info.group_by)) if parts and not ahead \
        else (None, [])
    windows = [(s, e) for s, e in windows if not watermark.is_final(e, old_wm, grace)
               and (not close or watermark.is_closed(e, old_wm))]
    bound = new_wm + 1 if new_wm is not None else -INFINITY  # windows ending by then are closed
    closing = (old_wm + 1 if old_wm is not None else -INFINITY, bound) if close and new_wm != old_wm else None
    if not windows and closing is None:
        write = writes.STATE_ONLY
    else:
        write = window_refresh.recompute_groups(run, touched if windows else None, windows, closing)
    if run.open_state is not None:  # a query of one source, its open windows kept: built again
        state = replace(state, open_id=open_windows.rebuilt(run, bound))
    return Recomputed(state, write)


def _not_final(run: Run) -> dict[str, str] | None:
    """Under a WATERMARK, per windowed source read once by the query: SQL on its rows that holds for
    every row in a window that is not final (its time after the previous watermark less GRACE and
    the longest window, since a row's windows end within that of it), so the terms that find the
    touched keys read only those rows of it, and the files Delta skips by time (a recategorized
    auction's term read every bid of it, of every day). None before a watermark, or when a
    windowed source is read more than once (its other reads are not windowed by that time)."""
    old_wm, info = run.previous.watermark, run.info
    if old_wm is None or any(w.sources[0] not in _read_once(run) for w in info.windows):
        return None
    final = old_wm - interval_micros(run.spark, run.view.definition.grace)
    return {w.sources[0]: f"{micros_sql(quote(w.time_column), run.time_type)} > {final - w.size}" for w in info.windows}


def _after_closed(run: Run, changes: dict[str, DataFrame], appended: list[tuple[Window, tuple[int, int] | None]],
                  old_wm: int | None) -> bool:
    """Whether the change reaches no window that the previous watermark `old_wm` closed: none is
    closed yet, or only windowed sources changed, each read once by the query, by appends whose
    every row is after it (`appended`: their times, window_refresh.appended_times), so each of
    their windows ends after it too. bench.joins' closed_per_minute, 1,000-bid appends at 1M bids:
    2.4 s a refresh before this and the appends' statistics for the watermark and late rows, 1.2 s after."""
    if old_wm is None:
        return True
    windowed = {w.sources[0] for w, _ in appended}
    return set(changes) <= windowed & _read_once(run) \
        and all(times is not None and times[0] > old_wm for _, times in appended)


def _read_once(run: Run) -> set[str]:
    """The sources the query reads once (a self-join reads its table twice)."""
    return {table for table, n in Counter(r.table for r in run.info.reads).items() if n == 1}


def _latest(run: Run, w: Window, change: DataFrame) -> int | None:
    """The latest event time (µs) of window function `w` that its source's change adds."""
    return change.where(F.col(SIGN) == 1).agg(F.max(F.expr(micros_sql(quote(w.time_column), run.time_type)))).first()[0]


def _combined_groups(run: Run, changes: dict[str, DataFrame], signs: dict[str, dict[int, int]]) -> Step:
    """A GROUP BY without windows of count, sum, min and max whose changed reads reach it row by row
    (combine.combinable_by_terms), over joins or not: the query over each changed read's inserted
    and deleted rows (`_parts`' terms, the other reads at the versions that make their sum the
    change) gives what each touched group gains and loses; folded per sign (combine.by_terms),
    those combine with the group's row in the view (window_refresh.combine_and_merge). Only the
    change is joined with the other reads, and no group is recomputed from the sources but those
    whose old row cannot say the answer (a retracted maximum). Recomputing the touched groups
    instead reads every source file their keys' ranges reach: a category, of every bid.
    Windowed groups keep recomputing within the touched windows' time ranges, which read about as
    little (bench.joins `--view per_minute` at 1M bids, combined against recomputed: no faster).

    Example: bids JOIN auctions GROUP BY category after 1,000 new bids: those bids joined to their
    auctions, counted per category, added to the categories' counts; the other bids are not read.
    """
    parts = _parts(run, changes, signs)
    if stopped := _weigh(run, parts, reads_view=True):
        return stopped
    if not parts:
        return Recomputed.carried(run, writes.STATE_ONLY)
    terms = by_terms(run.info.output, run.info.group_by, [(sign, query) for sign, _, query in parts])
    run.cached.extend(run.spark.sql(f"SELECT * FROM {side}").cache() for side in terms)  # read twice by combine
    return Recomputed.carried(run, window_refresh.combine_and_merge(run, f"{run.temp}_terms", terms=terms))


def refresh_partitions(run: Run, change: Change) -> Step:
    """A view whose top is OVER (PARTITION BY keys): top-N, deduplication, a running total per
    auction. A change reaches the partitions of its rows, whose keys the query over the change
    gives (as `refresh_groups_by_change`'s, the rank's filter dropped); those partitions are
    recomputed (a semi-join on the keys, which mv/jvm/SemiJoinsBelowRankFilters.scala takes below
    the rank, so only those partitions are ranked) and compared with the view's rows of the same
    keys, and only the rows that differ are merged (writes.counted), so a partition whose top rows
    stay put is not touched. The keys' ranges (`writes.value_range`) filter both sides too: Spark
    pushes such a filter below the OVER and through the query's joins to every source read on the
    key, where Delta skips the files outside them (a semi-join skips none).

    Example: the top 3 bids per auction, a bid of auction 7 deleted: auction 7's top 3 recomputed;
    its fourth bid moves up (one insert), the deleted one goes (one delete).
    """
    parts = _parts(run, change.frames, change.signs, keys=True)
    if stopped := _weigh(run, parts, reads_view=True, recomputes=True):
        return stopped
    return Recomputed.carried(run, _partitions_write(run, parts) if parts else writes.STATE_ONLY)


def _partitions_write(run: Run, parts: list[tuple[int, str, str]]) -> Write:
    keys = run.info.partition_by
    touched = _touched(run, parts, keys).cache()  # read three times: its ranges, then by both semi-joins
    run.cached.append(touched)
    within = writes.value_range(touched)
    if within == "FALSE":  # no partition reached (a bid of an auction not there): nothing to merge
        return writes.STATE_ONLY
    name = run.temp_view(touched, "keys")
    on = " AND ".join(f"v.{quote(k)} <=> k.{quote(k)}" for k in keys)
    affected = f"LEFT SEMI JOIN {name} k ON {on}"

    # The keys' ranges: a filter Spark pushes down to the scans, where Delta skips files (a semi-join skips none).
    recomputed = run.spark.sql(f"SELECT /*+ BROADCAST(k) */ v.*, 1 AS {SIGN} "
                               f"FROM {writes.kept_to(f'({run.query})', within)} v {affected}")
    # The view's rows of those partitions, located: every copy of a row that loses some is one, so
    # the merge takes them from here instead of reading the view again (q18's changes at 10M bids:
    # 2 s of 14 s).
    view = writes.located(run.spark, run.view.name, writes.read_version(run))
    read = run.spark.sql(f"SELECT /*+ BROADCAST(k) */ v.* FROM {writes.kept_to(view, within)} v {affected}").cache()
    run.cached.append(read)
    current = read.select(*[quote(c) for c in run.columns], F.lit(-1).alias(SIGN))
    return writes.counted(run, _netted(run, recomputed.unionByName(current)), read)


def _touched(run: Run, parts: list[tuple[int, str, str]], keys: list[str]) -> DataFrame:
    """The distinct `keys` the terms `parts` (rewritten to find keys) output: the groups or
    partitions their changes reach."""
    columns = ", ".join(quote(k) for k in keys)
    return _union([_frame(run, source, f"SELECT {columns} FROM ({query}) q") for _, source, query in parts]).distinct()


def _netted(run: Run, signed: DataFrame) -> DataFrame:
    """`signed`'s rows (the view's columns and SIGN) netted per distinct row: N, never 0."""
    columns = [quote(c) for c in run.columns]
    return signed.groupBy(*columns).agg(F.sum(SIGN).alias(N)).where(F.col(N) != 0)


def _parts(run: Run, changes: dict[str, DataFrame], signs: dict[str, dict[int, int]],
           keys: bool = False, live: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """(sign, source, query) for each non-empty side of each changed source's change, read by read (a
    self-join's sides are two reads: a term each): the view's query over those rows, the reads before
    it as of this refresh, those after it as of the last one. A read whose term can carry each
    row's sign to the output (Read.signed) has one term over both sides (sign BOTH): the other
    sources it joins are read once, not once per side. With `keys`, the rows those rows reach
    instead (mv_substitute_keys: outer joins, HAVING), one term over both sides of each change:
    the keys a row reaches do not depend on its sign, and each term reads the other sources again.
    `live`: per source, SQL on its rows that every row a term needs meets (`_not_final`), each of its
    reads, the change's too, kept to it."""
    reads, parts = run.info.reads, []
    for i, read in enumerate(reads):
        source = read.table
        if not any(signs.get(source, {}).values()):  # unchanged, or nothing left once netted
            continue
        after = {r.name: run.previous_source(r.table) for r in reads[i + 1:]
                 if run.previous.sources.get(r.table, -1) != run.targets[r.table]}

        def term(sign: int, replacement: str, **kind: str | bool) -> None:
            relations = {**after, read.name: replacement}
            relations.update({r.name: writes.kept_to(relations.get(r.name) or run.source(r.table), live[r.table])
                              for r in reads if live and r.table in live})
            parts.append((sign, source, run.query_over(relations, read.name, keys=keys, **kind)))
        # One term over both sides: the keys a change reaches do not depend on its rows' signs; a
        # signed term carries them. The whole change is registered once, for it and the flips.
        one_term = keys or read.signed and all(signs[source].get(s) for s in (1, -1))
        whole = one_term or (read.regroups or read.flips) and not keys
        change = run.temp_view(changes[source], f"change_{i}") if whole else None
        # Kept to its rows' bounds, a change lets the joins infer them for the other reads.
        bounded = len(reads) > 1 and read.equated and (keys or read.flips or not read.regroups)
        bounds = _value_bounds(run, source, changes[source], read.equated) if bounded else None
        if read.regroups and not keys:  # its aggregates' touched groups, new (+) and old (-)
            within = None
            if read.window:
                span = _change_span(changes[source], read.window)
                within = _time_within(read.window, span, read.window["size"], _time_type(run, read, changes[source]))
                for j in read.partners:  # joined on the touched windows' bounds: read only around them too
                    other = reads[j]
                    size = max(read.window["size"], other.window["size"])
                    after[other.name] = writes.kept_to(after.get(other.name) or run.source(other.table),
                                                 _time_within(other.window, span, size, _time_type(run, other)))
            term(1, writes.kept_to(run.source(source), within), regroups=change)
            term(-1, writes.kept_to(run.previous_source(source), within), regroups=change)
        elif one_term:
            term(1 if keys else BOTH, writes.kept_to(change, bounds), signed=not keys)
        elif not keys:
            for sign in (1, -1):
                if signs[source].get(sign):
                    rows = changes[source].where(F.col(SIGN) == sign)
                    term(sign, writes.kept_to(run.temp_view(rows, f"{'in' if sign > 0 else 'out'}_{i}"), bounds))
        if read.flips and not keys:  # the other side's rows whose match came or went
            term(1, run.source(source), flips=writes.kept_to(change, bounds))
            term(-1, run.previous_source(source), flips=writes.kept_to(change, bounds))
    return parts


def window_terms(run: Run, changes: dict[str, DataFrame]) -> list[tuple[int, str, str]]:
    """The terms of a window-local query (QueryInfo.window_local): two, whatever it reads, the
    query over every source kept to the change's time range at this refresh's versions (+1) and
    at the last refresh's (-1). A window holding a changed row lies within the range, so its rows
    are exact in both; another window's rows are the same in both (partial if it crosses the
    range's edge) and cancel in the netting. The padding covers a chain of windows tied by one
    bound each (a window per read). Where the rules of regrouping run the query four times for
    a self-join (each read's change, each version), with each aggregate kept to the groups the
    change reaches, this runs it twice. A change scattered in time (corrections across days) keeps
    the terms to the buckets of time around its rows, not its whole span (`_near_buckets`).

    Example: q5 after a 2-hour append: the HOP windows of those hours (and a window's width either
    side), recomputed at the new version, minus the same at the old, netted.
    """
    reads = run.info.reads
    timed = {(r.table, r.window["time_column"]): r.window for r in reads if r.table in changes}  # a self-join's once
    size = max(r.window["size"] for r in reads) * len(reads)  # _time_within pads twice this either side
    found = [times for (table, _), window in timed.items()
             if (times := _change_times(changes[table], window, 2 * size))]
    if not found:  # no changed row has a time: it is in no window
        return []
    span = (min(f[0] for f in found), max(f[1] for f in found))
    near = _near_buckets(set().union(*(f[2] for f in found)), 2 * size)

    def within(read: Read) -> str:
        t = _time_type(run, read)
        kept_to_span = _time_within(read.window, span, size, t)
        return kept_to_span if near is None else f"{kept_to_span} AND {_in_buckets(read.window, near, t)}"

    def kept(version) -> dict[str, str]:
        return {r.name: writes.kept_to(version(r.table), within(r)) for r in reads}
    old = (lambda t: run.previous_source(t) if t in changes else run.source(t))
    changed = next(iter(timed))[0]
    return [(1, changed, run.query_over(kept(run.source))), (-1, changed, run.query_over(kept(old)))]


def _change_times(change: DataFrame, window: dict, width: int) -> tuple[int, int, set[int]] | None:
    """`_change_span`, with the buckets of `width` µs (bucket k: [k * width, (k + 1) * width)) that
    `change`'s times fall in; one Spark job."""
    column = window["time_column"]
    micros = micros_sql(quote(column), change.schema[column].dataType.simpleString())
    low, high, buckets = change.selectExpr(f"min({micros})", f"max({micros})",
                                           f"collect_set({_bucket_sql(micros, width)})").first()
    return None if low is None else (low, high, set(buckets))


def _near_buckets(buckets: set[int], width: int, limit: int = MAX_BUCKETS) -> tuple[int, list[int]] | None:
    """The buckets a window term reads: each changed row's and the one either side, so every row
    within `width` of a changed row, as (width, sorted bucket numbers), the width doubled until
    they are at most `limit`; None when they make one run (the change's span says as much).
    A change of scattered corrections then recomputes the windows around each, not its whole span.

    Example: buckets {3, 9} of width 10 give (10, [2, 3, 4, 8, 9, 10]); {3, 4} give None.
    """
    scale = 1
    while True:
        near = sorted({k // scale + d for k in buckets for d in (-1, 0, 1)})
        if near[-1] - near[0] + 1 == len(near):
            return None
        if len(near) <= limit:
            return width * scale, near
        scale *= 2


def _bucket_sql(micros: str, width: int) -> str:
    """SQL: the bucket of `width` µs of the time `micros` (µs), exact for times before 1970 too."""
    return f"(({micros}) - pmod({micros}, {width})) div {width}"


def _in_buckets(window: dict, near: tuple[int, list[int]], t: str) -> str:
    """SQL: whether `window`'s time column (of type `t`) falls in one of the buckets `near`."""
    width, buckets = near
    return f"{_bucket_sql(micros_sql(quote(window['time_column']), t), width)} IN ({', '.join(map(str, buckets))})"


def _change_span(change: DataFrame, window: dict) -> tuple[int, int] | None:
    """The earliest and latest time (µs) of `change`'s rows in `window`'s time column; None when
    none has a time."""
    column = window["time_column"]
    micros = micros_sql(quote(column), change.schema[column].dataType.simpleString())
    low, high = change.selectExpr(f"min({micros})", f"max({micros})").first()
    return None if low is None else (low, high)


def _time_type(run: Run, read: Read, change: DataFrame | None = None) -> str:
    """The type of `read`'s window time column (Spark's simpleString): in its change, or its table's."""
    column = read.window["time_column"]
    if change is not None:
        return change.schema[column].dataType.simpleString()
    return run.source_schemas.get(read.table, {}).get(column.lower(), "timestamp")


def _time_within(window: dict, span: tuple[int, int] | None, size: int, t: str) -> str:
    """The condition keeping a source to the rows a regroup term of `window`-grouped aggregates needs:
    its touched groups each lie in a window (of at most `size` µs) holding a changed row, so within
    the change's `span` give or take twice the size (a day window in a time zone may be an hour
    longer). FALSE for a change without times: it is in no window, so the term's groups are none."""
    if span is None:
        return "FALSE"
    column = quote(window["time_column"])
    return f"{column} >= {time_sql(span[0] - 2 * size, t)} AND {column} <= {time_sql(span[1] + 2 * size, t)}"


def _value_bounds(run: Run, source: str, change: DataFrame, columns: tuple[str, ...]) -> str:
    """A condition every row of `change` (`source`'s signed change) meets on `columns`, those the
    query equates with another read's (Read.equated; writes.value_range): kept to it, a term's
    change is the same rows, and Spark infers the same bounds for each column they equal
    (InferFiltersFromConstraints), so Delta skips the other sources' files outside them. An
    append's from its files' statistics (change_feed.appended_ranges), else one job over the
    cached change.

    Example: Nexmark's q20 (bids JOIN auctions ON auction = id) after an append: the new
    auctions' ids are the highest, and the term joining them with the bids as of the last
    refresh reads only the bid files whose auction ids reach that range, not all of them.
    """
    rows = change.select(*[quote(c) for c in columns])
    return writes.value_range(rows, change_feed.appended_ranges(run, source, rows.schema))


def _weigh(run: Run, parts: list[tuple[int, str, str]], reads_view: bool, recomputes: bool = False) -> Stopped | None:
    """REFRESH POLICY AUTO's estimate (mv/estimate.py) of the rest of this refresh: the terms read
    every source but the changed one, in the files their change's bounds leave (a dimension's
    change scattered over its keys joins the whole fact table), and a change that takes copies
    away, or regroups, reads the view to find them (`reads_view`) and merges into it. Keys the
    terms of a join find and the query then `recomputes` (a GROUP BY without windows, an OVER)
    are priced at the whole query, as when the terms read the other sources whole: the keys are
    not known yet, and their recomputation may read everything (q9 at 1M bids: two bid files,
    neither skipped; bounded terms alone made its first append look cheap, and it ran at 3.3
    times a full refresh). Stops the refresh (estimate.stops) when a full refresh costs less (AUTO),
    and when asked only for the estimate (EXPLAIN). A change under SMALL_CHANGE of
    the sources' bytes goes unweighed only for a view that reads one source once, outside any
    aggregate: a small change of a source is joined with all of another read (of another source, or
    of itself), and an aggregate's touched groups are recomputed twice and merged into the view."""
    # A self-join's change joins all of its table's other read; a regroup term reads its source twice
    # and merges into the whole view: neither is cheap because the change is.
    several = len(run.info.reads) > 1 or any(r.regroups for r in run.info.reads)
    if not run.dry and (run.view.definition.policy != "AUTO" or (run.sizes.small_change and not several)):
        return None
    if not parts:  # the change has no rows (e.g. OPTIMIZE): nothing to weigh
        return estimate.stops(run.dry, None)
    terms = " UNION ALL ".join(f"SELECT 1 AS one FROM ({query}) q{i}" for i, (_, _, query) in enumerate(parts))
    view = f"SELECT * FROM {run.view.name}"
    if recomputes and len(run.info.reads) > 1:
        terms += f" UNION ALL SELECT 1 AS one FROM ({run.query}) r"
    source = f"SELECT 1 FROM ({terms}) t UNION ALL SELECT 1 FROM ({view}) v" if reads_view else terms
    found = estimate.planned(run.spark, run.view.name, run.query, (source, view if reads_view else None),
                             run.sizes, spent=time.time() - run.outcome.started_at, previous=run.previous,
                             previous_end=run.previous_end, retracts=bool(run.updated),
                             over_appends=estimate.retracts_over_appends(run.info))
    found = run.outcome.weighed(replace(found, small_change=found.small_change and not several))
    run.outcome.work_bytes = found.incremental_bytes + (run.sizes.change or 0)
    return estimate.stops(run.dry, found)


def _frame(run: Run, source: str, query: str) -> DataFrame:
    """`query` analysed. A source read as of the previous refresh's version (a term of another
    changed source) may be past Delta's log cleanup, or lack a column added since: the change
    cannot be computed then (change_feed's exceptions, which refresh.py turns into a full refresh
    under AUTO)."""
    try:
        return run.spark.sql(query)
    except Exception as e:  # noqa: BLE001 - Delta's and the substitution's errors come as several types
        if change_feed.is_gone(e):
            raise change_feed.ChangeFeedGone(source, run.previous.sources.get(source, -1) + 1) from None
        if "has no column" in str(e) or change_feed.is_schema_change(e):
            raise change_feed.SchemaChanged(source) from None
        raise


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionAll, frames)
