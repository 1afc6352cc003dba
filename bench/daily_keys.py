"""Distinct counts per day over a long history: a view grouped by a time column's day, its touched
days recomputed from the files of those days (mv/time_keys.py), against a full refresh.

The source is DAYS days of visits (a file a day, written in time order, cached under bench/data/
and cloned for each run), and two views of

    SELECT DATE_FORMAT(at, 'yyyy-MM-dd') AS day, count(DISTINCT user) AS users, count(*) AS visits
    FROM dk_visits GROUP BY DATE_FORMAT(at, 'yyyy-MM-dd')

(a COUNT DISTINCT: its touched groups are recomputed, not combined), one under REFRESH POLICY
INCREMENTAL and one under REFRESH POLICY FULL. Each round appends the next hour of visits of the
day after the history and refreshes both views, in an order alternating over the rounds. Figures
(bench/probe.py): the median seconds of each side, their ratio, and the source's files each read.
Both views are checked equal to the query after the last round.

Example:
    $ python -m bench.daily_keys                  # 60 days of 50,000 visits, 4 rounds (3 min)
    $ python -m bench.daily_keys --days 10 --rounds 2 --json /tmp/daily.json
    $ python -m bench.daily_keys --render         # RESULTS.md's section from results/daily_keys.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from datetime import datetime, timezone

from bench.nexmark_data import source_table
from bench.probe import measure
from bench.refresh import engine
from bench.report import add_output_arguments, publish, results
from bench.windows import BENCH_DIR, DATA_DIR, RESULTS_MD, machine

MV_HOME = DATA_DIR / "mv_home_daily_keys"
RESULTS_JSON = BENCH_DIR / "results" / "daily_keys.json"
DATA_VERSION = 1
START = "2026-09-01 00:00:00"   # UTC
HOUR_US = 3_600_000_000
USERS = 20_000
SIDES = {"incremental": "INCREMENTAL", "full": "FULL"}
QUERY = """SELECT DATE_FORMAT(at, 'yyyy-MM-dd') AS day, count(DISTINCT user) AS users, count(*) AS visits
FROM dk_visits GROUP BY DATE_FORMAT(at, 'yyyy-MM-dd')"""


def visits(spark, first_hour: int, hours: int, per_hour: int, salt: int):
    """`hours` hours of visits from hour `first_hour` after START, `per_hour` an hour, in time order."""
    return spark.range(hours * per_hour).selectExpr(
        f"pmod(xxhash64(id, {salt}), {USERS}) AS user",
        f"timestamp_micros(unix_micros(timestamp'{START}') + ({first_hour} + id DIV {per_hour}) * {HOUR_US} "
        f"+ pmod(id, {per_hour}) * ({HOUR_US} DIV {per_hour})) AS at")


def history(spark, days: int, per_day: int) -> str:
    """The path of the cached history: `days` days of visits, a file a day (generated on first use)."""
    path = DATA_DIR / f"daily-keys-v{DATA_VERSION}-{days}-{per_day}"
    if not (path / "_delta_log" / f"{0:020d}.json").is_file():
        (visits(spark, 0, days * 24, per_day // 24, salt=0).repartitionByRange(days, "at").sortWithinPartitions("at")
         .write.format("delta").mode("overwrite").save(str(path)))
    return str(path)


def refreshed(spark, view: str) -> dict:
    import mv

    cost = measure(spark, lambda: mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first())
    return {"seconds": cost["seconds"], "technique": cost["result"].technique,
            "source_files": cost["read"].get("dk_visits", {}).get("files", 0)}


def run(days: int, per_day: int, rounds: int) -> dict:
    """Create the views, play the rounds, check both views; the results/daily_keys.json document."""
    shutil.rmtree(MV_HOME, ignore_errors=True)
    os.environ["MV_HOME"] = str(MV_HOME)
    import mv

    measured_engine = engine(mv)
    spark = mv.session(conf={"spark.app.name": "mv-bench-daily-keys"})
    source_table(spark, "dk_visits", history(spark, days, per_day))
    for side, policy in SIDES.items():
        mv.sql(spark, f"CREATE MATERIALIZED VIEW dk_{side} REFRESH POLICY {policy} AS {QUERY}").collect()
    played = []
    for i in range(rounds):
        visits(spark, days * 24 + i, 1, per_day // 24, salt=1 + i).writeTo("dk_visits").append()
        order = list(SIDES) if i % 2 == 0 else list(reversed(SIDES))
        played.append({side: refreshed(spark, f"dk_{side}") for side in order})
        print(f"  round {i + 1}: " + ", ".join(f"{s} {played[-1][s]['seconds']:.2f} s" for s in SIDES), flush=True)
    expected = spark.sql(QUERY)
    for side in SIDES:
        view = spark.table(f"dk_{side}")
        if expected.exceptAll(view).count() or view.exceptAll(expected).count():
            raise AssertionError(f"dk_{side} is not its query")
    seconds = {side: statistics.median(p[side]["seconds"] for p in played) for side in SIDES}
    return {"benchmark": "daily_keys", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "engine": measured_engine, "machine": machine(spark), "days": days, "visits_per_day": per_day,
            "played": played, "median_s": seconds, "ratio": round(seconds["incremental"] / seconds["full"], 2),
            "files": {side: statistics.median(p[side]["source_files"] for p in played) for side in SIDES},
            "source_files": days + rounds}


def markdown(found: dict) -> str:
    techniques = sorted({p["incremental"]["technique"] for p in found["played"]})
    return "\n".join([
        f"Measured {found['measured_at'][:10]} on {found['machine'].get('cores', '?')} cores: {found['days']} days of "
        f"{found['visits_per_day']:,} visits ({found['source_files']} files after the rounds), "
        f"{len(found['played'])} rounds of an hour's {found['visits_per_day'] // 24:,} visits; both views equal "
        "their query after the last round.", "",
        "| Side | Median s | Source files read | Refreshed as |", "|---|---:|---:|---|",
        f"| incremental | {found['median_s']['incremental']:.2f} | {found['files']['incremental']:g} | "
        f"{', '.join(techniques)} |",
        f"| full | {found['median_s']['full']:.2f} | {found['files']['full']:g} | full |", "",
        f"Incremental / full: **{found['ratio']}** (target, issue 37: <= 0.1 on appends)."])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.daily_keys", description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--visits-per-day", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=4)
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    found = results(args, RESULTS_JSON, lambda: run(args.days, args.visits_per_day, args.rounds))
    publish(args, RESULTS_JSON, RESULTS_MD, "daily_keys", "Distinct counts per day: touched days recomputed",
            markdown(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
