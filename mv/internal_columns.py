"""The helper columns the engine adds to plans that also carry the query's output columns or the
sources' columns, named in one place (the JVM's names: mv/jvm/InternalColumns.scala).

Every helper column begins with the reserved prefix `__mv_`, and no view's query may have an output
column or read a source with a column that begins with it (`check`, at CREATE and at every REFRESH):
so a helper column can never take a user's column's place, whatever else the user names a column
(`__op`, `__deleted` from Debezium, `__sign`, `__file`...). The late table's own columns (`_change_sign`,
`refresh_id`, `target_versions`, `detected_at`) keep their names, which existing late tables have:
a source column of one of these names is kept there as `__mv_source_<name>` (`late_name`).

Example:
    >>> spark.sql(f"SELECT *, 'upsert' AS {OP} FROM rows")    # beside any user column, `__op` too
    >>> check("v", info)                                       # MV_RESERVED_COLUMN_NAME if a column is `__mv_x`
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mv import errors

if TYPE_CHECKING:
    from mv.query import QueryInfo

PREFIX = "__mv_"

OP = PREFIX + "op"              # a merge's source row: 'upsert', 'delete', 'insert', 'region' (RefreshCommit.scala)
SIGN = PREFIX + "sign"          # a change row: +1 insert or post-image, -1 delete or pre-image (change_feed.py)
FILE = PREFIX + "file"          # a view row's file, as input_file_name() gives it (RefreshCommit.scala)
ROW = PREFIX + "row"            # its row index in the file, as deletion vectors count (writes.reached_rows)
NET_KEY = PREFIX + "net_key"    # the columns an update's images are netted by, numbered (change_feed.netted)
R = PREFIX + "r"                # a recomputed row is present in the outer join (writes.py)
WS, WE, T = PREFIX + "ws", PREFIX + "we", PREFIX + "t"  # a windowed change's start, end and time in µs
PART = PREFIX + "part"          # which window function of the query a change row went through
TOUCHED = PREFIX + "touched"    # the change reaches the group (combine.py, session_refresh.py)
NEEDS = PREFIX + "needs"        # the group must be recomputed from the source (combine.py)
EMPTY = PREFIX + "empty"        # the group's rows are all retracted
SIDE = PREFIX + "side"          # o: the view's old row, i: inserts, r: retractions (combine.py)
PRESENT = PREFIX + "present"    # the side has rows in the group
STARTS = PREFIX + "starts"      # a kept or new session starts a session here (session_refresh.py)
SESSION = PREFIX + "session"    # the running number of the session
LO, HI = PREFIX + "lo", PREFIX + "hi"  # a session region's bounds, µs
FIRST, LAST = PREFIX + "first", PREFIX + "last"  # a session's first and last row's time, µs
CHANGED, CHANGES = PREFIX + "changed", PREFIX + "changes"  # a row is a change; a session's count of them
GROUP = PREFIX + "group"        # the running number of merged spans
LATE = PREFIX + "late"          # a change is late (session_lateness.py)
CUT = PREFIX + "cut"            # the latest end of a key's final sessions, µs
N, COPY = PREFIX + "n", PREFIX + "copy"  # a count of rows (a late row's net count; a windowed change row's), one copy
IN = PREFIX + "in"              # which side of the demo's comparison a row is in

# The late table's columns beside the source's (history.write_late_rows): names late tables have.
LATE_METADATA = ("_change_sign", "refresh_id", "target_versions", "detected_at")


def reserved(name: str) -> bool:
    """Whether `name` is reserved for the engine's helper columns (case-insensitive, as Delta's names)."""
    return name.lower().startswith(PREFIX)


def check(view: str, info: QueryInfo) -> None:
    """Raise MV_RESERVED_COLUMN_NAME when the query (as mv_describe says) has an output column, or reads
    a source with a column, that begins with the reserved prefix."""
    for column in info.output:
        if reserved(column.name):
            raise errors.reserved_column_name(view, column.name, None)
    for source in info.sources:
        for name in source.get("columns") or []:
            if reserved(name):
                raise errors.reserved_column_name(view, name, source.get("table"))


def late_name(column: str) -> str:
    """The late table's name for the source's column `column`: itself, unless the late table's own
    columns take that name.

    Example: late_name("price") == "price"; late_name("refresh_id") == "__mv_source_refresh_id".
    """
    return PREFIX + "source_" + column if column.lower() in LATE_METADATA else column
