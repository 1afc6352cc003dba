"""The sources' changes since a view's last refresh, from Delta's Change Data Feed, signed: +1 for
an insert or update post-image, -1 for a delete or update pre-image.

Example:
    >>> frames, counted = change_feed.read(run)   # {source table: its signed changes}, cached; rows by sign
"""
from __future__ import annotations

import re
from datetime import date, timedelta
from functools import reduce
from typing import NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mv import writes
from mv.internal_columns import NET_KEY, SIGN
from mv.maintainer import extension
from mv.plan import by_windows
from mv.query import quote
from mv.run import Run
from mv.settings import session_settings
from mv.state import RefreshState

# A change of at most this many bytes (its files in the log) is cached uncompressed: building the
# compressed cache of a 450,000-row change took 2.1 s, the uncompressed one 0.9 s (the read itself
# about as long), and every later read of it is as fast; above this, memory matters more than time.
UNCOMPRESSED_CACHE_BYTES = 64 * 1024 * 1024
# A change that only appends rows, read as a scan of the files it added, of at least this many bytes
# is left uncached under a view refreshed window by window (`_read_again`).
READ_AGAIN_FROM_BYTES = 1024 * 1024
COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"

# The error conditions in which Delta says the change feed of a version range can no longer be
# read (not recorded, its log or files cleaned up, vacuumed).
CHANGE_FEED_GONE = {"DELTA_MISSING_CHANGE_DATA", "DELTA_VERSIONS_NOT_CONTIGUOUS", "DELTA_VERSION_NOT_FOUND",
                    "DELTA_TRUNCATED_TRANSACTION_LOG", "DELTA_LOG_FILE_NOT_FOUND", "DELTA_FILE_NOT_FOUND",
                    "FAILED_READ_FILE.FILE_NOT_EXIST"}


# The error conditions in which Delta says the change feed of a version range spans a schema
# change it cannot read across (a dropped or renamed column of a column-mapped table, a type change).
SCHEMA_CHANGED = {"DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA",
                  "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE",
                  "FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH"}


def condition(error: Exception) -> str | None:
    """`error`'s error condition: PySpark's own, or, for a Java error PySpark passes through
    unconverted (a Py4JJavaError from a job, e.g. a vacuumed file), the first `[CONDITION]` of its text.

    Example:
        >>> condition(py4j_error)      # "...SparkException: [FAILED_READ_FILE.FILE_NOT_EXIST] ..."
        'FAILED_READ_FILE.FILE_NOT_EXIST'
    """
    if hasattr(error, "getCondition"):
        return error.getCondition()
    found = re.search(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]", str(error))
    return found.group(1) if found else None


def is_gone(error: Exception) -> bool:
    """Whether `error` is Delta saying a change feed can no longer be read, by its error condition."""
    return condition(error) in CHANGE_FEED_GONE


def is_schema_change(error: Exception) -> bool:
    """Whether `error` is Delta saying a change feed cannot be read across a schema change."""
    return condition(error) in SCHEMA_CHANGED


class SourceReplaced(Exception):
    """A source's Delta table id is not the one the previous refresh read: its versions start anew."""


def check_sources(run: Run) -> None:
    """Raise SourceReplaced when a source's table id is not the one the previous refresh read:
    the changes read are not changes of what the view holds."""
    if any(run.previous.source_ids.get(s, i) != i for s, i in run.source_ids.items()):
        raise SourceReplaced


class ChangeFeedGone(Exception):
    def __init__(self, source: str, version: int):
        super().__init__(source)
        self.source, self.version = source, version


class SchemaChanged(Exception):
    """A source's schema changed since the view's last refresh: its changes are not read across it."""

    def __init__(self, source: str):
        super().__init__(source)
        self.source = source


def schema_changed(previous: RefreshState | None, columns: dict[str, dict[str, str] | None]) -> str | None:
    """The first source one of whose columns the previous refresh recorded (`columns`, each
    source's delta_tables.Table.column_types) is gone or has another type: the change feed cannot
    be read across that. An added column is no such change: the feed reads on, and the query's
    columns stay as they were. None when none changed or none was recorded (a state from before
    they were kept: Delta's errors while reading are the fallback, as they are for an added and
    dropped column under column mapping).

    Example:
        >>> schema_changed(state_with({"bids": {"price": "int"}}), {"bids": {"price": "double"}})
        'bids'
    """
    recorded = previous.source_schemas if previous else {}
    for source, now in columns.items():
        before = recorded.get(source)
        if isinstance(before, dict) and now is not None and any(now.get(c) != t for c, t in before.items()):
            return source
    return None


def none(run: Run, source: str) -> DataFrame:
    """No changes of `source`, in the shape `read` gives them (a refresh the clock alone moves)."""
    return (run.spark.sql(f"SELECT * FROM {run.source(source)} WHERE false")
            .withColumn("_change_type", F.lit("insert")).withColumn("_commit_version", F.lit(0).cast("long"))
            .withColumn("_commit_timestamp", F.current_timestamp()).withColumn(SIGN, F.lit(1)))


# The change feed's own columns, kept with every change beside the query's.
FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def read(run: Run) -> tuple[dict[str, DataFrame], dict[str, dict[int, int]]]:
    """Each source's changes since the version last processed, signed: +1 insert/postimage, -1
    delete/preimage, with only the columns the query uses (`kept_columns`; the others read as typed
    NULLs, so the change keeps the source's columns). A source whose change may hold updates
    (`run.updated`) has those the query cannot see netted away (`netted`). Cached (the refresh
    reads them several times), uncompressed when small, the caches added to `run.cached`, but for
    a large append under a windowed view (`_read_again`). And the rows of each change that the
    netting's check counted by sign (`Netted.signs`), which `signs` need not count again.

    Reading only the used columns: bench.flink's q7 (2 of bids' 6 columns) read and grouped a
    500,000-bid change in 0.68 s, against 1.1 s with all of them. Not caching an append: two
    identical views over 2M rows (TUMBLE 10 s, max and count), one each way, alternating over five
    appends of 250,000 rows, refreshed in 0.94 of the cached twin's time (medians of the pairs)
    under EMIT ON UPDATE, whose recomputation reads the source, and in 0.85 under EMIT ON WINDOW
    CLOSE, which reads the change again to add it to the open windows."""
    changes, counted = {}, {}
    small = run.sizes.change is not None and run.sizes.change <= UNCOMPRESSED_CACHE_BYTES
    for source in run.targets:
        frame, appended = _change(run, source)
        if frame is None:
            continue
        kept = kept_columns(run, source, frame.columns)
        narrow = frame.select(*[quote(c) for c in kept], *FEED_COLUMNS, SIGN) if kept is not None else frame
        if appended and _read_again(run):
            changes[source] = _widened(narrow, frame) if kept is not None else narrow
            continue
        with session_settings(run.spark, {COMPRESSED: str(not small).lower()}):
            cached = narrow.cache()   # the cache's form is fixed when it is declared
            net = _netted(run, source, cached)
            if net.frame is not None:
                raw, cached = cached, net.frame.cache()
                cached.count()   # built from the raw change, which then goes
                raw.unpersist()
        run.cached.append(cached)
        if _late_from_kept(run, source):
            run.whole[source] = (cached, net.clean)
        if net.signs is not None:
            counted[source] = net.signs
        changes[source] = cached if kept is None else _widened(cached, frame)
    return changes, counted


def _read_again(run: Run) -> bool:
    """Whether a change that only appends (`_scanned`: a scan of the files it added) is read again
    by each step of the refresh rather than cached: under a view refreshed window by window
    (plan.by_windows), from READ_AGAIN_FROM_BYTES of change. The scan costs less than building the
    cache there (measured from 250,000 rows, about 3 MB); smaller changes, and the other shapes,
    whose terms read the change more often, keep the cache (unmeasured)."""
    return run.sizes.change is not None and run.sizes.change >= READ_AGAIN_FROM_BYTES and by_windows(run.info)


def _widened(narrow: DataFrame, frame: DataFrame) -> DataFrame:
    """`narrow`, some of the columns of `frame`, with `frame`'s others as typed NULLs, in its order."""
    return narrow.select(*[F.col(quote(f.name)) if f.name in narrow.columns
                           else F.lit(None).cast(f.dataType).alias(f.name) for f in frame.schema])


def whole_rows(run: Run, source: str, where: str | None = None, net: bool = False) -> DataFrame | None:
    """`source`'s signed change with every column, only its rows that `where` (SQL over columns the
    query uses, such as its time column) keeps, and with `net` netted (`netted`, whatever share
    cancels); None when it has no new version. Taken from the change `read` cached, where it keeps
    every column for this (`_late_from_kept`), and not netted again when no update image of it
    cancels (`netted`); else read from the change feed. Filtered first, the netting's aggregation
    reads those rows alone: an update's images that cancel agree on every used column, so a filter
    on them keeps both or neither.

    Example: the rows of a change that may be late under a watermark of 09:00:
        >>> whole_rows(run, "bids", "unix_micros(date_time) <= 1700038800000000")
    """
    if (kept := run.whole.get(source)) is not None:
        frame, clean = kept
        return _kept_rows(run, source, frame, where, net and not clean)
    frame = _signed(run, source)
    return None if frame is None else _kept_rows(run, source, frame, where, net)


def late_rows(run: Run, source: str, frame: DataFrame) -> DataFrame:
    """`frame`, rows of `source`'s signed change (with its change columns) that the late table is to
    keep, netted whatever share cancels: an update that changes no column the query reads is no
    late row, whether or not `read` netted the change.

    Example: a late bid's price set to what it was: neither of its images is a late row.
    """
    return _kept_rows(run, source, frame, None, True)


def _kept_rows(run: Run, source: str, frame: DataFrame, where: str | None, net: bool) -> DataFrame:
    """`frame`, `source`'s signed change, filtered by `where` and then, with `net`, netted (`whole_rows`)."""
    frame = frame.where(where) if where else frame
    netted_frame = _netted(run, source, frame, always=True).frame if net else None
    return netted_frame if netted_frame is not None else frame


def _netted(run: Run, source: str, frame: DataFrame, always: bool = False) -> Netted:
    """`frame`, `source`'s signed change, netted (`netted`; `always`: whatever share cancels) when
    the source may hold updates (`run.updated`) and the query's used columns are known (a change
    that only appends has no update image to cancel)."""
    if source not in run.updated:
        return Netted(None, True, None)
    used = run.info.used_columns(source)
    return netted(frame, used, always) if used is not None else Netted(None, False, None)


def kept_columns(run: Run, source: str, columns: list[str]) -> list[str] | None:
    """The columns of `source` (its change's `columns`) a refresh keeps of its change: those the
    query uses, in the source's order; None for all of them: the used columns unknown (a query that
    is not deterministic), all used, or a SESSION view, whose late rows come from the kept change
    (session_lateness.split) and must be whole, or a view refreshed window by window whose late
    rows come from it too (`_late_from_kept`).

    Example:
        >>> kept_columns(run_of("SELECT max(price) ... FROM TUMBLE(TABLE bids, ...)"), "bids", bid_columns)
        ['price', 'date_time']
    """
    used = run.info.used_columns(source)
    if used is None or any(w.kind == "SESSION" for w in run.info.windows) or _late_from_kept(run, source):
        return None
    source_columns = [c for c in columns if _of_source(c)]
    kept = [c for c in source_columns if c in used]
    return kept if len(kept) < len(source_columns) else None


def _of_source(column: str) -> bool:
    """Whether a column of a signed change (`read`'s) is the source's, not the feed's or SIGN."""
    return column not in FEED_COLUMNS and column != SIGN


def _late_from_kept(run: Run, source: str) -> bool:
    """Whether a view refreshed window by window takes the late rows of `source`'s change from the
    change as `read` keeps it (every column: the late table keeps whole rows), not from the change
    feed read again (`whole_rows`): under a watermark, for a change that may retract (`run.updated`),
    read through the change feed's relation (its change files), where a second read costs most.

    Measured (Nexmark's q7 under EMIT ON WINDOW CLOSE at 10M bids, repriced and withdrawn bids):
    writing the late rows of a change round read the feed twice more, 1.0-1.2 s of a 3-3.5 s refresh.
    """
    return (bool(run.view.definition.watermark_column) and run.previous is not None
            and run.previous.watermark is not None and source in run.updated and by_windows(run.info))


def _signed(run: Run, source: str) -> DataFrame | None:
    """`source`'s change feed from the version after the one last processed to the refresh's
    target, each row signed (SIGN); None when it has no new version."""
    return _change(run, source)[0]


def versions(run: Run, source: str) -> tuple[int, int]:
    """The first and last version of `source` whose change this refresh reads: the one after the
    version the previous refresh processed, and the refresh's target (none when the first is past it)."""
    return run.previous.sources.get(source, -1) + 1, run.targets[source]


def _change(run: Run, source: str) -> tuple[DataFrame | None, bool]:
    """`_signed`'s change, and whether it is read as the files its versions added (`_scanned`)."""
    start, target = versions(run, source)
    if start > target:
        return None, False
    appends_only = source not in run.updated
    frame = _scanned(run, source, start, target, appends_only)
    if frame is not None and appends_only:
        return frame.withColumn(SIGN, F.lit(1)), True
    if frame is None:
        frame = (run.spark.read.format("delta").option("readChangeFeed", "true")
                 .option("startingVersion", start).option("endingVersion", target).table(source))
    return frame.withColumn(SIGN, F.when(F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(-1)), False


def _scanned(run: Run, source: str, start: int, target: int, appends_only: bool) -> DataFrame | None:
    """`source`'s versions `start` to `target` with the change feed's rows and columns, those that
    only append read as the files they added, not through the change feed's relation (half the
    time for a 500,000-row append; mv/jvm/AppendedChanges.scala): all of them when the change
    `appends_only` (`frame`), else each run of the others through the change feed (`partly`:
    versions 8 INSERT, 9 UPDATE, 10 DELETE: 8's files scanned, 9-10's change feed). None when that
    does not apply (another action, a schema change, no appending version), and over Spark
    Connect: the change feed reads them all."""
    jvm = extension(run.spark)
    if jvm is None:
        return None
    read = jvm.AppendedChanges.frame if appends_only else jvm.AppendedChanges.partly
    jdf = read(run.spark._jsparkSession, source, start, target)
    return DataFrame(jdf, run.spark) if jdf is not None else None


def appended_span(run: Run, source: str, column: str) -> tuple[int, int, int, int, int] | None:
    """What the Delta statistics of the files `source`'s change added say of its `column`, without
    reading them (mv/jvm/AppendedChanges.scala's `span`): its rows, those where the column is not
    null, the column's least and greatest value as Delta wrote them (a TIMESTAMP's in
    microseconds, truncated to the millisecond), and 1 when that greatest value is exact, else 0:
    for a view with a watermark, a TIMESTAMP's greatest microsecond is read from the Parquet
    footers of the files holding it, when they keep it (INT64 microseconds, the local session's
    encoding). None when the change is not an append read as its files (`_scanned`), or a file's
    statistics lack one of them (a table that collects none for the column:
    delta.dataSkippingNumIndexedCols), and over Spark Connect.

    Example: a 20,000-row append of one row a second, the last at 19.999999 s:
        >>> appended_span(run, "events", "ts")
        (20000, 20000, 1700000000000000, 1700000019999999, 1)
    """
    jvm = extension(run.spark)
    start, target = versions(run, source)
    if jvm is None or source in run.updated or start > target:
        return None
    if (source, column) not in run.spans:  # one read of the log per column and refresh
        exact = bool(run.view.definition.watermark_column)  # only a watermark needs the microsecond
        span = jvm.AppendedChanges.span(run.spark._jsparkSession, source, start, target, column, exact)
        run.spans[(source, column)] = None if span is None else tuple(int(v) for v in span)
    return run.spans[(source, column)]


# The types whose least and greatest values `appended_span` reads from Delta's statistics.
_SPANNED = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType, T.TimestampType)
_EPOCH = date(1970, 1, 1)  # a DATE's statistics read as days since


def appended_ranges(run: Run, source: str, schema: T.StructType) -> dict[str, writes.Range] | None:
    """writes.value_ranges of `source`'s change over the columns of `schema` (some of the
    source's), from the statistics of the files an append added (`appended_span`), without a
    job; None when those do not tell (not such an append, a column of another ordered type, a
    file without statistics of it, no rows). A TIMESTAMP's bounds are widened by a millisecond,
    the precision Delta writes them in: a condition every row meets is all they are used for.

    Why: a 1,000-bid append to a view of bids joined to auctions ran a job of 0.12 s for its
    auction ids' range alone (bench.joins --view rows).

    Example: a 1,000-bid append numbered from 1,000,000:
        >>> appended_ranges(run, "bids", changes["bids"].select("auction").schema)
        {'auction': Range(low='1000000', high='1000999', nulls=False)}
    """
    ranges = {}
    for field in schema.fields[:writes.STATISTICS_COLUMNS]:
        if not writes.ordered(field.dataType.simpleString()):
            continue  # no range, as value_ranges gives none
        span = appended_span(run, source, field.name) if isinstance(field.dataType, _SPANNED) else None
        if span is None or span[0] == 0:
            return None
        rows, valued, low, high, _ = span
        if isinstance(field.dataType, T.DateType):
            low, high = (str(_EPOCH + timedelta(days=d)) for d in (low, high))
        elif isinstance(field.dataType, T.TimestampType):
            low, high = low - 1000, high + 999
        bounds = (str(low), str(high)) if valued else (None, None)
        ranges[field.name] = writes.Range(*bounds, nulls=valued < rows)
    return ranges


def appended_rows(run: Run, source: str, frame: DataFrame) -> int | None:
    """How many rows `source`'s change (`frame`, as `read` gives it) holds, from the statistics of
    the files an append added (`appended_span` of its first column of a type that reads), without
    a job; None when those do not tell."""
    column = next((f.name for f in frame.schema.fields[:writes.STATISTICS_COLUMNS]
                   if isinstance(f.dataType, _SPANNED) and _of_source(f.name)), None)
    span = appended_span(run, source, column) if column is not None else None
    return None if span is None else span[0]


# Types whose values Spark groups exactly as the query tells them apart. Not floating point (-0.0
# and 0.0 group together: compared as text), collated strings ('A' and 'a' may), nor nested types.
_EXACT = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType, T.DateType,
          T.TimestampType, T.TimestampNTZType, T.BinaryType)


# Netting rebuilds the change's cache without the cancelled rows (Nexmark's q2, a 21,035-row
# change round: 0.8 s to drop 2 rows): it is worth that only when this share of the change cancels.
NET_SHARE = 0.05


class Netted(NamedTuple):
    """`netted`'s answer: the change without its cancelling update images (None: left as it was),
    whether no image of what is left cancels (none did, or they are dropped: no part of it needs
    netting again, `whole_rows`), and what is left counted by sign (None: not counted)."""
    frame: DataFrame | None
    clean: bool
    signs: dict[int, int] | None


def netted(frame: DataFrame, used: list[str], always: bool = False) -> Netted:
    """`frame`'s signed changes without the updates the query cannot see: the update images of one
    commit that agree on every column the query reads (`used`) and count as many pre-images as
    post-images cancel, and each refresh path then has only the rows that change what it computes.
    Its frame is None (the change left as it is) when fewer than NET_SHARE of the rows cancel (one
    aggregation over the change tells; with `always`, none), or when some used column's values
    cannot be compared exactly (`_EXACT`; floating point as text). The aggregation also counts
    the rows by sign, before and so after the cancelled images go (each cancelled group is as many
    +1 as -1 rows): `read` hands the counts on, so `signs` runs no job of its own for that change
    (0.14-0.19 s a changed source of Nexmark's q3 at 1M bids).
    The rows kept keep their partitions: the cancelled images are dropped by a broadcast anti-join.

    Example: `UPDATE bids SET price = price + 1` under a view of each auction's bids per window
    (Nexmark's q5 reads auction and dateTime): none of the update's rows remain.
    """
    keys = [F.col("_commit_version")]
    for name in used:
        kind = frame.schema[name].dataType
        if isinstance(kind, (T.FloatType, T.DoubleType)):
            keys.append(F.col(quote(name)).cast("string"))
        elif isinstance(kind, _EXACT) or kind.simpleString() == "string":
            keys.append(F.col(quote(name)))
        else:
            return Netted(None, False, None)
    update = F.col("_change_type").startswith("update_")
    named = [f"{NET_KEY}{i}" for i in range(len(keys))]
    # Rows other than update images fall in one group of their own (every key null), counted too.
    groups = (frame.groupBy(update.alias(NET_KEY), *[F.when(update, k).alias(n) for k, n in zip(keys, named)])
              .agg(F.sum(SIGN).alias(SIGN), F.count(F.lit(1)).alias("rows")))
    ends = F.col(NET_KEY) & (F.col(SIGN) == 0)
    rows, cancelling, total = groups.agg(F.sum("rows"), F.sum(F.when(ends, F.col("rows"))), F.sum(SIGN)).first()
    rows, cancelling, total = rows or 0, cancelling or 0, total or 0
    plus, minus = (rows + total) // 2, (rows - total) // 2  # each row counts +1 or -1
    if not cancelling or (cancelling < NET_SHARE * rows and not always):
        return Netted(None, not cancelling, _by_sign(plus, minus))
    cancelled = groups.where(ends).select(*named)
    same = reduce(lambda a, b: a & b, [k.eqNullSafe(F.col(n)) for k, n in zip(keys, named)])
    return Netted(frame.join(F.broadcast(cancelled), update & same, "left_anti"), True,
                  _by_sign(plus - cancelling // 2, minus - cancelling // 2))


def _by_sign(plus: int, minus: int) -> dict[int, int]:
    """Rows counted by sign as `signs` gives them: a sign no row has left out."""
    return {sign: n for sign, n in ((1, plus), (-1, minus)) if n}


def signs(run: Run, source: str, frame: DataFrame) -> dict[int, int]:
    """How many rows of `source`'s signed change `frame` (`read`'s) count +1 and -1: an append's
    from its files' statistics (`appended_rows`; a job of 0.15-0.18 s for 1,000 bids before),
    else one Spark job.

    Example:
        >>> signs(run, "bids", changes["bids"])
        {1: 1000, -1: 20}
    """
    if (rows := appended_rows(run, source, frame)) is not None:
        return _by_sign(rows, 0)
    return {sign: n for sign, n in frame.groupBy(SIGN).count().collect()}
