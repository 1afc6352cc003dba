"""How a refresh's new rows go into the view (`Write`): appended, overwriting the view's, or
merged by the one commit (mv/jvm/RefreshCommit.scala) that upserts recomputed groups by key or
replaces the rows of a time range or of session regions. Every strategy returns one.

Example:
    >>> writes.merge(run, recomputed, current)     # groups upserted, vanished ones deleted
    Write(mode='merge', rows=DataFrame[...], on='t.`item` <=> s.`item` AND ...', ...)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv.internal_columns import FILE, N, OP, R, ROW
from mv.query import quote, sql_string, time_sql
from mv.run import Run
from mv.state import RefreshState


@dataclass(frozen=True)
class Write:
    """What the refresh's commit does with the view's rows. `mode`: append or overwrite with
    `rows`, merge `rows` (RefreshCommit.scala's clauses: `on`, `delete_matched`, `delete_missing`,
    `target_filter`), or state: no rows, only the new state. `reached`: the view's rows a merge
    reaches (`reached_rows`), already read, `located`, at the version the refresh started from
    (`read_version`). `fresh`: a key column whose rows beyond the view's files' greatest value
    there are inserted without matching (a window newer than the view's; `merge`). `unmatched`: a
    condition on the rows that `on` never lets match (a replacement's rows to insert), whose rows
    are inserted without matching too (`delete_matched_insert_rest`). `deletes_reached`: every
    reached row is deleted and the rows' others are inserts or markers (`counted`), so the commit
    classifies them without a join."""
    mode: str
    rows: DataFrame | None = None
    on: str | None = None
    delete_matched: bool = False
    delete_missing: str | None = None
    target_filter: str | None = None
    reached: DataFrame | None = None
    fresh: str | None = None
    unmatched: str | None = None
    deletes_reached: bool = False

    def spec(self, rows_view: str | None, reached_view: str | None = None, read_at: int | None = None) -> dict:
        """The commit statement's spec, with the rows as the temporary view `rows_view` and the
        reached rows as `reached_view`, read at the view's version `read_at`."""
        clauses = {"on": self.on, "delete_matched": self.delete_matched, "delete_missing": self.delete_missing,
                   "target_filter": self.target_filter, "reached": reached_view,
                   "reached_version": read_at if reached_view else None,
                   "fresh": self.fresh, "unmatched": self.unmatched,
                   "deletes_reached": self.deletes_reached} if self.mode == "merge" else {}
        return {"mode": self.mode, "rows": rows_view, **clauses}


STATE_ONLY = Write("state")

# A merge writes a file per this many rows (RefreshCommit.RowsPerFile); an append of fewer, one
# file, not one per file of its change (a 1,000-row append of two files wrote two each refresh).
ROWS_PER_FILE = 250_000


@dataclass(frozen=True)
class Recomputed:
    """What a refresh brings the view to: its new state (source versions, watermark, ...) and the
    write that brings its rows there. Every strategy returns one, or an `estimate.Stopped`
    (mv/strategies.py).

    Example:
        >>> Recomputed.carried(run, append(new_rows))   # rows added, no watermark to move
    """
    state: RefreshState
    write: Write

    @staticmethod
    def carried(run: Run, write: Write) -> Recomputed:
        """`write`, with the previous state carried to this refresh's id and source versions: the
        state of a strategy that moves no watermark and keeps no open windows."""
        return Recomputed(run.carried(), write)


def append(rows: DataFrame) -> Write:
    return Write("append", rows)


def overwrite(rows: DataFrame) -> Write:
    return Write("overwrite", rows)


def merge(run: Run, recomputed: DataFrame, current: DataFrame | None, delete_missing: bool | str = False,
          span: tuple[int, int] | None = None, within: str | None = None) -> Write:
    """One merge: recomputed rows upserted, `current` rows whose key vanished deleted.

    `delete_missing` also deletes view rows the recomputation lacks (those meeting it, if a condition
    on alias t; with a `span`, a condition that only rows within it can meet).
    `span` bounds the window starts of the view rows that can match, or `within`, a condition on
    their columns they meet, so the view's other files are skipped.
    Recomputed windows that start after every window in the view's files are inserted without
    matching (`Write.fresh`), unless `current` is given (its join to the recomputation would then
    be evaluated twice: the rows to match and those to insert) or the change is small enough for
    the driver to match all of it (`matched_locally`).
    """
    on = " AND ".join([f"t.{quote(k)} <=> s.{quote(k)}" for k in run.info.group_by]
                      + ([start_range(run, span, "t")] if span else []))
    missing = delete_missing if isinstance(delete_missing, str) else "true" if delete_missing else None
    start = run.info.window_start
    fresh = start if current is None and start in run.info.group_by and not matched_locally(run) else None
    return Write("merge", upserts_and_deletes(run, recomputed, current), on, delete_missing=missing,
                 target_filter=start_range(run, span, None) or within, fresh=fresh)


def matched_locally(run: Run) -> bool:
    """Whether the change read has at most half of `mv.localMergeRows` rows (20,000), so the new rows
    of its windows are few enough for the commit to match them all in the driver (LocalMerge.scala),
    in the job that writes them: inserting the new windows' rows apart costs a job there to count
    them first (then they go in the same write; as a write of their own, bench/fixed_cost.py's
    1,000-row append took 0.16 s more, 1.2 s against 0.9 s a refresh). Half: the
    windows recomputed hold the change's rows and those of the windows it shares with the view, and
    the view's file they reach about as many again; over the limit on either side LocalMerge gives up
    and the whole append goes through the distributed join (bench.appends' one_percent, 20,000 rows,
    and 13 more in a shared window: rounds of 1.3-1.7 s, against 0.9-1.3 s with the new windows apart)."""
    limit = run.spark.conf.get(LOCAL_MERGE_ROWS, None)
    limit = int(limit) if limit is not None and limit.strip().lstrip("-").isdigit() else LOCAL_MERGE_DEFAULT
    return 0 < run.outcome.rows_read <= limit // 2


# LocalMerge.scala's setting and its default.
LOCAL_MERGE_ROWS, LOCAL_MERGE_DEFAULT = "mv.localMergeRows", 20_000


def upserts_and_deletes(run: Run, recomputed: DataFrame, current: DataFrame | None) -> DataFrame:
    """The MERGE's source: each recomputed row to upsert, and each key of `current` the
    recomputation lacks to delete (internal_columns.OP). One full outer join on the group keys, so the
    recomputation, the costly side, is evaluated once.

    Example: recomputed {a: 3}, current {a: 2, b: 1} give (a, 3, 'upsert') and (b, NULL, 'delete').
    """
    if current is None:
        return recomputed.withColumn(OP, F.lit("upsert"))
    key = run.info.group_by
    r = recomputed.withColumn(R, F.lit(True)).alias("r")
    c = current.select(*[quote(k) for k in key]).alias("c")
    joined = r.join(c, [F.col(f"r.{quote(k)}").eqNullSafe(F.col(f"c.{quote(k)}")) for k in key], "full_outer")
    present = F.col(f"r.{R}").isNotNull()
    return joined.select(*[
        (F.when(present, F.col(f"r.{quote(name)}")).otherwise(F.col(f"c.{quote(name)}")) if name in key
         else F.col(f"r.{quote(name)}")).alias(name) for name in run.columns],
        F.when(present, F.lit("upsert")).otherwise(F.lit("delete")).alias(OP))


def delete_matched_insert_rest(run: Run, source: DataFrame, on: str, span: tuple[int, int] | None = None,
                               within: str | None = None) -> Write:
    """The merge of a replacement: view rows that match a source row `on` are deleted; the source's
    rows marked 'insert' (which `on` never matches) are inserted. `span`: window starts the
    matched rows lie in, or `within`, a condition they meet, so the view's other files are skipped.
    Unless the change is small enough for the driver to match it whole (`matched_locally`), the rows
    to insert are written apart from the matching (`Write.unmatched`): Nexmark's q0 at 1M bids, a
    change round of 32,000 rows (7,000 taken away) sent them all through the distributed full outer
    join with the 7,000 view rows they reach, 0.7 s of a 1.4 s commit."""
    unmatched = None if matched_locally(run) else f"{OP} = 'insert'"
    return Write("merge", source, on, delete_matched=True, target_filter=within or start_range(run, span, None),
                 unmatched=unmatched)


def replace_rows(run: Run, kept: str) -> Write:
    """One MERGE that deletes the view's rows meeting `kept` (on alias t) and inserts the query's
    rows meeting it: exact for any rows, duplicates included.

    The view's rows to delete match one marker row of the source, on a key the join can hash
    (`kept` turned into the marker's value); `kept` in ON also lets Delta skip the view's other
    files, which a NOT MATCHED BY SOURCE clause would not (it reads the whole view).
    """
    rows = run.spark.sql(f"SELECT *, 'insert' AS {OP} FROM ({run.query}) t WHERE {kept}")
    marker = run.spark.sql(f"SELECT 'region' AS {OP}")
    source = rows.unionByName(marker, allowMissingColumns=True)
    return delete_matched_insert_rest(run, source, f"s.{OP} = IF({kept}, 'region', NULL) AND {kept}")


def exact(run: Run, expected: DataFrame) -> Write:
    """One merge that makes the view exactly the rows `expected` (duplicates included), whatever
    happened to its files, touching only rows whose number of copies differs: each such row's
    copies in the view are deleted and `expected`'s inserted. An unchanged row is left alone, so the
    view's change feed shows net changes only (a changed group: its old row deleted, its new one
    inserted). Costs a read of the whole view and an aggregation of both sides, once (the rows
    that differ are computed and cached before the commit, which reads them twice): for repairs.

    Example: view {a, a, b, c}, expected {a, b, d}: a's two copies deleted and one inserted,
    c deleted, d inserted; b untouched.
    """
    columns = run.columns
    same = [F.col(f"e.{quote(c)}").eqNullSafe(F.col(f"v.{quote(c)}")) for c in columns]
    e = expected.groupBy(*[quote(c) for c in columns]).agg(F.count(F.lit(1)).alias(N)).alias("e")
    v = run.spark.table(run.view.name).groupBy(*[quote(c) for c in columns]) \
        .agg(F.count(F.lit(1)).alias(N)).alias("v")
    differing = e.join(v, same, "full_outer").where(
        F.coalesce(F.col(f"e.{N}"), F.lit(0)) != F.coalesce(F.col(f"v.{N}"), F.lit(0)))
    present = F.col(f"e.{N}").isNotNull()
    return _copies(run, differing.select(
        *[F.when(present, F.col(f"e.{quote(c)}")).otherwise(F.col(f"v.{quote(c)}")).alias(c) for c in columns],
        F.lit(True).alias(OP), F.coalesce(F.col(f"e.{N}"), F.lit(0)).alias(N)), settled=True)


def counted(run: Run, net: DataFrame, read: DataFrame | None = None) -> Write:
    """One merge that applies `net`, the view's distinct rows each with its net change of copies
    (N, never 0): a row that only gains copies has them inserted; a row that loses some has its
    copies in the view replaced by the number left. Only the view's copies of losing rows are
    read (a semi-join on every column), in the files whose statistics can hold them
    (`value_range`), so a change that retracts little reads little of the view; or taken from
    `read`, view rows already read and located (`located`) that hold every copy of a losing row.

    Example: view {a, a, b}, net {a: -1, c: +2}: a's two copies deleted and one inserted, c's two
    inserted; b untouched.
    """
    columns = [quote(c) for c in run.columns]
    net = run.held(net)  # read three times below (the losing rows twice, the gaining once): its terms run once
    losing = net.where(F.col(N) < 0)
    within = value_range(losing.select(*columns))
    if within == "FALSE":  # only gains: FALSE lets the commit skip every file of the view
        return _copies(run, net.select(*columns, F.lit(False).alias(OP), F.col(N)), within)
    reached = reached_rows(run, within, losing, read)
    held = reached.groupBy(*columns).agg(F.count(F.lit(1)).alias("held"))
    left = losing.join(held, [losing[c].eqNullSafe(held[c]) for c in columns], "left") \
        .select(*[losing[c] for c in columns], F.lit(True).alias(OP),
                F.greatest(F.lit(0), F.coalesce(held["held"], F.lit(0)) + losing[N]).alias(N))
    gaining = net.where(F.col(N) > 0).select(*columns, F.lit(False).alias(OP), F.col(N))
    write = _copies(run, left.unionByName(gaining), within, settled=True)
    return replace(write, reached=reached, deletes_reached=True)  # every reached row is a losing row's copy


def reached_rows(run: Run, within: str, losing: DataFrame, read: DataFrame | None = None) -> DataFrame:
    """The view's copies of the `losing` rows (those meeting `within` and equal to one on every
    column), with each one's file (FILE) and row index in it (ROW), read at the version the
    refresh started from and cached. They count the copies, and the commit takes them as the view
    rows its merge reaches when it reads that version (RefreshCommit.scala's `candidateRows`), so
    the view is read for them once: Nexmark q0's change round read 700,000 view rows twice for 6,880.
    `read`: the view's rows, so located, among which every copy is (a partition's rows, read to
    recompute it), instead of the view.
    """
    columns = [quote(c) for c in run.columns]
    same = [F.col(f"v.{c}").eqNullSafe(F.col(f"l.{c}")) for c in columns]
    if read is None:
        read = run.spark.sql(f"SELECT * FROM {located(run.spark, run.view.name, read_version(run))}")
    view = read.where(within)
    reached = view.alias("v").join(F.broadcast(losing.alias("l")), same, "left_semi").cache()
    run.cached.append(reached)
    return reached


def read_version(run: Run) -> int | None:
    """The view's version the refresh started from (None if it has no table yet)."""
    return run.view.table.version if run.view.table else None


def located(spark: SparkSession, view: str, version: int | None) -> str:
    """SQL: the view's rows at `version` (the latest with None), each with its file (FILE) and
    row index in it (ROW), as the commit locates the rows it marks deleted (`Write.reached`).
    The row index is a field of the file metadata column, which Spark renames (`__metadata`)
    when the view has a column of its name: its name is found by analysing the relation.

    Example: located(spark, "`db`.`v`", 7) ==
        "(SELECT *, input_file_name() AS __mv_file, `_metadata`.row_index AS __mv_row FROM `db`.`v` VERSION AS OF 7)"
    """
    relation = f"{view} VERSION AS OF {version}" if version is not None else view
    rows = spark.table(view) if version is None else spark.sql(f"SELECT * FROM {relation}")
    metadata = rows.select(rows.metadataColumn("_metadata")).columns[0]
    return f"(SELECT *, input_file_name() AS {FILE}, {quote(metadata)}.row_index AS {ROW} FROM {relation})"


# Delta keeps statistics on a table's first 32 columns (delta.dataSkippingNumIndexedCols).
STATISTICS_COLUMNS = 32


@dataclass(frozen=True)
class Range:
    """One column's values over some rows: least and greatest (as text that converts back exactly:
    a TIMESTAMP as its microseconds; None if every row has NULL), and whether some row has NULL."""
    low: str | None
    high: str | None
    nulls: bool


def value_ranges(rows: DataFrame) -> dict[str, Range] | None:
    """Each column of an ordered type's `Range` over `rows` (numbers but floating point, dates,
    times, strings; of the first STATISTICS_COLUMNS, which Delta keeps statistics of), None for no
    rows. One job over `rows`.

    Example: rows (7, 'a'), (9, NULL) give {'auction': Range('7', '9', False), 'seller': Range('a', 'a', True)}
    """
    fields = [f for f in rows.schema.fields[:STATISTICS_COLUMNS] if ordered(f.dataType.simpleString())]
    def value(f):  # one that converts to a string and back exactly: a TIMESTAMP (zoned) as its microseconds
        column = F.col(quote(f.name))
        return F.unix_micros(column) if f.dataType.simpleString() == "timestamp" else column
    found = rows.agg(F.count(F.lit(1)), *[a for f in fields for a in (
        F.min(value(f)).cast("string"), F.max(value(f)).cast("string"), F.count(quote(f.name)))]).first()
    if found[0] == 0:
        return None
    return {f.name: Range(found[1 + 3 * i], found[2 + 3 * i], found[3 + 3 * i] < found[0])
            for i, f in enumerate(fields)}


def value_range(rows: DataFrame, ranges: dict[str, Range] | None = None) -> str:
    """A condition every copy of `rows` meets, which Delta can skip files by: each column of an
    ordered type between the rows' least and greatest value (`value_ranges`, or those `ranges`
    already found), or NULL where some row has none. FALSE for no rows.
    The rows a counted merge takes copies from (`counted`), the partitions a change reaches
    (row_refresh.refresh_partitions), the groups recomputed (window_refresh.recompute_groups).

    Example: rows (7, 'a'), (9, NULL) give
        (`auction` >= CAST('7' AS bigint) AND `auction` <= CAST('9' AS bigint))
        AND (`seller` IS NULL OR (`seller` >= 'a' AND `seller` <= 'a'))
    """
    found = value_ranges(rows) if ranges is None else ranges
    if found is None:
        return "FALSE"
    types = {f.name: f.dataType.simpleString() for f in rows.schema.fields}
    conditions = []
    for column, r in found.items():
        name, t = quote(column), types[column]
        literal = (lambda v: f"timestamp_micros({v})") if t == "timestamp" else \
            (lambda v: sql_string(v)) if t == "string" else (lambda v: f"CAST({sql_string(v)} AS {t})")
        between = f"({name} >= {literal(r.low)} AND {name} <= {literal(r.high)})" if r.low is not None else None
        nulls = f"{name} IS NULL" if r.nulls else None
        conditions.append(f"({nulls} OR {between})" if nulls and between else nulls or between)
    return " AND ".join(conditions) or "TRUE"


def kept_to(relation: str, condition: str | None) -> str:
    """`relation` (SQL's FROM: a table, a source as of a version, a parenthesized query) with only
    its rows that meet `condition` (its own columns, unqualified), all of them with None.

    Example: kept_to("bids", "auction >= 7") == "(SELECT * FROM bids WHERE auction >= 7)"
    """
    return relation if condition is None else f"(SELECT * FROM {relation} WHERE {condition})"


def ordered(type_name: str) -> bool:
    """Whether equal values of the type are equal bytes and Delta's statistics order them as SQL
    does: not floating point (NaN, -0.0), booleans or nested types, nor a collated string."""
    return type_name in ("tinyint", "smallint", "int", "bigint", "date", "timestamp", "timestamp_ntz", "string") \
        or type_name.startswith("decimal(")


def _copies(run: Run, rows: DataFrame, within: str | None = None, settled: bool = False) -> Write:
    """The merge of `rows`, distinct rows of the view's columns each with OP true when its copies
    in the view are to be deleted and N, the copies to insert; `within`: a condition the view's
    rows to delete meet, so Delta skips its other files. `settled`: `rows` read the view (copies
    counted), so they are computed once, here, and cached: the commit reads them twice (to find
    the view rows they reach, then to classify those) and, knowing them small, broadcasts them."""
    columns = run.columns
    ops = F.concat(F.when(F.col(OP), F.array(F.lit("region"))).otherwise(F.array().cast("array<string>")),
                   F.array_repeat(F.lit("insert"), F.col(N).cast("int")))
    source = rows.select(*[quote(c) for c in columns], F.explode(ops).alias(OP))
    if settled:
        source = run.held(source)
    on = " AND ".join([f"s.{OP} = 'region'"] + [f"t.{quote(c)} <=> s.{quote(c)}" for c in columns])
    return delete_matched_insert_rest(run, source, on, within=within)


def start_range(run: Run, span: tuple[int, int] | None, alias: str | None) -> str | None:
    """A window_start range condition on `alias`'s rows (the view's own with None), so Delta
    skips the view's other files."""
    if span is None:
        return None
    start, t = (f"{alias}." if alias else "") + quote(run.info.window_start), run.time_type
    return f"{start} >= {time_sql(span[0], t)} AND {start} <= {time_sql(span[1], t)}"
