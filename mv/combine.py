"""Combining a group's row in the view with the changes' own aggregates, instead of recomputing it.

For a view whose query is one GROUP BY over one source, with count, sum, min and max as its
columns (mv_describe says `combinable`), the view's own query run over just the inserted rows (I)
and over just the retracted rows (R) gives, per group, what changed. The new row is then

    count:  old + I - R                          (always exact)
    sum:    old + I - R                          (integral and decimal sums: exact)
    min:    least(old, I)                        (unless R retracted a value <= old: recompute)
    max:    greatest(old, I)                     (unless R retracted a value >= old: recompute)

and a group whose count(*) falls to 0 is deleted. Where the old row alone cannot say the answer
(a retracted extreme; a sum whose every non-NULL value may be gone; a group with retractions and
no count(*) to tell whether it emptied), the group is marked NEEDS and the caller recomputes
it from the source. Inserts alone never need a recomputation: `added` then folds any number of
old rows and the inserts' aggregates of a group in one aggregation (the open windows an EMIT ON
WINDOW CLOSE view keeps, mv/open_windows.py).

Example:
    >>> rows, _ = combine(spark, Combination("hourly", query, "bids", "changes", info.output, ["item", ...]), [])
    >>> rows.filter(f"NOT {NEEDS} AND NOT {EMPTY}")   # the groups' new rows, ready to MERGE
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from mv.internal_columns import EMPTY, FILE, NEEDS, PRESENT, ROW, SIDE, SIGN, TOUCHED
from mv.query import Column, QueryInfo, quote, sql_string
from mv.writes import located


@dataclass(frozen=True)
class Combination:
    """What to combine: the view, its query and single source, the signed changes' temp view, the
    output columns (mv_describe's, with their `aggregate` kinds) and the row key. `partials_filter`
    keeps only the groups that may change (e.g. windows that are not final); `view_filter` bounds
    the view rows read (so Delta skips files); `reached_version`: `view` is the view's table, to
    read at this version, its rows located for the merge (`combine`)."""
    view: str
    query: str
    source: str
    changes: str
    output: list[Column]
    keys: list[str]
    partials_filter: str | None = None
    view_filter: str | None = None
    reached_version: int | None = None
    # The inserts' and the retractions' aggregates, one row per group each (`by_terms`: parenthesized
    # queries, which the caller caches), instead of the query over `changes` in place of `source`.
    terms: tuple[str, str] | None = None


def combinable(info: QueryInfo, sessions: bool = False) -> bool:
    """Whether the query's changed groups can be combined from their view rows and the changes:
    one source, combinable aggregates, no sessions (whose extent a change can alter) unless
    `sessions` (the open sessions mv/open_windows.py keeps fold under inserts alone)."""
    return _exact(info, sessions) and len(info.sources) == 1


def combinable_by_terms(info: QueryInfo, changed: set[str]) -> bool:
    """Whether the query's changed groups can be combined from their view rows and the aggregates of
    its change's terms (`by_terms`), whatever it joins: combinable aggregates, no sessions, and
    every read of each `changed` table reaching the aggregate row by row (Read.linear)."""
    return _exact(info) and all(r.linear for r in info.reads if r.table in changed)


def _exact(info: QueryInfo, sessions: bool = False) -> bool:
    """Combinable aggregates (mv_describe's `combinable`), no float sum (added in another order it
    differs in its last bits from the sum recomputed), no sessions unless `sessions`."""
    exact = all(c.aggregate != "sum_float" for c in info.output)
    return info.combinable and exact and (sessions or all(w.kind != "SESSION" for w in info.windows))


def by_terms(output: list[Column], keys: list[str], terms: list[tuple[int, str]]) -> tuple[str, str]:
    """The inserts' and the retractions' aggregates per group (Combination.terms) from the query's
    signed terms (mv/row_refresh.py's: the query over one read's inserted or deleted rows, the
    other reads at the versions that make their sum the change), each sign's terms folded into one
    row per group: count and sum add up, min and max compare.

    Example: bids JOIN auctions GROUP BY category, bids inserted and an auction recategorized:
    (+1, new bids joined), (+1, the auction's bids under its new category), (-1, under its old).
    """
    def side(sign: int) -> str:
        queries = [query for s, query in terms if s == sign]
        if not queries:  # no term of that sign: no group
            return f"(SELECT * FROM ({terms[0][1]}) WHERE false)"
        rows = " UNION ALL ".join(f"SELECT * FROM ({q})" for q in queries)
        return f"(SELECT {', '.join(folded(output, keys))} FROM ({rows}) GROUP BY {', '.join(quote(k) for k in keys)})"
    return side(1), side(-1)


def combine(spark: SparkSession, c: Combination, cached: list[DataFrame]) -> tuple[DataFrame, DataFrame | None]:
    """Per touched group: the view's columns combined, plus `NEEDS` (recompute it) and `EMPTY`
    (delete it), computed at once; and, when `c.reached_version` says which version of the view
    `c.view` is, the old rows it read, with each one's file and row index (FILE, ROW), cached:
    the rows the merge reaches (writes.Write.reached). The frames it caches go to `cached`: the
    caller unpersists them."""
    where = f" WHERE {c.partials_filter}" if c.partials_filter else ""
    for k, (part, sign) in enumerate((("ins", "= 1"), ("ret", "= -1"))):
        if c.terms:  # cached by the caller
            partials = spark.sql(f"SELECT * FROM {c.terms[k]}{where}")
        else:
            spark.sql(f"SELECT * FROM {c.changes} WHERE {SIGN} {sign}").createOrReplaceTempView(f"{c.changes}_{part}")
            partials = spark.sql(f"SELECT * FROM mv_substitute({sql_string(c.query)}, "
                                 f"{sql_string(c.source)}, {sql_string(c.changes + '_' + part)}){where}").cache()
            cached.append(partials)
        partials.createOrReplaceTempView(f"{c.changes}_p{part}")  # read twice below, so cached
    keys = ", ".join(quote(k) for k in c.keys)

    def on(alias: str) -> str:
        return " AND ".join(f"k.{quote(k)} <=> {alias}.{quote(k)}" for k in c.keys)

    view_where = f" AND {c.view_filter}" if c.view_filter else ""
    columns, needs = _combined_columns(c)
    star = next((quote(col.name) for col in c.output if col.aggregate == "count_star"), None)
    empty = f"coalesce(o.{star}, 0) + coalesce(i.{star}, 0) - coalesce(r.{star}, 0) <= 0" if star else "false"
    if star is None:  # without count(*) a group with retractions may have emptied: only the source can say
        needs.append(f"r.{PRESENT} IS NOT NULL")
    # An emptied group is deleted whatever its other columns say; retractions from a group the view
    # lacks mean the view and the changes disagree, which only the source can settle.
    needs = [f"(NOT ({empty}) AND ({' OR '.join(needs)}))" if needs else "false",
             f"(r.{PRESENT} IS NOT NULL AND o.{PRESENT} IS NULL)"]
    # One aggregation per group over its old row (o), the inserts' aggregates (i) and the
    # retractions' (r), each side a struct of its columns (NULL where the side has no row): one
    # shuffle, where joining the three sides took one per join.
    names = [quote(col.name) for col in c.output]
    spark.sql(f"SELECT {keys} FROM {c.changes}_pins UNION ALL SELECT {keys} FROM {c.changes}_pret") \
        .createOrReplaceTempView(f"{c.changes}_k")
    old, reached = _old_rows(spark, c, names, on("v"), view_where), None
    if c.reached_version is not None:  # read once, here and by the commit
        reached = old.cache()
        cached.append(reached)
    old.createOrReplaceTempView(f"{c.changes}_old")
    tagged = [f"SELECT {', '.join(names)}, 'o' AS {SIDE} FROM {c.changes}_old",
              f"SELECT {', '.join(names)}, 'i' AS {SIDE} FROM {c.changes}_pins",
              f"SELECT {', '.join(names)}, 'r' AS {SIDE} FROM {c.changes}_pret"]
    rows = spark.sql(f"""
        WITH g AS (SELECT {keys}, {', '.join(_side(c, side) for side in 'oir')}
                   FROM ({' UNION ALL '.join(tagged)}) GROUP BY {keys})
        SELECT {', '.join(columns)}, ({' OR '.join(needs)}) AS {NEEDS}, ({empty}) AS {EMPTY} FROM g k""")
    # Checkpointed, not cached: it reads the view, and Delta's MERGE into the view re-plans every
    # cached query over its target when it commits (seconds of Delta file listing, then unused).
    return rows.localCheckpoint(), reached


def _old_rows(spark: SparkSession, c: Combination, names: list[str], on: str, view_where: str) -> DataFrame:
    """The view's rows of the touched groups (`<changes>_k`): with their file and row index when
    `c.reached_version` is the version of the view `c.view` names, read at that version."""
    relation, place = c.view, ""
    if c.reached_version is not None:
        relation, place = located(spark, c.view, c.reached_version), f", v.{FILE}, v.{ROW}"
    return spark.sql(f"SELECT /*+ BROADCAST(k) */ {', '.join('v.' + n for n in names)}{place} FROM {relation} v "
                     f"LEFT SEMI JOIN {c.changes}_k k ON {on}{view_where}")


def _side(c: Combination, side: str) -> str:
    """SQL: the struct of one side's columns in a group (one row at most per side), named `side`."""
    fields = [f"max(IF({SIDE} = '{side}', {quote(col.name)}, NULL)) AS {quote(col.name)}"
              for col in c.output if col.name not in c.keys]
    present = f"IF(bool_or({SIDE} = '{side}'), true, NULL) AS {PRESENT}"
    return f"struct({', '.join(fields + [present])}) AS {side}"


# How an output column's values from several rows of one group add up: count and sum add, min and max compare.
_ADDED = {"count_star": "sum", "count": "sum", "sum_exact": "sum", "min": "min", "max": "max"}


def added(spark: SparkSession, c: Combination, kept: str, closed: str | None = None) -> tuple[DataFrame, int]:
    """Changes that only insert: each group's new row in one aggregation over its old rows and the
    inserted rows' own aggregates (count and sum add up, min and max take the least and greatest),
    with `TOUCHED` (the changes reach the group), and how many groups the changes reach (counted
    as the rows are computed, an Observation: a count of them afterwards was a Spark job of its
    own, 0.05-0.1 s of a 1.5 s refresh of Nexmark's q7 under EMIT ON WINDOW CLOSE). The old rows
    are every row of `kept` (a relation with the view's columns; untouched groups come out as
    they were) and the rows of the SELECT `closed` whose group the changes reach. No group ever
    needs the source here.

    Example: kept {(w1, a): n=2, max=5}, inserts into (w1, a) of prices 7 and 1 give n=4, max=7.
    """
    where = f" WHERE {c.partials_filter}" if c.partials_filter else ""
    partials = (f"SELECT * FROM mv_substitute({sql_string(c.query)}, {sql_string(c.source)}, "
                f"{sql_string(c.changes)}){where}")
    names = [quote(col.name) for col in c.output]
    parts = [f"SELECT {', '.join(names)}, false AS {TOUCHED} FROM {kept}",
             f"SELECT {', '.join(names)}, true AS {TOUCHED} FROM ({partials})"]
    if closed:
        on = " AND ".join(f"v.{quote(k)} <=> p.{quote(k)}" for k in c.keys)
        parts.append(f"SELECT /*+ BROADCAST(p) */ {', '.join('v.' + n for n in names)}, false AS {TOUCHED} "
                     f"FROM ({closed}) v LEFT SEMI JOIN ({partials}) p ON {on}")
    rows = spark.sql(f"SELECT {', '.join(folded(c.output, c.keys))}, bool_or({TOUCHED}) AS {TOUCHED} "
                     f"FROM ({' UNION ALL '.join(parts)}) GROUP BY {', '.join(quote(k) for k in c.keys)}")
    touched = Observation()
    rows = rows.observe(touched, F.count_if(F.col(TOUCHED)).alias("n")).localCheckpoint()  # read twice: kept, written
    return rows, touched.get["n"]


def folded(output: list[Column], keys: list[str], bounds: dict[str, str] | None = None) -> list[str]:
    """SQL select list folding several rows of one group into one: the keys as they are, count and
    sum added up, min and max compared; `bounds` names columns folded by a function of their own
    (a session's start by min, its end by max).

    Example: folded(info.output, ["item"]) == ["`item`", "CAST(sum(`n`) AS BIGINT) AS `n`", ...]
    """
    bounds = bounds or {}
    return [quote(col.name) if col.name in keys
            else f"CAST({bounds.get(col.name) or _ADDED[col.aggregate]}({quote(col.name)}) AS {col.type}) "
                 f"AS {quote(col.name)}"
            for col in output]


def foldable(output: list[Column], roles: tuple[str, ...]) -> bool:
    """Whether every column either carries one of the window `roles` or is an aggregate `folded` adds up."""
    return all(col.window_role in roles or col.aggregate in _ADDED for col in output)


def _combined_columns(c: Combination) -> tuple[list[str], list[str]]:
    """Each output column's combined value, and the conditions under which the group must be recomputed."""
    columns, needs = [], []
    for col in c.output:
        name, kind = quote(col.name), col.aggregate
        o, i, r = f"o.{name}", f"i.{name}", f"r.{name}"
        if col.name in c.keys:
            columns.append(f"k.{name} AS {name}")
            continue
        added = f"CASE WHEN {o} IS NULL THEN {i} WHEN {i} IS NULL THEN {o} ELSE {o} + {i} END"
        value = {
            "count_star": f"coalesce({o}, 0) + coalesce({i}, 0) - coalesce({r}, 0)",
            "count": f"coalesce({o}, 0) + coalesce({i}, 0) - coalesce({r}, 0)",
            "sum_exact": f"CASE WHEN {r} IS NULL THEN {added} ELSE {o} + coalesce({i}, 0) - {r} END",
            "min": f"least({o}, {i})",
            "max": f"greatest({o}, {i})",
        }[kind]
        need = {
            # every non-NULL value of the sum may be gone (then it is NULL, not 0)
            "sum_exact": f"({r} IS NOT NULL AND ({o} IS NULL OR ({i} IS NULL AND {o} - {r} = 0)))",
            "min": f"({r} IS NOT NULL AND ({o} IS NULL OR {r} <= {o}))",
            "max": f"({r} IS NOT NULL AND ({o} IS NULL OR {r} >= {o}))",
        }.get(kind)
        columns.append(f"CAST({value} AS {col.type}) AS {name}")
        if need:
            needs.append(need)
    return columns, needs
