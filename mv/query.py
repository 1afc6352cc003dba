"""What a view's query means, as Spark's analysed plan says (the extension's mv_describe).

Example:
    >>> info = describe(spark, "SELECT item, window_start, window_end, count(*) AS n "
    ...                        "FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '1' HOUR) "
    ...                        "GROUP BY item, window_start, window_end")
    >>> info.shape, info.group_by, info.window_start
    ('window', ['item', 'window_start', 'window_end'], 'window_start')
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from mv import errors
from mv.maintainer import extension
from mv.names import TableName


@dataclass(frozen=True)
class Window:
    """One window function of the query: kind, durations in microseconds, time column, sources,
    and whether the zone its windows align in keeps one offset from UTC (`fixed_offset`: so every
    window lasts its size; TIMESTAMP_NTZ aligns on its own value, which counts as fixed)."""
    kind: str
    size: int
    step: int
    offset: int
    time_zone: str | None
    time_column: str
    partition_by: list[str]
    sources: list[str]
    fixed_offset: bool = False
    # Its time column is a source's own, passed through or renamed, not computed (QueryDescription.ownTime):
    # a changed source row falls in the windows of its own value
    own_time: bool = False

    def call(self, table: str) -> str:
        """This window function applied to `table`, as SQL."""
        def interval(micros: int) -> str:
            return f"make_dt_interval(0, 0, 0, {micros // 1_000_000}.{micros % 1_000_000:06d})"
        data = f"TABLE({table})"
        if self.kind == "SESSION":
            keys = f" PARTITION BY ({', '.join(self.partition_by)})" if self.partition_by else ""
            return f"SESSION({data}{keys}, DESCRIPTOR(`{self.time_column}`), {interval(self.size)})"
        args = {"TUMBLE": [self.size], "HOP": [self.step, self.size], "CUMULATE": [self.step, self.size]}
        sizes = ", ".join(interval(m) for m in args[self.kind] + [self.offset])
        return f"{self.kind}({data}, DESCRIPTOR(`{self.time_column}`), {sizes})"

    def bounds(self, earliest: int, latest: int, shift: int = 0) -> tuple[int, int]:
        """TUMBLE's or HOP's earliest window start over a row at `earliest` and latest window end
        over one at `latest` (microseconds), its windows aligned on a clock `shift` microseconds
        ahead of theirs (the fixed offset of its zone from UTC: `fixed_offset`): the windows of
        those two rows found by rule 2 of docs/design.md, start(t) = t - floorMod(t - offset, step)
        on that clock, and a HOP row's earlier windows every step back while they still hold it.
        The extension's WindowBounds computes the same in the query (tests/test_window_bounds.py).

        Example: HOP(1 minute, 5 minutes) over rows at 00:07:30 and 00:09:10 (UTC): from 00:03 to 00:14.
            >>> M = 60_000_000
            >>> Window("HOP", 5 * M, M, 0, None, "ts", [], []).bounds(450_000_000, 550_000_000)
            (180000000, 840000000)
        """
        def last_start(t: int) -> int:  # on the zone's clock
            return t + shift - (t + shift - self.offset) % self.step
        first = last_start(earliest)
        back = -(-(first + self.size - earliest - shift) // self.step) - 1  # windows before it still holding `earliest`
        return first - back * self.step - shift, last_start(latest) + self.size - shift

    def ends_at(self, t: int, shift: int = 0) -> bool:
        """Whether a TUMBLE or HOP window ends at `t` (microseconds; its windows aligned on a clock
        `shift` microseconds ahead, as in `bounds`).

        Example: TUMBLE(1 minute) windows end on the minute.
            >>> Window("TUMBLE", 60_000_000, 60_000_000, 0, None, "ts", [], []).ends_at(120_000_000)
            True
        """
        return (t + shift - self.offset - self.size) % self.step == 0

    @property
    def copies(self) -> int:
        """How many windows one row falls in at most: HOP's size / slide, CUMULATE's size / step
        (its window of one step, two steps, ...), one for TUMBLE and SESSION.

        Example: CUMULATE(1 hour, 1 day) gives 24.
        """
        return -(-self.size // self.step) if self.kind in ("HOP", "CUMULATE") and self.step else 1


@dataclass(frozen=True)
class Read:
    """One read of a source table by the query (a self-join reads one twice): the table, its name
    in the extension's substitutions (`<table>#<k>`, its k-th read, when the query reads it more than
    once), and whether a change through it flips a join's other rows or regroups an aggregate
    (mv/row_refresh.py's terms)."""
    table: str
    name: str
    flips: bool = False
    regroups: bool = False
    # Regrouped by windows of the read's own time column, or its rows held between bounds of another
    # read's windows (WindowBands.scala): {"time_column": name, "size": micros} (its terms read only
    # the change's time range, give or take that size).
    window: dict | None = None
    # The reads (their indices in QueryInfo.reads) joined to this one on their windows' bounds: its
    # terms read them only around the change's times too (QueryDescription.windowPartners).
    partners: tuple[int, ...] = ()
    # Its change's term carries each row's sign to the output (DeltaRules.signed): both sides of the
    # change in one term, the other sources read once.
    signed: bool = False
    # Its columns an equality of two columns in a join's or filter's condition names (mv_describe's
    # `equated`, in the table's order): its change's terms bound the reads they join by their values
    # (row_refresh._value_bounds).
    equated: tuple[str, ...] = ()
    # The top GROUP BY's keys that are a function of one of its TIMESTAMP columns keeping the time's
    # order (mv_describe's `time_keys`: {"key", "column", "function", "argument"}; mv/time_keys.py):
    # a recomputation of touched groups reads only the time their keys span.
    time_keys: tuple[dict, ...] = ()
    # Its rows reach the top aggregate each on its own (mv_describe's `linear`: projections, filters,
    # UNION branches, TUMBLE/HOP/CUMULATE, inner joins, an outer join's kept side): the query over
    # its change gives the aggregates that change adds or takes away (mv/combine.py's terms).
    linear: bool = False


@dataclass(frozen=True)
class Column:
    """One output column of the query: its name and type, what it carries of the windows
    (window_start, window_end, window_time, session_key) and, for an aggregate, which kind
    (count_star, count, sum, sum_float, min, max, ...; mv/combine.py says which combine)."""
    name: str
    type: str
    window_role: str | None = None
    aggregate: str | None = None


@dataclass(frozen=True)
class QueryInfo:
    shape: str
    sources: list[dict]
    windows: list[Window]
    output: list[Column]
    group_by: list[str] | None
    reasons: list[str]
    combinable: bool = False
    temporary_views: tuple[str, ...] = ()  # read through this session's temporary views (by name)
    # A hash of the SQL views' definitions the query reads (None: it reads none): another one since
    # the last refresh makes a full refresh (plan.py, QUERY_DEFINITION_CHANGED).
    views_fingerprint: str | None = None
    # The planner's steps for a query of rows (mv/jvm/DeltaRules.scala): each operator, top first,
    # with its depth and its delta rule or the reason it has none; EXPLAIN lists them.
    maintenance: tuple[dict, ...] = ()
    # A GROUP BY whose touched groups the change itself gives (the query over each changed source's
    # rows outputs their keys): any keys, any inner joins below it (mv/row_refresh.py).
    keys_by_change: bool = False
    # A GROUP BY over one source, row by row, by its own columns: the touched groups are the change
    # feed rows' keys (mv/window_refresh.py's refresh_groups, which may combine them).
    keys_from_source: bool = False
    # Shape `partitions` (OVER (PARTITION BY ...) at the top: top-N, deduplication): the output
    # columns that carry the partition keys every top OVER shares; the touched partitions are
    # recomputed (mv/row_refresh.py's refresh_partitions).
    partition_by: list[str] | None = None
    # EXPLAIN's operator rows: `maintenance`, or for a query kept window by window (and one that
    # is not, each blocking operator with its reason) the steps of its windows (QueryDescription.scala).
    explained: tuple[dict, ...] = ()

    def located(self, code: str) -> str | None:
        """Where the reason `code` comes from in the query, as EXPLAIN's first operator row with it
        says: the operator and its fragment of the query's text; None when no operator gives it.

        Example: info.located("OVER_NOT_BY_WINDOW") == 'Window (OVER) at "ROW_NUMBER() OVER (PARTITION BY item ...) AS r"'
        """
        step = next((s for s in self.explained if s["reason"] == code), None)
        return None if step is None else step["operator"] + at_fragment(step)

    def column_with_role(self, role: str) -> str | None:
        return next((c.name for c in self.output if c.window_role == role), None)

    @property
    def session_keys(self) -> list[str]:
        """The output columns that carry a SESSION window's partition keys (the extension marks them)."""
        return [c.name for c in self.output if c.window_role == "session_key"]

    @property
    def window_start(self) -> str | None:
        return self.column_with_role("window_start")

    @property
    def window_end(self) -> str | None:
        return self.column_with_role("window_end")

    @property
    def source_tables(self) -> list[str]:
        return [s["table"] for s in self.sources if s.get("table")]

    def columns_of(self, table: str) -> set[str]:
        """Every column of the source `table` (lower-case), as the query's analysis read it: no
        lookup of the table again (a catalog round trip and an analysis, some 20 ms).

        Example:
            >>> describe(spark, "SELECT auction FROM bids").columns_of("`spark_catalog`.`default`.`bids`")
            {'auction', 'bidder', 'price', 'ts'}
        """
        return {c.lower() for s in self.sources if s.get("table") == table for c in s.get("columns") or ()}

    def used_columns(self, table: str) -> list[str] | None:
        """The columns of `table` its reads in the query use (operators' inputs or the output), in
        the table's order; None when unknown (a description from before they were kept, a query
        that is not deterministic).

        Example:
            >>> describe(spark, "SELECT auction, count(*) FROM bids GROUP BY auction").used_columns(
            ...     "spark_catalog.default.bids")
            ['auction']
        """
        reads = [s for s in self.sources if s.get("table") == table]
        if not reads or any(s.get("used") is None for s in reads):
            return None
        used = {c for s in reads for c in s["used"]}
        return [c for c in reads[0].get("columns", []) if c in used]

    @property
    def reads(self) -> list[Read]:
        """Each read of a source table, in the plan's order (mv_describe's sources)."""
        tables = self.source_tables
        seen: dict[str, int] = {}
        reads = []
        read_of = {i: n for n, i in enumerate(i for i, s in enumerate(self.sources) if s.get("table"))}
        for s in (s for s in self.sources if s.get("table")):
            k = seen[s["table"]] = seen.get(s["table"], -1) + 1
            name = s["table"] if tables.count(s["table"]) == 1 else f"{s['table']}#{k}"
            partners = tuple(read_of[i] for i in s.get("window_partners") or () if i in read_of)
            reads.append(Read(s["table"], name, bool(s.get("flips")), bool(s.get("regroups")), s.get("regroup_window"),
                              partners, bool(s.get("signed")), tuple(s.get("equated") or ()),
                              tuple(s.get("time_keys") or ()), bool(s.get("linear"))))
        return reads

    @property
    def window_local(self) -> bool:
        """Whether each row of this query of rows comes from one window's rows: every read of a
        source is under aggregates grouped by a window over its own time column (Read.window), and
        the inner joins above them tie every read to the others by equal window bounds
        (Read.partners, connected). Then the rows of a window without a changed row are the same
        before and after the change, and the change is the query over the sources kept to the
        change's time range, at the new versions, minus the same at the old (row_refresh.window_terms).

        A query that reads one source once is left to the rules of regrouping: they recompute only
        the groups its change reaches, as cheap with one read.

        A read of rows counts as windowed when a join holds its time between two bounds of another
        read's windows (mv/jvm/WindowBands.scala: Nexmark's q7).

        Example: Nexmark's q5 (the bids per auction of a window joined to the window's maximum,
        on the window's bounds) is; either aggregate joined to a table of rows is not.
        """
        reads = self.reads
        if len(reads) < 2 or any(r.window is None for r in reads):
            return False
        reached, todo = {0}, [0]
        while todo:
            for j in reads[todo.pop()].partners:
                if j not in reached:
                    reached.add(j)
                    todo.append(j)
        return len(reached) == len(reads)

    @property
    def upstream_views(self) -> list[str]:
        """The sources that are materialized views themselves."""
        return [s["table"] for s in self.sources if s.get("table") and s.get("materialized_view")]


def quote(name: str) -> str:
    """`name` as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def micros_sql(expr: str, data_type: str) -> str:
    """A TIMESTAMP, TIMESTAMP_NTZ or BIGINT epoch-milliseconds expression as microseconds since the epoch."""
    if data_type == "bigint":
        return f"(({expr}) * 1000)"
    if data_type == "timestamp_ntz":
        return f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {expr})"
    return f"unix_micros({expr})"


def time_sql(micros: int | str, data_type: str) -> str:
    """A value of the time column's type, `micros` after the epoch (a constant stays foldable, so it
    prunes scans). Epoch milliseconds round down: every bound compared with them is a whole millisecond."""
    if data_type == "bigint":
        return f"{micros // 1000}L" if isinstance(micros, int) else f"CAST(floor(({micros}) / 1000D) AS BIGINT)"
    if data_type == "timestamp_ntz":
        return f"timestampadd(MICROSECOND, {micros}, TIMESTAMP_NTZ'1970-01-01 00:00:00')"
    return f"timestamp_micros({micros})"


def utc_datetime(micros: int) -> datetime:
    """Microseconds since the epoch (a watermark, a history row's start) as an aware UTC datetime."""
    return datetime.fromtimestamp(micros / 1_000_000, timezone.utc)


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
        reason = next((line.strip() for line in str(e).splitlines() if line.strip()), "Spark cannot read it")
        raise errors.interval(text, reason.rstrip(".")) from None
    if not hasattr(value, "total_seconds") or value.total_seconds() < 0:
        raise errors.interval(text, "it is not a non-negative day-time interval")
    return round(value.total_seconds() * 1_000_000)


def at_fragment(step: dict) -> str:
    """` at "<text>"`: an operator step's fragment of the query's text (DeltaRules.fragment); '' without one."""
    return f' at "{step["fragment"]}"' if step.get("fragment") else ""


def describe(spark: SparkSession, query: str) -> QueryInfo:
    """Analyse `query` in Spark and describe it; raises Spark's AnalysisException if it does not analyse."""
    if (jvm := extension(spark)) is not None:  # this process is the driver: no SQL statement around it
        raw = json.loads(jvm.QueryDescription.describeJson(spark._jsparkSession, query))
    else:
        raw = json.loads(spark.sql(f"SELECT description FROM mv_describe({sql_string(query)})").first()[0])
    for source in raw["sources"]:  # the plan's names, each part quoted: as the name type renders them
        source["table"] = source["table"] and TableName.parse(source["table"])
    for w in raw["windows"]:
        w["sources"] = [TableName.parse(s) for s in w["sources"]]
    windows = [Window(**{k: w[k] for k in Window.__dataclass_fields__}) for w in raw["windows"]]
    output = [Column(c["name"], c["type"], c.get("window_role"), c.get("aggregate")) for c in raw["output"]]
    return QueryInfo(raw["shape"], raw["sources"], windows, output, raw["group_by"], raw["reasons"],
                     raw.get("combinable", False), tuple(raw.get("temporary_views", ())),
                     raw.get("views_fingerprint"), tuple(raw.get("maintenance") or ()),
                     raw.get("keys_by_change", False), raw.get("keys_from_source", False), raw.get("partition_by"),
                     tuple(raw.get("explained") or ()))
