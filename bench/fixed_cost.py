"""What a refresh costs when its change is small: the fixed floor, against a plain Delta append.

A 200,000-row source and a view over it (TUMBLE 1 minute, 100 keys, count + sum, EMIT ON UPDATE).
Each round appends the same 1,000 new rows twice, once to the source and once to a plain Delta
table, then refreshes the view; a last refresh per round finds nothing to do. What counts, as
medians over the rounds of one run:
    refresh / append           target <= 2.5 (issue 38)
    Spark SQL executions        target <= 15 per refresh (Spark's status store, as the UI's SQL tab)
    Delta commits               view + history + late tables, per refresh
    an idle refresh             target <= 0.1 s (no source moved; issue 38)
Every round checks the view against its query recomputed from scratch; a difference stops the run.

Example:
    $ python -m bench.fixed_cost --label "one commit"   # 5 rounds, kept beside earlier runs
    $ python -m bench.fixed_cost --rounds 2             # quicker
    $ python -m bench.fixed_cost --render               # rewrite RESULTS.md from results/fixed_cost.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import datetime, timezone

from bench.refresh import BENCH_DIR, DATA_DIR, execution_marker, where_time_went
from bench.report import InvalidRun, add_output_arguments, labelled_runs, reported
from bench.windows import RESULTS_MD, machine

MV_HOME = DATA_DIR / "mv_home_fixed_cost"
RESULTS_JSON = BENCH_DIR / "results" / "fixed_cost.json"
SOURCE_ROWS, CHANGE_ROWS, KEYS = 200_000, 1_000, 100
SECOND_US = 1_000_000
VIEW = """SELECT k, window_start, window_end, count(*) AS n, sum(v) AS total
FROM TUMBLE(TABLE(fc_source), DESCRIPTOR(ts), INTERVAL '1' MINUTE)
GROUP BY k, window_start, window_end"""


def rows(spark, count: int, first: int):
    """`count` rows numbered from `first`, one a second of event time, keys cycling over KEYS."""
    return spark.range(first, first + count, numPartitions=1).selectExpr(
        f"id % {KEYS} AS k", "id AS v", f"timestamp_micros(id * {SECOND_US}) AS ts")


def prepare(spark) -> None:
    """The source, the plain table and the view, created afresh."""
    import mv

    for table in ("fc_source", "fc_plain"):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    mv.sql(spark, "DROP MATERIALIZED VIEW IF EXISTS fc_view")
    spark.sql("CREATE TABLE fc_source (k BIGINT, v BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("CREATE TABLE fc_plain (k BIGINT, v BIGINT, ts TIMESTAMP) USING delta")
    rows(spark, SOURCE_ROWS, 0).write.insertInto("fc_source")
    mv.sql(spark, f"CREATE MATERIALIZED VIEW fc_view AS {VIEW}").collect()


def versions(spark) -> dict[str, int]:
    """Each table a refresh may commit to, with its latest Delta version (-1 if absent)."""
    found = {}
    for table in ("fc_view", "fc_view__late", "mv_refresh_history"):
        exists = spark.catalog.tableExists(table)
        found[table] = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"] if exists else -1
    return found


def timed(spark, action) -> dict:
    """Run `action`; its wall-clock seconds and the Spark SQL executions it ran."""
    marker = execution_marker(spark)
    started = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - started
    spent = where_time_went(spark, marker, seconds) or {}
    return {"seconds": round(seconds, 3), "executions": spent.get("executions"),
            "phases": spent.get("phases"), "profile": spent.get("profile"), "result": result}


def refresh(spark) -> dict:
    """One REFRESH of the view, with the Delta commits it made."""
    import mv

    before = versions(spark)
    run = timed(spark, lambda: mv.sql(spark, "REFRESH MATERIALIZED VIEW fc_view").first())
    after = versions(spark)
    row = run.pop("result")
    run |= {"technique": row.technique, "reason": row.reason, "engine_duration_s": row.duration_s,
            "commits": sum(after[t] - before[t] for t in after)}
    return run


def check(spark) -> None:
    expected = spark.sql(VIEW).exceptAll(spark.table("fc_view")).count()
    extra = spark.table("fc_view").exceptAll(spark.sql(VIEW)).count()
    if expected or extra:
        raise InvalidRun(f"fc_view differs from its query: {expected} rows missing, {extra} extra")


def run(rounds: int) -> dict:
    import mv

    os.environ.setdefault("MV_HOME", str(MV_HOME))
    spark = mv.session()
    prepare(spark)
    measured = []
    for i in range(rounds):
        first = SOURCE_ROWS + i * CHANGE_ROWS
        append = timed(spark, lambda: rows(spark, CHANGE_ROWS, first).write.insertInto("fc_plain"))
        rows(spark, CHANGE_ROWS, first).write.insertInto("fc_source")
        changed = refresh(spark)
        idle = refresh(spark)
        check(spark)
        measured.append({"append_s": append["seconds"], "refresh": changed, "idle": idle})
        print(f"round {i + 1}: append {append['seconds']:.2f} s, refresh {changed['seconds']:.2f} s "
              f"({changed['executions']} executions, {changed['commits']} commits), "
              f"idle {idle['seconds']:.2f} s ({idle['executions']} executions)", flush=True)
    return {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(spark),
            "source_rows": SOURCE_ROWS, "change_rows": CHANGE_ROWS, "rounds": measured,
            "summary": summary(measured)}


def summary(measured: list[dict]) -> dict:
    def median(pick) -> float:
        return round(statistics.median(pick(m) for m in measured), 3)

    return {"append_s": median(lambda m: m["append_s"]),
            "refresh_s": median(lambda m: m["refresh"]["seconds"]),
            "ratio": median(lambda m: m["refresh"]["seconds"] / m["append_s"]),
            "executions": median(lambda m: m["refresh"]["executions"] or 0),
            "commits": median(lambda m: m["refresh"]["commits"]),
            "idle_s": median(lambda m: m["idle"]["seconds"]),
            "idle_executions": median(lambda m: m["idle"]["executions"] or 0),
            "engine_share": median(lambda m: m["refresh"]["engine_duration_s"] / m["refresh"]["seconds"])}


def markdown_table(runs: list[dict]) -> str:
    """The newest run beside the first (the baseline), its profile below; every run's column is
    in HISTORY.md."""
    runs = [runs[0], runs[-1]] if len(runs) > 1 else runs
    rows = [("plain Delta append (s)", "append_s", "{:.2f}", ""), ("refresh (s)", "refresh_s", "{:.2f}", ""),
            ("refresh / append", "ratio", "{:.1f}", "<= 2.5"),
            ("Spark SQL executions per refresh", "executions", "{:.0f}", "<= 15"),
            ("Delta commits per refresh", "commits", "{:.0f}", "1"),
            ("refresh with nothing to do (s)", "idle_s", "{:.2f}", "<= 0.1"),
            ("its Spark SQL executions", "idle_executions", "{:.0f}", ""),
            ("history's duration_s / statement's wall time", "engine_share", "{:.2f}", "1.0")]
    head = "| measure | " + " | ".join(r["label"] for r in runs) + " | target |"
    lines = [head, "| --- |" + " ---: |" * (len(runs) + 1)]
    for title, key, form, target in rows:
        lines.append(f"| {title} | " + " | ".join(form.format(r["summary"][key]) for r in runs) + f" | {target} |")
    newest = runs[-1]
    profiled = _median_refresh(newest["rounds"])
    phases = "\n".join(f"| {label} | {seconds:.2f} |" for label, seconds in (profiled["phases"] or {}).items())
    steps = "\n".join(f"| {s['at']:.2f} | {s['seconds']:.2f} | {s['phase'].removeprefix('refresh, ')} | `{s['plan']}` |"
                      for s in profiled.get("profile") or [])
    when = "; ".join(f"{r['label']}: {r['when']}, {len(r['rounds'])} rounds" for r in runs)
    return f"""A {newest['change_rows']:,}-row append to a {newest['source_rows']:,}-row source, then REFRESH of a
TUMBLE 1-minute view (100 keys, count + sum, EMIT ON UPDATE); the same rows appended to a plain
Delta table. Medians over the rounds of each run ({when}; {newest['machine']['cores']} cores).
The runs between these two are in [HISTORY.md](HISTORY.md#the-fixed-cost-of-a-refresh).

{chr(10).join(lines)}

Where the median refresh of run "{newest['label']}" ({profiled['seconds']:.2f} s) spent its time, by the
refresh's phases (mv/progress.py describes its Spark SQL executions by phase in Spark's UI; seconds):

| phase | s |
| --- | ---: |
{phases}

Its Spark SQL executions (started at seconds after the statement's start, their seconds, phase, top of
the physical plan):

| at | s | phase | plan |
| ---: | ---: | --- | --- |
{steps}"""


def _median_refresh(rounds: list[dict]) -> dict:
    """The refresh of the median round by seconds (the profile of a typical refresh, not the cold first)."""
    ordered = sorted((r["refresh"] for r in rounds), key=lambda r: r["seconds"])
    return ordered[(len(ordered) - 1) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fixed_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--label", default="current", help="the run's name; a run of the same name is replaced")
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    return reported(args, RESULTS_JSON, RESULTS_MD, "fixed_cost", "The fixed cost of a refresh",
                    lambda: labelled_runs(args, RESULTS_JSON, lambda: run(args.rounds)), markdown_table)


if __name__ == "__main__":
    sys.exit(main())
