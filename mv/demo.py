"""The demo behind `make demo`: window table functions on generated auction bids in Delta Lake.

It writes a day of Nexmark-style bids into a Delta table, one file per hour, then runs TUMBLE,
HOP, CUMULATE and SESSION queries on it and shows that a filter on window_start reads only the
files that can hold those windows.

Example:
    $ python -m mv.demo
"""
from __future__ import annotations

import time

from pyspark.sql import SparkSession

import mv

BIDS = "demo_bids"

QUERIES = {
    "Hot items: bids per auction in 10-minute windows sliding every 5 minutes (HOP)": """
        SELECT window_start, window_end, auction, count(*) AS bids
        FROM HOP(TABLE(demo_bids), DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
        GROUP BY window_start, window_end, auction
        ORDER BY bids DESC, window_start LIMIT 5""",
    "Highest bid per hour (TUMBLE)": """
        SELECT window_start, window_end, max(price) AS highest, count(*) AS bids
        FROM TUMBLE(TABLE(demo_bids), DESCRIPTOR(bidtime), INTERVAL '1' HOUR)
        GROUP BY window_start, window_end ORDER BY window_start LIMIT 5""",
    "Running total of the day, every 6 hours (CUMULATE)": """
        SELECT window_start, window_end, sum(price) AS total
        FROM CUMULATE(TABLE(demo_bids), DESCRIPTOR(bidtime), INTERVAL '6' HOURS, INTERVAL '1' DAY)
        GROUP BY window_start, window_end ORDER BY window_end""",
    "Bidder sessions closing after 10 idle minutes (SESSION)": """
        SELECT bidder, window_start, window_end, count(*) AS bids
        FROM SESSION(TABLE(demo_bids) PARTITION BY bidder, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
        GROUP BY bidder, window_start, window_end
        ORDER BY bids DESC, bidder LIMIT 5""",
}

PRUNED = """SELECT window_start, count(*) AS bids
    FROM TUMBLE(TABLE(demo_bids), DESCRIPTOR(bidtime), INTERVAL '1' HOUR)
    WHERE window_start >= TIMESTAMP'2024-01-01 21:00:00'
    GROUP BY window_start ORDER BY window_start"""


def generate_bids(spark: SparkSession, rows_per_hour: int = 20_000) -> None:
    """A day of bids, one Delta file per hour (each range partition is one hour of ids).

    Bidders are active in bursts (a bidder bids in a few 10-minute slots of the day), so sessions
    are short; auctions are skewed, so some are hot.
    """
    spark.sql(f"DROP TABLE IF EXISTS {BIDS}")
    spark.sql(f"""CREATE TABLE {BIDS} USING delta AS
        SELECT CAST(pow(((id * 7919) % 1000) / 1000.0, 3) * 100 AS BIGINT) AS auction,
               (slot * 131 + id % 40) % 1000 AS bidder,
               10 + (id * 31) % 990 AS price,
               TIMESTAMP'2024-01-01 00:00:00' + make_dt_interval(0, 0, 0, slot * 600 + (id * 599) % 600) AS bidtime
        FROM (SELECT id, CAST(id DIV {rows_per_hour} AS INT) * 6
                         + CAST((id % {rows_per_hour}) * 6 DIV {rows_per_hour} AS INT) AS slot
              FROM range(0, {24 * rows_per_hour}, 1, 24))""")


def _files_read(spark: SparkSession, query: str) -> int:
    df = spark.sql(query)
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    scans = [leaves.apply(i) for i in range(leaves.size())]
    return sum(scan.metrics().apply("numFiles").value() for scan in scans if scan.metrics().contains("numFiles"))


def main() -> None:
    started = time.time()
    spark = mv.session()
    print(f"Spark {spark.version} with Delta Lake and the window functions ({time.time() - started:.0f}s)")
    generate_bids(spark)
    total = spark.table(BIDS).count()
    print(f"Wrote {total:,} bids into the Delta table {BIDS}, one file per hour.\n")
    for title, query in QUERIES.items():
        t0 = time.time()
        result = spark.sql(query)
        print(f"== {title}")
        result.show(truncate=False)
        print(f"   ({time.time() - t0:.1f}s)\n")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    files = _files_read(spark, PRUNED)
    print("== A filter on window_start becomes a range on bidtime at the scan:")
    spark.sql(PRUNED).show(truncate=False)
    print(f"   Delta read {files} of 24 hourly files.")
    print(f"\nDone in {time.time() - started:.0f}s.")


if __name__ == "__main__":
    main()
