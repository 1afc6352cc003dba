"""Delta source tables and materialized views over them, named apart per test and dropped after it,
for the scenario tests of views kept by their changes (test_row_views, test_windows_over_joins).

Example:
    >>> made = Sources(spark, "rv", {"bids": "id INT, price INT"}, {"cheap": "SELECT * FROM {bids} WHERE price < 5"})
    >>> made.run("INSERT INTO {bids} VALUES (1, 3)"); view = made.view("cheap")
    >>> bag(spark, view) == bag(spark, made.query("cheap"))
    True
"""
from __future__ import annotations

from collections import Counter
from itertools import count

import mv

_ids = count()


class Sources:
    """Tables `columns` (name: column list) named `<prefix>_<name>_<n>`, and views of `queries`
    (kind: query text over `{name}` placeholders) created over them."""

    def __init__(self, spark, prefix: str, columns: dict[str, str], queries: dict[str, str]):
        self.spark, self.prefix, self.queries, n = spark, prefix, queries, next(_ids)
        self.names = {table: f"{prefix}_{table}_{n}" for table in columns}
        self.views: list[str] = []
        for table, schema in columns.items():
            spark.sql(f"CREATE TABLE {self.names[table]} ({schema}) USING delta")

    def run(self, statement: str) -> None:
        self.spark.sql(statement.format(**self.names))

    def query(self, kind: str) -> str:
        return self.queries[kind].format(**self.names)

    def view(self, kind: str, clauses: str = "REFRESH POLICY INCREMENTAL", query: str | None = None) -> str:
        """A view of `queries[kind]` (or `query`); INCREMENTAL by default, so AUTO's estimate never
        turns a small table's refresh into a full one."""
        name = f"{self.prefix}_{kind}_{next(_ids)}"
        self.views.append(name)
        mv.sql(self.spark, f"CREATE MATERIALIZED VIEW {name} {clauses} AS {query or self.query(kind)}")
        return name

    def drop(self) -> None:
        for view in self.views:
            mv.sql(self.spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
        for table in self.names.values():
            self.spark.sql(f"DROP TABLE IF EXISTS {table}")


def bag(spark, relation: str) -> Counter:
    """The rows of `relation` (a table or view's name) with how many times each occurs."""
    return Counter(tuple(r) for r in spark.sql(f"SELECT * FROM {relation}").collect())
