"""eKuiper's per-event windows against the Spark SQL a user would write by hand: same rows, timed.

SLIDINGWINDOW is a RANGE frame over the event time and COUNTWINDOW a ROWS frame kept every m-th
row. Without other GROUP BY keys the engine runs both in one pass (mv/jvm/EkuiperSlidingWindowExec:
count, exact sums, avg, min and max updated as rows enter and leave the frame), where Spark's frame
re-aggregates every row's frame; target ratio median(ours) / median(hand-written) <= 1.0. Method,
table and timing are bench/windows.py's.

Example:
    $ python -m bench.ekuiper --runs 3          # 5M rows
    $ python -m bench.ekuiper --render          # rewrite RESULTS.md from results/ekuiper.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone

from bench.report import rewrite_section
from bench.windows import (BENCH_DIR, DATA_DIR, DATA_VERSION, RESULTS_MD, Pair, ResultMismatch, bids_table,
                           machine, markdown_table, measure)

RESULTS_JSON = BENCH_DIR / "results" / "ekuiper.json"
AGGREGATES = "count(*) AS bids, sum(price) AS volume, max(price) AS top_price"
FRAMED = "count(*) OVER w AS bids, sum(price) OVER w AS volume, max(price) OVER w AS top_price"

PAIRS = (
    # (t - 60 s, t]: a RANGE frame reaching back 60 s less one microsecond.
    Pair("SLIDINGWINDOW 60 s", "GROUP BY SLIDINGWINDOW(ss, 60)", "RANGE frame, 60 s back",
         f"SELECT window_end() AS window_end, {AGGREGATES} FROM bids GROUP BY SLIDINGWINDOW(ss, 60)",
         f"""SELECT ts AS window_end, {FRAMED} FROM bids
             WINDOW w AS (ORDER BY ts RANGE BETWEEN INTERVAL '59.999999' SECOND PRECEDING AND CURRENT ROW)"""),
    # Rows in time order, ties by a hash of the row (the engine's documented order); every 10th row
    # from the 100th closes a window of the latest 100.
    Pair("COUNTWINDOW 100 every 10", "GROUP BY COUNTWINDOW(100, 10)", "ROWS frame, every 10th row",
         f"SELECT window_end() AS window_end, {AGGREGATES} FROM bids GROUP BY COUNTWINDOW(100, 10)",
         f"""SELECT window_end, bids, volume, top_price FROM (
               SELECT ts AS window_end, {FRAMED},
                      row_number() OVER (ORDER BY ts, hash(auction, bidder, price, ts)) AS n FROM bids
               WINDOW w AS (ORDER BY ts, hash(auction, bidder, price, ts) ROWS BETWEEN 99 PRECEDING AND CURRENT ROW))
             WHERE n % 10 = 0 AND n >= 100"""),
)


def run(rows: int, runs: int) -> dict:
    """Measure both pairs on ``rows`` bids; the results/ekuiper.json document."""
    os.environ.setdefault("MV_HOME", str(DATA_DIR / "mv_home"))
    import mv

    spark = mv.session(conf={"spark.app.name": "mv-bench-ekuiper"})
    spark.read.format("delta").load(bids_table(spark, rows)).createOrReplaceTempView("bids")
    load_before = os.getloadavg()
    print(f"{rows:,} rows, {runs} runs per side", flush=True)
    pairs = [measure(spark, pair, runs) for pair in PAIRS]
    return {"benchmark": "ekuiper", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "rows": rows, "runs": runs, "data_version": DATA_VERSION, "machine": machine(spark),
            "load_average": {"before": load_before, "after": os.getloadavg()}, "pairs": pairs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ekuiper", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1,000,000 rows (QUICK=1 make bench)")
    parser.add_argument("--render", action="store_true", help="only rewrite RESULTS.md from results/ekuiper.json")
    args = parser.parse_args(argv)
    if args.render:
        results = json.loads(RESULTS_JSON.read_text())
    else:
        try:
            results = run(1_000_000 if args.quick else args.rows, args.runs)
        except ResultMismatch as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        RESULTS_JSON.write_text(json.dumps(results, indent=2) + "\n")
    rewrite_section(RESULTS_MD, "ekuiper", "eKuiper windows vs hand-written window frames", markdown_table(results))
    print(markdown_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
