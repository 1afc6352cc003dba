"""Which materialized views read which, and an order that puts every view after the views it reads.

Spark says what a query reads (mv.query.describe) when the query analyses. Before a deploy creates
the upstream view it does not, so then the query's words are matched against the views' names
(strings and comments skipped); that is enough to order a catalog, which is all it is used for.

Example:
    >>> order({"daily": {"hourly"}, "hourly": set()})
    ['hourly', 'daily']
"""
from __future__ import annotations

from pyspark.sql import SparkSession

from mv import errors
from mv.names import TableName
from mv.query import describe
from mv.statements import tokenize


def qualify(spark: SparkSession, name: str) -> str:
    """`name` as Spark names a table in a plan: catalog.database.table, lower case."""
    parts = list(TableName.parse(name).parts)
    if len(parts) == 1:
        parts.insert(0, spark.catalog.currentDatabase())
    if len(parts) == 2:
        parts.insert(0, spark.catalog.currentCatalog())
    return TableName.of(*parts).lower()


def upstream(spark: SparkSession, query: str, names: list[str]) -> set[str]:
    """The names among `names` that `query` reads: as Spark analyses it, or by its words if it cannot."""
    try:
        sources = set(describe(spark, query).source_tables)
    except Exception:  # noqa: BLE001 - an upstream view (or source) does not exist yet
        return mentioned(query, names)
    return {name for name in names if qualify(spark, name) in {s.lower() for s in sources}}


def mentioned(query: str, names: list[str]) -> set[str]:
    """The names among `names` that occur in `query` as (possibly qualified) table names."""
    tokens = tokenize(query)
    dotted: list[list[str]] = []
    for i, token in enumerate(tokens):
        if token.kind != "word":
            continue
        part = token.text.strip("`").lower()
        if i >= 2 and tokens[i - 1].text == "." and tokens[i - 2].kind == "word" and dotted:
            dotted[-1].append(part)
        elif not (i + 1 < len(tokens) and tokens[i + 1].text == "("):  # a function call, not a table
            dotted.append([part])
    found = set()
    for name in names:
        wanted = [p.lower() for p in TableName.parse(name).parts]
        if any(d[-len(wanted):] == wanted or wanted[-len(d):] == d for d in dotted):
            found.add(name)
    return found


def order(reads: dict[str, set[str]]) -> list[str]:
    """The keys of `reads` (view -> the views it reads) with each view after those it reads.

    Views that do not depend on each other keep their order in `reads`. A cycle is an error.
    """
    ordered: list[str] = []
    state: dict[str, str] = {}  # "visiting" while its upstream is being placed, then "done"

    def place(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise errors.catalog_cycle(path[path.index(name):])
        state[name] = "visiting"
        for before in reads.get(name, ()):
            if before != name and before in reads:
                place(before, path + [before])
        state[name] = "done"
        ordered.append(name)

    for name in reads:
        place(name, [name])
    return ordered
