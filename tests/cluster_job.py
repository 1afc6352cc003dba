"""Runs window functions on a local-cluster master (separate executor JVMs); used by test_local_cluster.

Prints one JSON line with the results, so the test can compare them with the expected answers.
"""
import json
import sys

import mv


def main() -> None:
    spark = mv.session(master="local-cluster[2,1,1024]",
                       conf={"spark.sql.shuffle.partitions": "4", "spark.executor.memory": "1g",
                             "spark.sql.catalogImplementation": "in-memory"})
    spark.sql("DROP TABLE IF EXISTS cluster_bids")
    spark.sql("""CREATE TABLE cluster_bids USING delta AS
        SELECT TIMESTAMP'2024-01-01 00:00:00' + make_dt_interval(0, 0, id * 7, 0) AS ts,
               id % 3 AS item, id AS price FROM range(0, 1000, 1, 8)""")
    tumble = spark.sql("""SELECT count(DISTINCT window_start), sum(price), count(*)
        FROM TUMBLE(TABLE(cluster_bids), DESCRIPTOR(ts), INTERVAL '1' HOUR)""").first()
    sessions = spark.sql("""SELECT item, count(*) FROM (SELECT DISTINCT item, window_start
        FROM SESSION(TABLE(cluster_bids) PARTITION BY item, DESCRIPTOR(ts), INTERVAL '21' MINUTES))
        GROUP BY item ORDER BY item""").collect()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
    print(json.dumps({"executors": executors, "tumble": list(tumble),
                      "sessions": [list(row) for row in sessions]}))
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
