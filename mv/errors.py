"""Every error the engine's Python side raises, built in one place.

Each has a stable error class (tests assert it, not the prose), parameters naming the offending
values, and a hint. Statement errors also point at the fragment:

    [MV_STATEMENT_SYNTAX] Expected EMIT ON WINDOW CLOSE or EMIT ON UPDATE. Hint: ...
    == Statement (line 1, position 36) ==
    CREATE MATERIALIZED VIEW v EMIT ON WINDOW AS SELECT 1
                                       ^^^^^^

Example:
    >>> raise errors.unknown_view("daily_totals")
"""
from __future__ import annotations

import re
from typing import Callable


class MvError(Exception):
    """An engine error: `error_class` (UPPER_SNAKE, stable), `params`, and a message with a hint."""

    def __init__(self, error_class: str, message: str, hint: str, context: str = "", **params: object):
        self.error_class = error_class
        self.params = {key: str(value) for key, value in params.items()}
        self.hint = hint
        text = f"[{error_class}] {message} Hint: {hint}"
        super().__init__(text + (f"\n{context}" if context else ""))

    def getCondition(self) -> str:  # noqa: N802 - the same name as PySpark's errors
        return self.error_class

    def as_json(self) -> dict:
        """What the maintainer answers the extension (mv/maintainer.py); from_spark reads it back."""
        return {"error_class": self.error_class, "text": str(self), "params": self.params}


def from_spark(error: Exception) -> MvError | None:
    """The engine's error that reached the caller as a Spark error (a statement run through
    spark.sql: the extension raises the maintainer's errors with their class, text and parameters)."""
    condition = getattr(error, "getCondition", lambda: None)()
    params = getattr(error, "getMessageParameters", lambda: None)() or {}
    if not condition or not condition.startswith("MV_") or "text" not in params:
        return None
    converted = MvError.__new__(MvError)
    Exception.__init__(converted, f"[{condition}] {params['text']}")
    converted.error_class = condition
    converted.params = {k: v for k, v in params.items() if k != "text"}
    converted.hint = params["text"].split(" Hint: ", 1)[-1].split("\n", 1)[0]
    return converted


def _pointer(text: str, start: int, end: int) -> str:
    line_no = text.count("\n", 0, start) + 1
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start: line_end if line_end >= 0 else len(text)]
    column = start - line_start
    width = max(1, min(end, line_start + len(line)) - start)
    return f"== Statement (line {line_no}, position {column + 1}) ==\n{line}\n{' ' * column}{'^' * width}"


def statement_syntax(text: str, start: int, end: int, expected: str, hint: str) -> MvError:
    fragment = text[start:end] or "end of statement"
    return MvError("MV_STATEMENT_SYNTAX", f"Expected {expected}, found '{fragment}'.", hint,
                   _pointer(text, start, max(end, start + 1)), expected=expected, fragment=fragment)


def duplicate_clause(text: str, start: int, end: int, clause: str) -> MvError:
    return MvError("MV_STATEMENT_DUPLICATE_CLAUSE", f"The clause {clause} is given twice.",
                   "Give each clause once.", _pointer(text, start, end), clause=clause, fragment=text[start:end])


def unsupported_combination(what: str, hint: str) -> MvError:
    return MvError("MV_STATEMENT_UNSUPPORTED_COMBINATION", f"{what}.", hint, what=what)


def unknown_view(name: str) -> MvError:
    return MvError("MV_VIEW_NOT_FOUND", f"There is no materialized view named {name}.",
                   "SHOW MATERIALIZED VIEWS lists them.", name=name)


def bad_name(text: str) -> MvError:
    return MvError("MV_INVALID_NAME", f"'{text}' is not a table name.",
                   "Write the name as SQL does: parts separated by dots, a part with other characters in "
                   "backticks, e.g. db.`my view`.", name=text)


def view_exists(name: str) -> MvError:
    return MvError("MV_VIEW_ALREADY_EXISTS", f"The materialized view {name} already exists.",
                   "Use CREATE OR REPLACE, or CREATE ... IF NOT EXISTS.", name=name)


def table_exists(name: str) -> MvError:
    return MvError("MV_NAME_TAKEN", f"{name} is already a table or view that is not a materialized view.",
                   "Choose another name, or drop that table first.", name=name)


def source_not_delta(view: str, source: str, provider: str) -> MvError:
    return MvError("MV_SOURCE_NOT_DELTA",
                   f"The source {source} of {view} is {provider or 'not a table'}, not a Delta table.",
                   "Materialized views read what changed through Delta's Change Data Feed; "
                   "convert the source with CONVERT TO DELTA or CREATE TABLE ... USING delta AS SELECT.",
                   view=view, source=source, provider=provider)


def source_temporary(view: str, names: list[str]) -> MvError:
    return MvError("MV_SOURCE_TEMPORARY",
                   f"The query of {view} reads the temporary view {', '.join(names)}, which exists only in this "
                   "session; the view's refreshes run in sessions of their own.",
                   "Make it a view of the catalog (CREATE VIEW ... AS, without TEMPORARY) or a table, "
                   "or name its tables in the query.",
                   view=view, names=",".join(names))


def view_definition_invalid(name: str, reason: str) -> MvError:
    return MvError("MV_VIEW_DEFINITION_INVALID",
                   f"The definition stored with the materialized view {name} (its table property "
                   f"mv.definition) cannot be read: {reason}.",
                   f"It was changed outside the engine; DROP MATERIALIZED VIEW {name} and create it again.",
                   name=name, reason=reason)


def watermark_column(view: str, column: str, available: list[str]) -> MvError:
    return MvError("MV_WATERMARK_COLUMN_NOT_FOUND",
                   f"The watermark column {column} of {view} is not the time column of a window "
                   f"function in its query (time columns: {', '.join(available) or 'none'}).",
                   "Name the column given to DESCRIPTOR(...) in the query's window function.",
                   view=view, column=column)


def interval(text: str, reason: str) -> MvError:
    return MvError("MV_STATEMENT_INTERVAL", f"{text} is not a usable interval: {reason}.",
                   "Use a positive day-time interval, e.g. INTERVAL '5' MINUTES.", interval=text)


def not_incremental(view: str, reasons: list[str], located: Callable[[str], str | None] = lambda _: None) -> MvError:
    """`reasons`, each with the operator and fragment of the query it comes from when one does
    (`located`: QueryInfo.located)."""
    found = [f"{r} ({where})" if (where := located(r)) else r for r in dict.fromkeys(reasons)]
    return MvError("MV_NOT_INCREMENTAL",
                   f"{view} cannot be refreshed incrementally: {'; '.join(found)}.",
                   "Use REFRESH POLICY AUTO to fall back to a full refresh, or change the query.",
                   view=view, reasons=",".join(reasons))


def view_changed_outside(view: str, version: int) -> MvError:
    return MvError("MV_VIEW_CHANGED_OUTSIDE",
                   f"Version {version} of {view}'s table changed its rows, and no refresh wrote it (a write "
                   "around the view's read-only rule: another engine, a session without the extension); the view may no "
                   "longer be its query, so it cannot continue incrementally.",
                   f"Run REFRESH MATERIALIZED VIEW {view} FULL once; it recomputes the view from its query.",
                   view=view, version=version)


def query_definition_changed(view: str) -> MvError:
    return MvError("MV_QUERY_DEFINITION_CHANGED",
                   f"A SQL view that {view}'s query reads has another definition since the last refresh "
                   "(CREATE OR REPLACE VIEW, ALTER VIEW ... AS), so the view's rows may no longer be its query "
                   "and it cannot continue incrementally.",
                   f"Run REFRESH MATERIALIZED VIEW {view} FULL once; it recomputes the view from the new "
                   "definition, and later refreshes are incremental again.",
                   view=view)


def extension_not_loaded() -> MvError:
    return MvError("MV_EXTENSION_NOT_LOADED",
                   "This Spark session was started without the engine's extension, so it cannot run the "
                   "materialized-view statements or the window functions.",
                   "Start the session with mv.session() or mv.configure(builder).getOrCreate(); on a cluster "
                   "(Databricks included) add the jar `python -m mv.jars` prints to the cluster's libraries and "
                   "io.mvengine.MvSparkSessionExtension to spark.sql.extensions, then restart it.")


def spark_version_unsupported(version: str, lines: tuple[str, ...]) -> MvError:
    return MvError("MV_SPARK_VERSION_UNSUPPORTED",
                   f"Spark {version} is not supported: the engine runs on Spark {', '.join(lines)} "
                   "(Scala 2.13), the lines its Delta Lake release is built for.",
                   "Install a pyspark of those lines (pip install 'pyspark>=4.0.1,<=4.2.0'; in this checkout "
                   "make setup SPARK=4.1.4), or run on a cluster of one of them.",
                   version=version, supported=",".join(lines))


def internal(what: str) -> MvError:
    return MvError("MV_INTERNAL_ERROR", f"The maintainer failed: {what}.",
                   "This is a bug in the engine; please report the statement with the driver's log.", what=what)


def invalid_setting(key: str, value: str, expected: str) -> MvError:
    return MvError("MV_INVALID_SETTING", f"The session setting {key} is '{value}', not {expected}.",
                   f"Set it to {expected}, or unset it for its default: spark.conf.unset('{key}').",
                   key=key, value=value)


def change_feed_gone(view: str, source: str, version: int) -> MvError:
    return MvError("MV_CHANGE_FEED_UNAVAILABLE",
                   f"The changes of {source} since version {version}, which {view} has not yet "
                   "processed, are no longer available (vacuumed or expired).",
                   f"Run REFRESH MATERIALIZED VIEW {view} FULL, or use REFRESH POLICY AUTO.",
                   view=view, source=source, version=version)


def source_schema_changed(view: str, source: str) -> MvError:
    return MvError("MV_SOURCE_SCHEMA_CHANGED",
                   f"The schema of {source} changed since {view} was last refreshed (a column added, dropped, "
                   "replaced or widened), so its changes cannot be applied to the view incrementally.",
                   f"Run REFRESH MATERIALIZED VIEW {view} FULL once; later refreshes are incremental again.",
                   view=view, source=source)


def state_lost(view: str) -> MvError:
    return MvError("MV_STATE_LOST",
                   f"{view} was refreshed before, but what its last refresh processed is no longer recorded "
                   "(its refresh commits were removed by Delta's log cleanup), so it cannot continue incrementally.",
                   f"Run REFRESH MATERIALIZED VIEW {view} FULL once; it records its state where cleanup cannot "
                   "remove it, and later refreshes are incremental again.",
                   view=view)


def concurrent_refresh(view: str) -> MvError:
    return MvError("MV_CONCURRENT_REFRESH",
                   f"Another refresh of {view} committed first; this one applied nothing.",
                   "Run the refresh again: it continues from what the other one committed.",
                   view=view)


# Delta's messages for a commit that lost to a concurrent one (its ConcurrentModificationException kinds),
# or a table that two writers created at once
_LOST_RACE = re.compile(r"Concurrent|METADATA_CHANGED|MetadataChanged|PROTOCOL_CHANGED|ProtocolChanged|"
                        r"TABLE_ALREADY_EXISTS|TableAlreadyExists")


def lost_race(e: Exception) -> bool:
    """Whether Delta or the catalog refused a write because a concurrent one got there first
    (then the refresh fails with concurrent_refresh, which a rerun resolves)."""
    return bool(_LOST_RACE.search(str(e)))


def query_broken(view: str, cause: str) -> MvError:
    return MvError("MV_QUERY_NO_LONGER_VALID",
                   f"The query of {view} no longer analyses against its sources: {cause}",
                   "A source's schema changed; CREATE OR REPLACE the view with a query that fits it.",
                   view=view)


def reserved_column_name(view: str, column: str, source: str | None) -> MvError:
    """A column beginning with `__mv_`, the engine's helper columns' prefix (mv/internal_columns.py)."""
    where = f"The source {source} of {view} has" if source else f"The query of {view} has"
    name = "`" + column.replace("`", "``") + "`"
    hint = (f"Rename it in {source} (with column mapping on: ALTER TABLE {source} SET TBLPROPERTIES "
            f"('delta.columnMapping.mode' = 'name'), then ALTER TABLE {source} RENAME COLUMN {name} TO ...), "
            "then run the statement again (a refresh as REFRESH ... FULL)." if source else
            f"Rename it with AS, e.g. ... AS `{column[5:] or 'c'}`.")
    return MvError("MV_RESERVED_COLUMN_NAME",
                   f"{where} a column {name}: names beginning with __mv_ are the engine's own.", hint,
                   view=view, column=column, source=source or "")


def catalog_not_found(path: str, reason: str) -> MvError:
    return MvError("MV_CATALOG_NOT_FOUND", f"{path} {reason}.",
                   "Give the folder that holds the catalog's .sql files, e.g. mv deploy catalog/.", path=path)


def catalog_statement(file: str, statement: str) -> MvError:
    first = statement.strip().splitlines()[0] if statement.strip() else statement
    return MvError("MV_CATALOG_NOT_DECLARATIVE",
                   f"{file} holds a statement that deploy cannot repeat safely: {first}",
                   "A catalog file declares: one CREATE MATERIALIZED VIEW, or sources with "
                   "CREATE ... IF NOT EXISTS (or CREATE OR REPLACE); load data elsewhere.",
                   file=file, statement=first)


def catalog_views_per_file(file: str, names: list[str]) -> MvError:
    return MvError("MV_CATALOG_ONE_VIEW_PER_FILE",
                   f"{file} declares {len(names)} materialized views ({', '.join(names)}).",
                   "Put each materialized view in a file of its own, named after it.",
                   file=file, names=",".join(names))


def catalog_duplicate_view(name: str, files: list[str]) -> MvError:
    return MvError("MV_CATALOG_DUPLICATE_VIEW",
                   f"The materialized view {name} is declared in {' and '.join(files)}.",
                   "Declare each view once.", name=name, files=",".join(files))


def catalog_cycle(names: list[str]) -> MvError:
    return MvError("MV_CATALOG_CYCLE",
                   f"These views read each other in a cycle: {' -> '.join(names + names[:1])}.",
                   "A view can read only views that do not read it back (check for a column or alias "
                   "named like one of these views).", names=",".join(names))


def schedule(text: str, reason: str) -> MvError:
    return MvError("MV_SCHEDULE_INVALID", f"The schedule {text} cannot be used: {reason}.",
                   "Write SCHEDULE EVERY 15 MINUTES, SCHEDULE CRON '0 * * * *' (minute hour day month "
                   "weekday) or TRIGGER ON UPDATE.", schedule=text)


def metastore_in_use(home: str) -> MvError:
    return MvError("MV_METASTORE_IN_USE",
                   f"The local metastore in {home} is open in another process (a running mv scheduler or "
                   "Connect server, a notebook or a test).",
                   "Stop that process; if it is a Connect server (python -m mv.connect_server), run this as its "
                   "client: SPARK_REMOTE=sc://localhost:15002 (its URL); or set MV_HOME to another folder, or "
                   "configure a shared metastore.",
                   home=home)
