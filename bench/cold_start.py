"""A refresh in a new process: what a scheduled `mv refresh` (cron, Airflow) waits for, started cold
with and without the class archive (mv/class_archive.py), against the same CLI as a client of a
warm Spark Connect server (`python -m mv.connect_server`, SPARK_REMOTE).

bench.refresh's per-minute view (count, sum, max per auction and minute, REFRESH POLICY
INCREMENTAL) over a shallow clone of its cached bid table; before each round, bench.refresh's
recent 1% change (appends, updates and deletes of the last hour's bids) in a process of its own
(the local metastore admits one process at a time) or through the server. Per way: the CLI's wall
time (the process, start to exit) and the REFRESH statement's own seconds as the CLI reports them.
The view is checked equal to its query after the last round.

Example:
    $ python -m bench.cold_start --quick       # 1M-row source, 2 rounds per way
    $ python -m bench.cold_start               # 10M rows, 3 rounds per way (about 10 min)
    $ python -m bench.cold_start --render      # redo RESULTS.md's section from results/cold_start.json
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench import refresh as R
from bench.report import InvalidRun, add_output_arguments, reported, results
from bench.windows import RESULTS_MD, machine
import mv
from mv import class_archive

MV_HOME = R.DATA_DIR / "mv_home_cold_start"
RESULTS_JSON = R.BENCH_DIR / "results" / "cold_start.json"
PORT = 15019
VIEW = "per_minute"
SOURCE = "bids_cold"
WAYS = {
    "cold": "`mv refresh` in a new process, no class archive (MV_CLASS_ARCHIVE=0)",
    "archive": "`mv refresh` in a new process, with the class archive",
    "server": "`mv refresh` as a client of a warm Connect server (SPARK_REMOTE)",
}
# The CLI's summary line: "refresh v: INCREMENTAL 110,112 changes read, ... in 10.1 s".
REFRESHED = re.compile(r"refresh \S+: (\S+).* in ([0-9.]+) s")


def run(rows: int, rounds: int) -> dict:
    """Every way's rounds, timed; the view checked against its query at the end."""
    shutil.rmtree(MV_HOME, ignore_errors=True)
    env = {**os.environ, "MV_HOME": str(MV_HOME)}
    env.pop("SPARK_REMOTE", None)
    _in_new_process(env, f"""
        R.source_table(spark, "{SOURCE}", R.bids_table(spark, {rows}))
        spark.sql("CREATE MATERIALIZED VIEW {VIEW} REFRESH POLICY INCREMENTAL AS " + R.VIEW.format(source="{SOURCE}"))
    """, rows)
    found, salt = {}, 1000
    for way in ("cold", "archive"):
        found[way] = []
        for _ in range(rounds):
            salt += 2
            _in_new_process(env, f"R.apply(spark, '{SOURCE}', batch, {salt})", rows)
            found[way].append(_refresh(env | {"MV_CLASS_ARCHIVE": "0" if way == "cold" else "1"}))
            print(way, found[way][-1], flush=True)
    found["server"], where = _through_server(env, rows, rounds, salt)
    return {"rows": rows, "rounds": rounds, "date": time.strftime("%Y-%m-%d"),
            "archive": class_archive.path().is_file(), "machine": where,
            "ways": {way: {"rounds": r, "wall_s": _median(r, "wall_s"), "refresh_s": _median(r, "refresh_s")}
                     for way, r in found.items()}}


def _through_server(env: dict, rows: int, rounds: int, salt: int) -> tuple[list[dict], dict]:
    """The rounds through a warm Connect server (its first refresh included), the view checked
    against its query after the last; and what the server ran on."""
    server = subprocess.Popen([sys.executable, "-m", "mv.connect_server", "--port", str(PORT)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        server.stdout.readline()  # its URL, once it accepts connections
        spark = mv.session(remote=f"sc://localhost:{PORT}")
        batch = R.Batch.of(round(rows * 0.01), "recent", rows / R.SPAN_US)
        refreshed = []
        for _ in range(rounds):
            salt += 2
            R.apply(spark, SOURCE, batch, salt)
            refreshed.append(_refresh(env | {"SPARK_REMOTE": f"sc://localhost:{PORT}"}))
            print("server", refreshed[-1], flush=True)
        R.check_views(spark, R.VIEW.format(source=SOURCE), (VIEW,))
        where = machine(spark)
        spark.stop()
        return refreshed, where
    finally:
        server.terminate()
        server.wait(timeout=120)


def _refresh(env: dict) -> dict:
    """`mv refresh` in a new process: its wall time and the statement's own seconds."""
    started = time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "mv"), "refresh", VIEW], env=env,
                          capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    line = REFRESHED.search(done.stdout)
    if done.returncode != 0 or not line:
        raise InvalidRun(f"mv refresh failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-1500:]}")
    if line.group(1) != "INCREMENTAL":
        raise InvalidRun(f"mv refresh did not run incrementally: {line.group(0)}")
    return {"wall_s": round(wall, 2), "refresh_s": float(line.group(2))}


def _in_new_process(env: dict, code: str, rows: int) -> None:
    """`code` run in a process with a local session of its own (`spark`, `R`, `batch` defined)."""
    script = textwrap.dedent(f"""
        import mv
        from bench import refresh as R
        spark = mv.session(conf={{"spark.app.name": "cold-start-setup"}})
        batch = R.Batch.of(round({rows} * 0.01), "recent", {rows} / R.SPAN_US)
    """) + textwrap.dedent(code)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=1800,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _median(rounds: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 2)


def markdown(found: dict) -> str:
    m, ways = found["machine"], found["ways"]
    lines = [f"{found['rows']:,}-row source (bench.refresh's table and per-minute view), a recent 1% change "
             f"before each of {found['rounds']} rounds per way, medians; measured {found['date']} on {m['cores']} "
             f"cores, Spark {m['spark']}, Java {m['java']}. The view equals its query after the last round.", "",
             "| Way | Process wall (s) | REFRESH statement (s) | Rounds: wall / statement (s) |",
             "|---|---:|---:|---|"]
    for way, label in WAYS.items():
        w = ways[way]
        each = ", ".join(f"{r['wall_s']:.1f} / {r['refresh_s']:.1f}" for r in w["rounds"])
        lines.append(f"| {label} | {w['wall_s']:.1f} | {w['refresh_s']:.1f} | {each} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, help="bids in the source (default 10,000,000)")
    parser.add_argument("--rounds", type=int, help="rounds per way (default 3)")
    parser.add_argument("--quick", action="store_true", help="1,000,000 rows and 2 rounds")
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    rounds = args.rounds or (2 if args.quick else 3)
    return reported(args, RESULTS_JSON, RESULTS_MD, "cold-start", "A refresh in a new process",
                    lambda: results(args, RESULTS_JSON, lambda: run(rows, rounds)), markdown)


if __name__ == "__main__":
    sys.exit(main())
