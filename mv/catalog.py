"""Materialized views in the Spark catalog: each is a Delta table whose properties hold its definition.

Beside a view `v` lives `v__late` (rows that arrived after their window was final); its refreshes
are its own commits, read back as `mv_refresh_history` (mv/history.py).

Example:
    >>> view = catalog.load(spark, "hourly_totals")
    >>> view.definition.emit
    'WINDOW CLOSE'
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from pyspark.sql import SparkSession

from mv import delta_tables, errors
from mv.query import sql_string
from mv.settings import session_settings
from mv.statements import Definition

DEFINITION_PROPERTY = "mv.definition"
# SHOW TBLPROPERTIES replaces a value by "*********(redacted)" when its key or value matches this
# setting's pattern (`(?i)url` by default: a definition saying "hourly" matches). NEVER matches nothing.
REDACTION, NEVER = "spark.sql.redaction.options.regex", "(?!)"


@dataclass(frozen=True)
class View:
    """A materialized view: its table name, its definition, and the time zone its windows align in."""
    name: str
    definition: Definition
    time_zone: str
    table_id: str = ""  # the Delta table's id when loaded: a view dropped and created again gets a new one
    properties: dict = field(default_factory=dict, compare=False)  # the table's, as loaded (refresh state)
    table: delta_tables.Table | None = field(default=None, compare=False)  # version etc., read with them

    @property
    def late_table(self) -> str:
        return late_table(self.name)

    @property
    def open_table(self) -> str:
        return open_table(self.name)


def late_table(name: str) -> str:
    return f"{name}__late"


def open_table(name: str) -> str:
    """The rows of the windows an EMIT ON WINDOW CLOSE view holds back (mv/open_windows.py)."""
    return f"{name}__open"


def load(spark: SparkSession, name: str) -> View | None:
    """The materialized view called `name`, or None if there is none (no table, or a plain one).

    Its definition and its id come from the Delta table's metadata, as the extension reads it from
    Delta's log (mv_delta_tables, one query): no redaction, no state reconstruction."""
    table = delta_tables.lookup(spark, [name])[name]
    raw = table.properties.get(DEFINITION_PROPERTY) if table.exists and table.version >= 0 else None
    if raw is None:
        return None
    stored = json.loads(raw)
    time_zone = stored.pop("time_zone")
    return View(name, Definition(**stored), time_zone, table.id, table.properties, table)


def shown_properties(spark: SparkSession, name: str) -> dict[str, str]:
    """The table's properties as SHOW TBLPROPERTIES gives them, which reads no more of a Delta
    table than its metadata; unredacted unless a value says "url" anyway (see REDACTION)."""
    with session_settings(spark, {REDACTION: NEVER}):
        return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def require(spark: SparkSession, name: str) -> View:
    view = load(spark, name)
    if view is None:
        raise errors.table_exists(name) if spark.catalog.tableExists(name) else errors.unknown_view(name)
    return view


def definition_property(view: View) -> str:
    """The table property that makes a Delta table the view `view`, as a TBLPROPERTIES item: the
    view's table is created with it, in its first commit.

    Example:
        >>> definition_property(View("hourly", definition, "UTC"))
        "'mv.definition' = '{\\"cluster_by\\": null, ...}'"
    """
    stored = json.dumps({**asdict(view.definition), "time_zone": view.time_zone}, sort_keys=True)
    return f"'{DEFINITION_PROPERTY}' = {sql_string(stored)}"


def create_empty(spark: SparkSession, table: str, query: str, clauses: str, if_not_exists: bool = False) -> None:
    """Create `table` (a view's, or its `__late` or `__open` table) empty, with the columns of
    `query`: `CREATE TABLE [IF NOT EXISTS] table clauses AS SELECT * FROM (query) WHERE false`, run
    by the extension's MV_CREATE_TABLE (mv/jvm/EngineCreate.scala), the one statement that the
    read-only rule lets create a view's tables. It only creates; a table that exists fails it
    (TABLE_OR_VIEW_ALREADY_EXISTS), or with `if_not_exists` is left as it is.

    Example:
        >>> create_empty(spark, "v__late", "SELECT * FROM rows", "USING delta", if_not_exists=True)
    """
    spec = {"table": table, "query": query, "clauses": clauses, "if_not_exists": if_not_exists}
    spark.sql(f"MV_CREATE_TABLE {sql_string(json.dumps(spec))}")


def list_views(spark: SparkSession) -> list[str]:
    """Names of the materialized views in the current database: the tables whose properties hold a
    definition, read as `load` reads them, in one `mv_delta_tables` query for all of them."""
    tables = {f"{t.namespace[0]}.{t.name}" if t.namespace else t.name: t.name for t in spark.catalog.listTables()
              if not t.isTemporary and t.tableType != "VIEW"}
    found = delta_tables.lookup(spark, list(tables))
    return sorted(short for name, short in tables.items() if DEFINITION_PROPERTY in found[name].properties)
