"""The in-process crash-safety test's source, views and checks (test_mv_exactly_once): two
identical views, `killed` (stopped at a kill point) and `clean` (its oracle), of one of WINDOWS:
both keep their open windows or sessions in `<view>__open`."""
import json

VIEW = """CREATE MATERIALIZED VIEW {name}
    WATERMARK FOR ts AS ts - INTERVAL '10' MINUTES EMIT ON WINDOW CLOSE
    AS SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
    FROM {window} GROUP BY item, window_start, window_end"""
WINDOWS = {
    "tumble": "TUMBLE(TABLE(crash_bids), DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
    "session": "SESSION(TABLE(crash_bids) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
}


def setup(spark, kind: str = "tumble") -> None:
    """The source with its first rows, and the views `killed` and `clean` over it."""
    spark.sql("CREATE TABLE crash_bids (item STRING, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql("""INSERT INTO crash_bids VALUES ('A', 0, TIMESTAMP'2024-01-01 00:01:00'),
                 ('B', 0, TIMESTAMP'2024-01-01 00:15:00'), ('C', 0, TIMESTAMP'2024-01-01 00:30:00')""")
    for name in ("killed", "clean"):
        spark.sql(VIEW.format(name=name, window=WINDOWS[kind]))


def teardown(spark) -> None:
    for name in ("killed", "clean"):
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
    spark.sql("DROP TABLE IF EXISTS crash_bids")


def batch(spark, n: int, retracting: bool = True) -> None:
    """New rows an hour later each batch, one row far too late, and unless not `retracting` an
    update and a delete."""
    spark.sql(f"""INSERT INTO crash_bids VALUES
        ('A', {n}, TIMESTAMP'2024-01-01 00:01:00' + INTERVAL {n} HOURS),
        ('B', {n}, TIMESTAMP'2024-01-01 00:15:00' + INTERVAL {n} HOURS),
        ('C', {n}, TIMESTAMP'2024-01-01 00:40:00' + INTERVAL {n} HOURS),
        ('L', {n}, TIMESTAMP'2024-01-01 00:01:00')""")
    if not retracting:
        return
    spark.sql(f"UPDATE crash_bids SET price = price + 100 WHERE item = 'A' AND price = {n - 1}")
    spark.sql(f"DELETE FROM crash_bids WHERE item = 'B' AND price = {n - 1}")


def compare(spark) -> dict:
    def rows(query):
        return sorted(json.dumps(list(r), default=str) for r in spark.sql(query).collect())
    late = "SELECT item, price, ts, _change_type FROM {}__late"  # ids may differ: see the test
    history = "SELECT refresh_id, count(*) FROM mv_refresh_history WHERE view = '{}' GROUP BY refresh_id"
    return {
        "views_equal": rows("SELECT * FROM killed") == rows("SELECT * FROM clean"),
        "late_equal": rows(late.format("killed")) == rows(late.format("clean")),
        "open_equal": rows("SELECT * FROM killed__open") == rows("SELECT * FROM clean__open"),
        "late_rows": len(rows(late.format("killed"))),
        "history": rows(history.format("killed")),
        "view_rows": len(rows("SELECT * FROM killed")),
    }
