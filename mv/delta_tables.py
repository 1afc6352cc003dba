"""Delta tables' versions, ids and properties, read from Delta's log by the extension
(mv_delta_tables), not by DESCRIBE DETAIL or DESCRIBE HISTORY, which make Delta rebuild a table's
state (a Spark job) to report figures a refresh does not need.

Example:
    >>> delta_tables.lookup(spark, ["bids", "hourly"])
    {'bids': Table(version=7, id='5d3c...', changed_outside=None, small=True), 'hourly': Table(version=12, ...)}
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from mv.maintainer import extension
from mv.query import sql_string


@dataclass(frozen=True)
class Table:
    version: int  # -1 for a table that is not a Delta table
    id: str | None
    changed_outside: int | None = None  # a view's first version since its last refresh that no refresh wrote
    small: bool = False  # its checksum lists its files: scans and the commit read them without a Spark job
    properties: dict = field(default_factory=dict, compare=False)  # the table's (a Delta table's configuration)
    exists: bool = True  # False for a name the catalog has no table of (version -1)
    bytes: int | None = None  # its files' size: from its checksum, else its state (None: not a Delta table)
    change_bytes: int | None = None  # what its change feed after the version asked for holds (`lookup`'s `after`)
    schema: str | None = field(default=None, compare=False)  # Delta's schema JSON (None: not a Delta table)
    change_retracts: bool | None = None  # whether that change feed takes rows away (updates, deletes)
    committed_at: int | None = None  # a view's newest commit's time, epoch ms (None for other tables)

    @property
    def column_types(self) -> dict[str, str] | None:
        """The table's columns and their types (lower-case names, Spark's simpleString): a refresh
        keeps them in the view's state, and the next one tells a column dropped, renamed or retyped
        since (change_feed.schema_changed) without reading a change. None: not a Delta table.

        Example:
            >>> Table(3, "id", schema='{"type":"struct","fields":[{"name":"p","type":"integer",'
            ...       '"nullable":true,"metadata":{}}]}').column_types
            {'p': 'int'}
        """
        return dict(self.columns()) if self.schema is not None else None

    def columns(self) -> list[tuple[str, str]]:
        """The table's columns as (lower-case name, type in Spark's simpleString), in order."""
        fields = StructType.fromJson(json.loads(self.schema)).fields if self.schema else []
        return [(f.name.lower(), f.dataType.simpleString()) for f in fields]


def lookup(spark: SparkSession, names: list[str], after: dict[str, int] | None = None) -> dict[str, Table]:
    """Each table's latest version, Delta table id and properties, in one query; a name with no
    table gets a row too (`exists` False). A table with a version in `after` also gets the bytes
    of its change feed since then (`change_bytes`, from the log) and whether it takes rows away
    (`change_retracts`)."""
    if not names:
        return {}
    args = [f"{name}@{after[name]}" if name in (after or {}) else name for name in names]
    if (jvm := extension(spark)) is not None:  # this process is the driver: no SQL statement
        rows = json.loads(jvm.DeltaTables.tablesJson(spark._jsparkSession, json.dumps(args)))
    else:
        rows = [row.asDict() for row in
                spark.sql(f"SELECT * FROM mv_delta_tables({', '.join(map(sql_string, args))})").collect()]
    return {row["name"]: Table(row["version"], row["id"], row["changed_outside"], row["small"],
                               dict(row["properties"] or {}), row["exists"], row["bytes"], row["change_bytes"],
                               row["schema"], row["change_retracts"], row["committed_at"]) for row in rows}
