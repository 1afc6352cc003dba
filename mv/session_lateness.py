"""SESSION windows under a watermark: which changes are late, and the rows a recomputation reads.

A session's window is only known once its rows are: a row may join a session, merge two, or
start one. So a change (at time t, key k) is late, and goes to <view>__late, when

    t + gap + grace <= watermark       the session of that row alone would already be final, or
    t <= cut(k)                        it falls within gap of a final session of k, or before one

where cut(k) is the latest end of k's final sessions (end + grace <= watermark). A change that is
not late can then never reach a final session, so final sessions never change (docs/design.md, rule 12).

Late rows stay in the source, and may lie inside a session that is not final yet (a long one, a
row more than gap + grace behind the watermark). Every recomputation therefore reads the source
with the late changes undone (`without_late`): their inserts taken out, their deletes put back.

Example:
    >>> on_time, late, late_count, max_event, retracted = split(run, "changes", watermark=600_000_000, grace=0)
    >>> effective = without_late(run, run.source(source))   # then the regions' rows of it
"""
from __future__ import annotations

from mv.internal_columns import COPY, CUT, LATE, N, SIGN, late_name
from mv.query import micros_sql, quote, time_sql
from mv.watermark import closed_sql


def _keys(run) -> list[str]:
    return [quote(k) for k in run.info.windows[0].partition_by]


def _cuts(run, watermark: int, grace: int, since: int | None) -> str:
    """SQL: per key, the latest end (µs) of its final sessions in the view, those ending after `since`."""
    t, end = run.time_type, quote(run.info.window_end)
    keys = _keys(run)
    where = f"{end} <= {time_sql(watermark - grace, t)}"
    if since is not None:  # only sessions ending after it can hold a change back: Delta skips the rest
        where += f" AND {end} > {time_sql(since, t)}"
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    return f"SELECT {''.join(k + ', ' for k in keys)}max({micros_sql(end, t)}) AS {CUT} FROM {run.view.name} " \
           f"WHERE {where}{group}"


def _match(run, left: str, right: str) -> str:
    return " AND ".join([f"{left}.{k} <=> {right}.{k}" for k in _keys(run)] or ["true"])


def split(run, changes: str, watermark: int | None, grace: int) -> tuple[str, str, int, int | None, int, int | None]:
    """The changes that are not late and those that are (two temporary views; the caller writes the
    late ones to the late table), how many are late, the latest event time the changes add, how
    many of the changes that are not late retract a row, and the earliest time among those (µs)."""
    w, t = run.info.windows[0], run.time_type
    time = micros_sql(f"c.{quote(w.time_column)}", t)
    gap = w.size
    if watermark is None:
        classified = run.spark.sql(f"SELECT c.*, false AS {LATE} FROM {changes} c")
    else:
        # A change at t can only be held back by a final session ending at or after t, and t itself
        # is later than watermark - grace - gap, or late anyway.
        classified = run.spark.sql(
            f"SELECT c.*, coalesce({time} + {gap + grace} <= {watermark} OR {time} <= f.{CUT}, false) AS {LATE} "
            f"FROM {changes} c LEFT JOIN ({_cuts(run, watermark, grace, watermark - grace - gap - 1)}) f "
            f"ON {_match(run, 'c', 'f')}")
    classified = classified.localCheckpoint()  # not cached: it reads the view (mv/combine.py says why)
    name = run.temp_view(classified, "classified")
    late, latest, retracted, earliest = run.spark.sql(
        f"SELECT count_if({LATE}), max(IF({SIGN} = 1, {time}, NULL)), count_if(NOT {LATE} AND {SIGN} = -1), "
        f"min(IF({LATE}, NULL, {time})) FROM {name} c").first()
    on_time, too_late = (run.temp_view(run.spark.sql(f"SELECT * EXCEPT ({LATE}) FROM {name} WHERE {test}"), part)
                         for test, part in ((f"NOT {LATE}", "on_time"), (LATE, "late")))
    return on_time, too_late, late, latest, retracted, earliest


def without_late(run, rows: str, between: tuple[int, int] | None = None) -> str:
    """The source rows `rows` (a relation in FROM) with the view's late changes undone: each late
    insert's row taken out once, each late delete's row put back once (rows compared on every column).
    `rows` is a whole source: a late delete puts its row back wherever it is, so select from the result.
    `between` (µs, both included): the caller selects only rows of that time, so only the late
    changes of that time are read (the late table grows with every refresh; Delta skips its files).

    Only a row at the time of a late change can be one: the others pass by a join on the time
    column alone, which keeps the scan to the columns the query reads; the rows at those times,
    read within the late changes' span of time (Delta skips the other files), are netted with the
    late changes on every column. (Joining every row on every column read the whole source twice,
    every column of it: 3x the recomputation's own time for Nexmark's q11 at 10M bids.)

    Example: rows {x, x, y}, a late insert of x and a late delete of z give {x, y, z}.
    """
    spark = run.spark
    if not spark.catalog.tableExists(run.view.late_table):
        return rows
    late, cols = _late_net(run, rows, between)
    time, t = quote(run.info.windows[0].time_column), run.time_type
    low, high, untimed = spark.sql(f"SELECT min({micros_sql(time, t)}), max({micros_sql(time, t)}), "
                                   f"count_if({time} IS NULL) FROM {late}").first()
    if low is None and not untimed:  # the late changes net to nothing
        return rows
    span = "true" if untimed else f"r.{time} BETWEEN {time_sql(low, t)} AND {time_sql(high, t)}"
    times = run.temp_view(spark.sql(f"SELECT DISTINCT {time} FROM {late}"), "late_times")
    return run.temp_view(spark.sql(f"""
        SELECT /*+ BROADCAST(l) */ r.* FROM {rows} r LEFT ANTI JOIN {times} l ON r.{time} <=> l.{time}
        UNION ALL
        SELECT {cols} FROM (
            SELECT {cols}, sum({N}) AS {N} FROM (
                SELECT /*+ BROADCAST(l) */ r.*, 1 AS {N} FROM {rows} r
                LEFT SEMI JOIN {times} l ON r.{time} <=> l.{time} WHERE {span}
                UNION ALL SELECT * FROM {late})
            GROUP BY {cols} HAVING sum({N}) > 0) g
        LATERAL VIEW explode(sequence(1, {N})) copies AS {COPY}"""), "without_late")


def _late_net(run, rows: str, between: tuple[int, int] | None) -> tuple[str, str]:
    """A temporary view of the late changes as rows of `rows`' columns with N, how many copies each
    adds (a late delete's) or takes out (negative: a late insert's), those that net to nothing left
    out; and those columns, quoted, as a select list."""
    spark = run.spark
    schema = spark.sql(f"SELECT * FROM {rows}").schema
    recorded = {c.lower() for c in spark.table(run.view.late_table).columns}
    picked = ", ".join(f"{quote(late_name(f.name))} AS {quote(f.name)}" if late_name(f.name).lower() in recorded
                       else f"CAST(NULL AS {f.dataType.simpleString()}) AS {quote(f.name)}" for f in schema)
    cols = ", ".join(quote(f.name) for f in schema)
    time, t = quote(late_name(run.info.windows[0].time_column)), run.time_type  # the late table's name for it
    where = f" WHERE {time} BETWEEN {time_sql(between[0], t)} AND {time_sql(between[1], t)}" if between else ""
    return run.temp_view(spark.sql(
        f"SELECT {cols}, sum(-{SIGN}) AS {N} FROM (SELECT {picked}, _change_sign AS {SIGN} "
        f"FROM {run.view.late_table}{where}) GROUP BY {cols} HAVING sum({SIGN}) <> 0"), "late_net"), cols


def after_final(run, rows: str, watermark: int, grace: int, since: int | None = None) -> str:
    """A temporary view of the source rows `rows` that no final session of their key holds back:
    what a full recomputation reads, so the sessions it makes never reach a final one. `since`
    (µs): `rows` are all later, so only final sessions ending after it can hold one back."""
    w, t = run.info.windows[0], run.time_type
    time = micros_sql(f"r.{quote(w.time_column)}", t)
    return run.temp_view(run.spark.sql(
        f"SELECT r.* FROM {rows} r LEFT JOIN ({_cuts(run, watermark, grace, since)}) f ON {_match(run, 'r', 'f')} "
        f"WHERE f.{CUT} IS NULL OR {time} IS NULL OR {time} > f.{CUT}"), "after_final")


def open_from(run, recomputed: str, watermark: int | None) -> int | None:
    """Under EMIT ON WINDOW CLOSE: where the earliest session of `recomputed` that is not closed
    starts (µs); with none, just after the watermark (a later session starts there or later)."""
    t = run.time_type
    closed = closed_sql(quote(run.info.window_end), watermark, t)
    first = run.spark.sql(f"SELECT min({micros_sql(quote(run.info.window_start), t)}) FROM {recomputed} "
                          f"WHERE NOT ({closed})").first()[0]
    if first is not None:
        return first
    return watermark + 1 if watermark is not None else None


def settled(run, watermark: int | None, grace: int) -> bool:
    """Whether every session in the view is final (end + grace <= `watermark`), so that no change
    that is not late can reach one. Under EMIT ON WINDOW CLOSE without GRACE the view holds only
    closed sessions, and a closed one is final unless it ends exactly 1 µs past the watermark.

    Example: a view holding [00:00, 00:05) is settled at watermark 00:06, grace 0; not at grace 2 min.
    """
    t, end = run.time_type, quote(run.info.window_end)
    final = f"{end} <= {time_sql(watermark - grace, t)}" if watermark is not None else "false"
    return not run.spark.sql(f"SELECT 1 FROM {run.view.name} WHERE NOT ({final}) LIMIT 1").collect()
