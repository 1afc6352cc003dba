"""Large appends at the end of time: an incremental refresh against a full one (issue 38's cases).

Each case: a source of one row a second (`--rows`, 2M by default), two identical views over it,
one under REFRESH POLICY INCREMENTAL and one under REFRESH POLICY FULL (the full refresh AUTO
would run); each round appends a batch of newer rows and refreshes both, in alternating order.
Medians over the rounds after the first (the first incremental refresh of a process pays for
its code's first run), and the median of the rounds' paired ratios. Every round checks the
incremental view against its query recomputed from scratch; a difference stops the run.
    one_percent   TUMBLE 1 minute, 1,000 keys, count + sum, EMIT ON UPDATE; 1% appended a round
                  (target <= 0.12x full)
    q7            TUMBLE 10 s, max and count, EMIT ON UPDATE; 500,000 rows a round from 2M
                  (Nexmark q7's shape; target <= 0.3x full)
    q7_on_close   the same under WATERMARK ts - 10 minutes, EMIT ON WINDOW CLOSE (target <= 0.3x)
    q5_on_close   HOP 2 s / 10 s, count per auction (`a`, hot for 100 s at a time), under the same
                  watermark and EMIT ON WINDOW CLOSE; 500,000 rows a round (Nexmark q5's shape;
                  target <= 0.3x)

Example:
    $ python -m bench.appends --label "fresh windows"      # 3 rounds a case, kept beside earlier runs
    $ python -m bench.appends --cases q7 --rounds 2        # quicker
    $ python -m bench.appends --render                     # rewrite RESULTS.md from results/appends.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import datetime, timezone

from bench.refresh import BENCH_DIR, DATA_DIR
from bench.report import InvalidRun, add_output_arguments, labelled_runs, reported
from bench.windows import RESULTS_MD, machine

MV_HOME = DATA_DIR / "mv_home_appends"
RESULTS_JSON = BENCH_DIR / "results" / "appends.json"
CASES = {
    "one_percent": {"select": "k, window_start, window_end, count(*) AS n, sum(price) AS total",
                    "size": "1 MINUTE", "group": "k, window_start, window_end", "clauses": "",
                    "batch": 0.01, "target": 0.12},
    "q7": {"select": "window_start, window_end, max(price) AS top, count(*) AS n", "size": "10 SECONDS",
           "group": "window_start, window_end", "clauses": "", "batch": 0.25, "target": 0.3},
    "q7_on_close": {"select": "window_start, window_end, max(price) AS top, count(*) AS n", "size": "10 SECONDS",
                    "group": "window_start, window_end", "batch": 0.25, "target": 0.3,
                    "clauses": "WATERMARK FOR ts AS ts - INTERVAL '10' MINUTES EMIT ON WINDOW CLOSE"},
    "q5_on_close": {"select": "a, window_start, window_end, count(*) AS n", "group": "a, window_start, window_end",
                    "window": "HOP(TABLE(ap_source), DESCRIPTOR(ts), INTERVAL '2' SECONDS, INTERVAL '10' SECONDS)",
                    "batch": 0.25, "target": 0.3,
                    "clauses": "WATERMARK FOR ts AS ts - INTERVAL '10' MINUTES EMIT ON WINDOW CLOSE"},
}


def rows(spark, first: int, count: int):
    """`count` rows numbered from `first`, one a second, keys `k` cycling over 1,000, auctions `a`
    over 10, each bid on for 100 s at a time."""
    return spark.range(first, first + count, numPartitions=2).selectExpr(
        "id % 1000 AS k", "(id DIV 100) % 10 AS a", "(id * 7919) % 100000 AS price",
        "timestamp_micros(id * 1000000) AS ts")


def query(case: dict) -> str:
    window = case.get("window") or f"TUMBLE(TABLE(ap_source), DESCRIPTOR(ts), INTERVAL {case['size']})"
    return f"SELECT {case['select']} FROM {window} GROUP BY {case['group']}"


def refreshed(spark, view: str) -> dict:
    import mv

    started = time.perf_counter()
    row = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    return {"seconds": round(time.perf_counter() - started, 3), "technique": row.technique, "reason": row.reason}


def run_case(spark, name: str, source_rows: int, rounds: int) -> dict:
    import mv

    case = CASES[name]
    batch = int(source_rows * case["batch"])
    for view in ("ap_incremental", "ap_full"):
        mv.sql(spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
    spark.sql("DROP TABLE IF EXISTS ap_source")
    spark.sql("CREATE TABLE ap_source (k BIGINT, a BIGINT, price BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    rows(spark, 0, source_rows).write.insertInto("ap_source")
    for view, policy in (("ap_incremental", "INCREMENTAL"), ("ap_full", "FULL")):
        mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} {case['clauses']} REFRESH POLICY {policy} "
                      f"AS {query(case)}").collect()
    measured = []
    for i in range(rounds + 1):
        rows(spark, source_rows + i * batch, batch).write.insertInto("ap_source")
        order = ["ap_incremental", "ap_full"] if i % 2 == 0 else ["ap_full", "ap_incremental"]
        times = {view: refreshed(spark, view) for view in order}
        incremental, full = times["ap_incremental"], times["ap_full"]
        if incremental["technique"] != "incremental":
            raise InvalidRun(f"{name}: the incremental view refreshed {incremental['technique']} ({incremental['reason']})")
        check(spark, case)
        print(f"{name} round {i}: incremental {incremental['seconds']:.2f} s, full {full['seconds']:.2f} s", flush=True)
        if i:   # the first round warms the process up
            measured.append({"incremental_s": incremental["seconds"], "full_s": full["seconds"]})
    return {"case": name, "source_rows": source_rows, "batch": batch, "rounds": measured,
            "incremental_s": _median(m["incremental_s"] for m in measured),
            "full_s": _median(m["full_s"] for m in measured),
            "paired": _median(m["incremental_s"] / m["full_s"] for m in measured)}


def check(spark, case: dict) -> None:
    view, expected = spark.table("ap_incremental"), spark.sql(query(case))
    if "WINDOW CLOSE" in case["clauses"]:   # the view holds the windows its watermark closed
        expected = expected.where("window_end <= (SELECT max(window_end) FROM ap_incremental)")
    missing, extra = expected.exceptAll(view).count(), view.exceptAll(expected).count()
    if missing or extra:
        raise InvalidRun(f"ap_incremental differs from its query: {missing} rows missing, {extra} extra")


def _median(values) -> float:
    return round(statistics.median(list(values)), 3)


def run(cases: list[str], source_rows: int, rounds: int) -> dict:
    import mv

    os.environ.setdefault("MV_HOME", str(MV_HOME))
    spark = mv.session()
    results = [run_case(spark, name, source_rows, rounds) for name in cases]
    return {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(spark),
            "cases": results}


def markdown_table(runs: list[dict]) -> str:
    """Every case of the newest run beside the same case in the first run (the baseline)."""
    newest, first = runs[-1], runs[0]
    before = {c["case"]: c for c in first["cases"]} if first is not newest else {}
    lines = ["| case | source rows | appended a round | incremental (s) | full (s) | **paired ratio** | target | "
             f"paired ratio in run \"{first['label']}\" |", "| --- |" + " ---: |" * 7]
    for c in newest["cases"]:
        old = before.get(c["case"])
        baseline = f"{old['paired']:.2f}" if old else ""
        lines.append(f"| {c['case']} | {c['source_rows']:,} | {c['batch']:,} | {c['incremental_s']:.2f} | "
                     f"{c['full_s']:.2f} | **{c['paired']:.2f}** | <= {CASES[c['case']]['target']} | {baseline} |")
    m = newest["machine"]
    return (f"Run \"{newest['label']}\", {newest['when']}, {m['cores']} cores, Spark {m['spark']}, Delta "
            f"{m['delta']}; {len(newest['cases'][0]['rounds'])} rounds a case after a first one; seconds are "
            f"medians, the ratio the median of each round's incremental / full.\n\n" + "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.appends", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--label", default="current", help="the run's name; a run of the same name is replaced")
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    return reported(args, RESULTS_JSON, RESULTS_MD, "appends", "Large appends: incremental vs full",
                    lambda: labelled_runs(args, RESULTS_JSON, lambda: run(args.cases, args.rows, args.rounds)),
                    markdown_table)


if __name__ == "__main__":
    sys.exit(main())
