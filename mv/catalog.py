"""Materialized views in the Spark catalog: each is a Delta table whose properties hold its definition.

Beside a view `v` lives `v__late` (rows that arrived after their window was final); its refreshes
are its own commits, read back as `mv_refresh_history` (mv/history.py). A view's name is a
`names.TableName`; the view keeps the database its query was written in, and its query is resolved
there, as Spark's own views are.

Example:
    >>> view = catalog.load(spark, "hourly_totals")
    >>> view.definition.emit
    'WINDOW CLOSE'
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace

from pyspark.sql import SparkSession

from mv import delta_tables, errors
from mv.names import TableName
from mv.query import sql_string
from mv.settings import session_settings
from mv.statements import Definition, tokenize

DEFINITION_PROPERTY = "mv.definition"
# SHOW TBLPROPERTIES replaces a value by "*********(redacted)" when its key or value matches this
# setting's pattern (`(?i)url` by default: a definition saying "hourly" matches). NEVER matches nothing.
REDACTION, NEVER = "spark.sql.redaction.options.regex", "(?!)"


@dataclass(frozen=True)
class View:
    """A materialized view: its table name, its definition, the time zone its windows align in, and
    the database its query's names resolve in (None for a view created before it was kept)."""
    name: TableName
    definition: Definition
    time_zone: str
    database: str | None = None
    table_id: str = ""  # the Delta table's id when loaded: a view dropped and created again gets a new one
    properties: dict = field(default_factory=dict, compare=False)  # the table's, as loaded (refresh state)
    table: delta_tables.Table | None = field(default=None, compare=False)  # version etc., read with them

    @property
    def late_table(self) -> TableName:
        return self.name.late

    @property
    def open_table(self) -> TableName:
        """The rows of the windows an EMIT ON WINDOW CLOSE view holds back (mv/open_windows.py)."""
        return self.name.open


def load(spark: SparkSession, name: str) -> View | None:
    """The materialized view called `name`, or None if there is none (no table, or a plain one).

    Its definition and its id come from the Delta table's metadata, as the extension reads it from
    Delta's log (mv_delta_tables, one query): no redaction, no state reconstruction."""
    name = TableName.parse(name)
    return of_table(name, delta_tables.lookup(spark, [name])[name])


def of_table(name: TableName, table: delta_tables.Table) -> View | None:
    """The view `name` as its table, looked up (`delta_tables.lookup`), holds it; None for no view."""
    raw = table.properties.get(DEFINITION_PROPERTY) if table.exists and table.version >= 0 else None
    if raw is None:
        return None
    definition, time_zone, database = _parsed(name, raw)
    return View(name, replace(definition, name=TableName.parse(definition.name)), time_zone, database,
                table.id, table.properties, table)


def _parsed(name: str, raw: str) -> tuple[Definition, str, str | None]:
    """The definition, time zone and query database stored as `raw` (a view created before the
    database was kept has None); MV_VIEW_DEFINITION_INVALID, naming the view,
    for one that is not what the engine wrote (changed with ALTER TABLE ... SET TBLPROPERTIES).

    Example:
        >>> _parsed("v", '{bad json')
        MvError: [MV_VIEW_DEFINITION_INVALID] The definition stored with the materialized view v ...
    """
    try:
        stored = json.loads(raw)
        time_zone, database = stored.pop("time_zone"), stored.pop("database", None)
        definition = Definition(**stored)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise errors.view_definition_invalid(name, f"{type(e).__name__}: {e}") from None
    if not isinstance(definition.query, str) or not isinstance(time_zone, str):
        raise errors.view_definition_invalid(name, "its query or time zone is not a string")
    return definition, time_zone, database


def is_view(spark: SparkSession, name: str) -> bool:
    """Whether `name` is a materialized view's table (it holds a definition), readable or not: what
    DROP MATERIALIZED VIEW needs to know, so a view whose definition was forged can still be dropped."""
    table = delta_tables.lookup(spark, [name])[name]
    return table.exists and table.version >= 0 and DEFINITION_PROPERTY in table.properties


def shown_properties(spark: SparkSession, name: str) -> dict[str, str]:
    """The table's properties as SHOW TBLPROPERTIES gives them, which reads no more of a Delta
    table than its metadata; unredacted unless a value says "url" anyway (see REDACTION)."""
    with session_settings(spark, {REDACTION: NEVER}):
        return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def require(spark: SparkSession, name: str) -> View:
    """The view called `name`, named so that it resolves in the database of its query too: a view
    found in the current database whose query was written in another gets its database in its name."""
    view = load(spark, name)
    if view is None:
        raise errors.table_exists(name) if spark.catalog.tableExists(name) else errors.unknown_view(name)
    current = spark.catalog.currentDatabase()
    if view.database and view.database.lower() != current.lower():
        return replace(view, name=view.name.in_database(current))
    return view


def definition_property(view: View) -> str:
    """The table property that makes a Delta table the view `view`, as a TBLPROPERTIES item: the
    view's table is created with it, in its first commit.

    Example:
        >>> definition_property(View("hourly", definition, "UTC"))
        "'mv.definition' = '{\\"cluster_by\\": null, ...}'"
    """
    stored = json.dumps({**asdict(view.definition), "time_zone": view.time_zone, "database": view.database},
                        sort_keys=True)
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
    tables = {TableName.of(*(t.namespace or [])[:1], t.name): TableName.of(t.name) for t in spark.catalog.listTables()
              if not t.isTemporary and t.tableType != "VIEW"}
    found = delta_tables.lookup(spark, list(tables))
    return sorted(short for name, short in tables.items() if DEFINITION_PROPERTY in found[name].properties)


Differences = tuple[tuple[str, str | None, str | None], ...]


def compare(spark: SparkSession, declared: Definition) -> tuple[str, Differences]:
    """What CREATE OR REPLACE of `declared` would do to the catalog: "create" (no view by its name),
    "replace" (the stored definition differs; the differing fields come along) or "unchanged".
    `mv deploy`, EXPLAIN CREATE and dbt's materialization decide with it.

    Example:
        >>> compare(spark, statements.parse("CREATE MATERIALIZED VIEW hourly EMIT ON WINDOW CLOSE ...").definition)
        ('replace', (('emit', 'UPDATE', 'WINDOW CLOSE'),))
    """
    existing = load(spark, declared.name)
    if existing is None:
        if spark.catalog.tableExists(str(declared.name)):
            raise errors.table_exists(declared.name)
        return "create", ()
    found = differences(existing.definition, declared)
    return ("replace" if found else "unchanged"), found


def differences(old: Definition, new: Definition) -> Differences:
    """The fields whose values differ, as (field, old, new); layout, comments and keyword case aside."""
    found = []
    for f in fields(Definition):
        before, after = getattr(old, f.name), getattr(new, f.name)
        if _normal(before) != _normal(after):
            found.append((f.name, before, after))
    return tuple(found)


def _normal(value):
    if not isinstance(value, str):
        return value
    return [t.text if t.kind == "string" else t.text.lower() for t in tokenize(value)]
