"""Parquet's two encodings of a TIMESTAMP column, as Spark writes them: INT96 (Spark's default:
nanoseconds in 12 bytes) against INT64 microseconds (TIMESTAMP_MICROS, what conf/spark-defaults.conf
sets for the engine's local session), for the work a refresh does with a time column.

The same rows (`k`, `price`, `ts` one a second) are written as a Delta table once per encoding,
then each round times, for each encoding in alternating order: the write of the rows as a Delta
table (overwritten), a 10-second TUMBLE aggregate of the table (count and max, run to the end with
Spark's `noop` writer, bench.windows.run_once), and the same aggregate written as a Delta table
(overwritten). Medians of the rounds after the first; the ratio is INT64's / INT96's. The two
aggregates are checked equal first.

Example:
    $ python -m bench.timestamps                        # 5,000,000 rows, 5 rounds (3 min)
    $ python -m bench.timestamps --rows 1000000 --rounds 3 --json /tmp/timestamps.json
    $ python -m bench.timestamps --render               # RESULTS.md's section from results/timestamps.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone

from bench.refresh import engine
from bench.report import InvalidRun, add_output_arguments, reported, results
from bench.windows import BENCH_DIR, DATA_DIR, RESULTS_MD, machine, run_once

MV_HOME = DATA_DIR / "mv_home_timestamps"
RESULTS_JSON = BENCH_DIR / "results" / "timestamps.json"
ENCODINGS = {"INT96": "INT96", "INT64": "TIMESTAMP_MICROS"}
ROWS = "SELECT id AS k, id % 97 AS price, timestamp_seconds(1704067200 + id) AS ts FROM range({rows})"
AGGREGATE = ("SELECT window_start, count(*) AS n, max(price) AS top "
             "FROM TUMBLE(TABLE({table}), DESCRIPTOR(ts), INTERVAL '10' SECONDS) GROUP BY window_start")
STEPS = ("write the rows", "aggregate", "aggregate written")


def _writing(spark, encoding: str) -> None:
    """The session's TIMESTAMP columns written from now on in `encoding` (a key of ENCODINGS)."""
    spark.conf.set("spark.sql.parquet.outputTimestampType", ENCODINGS[encoding])


def _round(spark, rows: int, encoding: str) -> dict[str, float]:
    """One round's seconds of each step under `encoding`."""
    _writing(spark, encoding)
    query = AGGREGATE.format(table=f"ts_{encoding}")

    def written(sql: str, name: str) -> float:  # overwritten by path: no catalog entry to alter
        start = time.perf_counter()
        spark.sql(sql).write.format("delta").mode("overwrite").save(str(MV_HOME / f"{name}_{encoding}"))
        return time.perf_counter() - start
    return {"write the rows": written(ROWS.format(rows=rows), "rows"),
            "aggregate": run_once(spark.sql(query)),
            "aggregate written": written(query, "aggregate")}


def run(rows: int, rounds: int) -> dict:
    """Write both tables, check their aggregates equal, play the rounds; results/timestamps.json's document."""
    shutil.rmtree(MV_HOME, ignore_errors=True)
    os.environ["MV_HOME"] = str(MV_HOME)
    import mv

    measured_engine = engine(mv)
    spark = mv.session(conf={"spark.app.name": "mv-bench-timestamps"})
    for encoding in ENCODINGS:
        _writing(spark, encoding)
        spark.sql(f"CREATE OR REPLACE TABLE ts_{encoding} USING delta AS " + ROWS.format(rows=rows))
    first, second = (spark.sql(AGGREGATE.format(table=f"ts_{e}")) for e in ENCODINGS)
    if first.exceptAll(second).count() or second.exceptAll(first).count():
        raise InvalidRun("the two encodings' aggregates differ")
    played = []
    for i in range(rounds):
        order = list(ENCODINGS) if i % 2 == 0 else list(reversed(ENCODINGS))
        played.append({encoding: _round(spark, rows, encoding) for encoding in order})
        print(f"  round {i + 1}: " + "; ".join(f"{e} " + ", ".join(f"{s} {played[-1][e][s]:.2f} s" for s in STEPS)
                                               for e in ENCODINGS), flush=True)
    kept = played[1:] or played   # the first round warms the session up
    medians = {e: {s: round(statistics.median(p[e][s] for p in kept), 3) for s in STEPS} for e in ENCODINGS}
    return {"benchmark": "timestamps", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "engine": measured_engine, "machine": machine(spark), "rows": rows, "rounds": rounds,
            "played": played, "median_s": medians}


def markdown(found: dict) -> str:
    m = found["median_s"]
    lines = [f"Measured {found['measured_at'][:10]} on {found['machine'].get('cores', '?')} cores, Spark "
             f"{found['machine'].get('spark', '?')}: {found['rows']:,} rows, {found['rounds']} rounds (medians of "
             "all but the first); the two aggregates are equal.", "",
             "| Step | INT96 s | INT64 (TIMESTAMP_MICROS) s | INT64 / INT96 |", "|---|---:|---:|---:|"]
    lines += [f"| {step} | {m['INT96'][step]:.2f} | {m['INT64'][step]:.2f} | "
              f"**{m['INT64'][step] / m['INT96'][step]:.2f}** |" for step in STEPS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.timestamps", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    return reported(args, RESULTS_JSON, RESULTS_MD, "timestamps", "TIMESTAMP columns: Parquet INT96 against INT64",
                    lambda: results(args, RESULTS_JSON, lambda: run(args.rows, args.rounds)), markdown)


if __name__ == "__main__":
    sys.exit(main())
