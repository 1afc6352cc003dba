"""Our refreshes side by side with Flink: Nexmark's q5 and q7 on the same bids, events per second, rows compared.

The bids are the Nexmark benchmark's two days of history (bench/nexmark_data.py) at the scale whose
history holds ``--bids`` bids, numbered in time order and exported once under bench/data/ (a Delta
table with the number, for our source; CSV for Flink: a file per source reader, every other bid,
each in time order), never regenerated when present. The queries are bench/nexmark_workloads.py's
q5 (HOP, count per auction) and q7 (TUMBLE, highest price and count) with Nexmark's window sizes
(HOP 2 s / 10 s, TUMBLE 10 s; ``--windows workload`` keeps the workloads' own), and the views'
WATERMARK (10 minutes) on both sides.

Flink (bench/flink_job.py: PyFlink in .venv-flink, ``make setup-flink``) runs each query as Flink
SQL in streaming mode at parallelism 2 over all the bids, ``--runs`` times: its events per second
are bids / the job's seconds (median, range). Ours: a Delta source holding the first ``--batch``
bids, each view created over it (EMIT ON WINDOW CLOSE), then append batches of ``--batch`` bids,
one REFRESH of each view after each: events per second are the batch / the median refresh's
seconds. Structured Streaming (bench/streaming.py, availableNow after each batch) runs beside ours,
in an order rotating over the batches, unless ``--no-streaming``. At the end every window of our view
(and of the stream's table) must be in Flink's output with equal rows (with EMIT ON WINDOW CLOSE
they hold only the windows their watermark closed; Flink closes all at the end of its bounded
input): a difference stops the run before any figure is written.

Example:
    $ make bench-flink                     # 3M bids, batches of 500,000, q5 and q7, 3 Flink runs
    $ python -m bench.flink --quick        # 1M bids: one batch after the start
    $ python -m bench.flink --bids 200000 --batch 50000 --runs 1 --work /tmp/flink --json /tmp/flink.json
    $ python -m bench.flink --render       # rewrite RESULTS.md's section from results/flink.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench.nexmark_data import HISTORY_SHARE, Plan, history_tables
from bench.nexmark_workloads import WORKLOADS, Workload, _windowed
from bench.probe import measure
from bench.refresh import checksum, engine
from bench.report import InvalidRun, ResultMismatch, add_output_arguments, reported, results
from bench.streaming import StreamingJob
from bench.windows import BENCH_DIR, DATA_DIR, RESULTS_MD, machine

EXPORT_VERSION = 1                        # bump when the export changes, so cached exports are not reused
RESULTS_JSON = BENCH_DIR / "results" / "flink.json"
WORK_DIR = DATA_DIR / "flink_work"        # MV_HOME, checkpoints, the job spec, Flink's output: fresh each run
FLINK_PYTHON = BENCH_DIR.parent / ".venv-flink" / "bin" / "python"
FLINK_JOB = BENCH_DIR / "flink_job.py"
PARALLELISM = 2                           # Flink's, and the CSV files its source readers take one each
BIDS, QUICK_BIDS, BATCH, RUNS = 3_000_000, 1_000_000, 500_000, 3
QUERIES = ("q5", "q7")
TARGET = 0.5                              # issue 38: our events per second >= 0.5x Flink's
SOURCE = "flink_bids"
COLUMNS = ("auction", "bidder", "price", "channel", "date_time", "extra")
FLINK_COLUMNS = [["auction", "BIGINT"], ["bidder", "BIGINT"], ["price", "BIGINT"], ["channel", "STRING"],
                 ["date_time_ms", "BIGINT"], ["extra", "STRING"]]   # the CSV's, the time in epoch milliseconds


@dataclasses.dataclass(frozen=True)
class Resize:
    """A workload's window arguments as its SQL spells them, Nexmark's, and its streaming job with Nexmark's."""
    label: str
    ours: str
    nexmark: str
    stream: Callable[[DataFrame], DataFrame]


NEXMARK_WINDOWS = {
    "q5": Resize("HOP 2 s / 10 s, count per auction", "INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
                 "INTERVAL '2' SECOND, INTERVAL '10' SECOND)",
                 lambda df: _windowed(df, ["auction"], F.window("date_time", "10 seconds", "2 seconds"),
                                      bids=F.count("*"))),
    "q7": Resize("TUMBLE 10 s, highest price and count", "INTERVAL '10' MINUTES)", "INTERVAL '10' SECOND)",
                 lambda df: _windowed(df, [], F.window("date_time", "10 seconds"),
                                      highest=F.max("price"), bids=F.count("*"))),
}


def workload(name: str, windows: str) -> Workload:
    """WORKLOADS[name]; with ``windows`` 'nexmark', Nexmark's window sizes in its SQL and its streaming job.

    Example:
        >>> workload("q7", "nexmark").query("bids")
        "SELECT window_start, window_end, max(price) AS highest, ... INTERVAL '10' SECOND) GROUP BY ..."
    """
    w = WORKLOADS[name]
    if windows == "workload":
        return w
    resize = NEXMARK_WINDOWS[name]
    if resize.ours not in w.select:
        raise InvalidRun(f"{name}: the workload's window is no longer {resize.ours!r}: update NEXMARK_WINDOWS")
    return dataclasses.replace(w, select=w.select.replace(resize.ours, resize.nexmark), window=resize.label,
                               stream=resize.stream)


TVF = re.compile(r"\b(TUMBLE|HOP|CUMULATE|SESSION)\(TABLE\((\w+)\)")


def flink_sql(select: str) -> str:
    """``select`` in Flink's syntax: our ``HOP(TABLE(t), ...)`` is Flink's ``TABLE(HOP(TABLE t, ...))``.

    Example:
        >>> flink_sql("SELECT 1 FROM TUMBLE(TABLE(bids), DESCRIPTOR(t), INTERVAL '10' SECOND) GROUP BY 1")
        "SELECT 1 FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(t), INTERVAL '10' SECOND)) GROUP BY 1"
    """
    match = TVF.search(select)
    if match is None:
        raise ValueError(f"no window function in {select!r}")
    close = _closing(select, match.end(1))
    return (select[:match.start()] + f"TABLE({match.group(1)}(TABLE {match.group(2)}"
            + select[match.end():close + 1] + ")" + select[close + 1:])


def _closing(text: str, opening: int) -> int:
    """The index of the parenthesis that closes the one at ``opening``."""
    depth = 0
    for index in range(opening, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    raise ValueError(f"unbalanced parentheses in {text!r}")


def watermark(w: Workload) -> tuple[str, str]:
    """The view's WATERMARK as (column, expression), e.g. ('date_time', "date_time - INTERVAL '10' MINUTES")."""
    match = re.search(r"WATERMARK FOR (\w+) AS (.+?)(?= EMIT\b|$)", w.options)
    if match is None:
        raise InvalidRun(f"{w.name} has no WATERMARK: {w.options!r}")
    return match.group(1), match.group(2).strip()


def export(spark, bids: int) -> dict[str, Path]:
    """The bids both sides read, numbered in time order (``seq``): written once under bench/data/, reused after.

    Example:
        >>> export(spark, 200_000)
        {'delta': PosixPath('.../bench/data/flink-bids-v1-200000/delta'), 'csv': PosixPath('.../csv')}
    """
    folder = DATA_DIR / f"flink-bids-v{EXPORT_VERSION}-{bids}"
    paths = {"delta": folder / "delta", "csv": folder / "csv"}
    if (folder / "_complete").is_file():
        return paths
    shutil.rmtree(folder, ignore_errors=True)
    plan = Plan(bids=round(bids / HISTORY_SHARE))    # the scale whose history holds `bids` bids
    if plan.history_bids != bids:
        raise InvalidRun(f"no Nexmark scale has a history of exactly {bids:,} bids")
    history = history_tables(spark, plan)["bids"]
    print(f"exporting {bids:,} bids into {folder} ...", flush=True)
    order = "date_time, auction, bidder, price, channel"
    (spark.sql(f"SELECT {', '.join(COLUMNS)}, row_number() OVER (ORDER BY {order}) - 1 AS seq "
               f"FROM delta.`{history}`")
     .repartitionByRange(max(1, bids // 100_000), "seq").sortWithinPartitions("seq")
     .write.format("delta").save(str(paths["delta"])))
    numbered = spark.read.format("delta").load(str(paths["delta"]))
    for reader in range(PARALLELISM):
        _write_csv(numbered.where(f"seq % {PARALLELISM} = {reader}"), paths["csv"] / f"reader-{reader}.csv")
    (folder / "_complete").write_text(json.dumps({"bids": bids, "history": history}) + "\n")
    return paths


def _write_csv(rows: DataFrame, path: Path) -> None:
    """``rows`` as one CSV file without a header at ``path``, in ``seq`` order, the time in epoch milliseconds."""
    scratch = path.with_suffix(".parts")
    (rows.coalesce(1).sortWithinPartitions("seq")
     .selectExpr("auction", "bidder", "price", "channel", "unix_millis(date_time) AS date_time_ms", "extra")
     .write.mode("overwrite").csv(str(scratch)))
    (part,) = scratch.glob("part-*.csv")
    part.rename(path)
    shutil.rmtree(scratch)


def run_flink(python: Path, csv: Path, chosen: dict[str, Workload], runs: int, work: Path) -> dict:
    """Every query ``runs`` times in Flink (bench/flink_job.py under ``python``); its timings."""
    if not python.is_file():
        raise InvalidRun(f"{python} is missing: run `make setup-flink`")
    column, expression = watermark(next(iter(chosen.values())))
    spec = {"parallelism": PARALLELISM, "runs": runs, "result": str(work / "flink_result.json"),
            "source": {"name": "bids", "path": str(csv), "columns": FLINK_COLUMNS, "event_time": column,
                       "millis": "date_time_ms", "watermark": expression},
            "queries": {name: {"sql": flink_sql(w.query("bids")), "output": str(work / "flink_out" / name)}
                        for name, w in chosen.items()}}
    if any(watermark(w) != (column, expression) for w in chosen.values()):
        raise InvalidRun("the workloads' watermarks differ: Flink's source has one")
    (work / "flink_spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    started = time.perf_counter()
    done = subprocess.run([str(python), str(FLINK_JOB), str(work / "flink_spec.json")])
    if done.returncode != 0:
        raise InvalidRun(f"the Flink job failed (exit code {done.returncode})")
    result = json.loads(Path(spec["result"]).read_text())
    return {**result, "process_s": round(time.perf_counter() - started, 1), "sql": {
        name: query["sql"] for name, query in spec["queries"].items()}, "watermark": expression}


def create_source(spark, delta: Path, upto: int) -> str:
    """Our source: a Delta table (with a change feed) holding the bids numbered below ``upto``."""
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")
    spark.sql(f"CREATE TABLE {SOURCE} USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true) AS "
              f"SELECT {', '.join(COLUMNS)} FROM delta.`{delta}` WHERE seq < {upto}")
    return SOURCE


def append(spark, delta: Path, first: int, end: int) -> None:
    """Append the bids numbered [first, end) to our source, in one commit."""
    spark.sql(f"INSERT INTO {SOURCE} SELECT {', '.join(COLUMNS)} FROM delta.`{delta}` "
              f"WHERE seq >= {first} AND seq < {end}")


def create_contenders(spark, w: Workload, policy: str, streaming: bool, work: Path) -> dict:
    """Our view of ``w`` (and its streaming job), created over the source and timed: {'sides': ..., 'initial': ...}."""
    import mv

    view = f"flink_{w.name}"
    mv.sql(spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
    sides, initial = {"ours": view}, {}
    initial["ours"] = measure(spark, lambda: mv.sql(
        spark, f"CREATE MATERIALIZED VIEW {view} {w.options} REFRESH POLICY {policy} AS {w.query(SOURCE)}"
    ).collect())["seconds"]
    if streaming:
        job = sides["streaming"] = StreamingJob(spark, w, SOURCE, f"{view}_stream", str(work / "checkpoints" / w.name))
        job.create()
        initial["streaming"] = measure(spark, job.run)["seconds"]
    print(f"  {w.name}: created " + ", ".join(f"{k} {v:.1f} s" for k, v in initial.items()), flush=True)
    return {"sides": sides, "initial": initial}


def refresh_action(spark, contender) -> Callable[[], dict]:
    """A callable that refreshes ``contender`` (our view's name or a StreamingJob) once and says how."""
    import mv

    if isinstance(contender, StreamingJob):
        return contender.run

    def refresh() -> dict:
        row = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {contender}").first()
        return {"technique": row.technique, "reason": row.reason, "rows_read": row.rows_read,
                "late_rows": row.late_rows, "rows_written": row.rows_inserted + row.rows_updated + row.rows_deleted}
    return refresh


def play_batch(spark, contenders: dict, index: int) -> dict:
    """Refresh every side of every query once, in an order that rotates with ``index``; their costs."""
    measured = {}
    for name, entry in contenders.items():
        sides = list(entry["sides"])
        shift = index % len(sides)
        for side in sides[shift:] + sides[:shift]:
            cost = measure(spark, refresh_action(spark, entry["sides"][side]))
            result = cost.pop("result", None)
            measured.setdefault(name, {})[side] = {**cost, "outcome": result} if isinstance(result, dict) else cost
    print(f"  batch {index + 1}: " + "; ".join(
        f"{name} " + " ".join(f"{side} {cost['seconds']:.1f} s" for side, cost in m.items())
        for name, m in measured.items()), flush=True)
    return measured


def run_ours(spark, chosen: dict[str, Workload], delta: Path, bids: int, batch: int, policy: str,
             streaming: bool, work: Path) -> tuple[dict, list[dict]]:
    """The source with the first ``batch`` bids, the contenders created, then a refresh of each after each batch."""
    print(f"ours: {batch:,} bids to start, then {bids // batch - 1} batches of {batch:,}", flush=True)
    create_source(spark, delta, batch)
    contenders = {name: create_contenders(spark, w, policy, streaming, work) for name, w in chosen.items()}
    played = []
    for index, first in enumerate(range(batch, bids, batch)):
        append(spark, delta, first, first + batch)
        played.append(play_batch(spark, contenders, index))
    return contenders, played


def flink_rows(spark, folder: Path, like: DataFrame) -> DataFrame:
    """Flink's CSV output in ``folder`` with the columns and types of ``like`` (the query's)."""
    raw = spark.read.schema(", ".join(f"`{f.name}` STRING" for f in like.schema)).csv(str(folder))
    return raw.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in like.schema])


def compare(spark, table: str, flink: DataFrame) -> dict:
    """Raise ResultMismatch unless every window of ``table`` is in ``flink`` with equal rows, and Flink's other
    windows all end after the last of them (past ``table``'s watermark); the counts.

    Example:
        >>> compare(spark, "flink_q7", flink_rows(spark, out / "q7", spark.sql(q7)))
        {'windows': 17220, 'rows': 17220, 'flink_only_windows': 61, 'flink_only_from': '2026-01-06 23:50:10'}
    """
    ours = spark.table(table).select(*flink.columns)
    keys = ["window_start", "window_end"]
    windows = ours.select(*keys).distinct()
    theirs = flink.join(windows, keys, "left_semi").select(*flink.columns)
    if checksum(ours) != checksum(theirs):
        raise ResultMismatch(f"{table} differs from Flink's output on the windows it holds"
                             f"\n  only in {table}: {ours.exceptAll(theirs).limit(5).collect()}"
                             f"\n  only in Flink's: {theirs.exceptAll(ours).limit(5).collect()}")
    held = windows.agg(F.count("*").alias("n"), F.max("window_end").alias("last")).first()
    extra = (flink.select(*keys).distinct().join(windows, keys, "left_anti")
             .agg(F.count("*").alias("n"), F.min("window_end").alias("first")).first())
    if held["n"] == 0:
        raise ResultMismatch(f"{table} holds no window to compare")
    if extra["n"] and extra["first"] <= held["last"]:
        raise ResultMismatch(f"{table} lacks windows Flink emitted before its last one ({extra['n']} windows only"
                             f" Flink's, the first ending {extra['first']}, {table}'s last ending {held['last']})")
    return {"windows": held["n"], "rows": checksum(ours)[0], "flink_only_windows": extra["n"],
            "flink_only_from": str(extra["first"]) if extra["first"] else None, "last_window_end": str(held["last"])}


def check(spark, chosen: dict[str, Workload], contenders: dict, work: Path) -> dict:
    """Each query's sides compared with Flink's output (raises ResultMismatch on a difference)."""
    checks = {}
    for name, w in chosen.items():
        flink = flink_rows(spark, work / "flink_out" / name, spark.sql(w.query(SOURCE)).limit(0))
        checks[name] = {side: compare(spark, getattr(c, "target", c), flink)
                        for side, c in contenders[name]["sides"].items()}
        print(f"  {name}: " + "; ".join(f"{side} equal to Flink's on {c['windows']:,} windows ({c['rows']:,} rows),"
                                        f" {c['flink_only_windows']:,} only Flink's" for side, c in checks[name].items()),
              flush=True)
    return checks


def summarize(name: str, flink: dict, played: list[dict], bids: int, batch: int) -> dict:
    """One query's figures: Flink's events per second (median, range), each side's, and their ratios."""
    runs = [r for r in flink["runs"] if r["query"] == name]
    rates = sorted(bids / r["job_s"] for r in runs)
    summary = {"flink": {"events_per_s": statistics.median(rates), "range": [rates[0], rates[-1]],
                         "job_s": statistics.median(r["job_s"] for r in runs),
                         "wall_s": statistics.median(r["wall_s"] for r in runs)}}
    for side in played[0][name]:
        costs = [p[name][side] for p in played]
        seconds = statistics.median(c["seconds"] for c in costs)
        summary[side] = {"seconds": seconds, "events_per_s": batch / seconds,
                         "ratio": batch / seconds / summary["flink"]["events_per_s"]}
        if side == "ours":   # how our refreshes ran (AUTO may refresh in full: FULL_CHEAPER)
            summary[side]["how"] = sorted({f"{c['outcome']['technique']} {c['outcome']['reason']}" for c in costs})
    return summary


def run(bids: int, batch: int, names: list[str], runs: int, windows: str, policy: str, streaming: bool,
        flink_python: Path, work: Path, command: str) -> dict:
    """Export the bids, time Flink, play our batches, compare the rows; the results/flink.json document."""
    if batch <= 0 or bids % batch or bids < 2 * batch:
        raise InvalidRun(f"--bids ({bids:,}) must be a multiple of --batch ({batch:,}), at least twice it")
    began = time.perf_counter()
    for part in ("mv_home", "checkpoints", "flink_out"):    # a warehouse of its own, fresh each run
        shutil.rmtree(work / part, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    os.environ["MV_HOME"] = str(work / "mv_home")
    import mv

    measured_engine = engine(mv)
    spark = mv.session(conf={"spark.app.name": "mv-bench-flink"})
    load_before = os.getloadavg()
    paths = export(spark, bids)
    chosen = {name: workload(name, windows) for name in names}
    print(f"flink: {bids:,} bids, {_runs(runs)} of {', '.join(names)} at parallelism {PARALLELISM}", flush=True)
    flink = run_flink(flink_python, paths["csv"], chosen, runs, work)
    contenders, played = run_ours(spark, chosen, paths["delta"], bids, batch, policy, streaming, work)
    checks = check(spark, chosen, contenders, work)
    return {
        "benchmark": "flink", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command, "engine": measured_engine, "machine": machine(spark), "bids": bids, "batch": batch,
        "batches": len(played), "runs": runs, "windows": windows, "policy": policy, "flink": flink,
        "queries": {name: {"label": w.label, "window": w.window, "initial": contenders[name]["initial"],
                           "summary": summarize(name, flink, played, bids, batch), "checks": checks[name]}
                    for name, w in chosen.items()},
        "played": played, "load_average": {"before": load_before, "after": os.getloadavg()},
        "total_s": round(time.perf_counter() - began, 1),
    }


def _runs(count: int) -> str:
    return f"{count} run" + ("" if count == 1 else "s")


def _rate(events_per_s: float) -> str:
    return f"{round(events_per_s, -3):,.0f}"


def markdown(results: dict) -> str:
    """RESULTS.md's section: the command, the machine, and one line per query."""
    m, f, load = results["machine"], results["flink"], results["load_average"]
    streaming = any("streaming" in q["summary"] for q in results["queries"].values())
    lines = [f"Measured {results['measured_at'][:10]} on {m['cores']} cores / {m['memory_gib']} GiB, Spark "
             f"{m['spark']}, Delta {m['delta']}, Flink {f['flink']} (PyFlink, local mini-cluster, parallelism "
             f"{f['parallelism']}), Java {f['java']}, Python {m['python']}; load average {load['before'][0]:.1f} "
             f"before, {load['after'][0]:.1f} after; whole run {results['total_s'] / 60:.0f} min:", "",
             f"    {results['command']}", "",
             f"{results['bids']:,} bids. Flink streams all of them, {_runs(results['runs'])} per query (its JVM took "
             f"{f['start_s']:.1f} s to start, once). Ours{' and Structured Streaming' if streaming else ''} start "
             f"from the first {results['batch']:,} and refresh after each of {results['batches']} append batches "
             f"of {results['batch']:,}. Watermark: `{f['watermark']}`, EMIT ON WINDOW CLOSE.", "",
             "| Query | Window | Flink bids/s (median, range) | Flink job s (with mini-cluster start) | Ours bids/s "
             "| Ours s a batch | **Ours / Flink** | Structured Streaming bids/s | SS / Flink | Results equal on |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, q in results["queries"].items():
        s, fl = q["summary"], q["summary"]["flink"]
        ours, ss = s["ours"], s.get("streaming")
        under = "" if ours["ratio"] >= TARGET else f" (under {TARGET})"
        ss_cells = [_rate(ss["events_per_s"]), f"{ss['ratio']:.2f}"] if ss else ["n/a", "n/a"]
        equal = _equal_on(q["checks"])
        lines.append(f"| {q['label']} | {q['window']} | {_rate(fl['events_per_s'])} ({_rate(fl['range'][0])}-"
                     f"{_rate(fl['range'][1])}) | {fl['job_s']:.1f} ({fl['wall_s']:.1f}) | "
                     f"{_rate(ours['events_per_s'])} | {ours['seconds']:.1f} | **{ours['ratio']:.2f}**{under} | "
                     f"{' | '.join(ss_cells)} | {equal} |")
    how = sorted({h for q in results["queries"].values() for h in q["summary"]["ours"]["how"]})
    lines += ["", f"Target (issue 38): ours >= {TARGET}x Flink's bids per second. Our refreshes ran as: "
              f"{'; '.join(how)} (REFRESH POLICY {results['policy']})."]
    return "\n".join(lines)


def _equal_on(checks: dict) -> str:
    """The last column: windows and rows equal to Flink's per side (once if the sides agree), and Flink's others."""
    counts = {side: (c["windows"], c["rows"], c["flink_only_windows"]) for side, c in checks.items()}
    if len(set(counts.values())) == 1:
        windows, rows, only = next(iter(counts.values()))
        return f"{windows:,} windows ({rows:,} rows); {only:,} more only Flink's (past the watermark)"
    return "; ".join(f"{side}: {w:,} windows ({r:,} rows), {o:,} more only Flink's" for side, (w, r, o) in counts.items())


def main(argv: list[str] | None = None) -> int:
    """The command line: run, write results/flink.json and RESULTS.md's section; 1 if the run is invalid."""
    parser = argparse.ArgumentParser(prog="python -m bench.flink", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_BIDS:,} bids")
    parser.add_argument("--bids", type=int, help=f"bids in all (default {BIDS:,}; a multiple of --batch)")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"bids to start with and per batch ({BATCH:,})")
    parser.add_argument("--queries", default=",".join(QUERIES), help="comma-separated, of " + ", ".join(QUERIES))
    parser.add_argument("--runs", type=int, default=RUNS, help=f"Flink's runs per query ({RUNS})")
    parser.add_argument("--windows", choices=["nexmark", "workload"], default="nexmark",
                        help="Nexmark's window sizes (HOP 2 s / 10 s, TUMBLE 10 s) or the workloads' own")
    parser.add_argument("--policy", choices=["AUTO", "INCREMENTAL"], default="AUTO", help="our views' REFRESH POLICY")
    parser.add_argument("--no-streaming", action="store_true", help="leave Structured Streaming out")
    parser.add_argument("--flink-python", type=Path, default=FLINK_PYTHON, help="PyFlink's Python (.venv-flink)")
    parser.add_argument("--work", type=Path, default=WORK_DIR,
                        help="a folder of the run's own: MV_HOME, checkpoints, Flink's output (emptied first)")
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    command = "python -m bench.flink " + " ".join(sys.argv[1:] if argv is None else argv)
    return reported(args, RESULTS_JSON, RESULTS_MD, "flink", "Side by side with Flink", lambda: results(
        args, RESULTS_JSON, lambda: run(
            args.bids or (QUICK_BIDS if args.quick else BIDS), args.batch, args.queries.split(","), args.runs,
            args.windows, args.policy, not args.no_streaming, args.flink_python, args.work.resolve(), command.strip())),
        markdown)


if __name__ == "__main__":
    sys.exit(main())
