"""Window TVFs against Spark's built-in windows: same Delta table, same aggregates, same answer, timed.

Each pair runs "TVF + GROUP BY" (ours) and the way Spark users write the same windows today (built-in)
over one cached Delta table of bids. A pair is timed only after both sides are shown to give the same
rows; then each side is warmed up once and the two run interleaved (ours, built-in, ours, ...), so load
from other jobs on the machine hits both alike. What counts is ratio = median(ours) / median(built-in)
from one run, target <= 1.0.

Example:
    $ python -m bench.windows --quick          # 1M rows, 3 runs
    $ python -m bench.windows                  # 5M rows, 5 runs (make bench)
    $ python -m bench.windows --render         # rewrite RESULTS.md from results/windows.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from bench.report import rewrite_section

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
RESULTS_JSON = BENCH_DIR / "results" / "windows.json"
RESULTS_MD = BENCH_DIR / "RESULTS.md"

# The bid table. Bump DATA_VERSION when the generator changes, so cached tables are not reused.
DATA_VERSION = 1
BIDDERS, AUCTIONS = 5_000, 50_000
BURST_ROWS = 16                                # consecutive ids form one bidder's burst of bids
START = "2026-01-05 00:00:00"                  # a Monday, UTC
SPAN_US = 3 * 86_400_000_000                   # three days
STEP_US = 20_000_000                           # bids in a burst come 0-40 s apart
PAUSE_US = 30 * 60_000_000                     # a burst may pause up to 30 min part-way

AGGREGATES = "count(*) AS bids, sum(price) AS volume, max(price) AS top_price"


@dataclass(frozen=True)
class Pair:
    """One window, written with our TVF and with Spark's built-in; both select the same columns."""
    name: str
    ours_label: str
    builtin_label: str
    ours: str
    builtin: str


PAIRS = (
    Pair("TUMBLE 1 min", "TUMBLE(..., INTERVAL '1' MINUTE)", "window(ts, '1 minute')",
         f"""SELECT window_start, window_end, {AGGREGATES}
             FROM TUMBLE(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE)
             GROUP BY window_start, window_end""",
         f"""SELECT window.start AS window_start, window.end AS window_end, {AGGREGATES}
             FROM bids GROUP BY window(ts, '1 minute')"""),
    Pair("HOP 1 min / 5 min", "HOP(..., INTERVAL '1' MINUTE, INTERVAL '5' MINUTES)",
         "window(ts, '5 minutes', '1 minute')",
         f"""SELECT window_start, window_end, {AGGREGATES}
             FROM HOP(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTES)
             GROUP BY window_start, window_end""",
         f"""SELECT window.start AS window_start, window.end AS window_end, {AGGREGATES}
             FROM bids GROUP BY window(ts, '5 minutes', '1 minute')"""),
    Pair("SESSION 5 min by bidder", "SESSION(... PARTITION BY bidder, ..., INTERVAL '5' MINUTES)",
         "bidder, session_window(ts, '5 minutes')",
         f"""SELECT bidder, window_start, window_end, {AGGREGATES}
             FROM SESSION(TABLE(bids) PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
             GROUP BY bidder, window_start, window_end""",
         f"""SELECT bidder, session_window.start AS window_start, session_window.end AS window_end,
                    {AGGREGATES}
             FROM bids GROUP BY bidder, session_window(ts, '5 minutes')"""),
    # Spark has no cumulative window: each row goes to every window [day start, e) with e from the
    # end of its own hour to the end of its day. The session time zone is UTC, so date_trunc aligns
    # on the same days and hours as CUMULATE does.
    Pair("CUMULATE 1 h / 1 day", "CUMULATE(..., INTERVAL '1' HOUR, INTERVAL '1' DAY)",
         "explode(sequence(hour end, day end, 1 hour))",
         f"""SELECT window_start, window_end, {AGGREGATES}
             FROM CUMULATE(TABLE(bids), DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '1' DAY)
             GROUP BY window_start, window_end""",
         f"""SELECT window_start, window_end, {AGGREGATES}
             FROM (SELECT price, date_trunc('DAY', ts) AS window_start,
                          explode(sequence(date_trunc('HOUR', ts) + INTERVAL '1' HOUR,
                                           date_trunc('DAY', ts) + INTERVAL '1' DAY,
                                           INTERVAL '1' HOUR)) AS window_end
                   FROM bids)
             GROUP BY window_start, window_end"""),
)


class ResultMismatch(AssertionError):
    """The two sides of a pair disagree, so timing them would compare different work."""


def bid_columns() -> list[str]:
    """The bid generator as SQL expressions over ``spark.range``'s ``id``: deterministic hashes, no rand().

    Every BURST_ROWS consecutive ids are one bidder's burst: bids 0-40 s apart, on one or two auctions,
    starting anywhere in three days; at a random point a burst may pause up to 30 minutes, so a
    5-minute session gap sees sessions of a few to a few dozen bids.

    Example:
        >>> spark.range(10).selectExpr(*bid_columns()).show()
    """
    burst, pos = f"(id div {BURST_ROWS})", f"(id % {BURST_ROWS})"

    def draw(key: str, salt: int, bound: int) -> str:
        return f"pmod(xxhash64({key}, {salt}), {bound})"

    pause = f"if({pos} >= {draw(burst, 3, BURST_ROWS)}, {draw(burst, 4, PAUSE_US)}, 0)"
    latest_start = SPAN_US - PAUSE_US - BURST_ROWS * STEP_US   # so the whole burst stays in the span
    micros = (f"unix_micros(TIMESTAMP '{START}') + {draw(burst, 2, latest_start)}"
              f" + {pos} * {STEP_US} + {draw('id', 5, STEP_US)} + {pause}")
    return [
        f"pmod(xxhash64({burst}, 6) + {pos} div 8, {AUCTIONS}) AS auction",
        f"{draw(burst, 1, BIDDERS)} AS bidder",
        f"1 + {draw('id', 7, 10_000)} AS price",
        f"timestamp_micros({micros}) AS ts",
    ]


def bids_table(spark, rows: int) -> str:
    """The path of a Delta table of ``rows`` bids, generated on first use and cached under bench/data/.

    Written in time order, as an append-only event table would be.

    Example:
        >>> spark.read.format("delta").load(bids_table(spark, 1000)).count()
        1000
    """
    path = DATA_DIR / f"bids-v{DATA_VERSION}-{rows}"
    if not (path / "_delta_log" / f"{0:020d}.json").is_file():   # no commit: absent or half-written
        print(f"generating {rows:,} bids into {path} ...", flush=True)
        (spark.range(rows, numPartitions=8).selectExpr(*bid_columns()).orderBy("ts")
         .write.format("delta").mode("overwrite").save(str(path)))
    return str(path)


def check_same(pair: Pair, ours, builtin) -> int:
    """Raise ResultMismatch unless both DataFrames hold the same rows (as multisets); return how many.

    Example:
        >>> check_same(PAIRS[0], spark.sql(PAIRS[0].ours), spark.sql(PAIRS[0].builtin))
        4319
    """
    only_ours = ours.exceptAll(builtin).limit(5).collect()
    only_builtin = builtin.exceptAll(ours).limit(5).collect()
    if only_ours or only_builtin:
        raise ResultMismatch(f"{pair.name}: results differ\n  only in ours: {only_ours}\n"
                             f"  only in built-in: {only_builtin}")
    return ours.count()


def run_once(df) -> float:
    """Seconds to run ``df`` to the end: every row computed, nothing collected or written.

    Example:
        >>> run_once(spark.range(10))
        0.08...
    """
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def measure(spark, pair: Pair, runs: int) -> dict:
    """Check a pair, warm both sides up once, then time them interleaved ``runs`` times each.

    Example:
        >>> measure(spark, PAIRS[0], runs=3)["ratio"]
        0.8...
    """
    ours, builtin = spark.sql(pair.ours), spark.sql(pair.builtin)
    groups = check_same(pair, ours, builtin)
    # Warm-up: JIT, generated code and the file cache, for both sides alike.
    run_once(ours)
    run_once(builtin)
    times: dict[str, list[float]] = {"ours": [], "builtin": []}
    for _ in range(runs):
        # Alternating keeps a burst of load from other jobs from landing on one side only.
        times["ours"].append(run_once(ours))
        times["builtin"].append(run_once(builtin))
    medians = {side: statistics.median(ts) for side, ts in times.items()}
    # Each run's two sides ran back to back, under about the same load; the median of their ratios
    # holds steady when the load changes part-way through, which can tip the ratio of medians.
    paired = statistics.median(o / b for o, b in zip(times["ours"], times["builtin"]))
    result = {"name": pair.name, "ours_label": pair.ours_label, "builtin_label": pair.builtin_label,
              "groups": groups, "median_s": medians, "runs_s": times,
              "ratio": medians["ours"] / medians["builtin"], "paired_ratio": paired,
              "ours_sql": _flat(pair.ours), "builtin_sql": _flat(pair.builtin)}
    print(f"  {pair.name}: ours {medians['ours']:.2f} s, built-in {medians['builtin']:.2f} s,"
          f" ratio {result['ratio']:.2f}, paired {paired:.2f}", flush=True)
    return result


def _flat(sql: str) -> str:
    return " ".join(sql.split())


def machine(spark) -> dict:
    """What the figures were measured on: hardware, versions and the Spark settings that matter.

    Example:
        >>> machine(spark)["cores"]
        2
    """
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    java = spark.sql("SELECT java_method('java.lang.System', 'getProperty', 'java.version')").first()[0]
    return {
        "cores": os.cpu_count(), "memory_gib": round(memory / 2**30, 1), "cpu": _cpu_model(),
        "os": platform.platform(), "python": platform.python_version(), "java": java,
        "pyspark": version("pyspark"), "spark": spark.version, "delta": version("delta-spark"),
        "spark_conf": {key: _setting(spark, key) for key in (
            "spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
            "spark.sql.adaptive.enabled", "spark.sql.session.timeZone")},
    }


def _setting(spark, key: str) -> str | None:
    try:
        return spark.conf.get(key)               # SQL settings answer with their default
    except Exception:                            # a core setting left unset has none to give
        return None


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                platform.processor())


def markdown_table(results: dict) -> str:
    """The RESULTS.md table for a results/windows.json document.

    Example:
        >>> print(markdown_table(json.loads(RESULTS_JSON.read_text())))
        5,000,000 rows, 5 runs ...
    """
    m, load = results["machine"], results["load_average"]
    lines = [
        f"{results['rows']:,} rows, {results['runs']} timed runs per side (medians), measured"
        f" {results['measured_at'][:10]} on {m['cores']} cores / {m['memory_gib']} GiB,"
        f" Spark {m['spark']}, Delta {m['delta']}, Python {m['python']}, Java {m['java']};"
        f" load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after.",
        "",
        "| Window | Ours: TVF + GROUP BY | Spark built-in | Groups | Ours (s) | Built-in (s) | Ratio"
        " | Paired ratio |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for p in results["pairs"]:
        verdict = "" if p["ratio"] <= 1.0 else " (over)"
        lines.append(f"| {p['name']} | `{p['ours_label']}` | `{p['builtin_label']}` | {p['groups']:,}"
                     f" | {p['median_s']['ours']:.2f} | {p['median_s']['builtin']:.2f}"
                     f" | **{p['ratio']:.2f}**{verdict} | {p['paired_ratio']:.2f} |")
    lines += ["", "Ratio = median(ours) / median(built-in), target <= 1.0. Paired ratio = median over runs"
              " of ours / built-in within the run."]
    return "\n".join(lines)


def write_results_md(results: dict, path: Path = RESULTS_MD) -> None:
    """Rewrite this benchmark's section of RESULTS.md from `results`.

    Example:
        >>> write_results_md(json.loads(RESULTS_JSON.read_text()))
    """
    rewrite_section(path, "windows", "Window TVFs vs Spark built-ins", markdown_table(results))


def run(rows: int, runs: int) -> dict:
    """Measure every pair on ``rows`` bids and return the results/windows.json document.

    Example:
        >>> run(rows=100_000, runs=1)["pairs"][0]["name"]
        'TUMBLE 1 min'
    """
    # A warehouse and metastore of the benchmark's own, away from the user's and the tests'.
    os.environ.setdefault("MV_HOME", str(DATA_DIR / "mv_home"))
    import mv

    spark = mv.session(conf={"spark.app.name": "mv-bench-windows"})
    spark.read.format("delta").load(bids_table(spark, rows)).createOrReplaceTempView("bids")
    load_before = os.getloadavg()
    print(f"{rows:,} rows, {runs} runs per side", flush=True)
    pairs = [measure(spark, pair, runs) for pair in PAIRS]
    return {
        "benchmark": "windows", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "rows": rows, "runs": runs, "data_version": DATA_VERSION, "machine": machine(spark),
        # Other jobs may share the machine: load averages say how busy it was around the run.
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "pairs": pairs,
    }


def main(argv: list[str] | None = None) -> int:
    """The command line: run, write results/windows.json and RESULTS.md, print the table; 1 on a mismatch."""
    parser = argparse.ArgumentParser(prog="python -m bench.windows", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, help="bids in the table (default 5,000,000)")
    parser.add_argument("--runs", type=int, help="timed runs per side (default 5)")
    parser.add_argument("--quick", action="store_true", help="1,000,000 rows and 3 runs")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite RESULTS.md from results/windows.json")
    args = parser.parse_args(argv)
    if args.render:
        results = json.loads(RESULTS_JSON.read_text())
    else:
        rows = args.rows or (1_000_000 if args.quick else 5_000_000)
        runs = args.runs or (3 if args.quick else 5)
        try:
            results = run(rows, runs)
        except ResultMismatch as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_JSON.write_text(json.dumps(results, indent=2) + "\n")
    write_results_md(results)
    print(markdown_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
