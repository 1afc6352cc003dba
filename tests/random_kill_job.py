"""The random-kill test's refresh process (test_mv_exactly_once): one round of a batch, refreshed
by a process that the test kills with SIGKILL after a random delay.

    python random_kill_job.py ROUND        round 0 creates the source and the views; each round
                                           first finishes what the previous (killed) process left,
                                           refreshes the clean twins, prints their comparison as
                                           JSON, then writes batch ROUND + 1, prints "refreshing" and
                                           refreshes the killed views
    python random_kill_job.py ROUND STEP   the same, the killed views' refresh killing itself (kill -9)
                                           at kill point STEP (mv.progress) instead
    python random_kill_job.py ROUND last   only the first part: finish, refresh, compare
Six kinds of view, each twice (`<kind>_killed`, `<kind>_clean`): TUMBLE; HOP with a WATERMARK,
EMIT ON WINDOW CLOSE and GRACE; SESSION; a TUMBLE over bids joined to their items' categories (a
category changes each batch); the rows of bids LEFT JOIN items (item C leaves and comes back, its
bids padded, then matched again); a UNION ALL of bids and asks. A killed view is always brought up to date before the next
batch, so both twins see the same batches at the same refreshes and must end equal.
Each process runs on the warehouse of MV_HOME, with Spark's default settings.
"""
import json
import os
import sys

import mv

VIEWS = {  # the killed twins refresh in this order: HOP first, the one with late rows; the join
    # and union views next, so that the random delay lands in them as often as in the windows
    "hop": """SELECT item, window_start, window_end, count(*) AS n, max(price) AS top
        FROM HOP(TABLE(rk_bids), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
        GROUP BY item, window_start, window_end""",
    "joined": """SELECT i.category, window_start, window_end, count(*) AS n, sum(b.price) AS total
        FROM TUMBLE(TABLE(rk_bids), DESCRIPTOR(ts), INTERVAL '10' MINUTES) b JOIN rk_items i ON b.item = i.item
        GROUP BY i.category, window_start, window_end""",
    "union": "SELECT item, price, ts FROM rk_bids UNION ALL SELECT item, price, ts FROM rk_asks WHERE price < 90",
    "join_rows": "SELECT b.item, b.price, b.ts, i.category FROM rk_bids b LEFT JOIN rk_items i ON b.item = i.item",
    "tumble": """SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
        FROM TUMBLE(TABLE(rk_bids), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY item, window_start, window_end""",
    "session": """SELECT item, window_start, window_end, count(*) AS n, sum(price) AS total
        FROM SESSION(TABLE(rk_bids) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
        GROUP BY item, window_start, window_end""",
}
CLAUSES = {  # what a view says before AS; the others: nothing
    "hop": "WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE GRACE INTERVAL '10' MINUTES",
}


def create(spark) -> None:
    for table, columns in (("rk_bids", "item STRING, price BIGINT, ts TIMESTAMP"),
                           ("rk_asks", "item STRING, price BIGINT, ts TIMESTAMP"),
                           ("rk_items", "item STRING, category STRING")):
        spark.sql(f"CREATE TABLE {table} ({columns}) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO rk_items VALUES ('A', 'a'), ('B', 'b'), ('C', 'c'), ('L', 'l')")
    for kind, query in VIEWS.items():
        for twin in ("killed", "clean"):
            # INCREMENTAL: AUTO would refresh these tiny tables in full, and the test is of the changes' path
            spark.sql(f"CREATE MATERIALIZED VIEW {kind}_{twin} {CLAUSES.get(kind, '')} REFRESH POLICY INCREMENTAL "
                      f"AS {query}").collect()


def batch(spark, n: int) -> None:
    """Rows half an hour later each batch (one extends a session, one is within GRACE of a closed
    window, one is far too late), an update and a delete of the previous batch's rows; an ask
    inserted, one updated and one deleted; item A's category renamed; item C deleted (odd batches)
    or back (even ones)."""
    base = "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL {} MINUTES"
    rows = [("A", n, 30 * n + 1), ("A", n, 30 * n + 4), ("B", n, 30 * n + 12), ("C", n, 30 * n + 20),
            ("A", 100 + n, 30 * n - 8), ("L", n, 1)]
    spark.sql("INSERT INTO rk_bids VALUES " + ", ".join(f"('{i}', {p}, {base.format(m)})" for i, p, m in rows))
    spark.sql(f"UPDATE rk_bids SET price = price + 1000 WHERE item = 'A' AND price = {n - 1}")
    spark.sql(f"DELETE FROM rk_bids WHERE item = 'B' AND price = {n - 1}")
    spark.sql(f"INSERT INTO rk_asks VALUES ('A', {n}, {base.format(30 * n + 2)}), ('C', {n}, {base.format(30 * n)})")
    spark.sql(f"UPDATE rk_asks SET price = price + 90 WHERE item = 'A' AND price = {n - 1}")
    spark.sql(f"DELETE FROM rk_asks WHERE item = 'C' AND price = {n - 1}")
    spark.sql(f"UPDATE rk_items SET category = 'a{n}' WHERE item = 'A'")
    spark.sql("DELETE FROM rk_items WHERE item = 'C'" if n % 2 else "INSERT INTO rk_items VALUES ('C', 'c')")


def compare(spark) -> dict:
    """Per kind: whether the twins' rows and late rows are equal, and the killed view's history
    (refresh id, history rows with that id)."""
    def rows(query: str) -> list:
        return sorted(json.dumps(list(r), default=str) for r in spark.sql(query).collect())

    def late(view: str) -> list:  # refresh ids may differ: a killed refresh's rerun keeps its id, others not
        exists = spark.catalog.tableExists(f"{view}__late")
        return rows(f"SELECT item, price, ts, _change_type FROM {view}__late") if exists else []
    history = "SELECT refresh_id, count(*) FROM mv_refresh_history WHERE view = '{}' GROUP BY refresh_id"
    def kept(view: str) -> list:  # the open windows an EMIT ON WINDOW CLOSE view keeps (hop's)
        return rows(f"SELECT * FROM {view}__open") if spark.catalog.tableExists(f"{view}__open") else []
    return {kind: {"views_equal": rows(f"SELECT * FROM {kind}_killed") == rows(f"SELECT * FROM {kind}_clean"),
                   "late_equal": late(f"{kind}_killed") == late(f"{kind}_clean"),
                   "open_equal": kept(f"{kind}_killed") == kept(f"{kind}_clean"),
                   "late_rows": len(late(f"{kind}_killed")),
                   "history": [json.loads(h) for h in rows(history.format(f"{kind}_killed"))]}
            for kind in VIEWS}


def main(round_: str, step: str = "") -> None:
    spark = mv.session(conf={"spark.sql.shuffle.partitions": "2"})
    n = int(round_)
    if n == 0:
        create(spark)
    techniques = {}
    for kind in VIEWS:  # what the killed process left, then the twins, at the same source versions
        spark.sql(f"REFRESH MATERIALIZED VIEW {kind}_killed").collect()
        techniques[kind] = spark.sql(f"REFRESH MATERIALIZED VIEW {kind}_clean").first().technique
    compared = compare(spark)
    for kind, technique in techniques.items():
        compared[kind]["clean_technique"] = technique
    print(json.dumps(compared), flush=True)
    if step == "last":
        return spark.stop()
    batch(spark, n + 1)
    if step:
        os.environ["MV_KILL_AT"] = step  # the process dies there (mv.progress.checkpoint)
    print("refreshing", flush=True)
    for kind in VIEWS:
        spark.sql(f"REFRESH MATERIALIZED VIEW {kind}_killed").collect()
    print("refreshed", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
