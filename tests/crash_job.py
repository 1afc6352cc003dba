"""The crash-safety test's source, views and checks (test_mv_exactly_once), and its refresh process.

    python crash_job.py setup STEP   source + two identical views (killed, clean) + first batch,
                                     then refresh `killed`, killed (kill -9) at STEP
    python crash_job.py resume       refresh `killed` and `clean`, print their comparison
Each process runs on the warehouse of MV_HOME, with Spark's default settings.
"""
import json
import os
import sys

import mv

VIEW = """CREATE MATERIALIZED VIEW {name}
    WATERMARK FOR ts AS ts - INTERVAL '10' MINUTES EMIT ON WINDOW CLOSE
    AS SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
    FROM TUMBLE(TABLE(crash_bids), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
    GROUP BY item, window_start, window_end"""


def setup(spark) -> None:
    """The source with its first rows, and the views `killed` and `clean` over it."""
    spark.sql("CREATE TABLE crash_bids (item STRING, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql("""INSERT INTO crash_bids VALUES ('A', 0, TIMESTAMP'2024-01-01 00:01:00'),
                 ('B', 0, TIMESTAMP'2024-01-01 00:15:00'), ('C', 0, TIMESTAMP'2024-01-01 00:30:00')""")
    for name in ("killed", "clean"):
        spark.sql(VIEW.format(name=name))


def teardown(spark) -> None:
    for name in ("killed", "clean"):
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
    spark.sql("DROP TABLE IF EXISTS crash_bids")


def batch(spark, n: int) -> None:
    """New rows an hour later each batch, one row far too late, an update and a delete."""
    spark.sql(f"""INSERT INTO crash_bids VALUES
        ('A', {n}, TIMESTAMP'2024-01-01 00:01:00' + INTERVAL {n} HOURS),
        ('B', {n}, TIMESTAMP'2024-01-01 00:15:00' + INTERVAL {n} HOURS),
        ('C', {n}, TIMESTAMP'2024-01-01 00:40:00' + INTERVAL {n} HOURS),
        ('L', {n}, TIMESTAMP'2024-01-01 00:01:00')""")
    spark.sql(f"UPDATE crash_bids SET price = price + 100 WHERE item = 'A' AND price = {n - 1}")
    spark.sql(f"DELETE FROM crash_bids WHERE item = 'B' AND price = {n - 1}")


def compare(spark) -> dict:
    def rows(query):
        return sorted(json.dumps(list(r), default=str) for r in spark.sql(query).collect())
    late = "SELECT item, price, ts, window_start, _change_type FROM {}__late"  # ids may differ: see the test
    history = "SELECT refresh_id, count(*) FROM mv_refresh_history WHERE view = '{}' GROUP BY refresh_id"
    return {
        "views_equal": rows("SELECT * FROM killed") == rows("SELECT * FROM clean"),
        "late_equal": rows(late.format("killed")) == rows(late.format("clean")),
        "late_rows": len(rows(late.format("killed"))),
        "history": rows(history.format("killed")),
        "view_rows": len(rows("SELECT * FROM killed")),
    }


def main(step: str, *args: str) -> None:
    spark = mv.session(conf={"spark.sql.shuffle.partitions": "2"})
    if step == "setup":
        setup(spark)
        batch(spark, 1)
        os.environ["MV_KILL_AT"] = args[0]  # the process dies there (mv.progress.checkpoint)
        spark.sql("REFRESH MATERIALIZED VIEW killed").collect()
        raise SystemExit(f"the refresh was not killed at {args[0]}")
    for name in ("killed", "clean"):
        spark.sql(f"REFRESH MATERIALIZED VIEW {name}").collect()
    print(json.dumps(compare(spark)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
