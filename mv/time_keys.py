"""Group keys that are a time column's day, month or hour: the source time a range of them spans.

A GROUP BY `DATE_FORMAT(dateTime, 'yyyy-MM-dd')` (or `date_trunc('HOUR', ts)`) recomputes the
groups a change touches from the rows of those keys. A filter on the key is no filter on the time
column, so Delta would read every file of the source (Spark turns one on `CAST(ts AS DATE)` into
one on ts itself, but not these); the rows of keys `low` to `high` lie between the start of
`low`'s period and the end of `high`'s, a range of the time column Delta skips files by.
mv_describe finds such keys (each read's `time_keys`: QueryDescription.timeKeys); this module
decides which of them keep the time's order (a format whose text sorts as its time: fixed-width
numbers, largest unit first) and turns a range of keys into the range of time: from the lowest
key parsed back with its format, in the session's time zone as the key was made (the first
instant of its period, exactly), to the highest's plus its period and a day's margin (adding a
day adds 24 hours, and a local day may have 25).

Example:
    >>> kept_sources(run, {"day": Range("2026-11-03", "2026-11-04", False)})
    {'bids': '(SELECT * FROM bids VERSION AS OF 9 WHERE (`dateTime` >= timestamp_micros(...) AND ...))'}
"""
from __future__ import annotations

import re

from mv import writes
from mv.query import quote, sql_string
from mv.run import Run
from mv.writes import Range

# DATE_FORMAT patterns whose text sorts as the time does: zero-padded fields, largest first, and
# the period the last one spans.
ORDERED_FORMAT = re.compile(r"^yyyy(?P<month>[-/. ]?MM(?P<day>[-/. ]?dd(?P<hour> ?HH(?P<minute>:?mm(?P<second>:?ss)?)?)?)?)?$")
FORMAT_PERIODS = (("second", "1 SECOND"), ("minute", "1 MINUTE"), ("hour", "1 HOUR"), ("day", "1 DAY"),
                  ("month", "1 MONTH"))
TRUNC_PERIODS = {"YEAR": "1 YEAR", "YYYY": "1 YEAR", "YY": "1 YEAR", "QUARTER": "3 MONTH", "MONTH": "1 MONTH",
                 "MM": "1 MONTH", "MON": "1 MONTH", "WEEK": "7 DAY", "DAY": "1 DAY", "DD": "1 DAY",
                 "HOUR": "1 HOUR", "MINUTE": "1 MINUTE", "SECOND": "1 SECOND"}
MARGIN = "INTERVAL 1 DAY"  # after the end found by adding the period: a local day may have 25 hours


def kept_sources(run: Run, ranges: dict[str, Range]) -> dict[str, str]:
    """Each read with time keys among `ranges` (the touched groups' keys), as this refresh's version
    of its source kept to the time those keys span: `Run.query_over`'s replacements. One query on
    the driver turns the keys into times; a key whose function does not keep the order, or whose
    range has no value, keeps nothing."""
    wanted = [(read, key) for read in run.info.reads for key in read.time_keys
              if key["key"] in ranges and ranges[key["key"]].low is not None and period(key)]
    if not wanted:
        return {}
    bounds = [expression for _, key in wanted for expression in _bounds(key, ranges[key["key"]])]
    times = run.spark.sql("SELECT " + ", ".join(bounds)).first()
    conditions: dict[str, list[str]] = {}
    for i, (read, key) in enumerate(wanted):
        low, high = times[2 * i], times[2 * i + 1]
        if low is None or high is None:  # a key the format cannot read back: no bound
            continue
        column = quote(key["column"])
        between = f"({column} >= timestamp_micros({low}) AND {column} <= timestamp_micros({high}))"
        conditions.setdefault(read.name, []).append(
            f"({column} IS NULL OR {between})" if ranges[key["key"]].nulls else between)
    tables = {read.name: read.table for read in run.info.reads}
    return {name: writes.kept_to(run.source(tables[name]), " AND ".join(found)) for name, found in conditions.items()}


def period(key: dict) -> str | None:
    """The time one key value spans, as an interval's SQL (None: the function does not keep the order)."""
    if key["function"] == "date_trunc":
        return TRUNC_PERIODS.get(str(key["argument"]).upper())
    ordered = ORDERED_FORMAT.match(key["argument"] or "") if key["function"] == "date_format" else None
    if not ordered:
        return None
    return next((period for field, period in FORMAT_PERIODS if ordered.group(field)), "1 YEAR")


def _bounds(key: dict, found: Range) -> tuple[str, str]:
    """SQL: the microseconds of the start of `found.low`'s period, and of the end of `found.high`'s
    plus the margin (NULL when the key does not read back as a time)."""
    def start(value: str) -> str:
        if key["function"] == "date_trunc":
            return f"timestamp_micros({int(value)})"
        return f"try_to_timestamp({sql_string(value)}, {sql_string(key['argument'])})"
    return (f"unix_micros({start(found.low)})",
            f"unix_micros({start(found.high)} + INTERVAL {period(key)} + {MARGIN})")
