"""Every materialized-view statement of docs/statements.md, run in a fresh database, as a transcript.

The same suite runs three ways (tests/test_sql_statements.py: spark.sql and mv.sql in the
embedded session; tests/test_connect.py: a Spark Connect client with no `mv` package), and each
transcript must equal EXPECTED. It imports nothing of the engine, so a plain pyspark process can
run it:

    $ python tests/statement_suite.py sc://localhost:15002     # prints the transcript as JSON
"""
from __future__ import annotations

import json
import re
import sys
from typing import Callable

QUERY = """SELECT window_start, window_end, count(*) AS bids, sum(price) AS total
    FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES) GROUP BY window_start, window_end"""

STATEMENTS = [
    # CREATE with clauses in an unusual order, then the variants that change nothing or everything.
    f"""CREATE MATERIALIZED VIEW totals COMMENT 'ten-minute totals' REFRESH POLICY AUTO
        EMIT ON UPDATE WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE AS {QUERY}""",
    f"CREATE MATERIALIZED VIEW IF NOT EXISTS totals AS {QUERY}",
    f"CREATE MATERIALIZED VIEW totals AS {QUERY}",
    "SHOW MATERIALIZED VIEWS",
    "DESCRIBE MATERIALIZED VIEW totals",
    "EXPLAIN MATERIALIZED VIEW totals",
    f"EXPLAIN CREATE MATERIALIZED VIEW other AS {QUERY}",
    f"EXPLAIN CREATE OR REPLACE MATERIALIZED VIEW totals AS {QUERY}",  # deploy row: what would change
    "INSERT INTO bids VALUES (TIMESTAMP'2020-04-15 08:21:00', 7, 'G')",
    "REFRESH MATERIALIZED VIEW totals",
    "REFRESH MATERIALIZED VIEW totals",
    "REFRESH MATERIALIZED VIEW totals FULL",
    "SELECT * FROM totals ORDER BY window_start",
    "INSERT INTO totals SELECT * FROM totals",
    "REFRESH MATERIALIZED VIEW totals EMIT",
    "REFRESH MATERIALIZED VIEW missing",
    f"CREATE OR REPLACE MATERIALIZED VIEW totals REFRESH POLICY INCREMENTAL AS {QUERY}",
    "DESC MATERIALIZED VIEW EXTENDED totals",
    "DROP MATERIALIZED VIEW totals",
    "DROP MATERIALIZED VIEW IF EXISTS totals",
    "SHOW MATERIALIZED VIEWS",
]

OPERATORS = [["operator", "Aggregate: the touched windows' groups: the change's aggregates combined into theirs, or recomputed"],
             ["operator", "  Window TUMBLE: each changed row's windows, touched"],
             ["operator", "    Filter: rows pass through"],
             ["operator", "      SubqueryAlias: rows pass through"],
             ["operator", "        Source `spark_catalog`.`{db}`.`bids`: its change feed, signed: the windows its changed rows fall in"]]

EXPECTED = [
    ["status", [["created totals: 2 rows"]]],
    ["status", [["totals already exists"]]],
    ["error", "MV_VIEW_ALREADY_EXISTS"],
    ["name", [["totals"]]],
    ["property,value", [["name", "totals"], ["query", "…"], ["watermark_column", "bidtime"],
                        ["watermark_delay", "INTERVAL '1' MINUTE"], ["emit", "UPDATE"], ["policy", "AUTO"],
                        ["comment", "'ten-minute totals'"], ["time_zone", "UTC"]]],
    ["property,value", [["technique", "incremental"], ["reason", "CHANGES_ONLY"], ["shape", "window"],
                        ["strategy", "windows: the windows the change touches, combined or recomputed"],
                        ["sources", "spark_catalog.{db}.bids"], ["row_key", "window_start, window_end"],
                        ["estimate", "none: nothing to weigh (no pending change, a full refresh, or not a window query)"],
                        ["last_refresh", "1: full (FIRST_REFRESH) in … s; not estimated in seconds"], *OPERATORS]],
    ["property,value", [["technique", "incremental"], ["reason", "CHANGES_ONLY"], ["shape", "window"],
                        ["strategy", "windows: the windows the change touches, combined or recomputed"],
                        ["sources", "spark_catalog.{db}.bids"], ["row_key", "window_start, window_end"],
                        ["estimate", "none: nothing to weigh (no pending change, a full refresh, or not a window query)"],
                        *OPERATORS, ["deploy", "create"]]],
    ["property,value", [["technique", "incremental"], ["reason", "CHANGES_ONLY"], ["shape", "window"],
                        ["strategy", "windows: the windows the change touches, combined or recomputed"],
                        ["sources", "spark_catalog.{db}.bids"], ["row_key", "window_start, window_end"],
                        ["estimate", "none: nothing to weigh (no pending change, a full refresh, or not a window query)"],
                        *OPERATORS, ["deploy", "replace: watermark_column, watermark_delay, comment"]]],
    ["", []],
    ["view,technique,reason,refresh_id,rows_read,rows_inserted,rows_updated,rows_deleted,late_rows,"
     "groups_combined,groups_recomputed,duration_s",
     [["totals", "incremental", "CHANGES_ONLY", 2, 1, 1, 0, 0, 0, 0, 0, "…"]]],
    ["view,technique,reason,refresh_id,rows_read,rows_inserted,rows_updated,rows_deleted,late_rows,"
     "groups_combined,groups_recomputed,duration_s",
     [["totals", "incremental", "NO_CHANGES", 2, 0, 0, 0, 0, 0, 0, 0, "…"]]],
    ["view,technique,reason,refresh_id,rows_read,rows_inserted,rows_updated,rows_deleted,late_rows,"
     "groups_combined,groups_recomputed,duration_s",
     [["totals", "full", "REQUESTED_FULL", 3, 0, 0, 0, 0, 0, 0, 0, "…"]]],  # a full refresh that changed no row
    ["window_start,window_end,bids,total", [["2020-04-15 08:00:00", "2020-04-15 08:10:00", 3, 11],
                                            ["2020-04-15 08:10:00", "2020-04-15 08:20:00", 3, 10],
                                            ["2020-04-15 08:20:00", "2020-04-15 08:30:00", 1, 7]]],
    ["error", "MV_VIEW_READ_ONLY"],
    ["error", "MV_STATEMENT_SYNTAX"],
    ["error", "MV_VIEW_NOT_FOUND"],
    ["status", [["created totals: 3 rows"]]],
    ["property,value", "…"],
    ["status", [["dropped totals"]]],
    ["status", [["totals does not exist"]]],
    ["name", []],
]

# Flink's Bid table (tests/fixtures/window_examples/flink.txt), prices as integers.
BIDS = """CREATE TABLE bids USING delta AS SELECT * FROM VALUES
    (TIMESTAMP'2020-04-15 08:05:00', 4, 'C'), (TIMESTAMP'2020-04-15 08:07:00', 2, 'A'),
    (TIMESTAMP'2020-04-15 08:09:00', 5, 'D'), (TIMESTAMP'2020-04-15 08:11:00', 3, 'B'),
    (TIMESTAMP'2020-04-15 08:13:00', 1, 'E'), (TIMESTAMP'2020-04-15 08:17:00', 6, 'F') AS t(bidtime, price, item)"""


def transcript(run: Callable[[str], object], database: str) -> list:
    """Each statement's columns and rows (values that vary from run to run as '…'), or its error class."""
    run(f"DROP DATABASE IF EXISTS {database} CASCADE")
    run(f"CREATE DATABASE {database}")
    run(f"USE {database}")
    run(BIDS)
    result = []
    for text in STATEMENTS:
        try:
            frame = run(text)
        except Exception as e:  # noqa: BLE001 - the transcript records the error's class
            result.append(["error", e.getCondition() if hasattr(e, "getCondition") else repr(e)])
            continue
        columns = ",".join(frame.columns)
        rows = [[_plain(column, value, database) for column, value in zip(frame.columns, row)]
                for row in frame.collect()]
        result.append([columns, "…" if text.startswith("DESC MATERIALIZED VIEW EXTENDED") else rows])
    return result


def expected(database: str) -> list:
    return json.loads(json.dumps(EXPECTED).replace("{db}", database))


LAST_REFRESH = re.compile(r"\d+: \w+ \(\w+\) in [0-9.]+ s")


def _plain(column: str, value, database: str):
    if column == "duration_s" or (column == "value" and isinstance(value, str) and "TUMBLE(" in value):
        return "…"
    if column == "value" and isinstance(value, str) and LAST_REFRESH.match(value):  # EXPLAIN's last_refresh
        return re.sub(r" in [0-9.]+ s", " in … s", value)
    if hasattr(value, "isoformat"):
        return str(value)
    if hasattr(value, "as_integer_ratio") and not isinstance(value, (int, float)):
        return int(value)
    return value


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print(json.dumps(transcript(spark.sql, sys.argv[2] if len(sys.argv) > 2 else "suite_connect")))
