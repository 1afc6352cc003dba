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
no count(*) to tell whether it emptied), the group is marked `__needs` and the caller recomputes
it from the source. Inserts alone never need a recomputation.

Example:
    >>> rows = combine(spark, Combination("hourly", query, "bids", "changes", info.output, ["item", ...]), [])
    >>> rows.filter("NOT __needs AND NOT __empty")   # the groups' new rows, ready to MERGE
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from mv.query import Column, QueryInfo, quote, sql_string


@dataclass(frozen=True)
class Combination:
    """What to combine: the view, its query and single source, the signed changes' temp view, the
    output columns (mv_describe's, with their `aggregate` kinds) and the row key. `partials_filter`
    keeps only the groups that may change (e.g. windows that are not final); `view_filter` bounds
    the view rows read (so Delta skips files)."""
    view: str
    query: str
    source: str
    changes: str
    output: list[Column]
    keys: list[str]
    partials_filter: str | None = None
    view_filter: str | None = None


def combinable(info: QueryInfo) -> bool:
    """Whether the query's changed groups can be combined from their view rows and the changes:
    one source, combinable aggregates, no sessions (whose extent a change can alter)."""
    # A float sum added in another order differs in its last bits from the sum recomputed: not combined.
    exact = all(c.aggregate != "sum_float" for c in info.output)
    return info.combinable and exact and len(info.sources) == 1 and all(w.kind != "SESSION" for w in info.windows)


def combine(spark: SparkSession, c: Combination, cached: list[DataFrame]) -> DataFrame:
    """Per touched group: the view's columns combined, plus `__needs` (recompute it) and `__empty`
    (delete it), computed at once. The frames it caches go to `cached`: the caller unpersists them."""
    where = f" WHERE {c.partials_filter}" if c.partials_filter else ""
    for part, sign in (("ins", "= 1"), ("ret", "= -1")):
        spark.sql(f"SELECT * FROM {c.changes} WHERE __sign {sign}").createOrReplaceTempView(f"{c.changes}_{part}")
        partials = spark.sql(f"SELECT *, true AS __present FROM mv_substitute({sql_string(c.query)}, "
                             f"{sql_string(c.source)}, {sql_string(c.changes + '_' + part)}){where}").cache()
        partials.createOrReplaceTempView(f"{c.changes}_p{part}")  # read twice below, so cached
        cached.append(partials)
    keys = ", ".join(quote(k) for k in c.keys)

    def on(alias: str) -> str:
        return " AND ".join(f"k.{quote(k)} <=> {alias}.{quote(k)}" for k in c.keys)

    view_where = f" AND {c.view_filter}" if c.view_filter else ""
    columns, needs = _combined_columns(c)
    star = next((quote(col.name) for col in c.output if col.aggregate == "count_star"), None)
    empty = f"coalesce(o.{star}, 0) + coalesce(i.{star}, 0) - coalesce(r.{star}, 0) <= 0" if star else "false"
    if star is None:  # without count(*) a group with retractions may have emptied: only the source can say
        needs.append("r.__present IS NOT NULL")
    # An emptied group is deleted whatever its other columns say; retractions from a group the view
    # lacks mean the view and the changes disagree, which only the source can settle.
    needs = [f"(NOT ({empty}) AND ({' OR '.join(needs)}))" if needs else "false",
             "(r.__present IS NOT NULL AND o.__present IS NULL)"]
    rows = spark.sql(f"""
        WITH k AS (SELECT {keys} FROM {c.changes}_pins UNION SELECT {keys} FROM {c.changes}_pret),
        o AS (SELECT /*+ BROADCAST(k) */ v.*, true AS __present FROM {c.view} v
              LEFT SEMI JOIN k ON {on('v')}{view_where})
        SELECT {', '.join(columns)}, ({' OR '.join(needs)}) AS __needs, ({empty}) AS __empty
        FROM k LEFT JOIN o ON {on('o')} LEFT JOIN {c.changes}_pins i ON {on('i')}
             LEFT JOIN {c.changes}_pret r ON {on('r')}""")
    # Checkpointed, not cached: it reads the view, and Delta's MERGE into the view re-plans every
    # cached query over its target when it commits (seconds of Delta file listing, then unused).
    return rows.localCheckpoint()


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
