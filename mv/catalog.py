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
    definition, time_zone = _parsed(name, raw)
    return View(name, definition, time_zone, table.id, table.properties, table)


def _parsed(name: str, raw: str) -> tuple[Definition, str]:
    """The definition and time zone stored as `raw`; MV_VIEW_DEFINITION_INVALID, naming the view,
    for one that is not what the engine wrote (changed with ALTER TABLE ... SET TBLPROPERTIES).

    Example:
        >>> _parsed("v", '{bad json')
        MvError: [MV_VIEW_DEFINITION_INVALID] The definition stored with the materialized view v ...
    """
    try:
        stored = json.loads(raw)
        time_zone = stored.pop("time_zone")
        definition = Definition(**stored)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise errors.view_definition_invalid(name, f"{type(e).__name__}: {e}") from None
    if not isinstance(definition.query, str) or not isinstance(time_zone, str):
        raise errors.view_definition_invalid(name, "its query or time zone is not a string")
    return definition, time_zone


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


def list_views(spark: SparkSession) -> list[str]:
    """Names of the materialized views in the current database: the tables whose properties hold a
    definition, read as `load` reads them, in one `mv_delta_tables` query for all of them."""
    tables = {f"{t.namespace[0]}.{t.name}" if t.namespace else t.name: t.name for t in spark.catalog.listTables()
              if not t.isTemporary and t.tableType != "VIEW"}
    found = delta_tables.lookup(spark, list(tables))
    return sorted(short for name, short in tables.items() if DEFINITION_PROPERTY in found[name].properties)
