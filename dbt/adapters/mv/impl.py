"""dbt-spark's adapter with the engine's materialized views as dbt's `materialized_view` relations.

dbt-spark decides a relation's type from SHOW TABLE EXTENDED (a SQL view or a table); a view of the
engine is a Delta table whose properties carry `mv.definition`, so this adapter reads the Delta
tables' properties of a schema in one query (the extension's `mv_delta_tables`) and marks those
relations `materialized_view`, with the view's query as their `view_text`. `dbt docs generate`
then lists them as materialized views, their query as the table's comment:

    catalog.json: "metadata": {"type": "materialized_view", "comment": "SELECT ... FROM ...", ...}

Connections are dbt-spark's own (`method: session`, `thrift`, ...); only the type's name differs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from dbt.adapters.contracts.relation import RelationType
from dbt.adapters.spark import SparkAdapter, SparkConnectionManager, SparkCredentials, SparkRelation

DEFINITION_PROPERTY = "mv.definition"  # mv/catalog.py's


@dataclass
class MvCredentials(SparkCredentials):
    @property
    def type(self) -> str:
        return "mv"


class MvConnectionManager(SparkConnectionManager):
    TYPE = "mv"


@dataclass(frozen=True, eq=False, repr=False)
class MvRelation(SparkRelation):
    view_text: Optional[str] = None  # a materialized view's query, as its definition stores it


class MvAdapter(SparkAdapter):
    ConnectionManager = MvConnectionManager
    Relation = MvRelation

    def _build_spark_relation_list(self, row_list, relation_info_func) -> list:
        """dbt-spark's relations, those that are the engine's views as `materialized_view`."""
        relations = super()._build_spark_relation_list(row_list, relation_info_func)
        queries = self._view_queries([r for r in relations if r.is_delta])
        return [self._as_view(r, queries[str(r)]) if str(r) in queries else r for r in relations]

    def _view_queries(self, tables: list) -> dict[str, str]:
        """Each Delta table that is a view: its query, by the relation's name, in one query."""
        if not tables:
            return {}
        names = ", ".join("'" + str(table).replace("`", "").replace("'", "\\'") + "'" for table in tables)
        _, rows = self.execute(f"SELECT name, properties['{DEFINITION_PROPERTY}'] FROM mv_delta_tables({names})",
                               fetch=True)
        by_name = {str(table).replace("`", ""): str(table) for table in tables}
        return {by_name[name]: json.loads(stored).get("query", "") for name, stored in rows
                if stored and name in by_name}

    @staticmethod
    def _as_view(relation: MvRelation, query: str) -> MvRelation:
        return relation.incorporate(type=RelationType.MaterializedView, view_text=query)

    def _get_columns_for_catalog(self, relation) -> Iterable[dict[str, Any]]:
        for column in super()._get_columns_for_catalog(relation):
            if relation.type == RelationType.MaterializedView:
                column["table_comment"] = relation.view_text
            yield column
