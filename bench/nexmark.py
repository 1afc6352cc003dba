"""Nexmark-style workloads: our incremental refresh against a full refresh and Structured Streaming.

Two days of bids are the source's history; the third day comes in scheduled batches (bench/
nexmark_data.py). Each workload (bench/nexmark_workloads.py) is kept three ways on one source: our
view refreshed incrementally, our view refreshed in full, and a Structured Streaming job run with
trigger(availableNow=True) after each batch (bench/streaming.py). The day's first batches only
append (the append-only variant); the later ones also correct and withdraw recent bids (the
changes variant), where the streaming job stops: it cannot retract. After each batch every
contender runs once, in an order that rotates over the batches, measured by bench/probe.py. The
full side is a twin under REFRESH POLICY FULL, refreshed as that policy (and AUTO's FULL_CHEAPER)
refreshes in full: not REFRESH ... FULL, which repairs (every row compared with the view's). At the
end of each variant every contender's table is checked against the query recomputed from scratch
(on the windows all of them have closed, apart from those late bids touched); a difference stops the
run before any figure is written. What counts are ratios from one run.

Example:
    $ python -m bench.nexmark --quick          # 1M bids: 3 append-only batches, then 2 with changes
    $ python -m bench.nexmark                  # 1M, 10M and 50M bids: 8 append-only batches, then 4
    $ python -m bench.nexmark --render         # rewrite RESULTS.md and the chart from results/nexmark.json
    $ python -m bench.nexmark --bids 50000000 --rounds 1 2 --json bench/results/nexmark-50m.json
    $ python -m bench.nexmark --chart-scales   # results/nexmark-scales.png from every results/nexmark*.json
    $ python -m bench.nexmark --quick --policy INCREMENTAL --json bench/results/nexmark-forced.json
                                               # the change's path every time (AUTO may refresh in full)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from bench import nexmark_check, nexmark_report
from bench.nexmark_data import BATCHES, Plan, append_batch, change_batch, history_tables, source_table
from bench.nexmark_workloads import WORKLOADS
from bench.probe import measure
from bench.refresh import engine
from bench.report import InvalidRun
from bench.streaming import StreamingJob
from bench.windows import DATA_DIR, machine

MV_HOME = DATA_DIR / "mv_home_nexmark"
CHECKPOINTS = DATA_DIR / "nexmark_checkpoints"
SCALES, QUICK_SCALES = (1_000_000, 10_000_000, 50_000_000), (1_000_000,)
VARIANTS = {   # name: (label, how a batch changes the source)
    "append": ("append-only batches (with late bids)", append_batch),
    "changes": ("batches with updates and deletes of recent bids", change_batch),
}
ROUNDS, QUICK_ROUNDS = {"append": 8, "changes": 4}, {"append": 3, "changes": 2}


def setup(spark, history: str, workloads: list[str], policy: str = "AUTO") -> dict:
    """The source (a clone of the cached history) and, per workload, its three contenders, created;
    the incremental view under REFRESH POLICY `policy` (AUTO may refresh it in full: FULL_CHEAPER),
    its twin under REFRESH POLICY FULL.

    Creating a view runs its first (full) refresh; a streaming job's first run reads the history.
    Both are timed as "initial", apart from the batches.
    """
    import mv

    source = source_table(spark, "bids", history)
    made = {"source": source, "workloads": {}}
    for name in workloads:
        w, contenders, initial = WORKLOADS[name], {}, {}
        for side in ("incremental", "full"):
            view = contenders[side] = f"{name}_{side[:4]}"
            clauses = f"{w.options} REFRESH POLICY {policy if side == 'incremental' else 'FULL'}"
            initial[side] = measure(spark, lambda: mv.sql(
                spark, f"CREATE MATERIALIZED VIEW {view} {clauses} AS {w.query(source)}").collect())
        job = StreamingJob(spark, w, source, f"{name}_stream", str(CHECKPOINTS / name))
        job.create()
        contenders["streaming"] = job
        initial["streaming"] = measure(spark, job.run)
        made["workloads"][name] = {"contenders": contenders, "initial": {k: _plain(v) for k, v in initial.items()}}
        print(f"  {name}: created " + ", ".join(f"{k} {v['seconds']:.1f} s" for k, v in initial.items()), flush=True)
    return made


def refresh(spark, contender, full: bool):
    """A callable that refreshes ``contender`` (a view's name or a StreamingJob) once."""
    import mv

    if isinstance(contender, StreamingJob):
        return contender.run

    def run():
        row = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {contender}").first()   # the full twin: POLICY FULL
        expected = "full" if full else "incremental"
        if row.technique != expected and row.reason != "FULL_CHEAPER":  # AUTO's own choice is what users get
            raise InvalidRun(f"{contender}: expected an {expected} refresh, got {row.technique} ({row.reason})")
        return {"rows_read": row.rows_read, "late_rows": row.late_rows, "reason": row.reason,
                "rows_written": row.rows_inserted + row.rows_updated + row.rows_deleted}
    return run


def play_round(spark, made: dict, variant: str, plan: Plan, index: int, sides: tuple[str, ...]) -> dict:
    """Apply batch ``index`` to the source as ``variant`` does, then run each of ``sides`` of every workload once."""
    source = made["source"]
    before = _version(spark, source)
    applied = VARIANTS[variant][1](spark, source, plan, index)
    applied.update(_change_bytes(spark, source, before))
    events = applied["appended"] + applied.get("updated", 0) + applied.get("deleted", 0)
    measured = {}
    for name, entry in made["workloads"].items():
        shift = index % len(sides)
        for side in sides[shift:] + sides[:shift]:           # each side goes first in some rounds
            cost = _plain(measure(spark, refresh(spark, entry["contenders"][side], side == "full")))
            cost["events_per_s"] = round(events / cost["seconds"], 1)
            cost["source_read"] = cost["read"].get(source, {"files": 0, "bytes": 0})
            measured.setdefault(name, {})[side] = cost
    line = "; ".join(f"{n} " + " ".join(f"{s[:4]} {c['seconds']:.1f}" for s, c in m.items())
                     for n, m in measured.items())
    print(f"  batch {index + 1}: {events:,} changes; seconds: {line}", flush=True)
    return {"applied": applied, "events": events, "workloads": measured}


def _plain(cost: dict) -> dict:
    """``cost`` with what the action returned kept only if it is JSON (a refresh's counts, a stream's progress)."""
    result = cost.pop("result", None)
    return {**cost, "outcome": result} if isinstance(result, dict) else cost


def _version(spark, table: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"]


def _change_bytes(spark, table: str, after: int) -> dict:
    """Bytes the source's commits after version ``after`` added, and the table's size now."""
    added = 0
    for row in spark.sql(f"DESCRIBE HISTORY {table}").where(f"version > {after}").collect():
        metrics = row["operationMetrics"] or {}
        added += int(metrics.get("numOutputBytes", metrics.get("numAddedBytes", 0)))
    size = spark.sql(f"DESCRIBE DETAIL {table}").first()["sizeInBytes"]
    return {"change_bytes": added, "table_bytes": size}


def run_scale(spark, plan: Plan, history: str, rounds: dict[str, int], workloads: list[str],
              full_on_appends: bool = True, policy: str = "AUTO") -> list[dict]:
    """Set up, play the append-only batches, then those with changes; check after each variant.

    Streaming runs only on the append-only batches. ``full_on_appends`` False skips the full
    refreshes there (--quick: the full view is brought up to date by the first batch with changes).
    """
    print(f"{plan.bids:,} bids; {rounds['append']} append-only batches, then {rounds['changes']} with changes",
          flush=True)
    made = setup(spark, history, workloads, policy)
    initial = {n: e["initial"] for n, e in made["workloads"].items()}
    results, first = [], 0
    for variant, count in rounds.items():
        if not count:
            continue
        sides = _sides(variant, full_on_appends)
        print(f" {VARIANTS[variant][0]}: {', '.join(sides)}", flush=True)
        played = [play_round(spark, made, variant, plan, i, sides) for i in range(first, first + count)]
        first += count
        checks = {name: nexmark_check.check(spark, WORKLOADS[name], made["source"],
                                            {s: entry["contenders"][s] for s in sides})
                  for name, entry in made["workloads"].items()}
        print("  checked: " + "; ".join(f"{n}: {c['compared_rows']:,} rows equal" for n, c in checks.items()),
              flush=True)
        results.append({"variant": variant, "label": VARIANTS[variant][0], "bids": plan.bids, "sides": sides,
                        "rounds": played, "initial": initial, "checks": checks,
                        "summary": {name: summarize(played, name) for name in workloads}})
    return results


def _sides(variant: str, full_on_appends: bool) -> tuple[str, ...]:
    """Who runs on a variant's batches: streaming only where the source only grows."""
    if variant == "changes":
        return ("incremental", "full")
    return ("incremental", "full", "streaming") if full_on_appends else ("incremental", "streaming")


def summarize(played: list[dict], name: str) -> dict:
    """Medians over the rounds per contender, and ratios: of medians, and paired (the median of per-round ratios)."""
    sides = list(played[0]["workloads"][name])

    def median(side, get):
        return statistics.median(get(r["workloads"][name][side], r) for r in played)

    medians = {side: {
        "seconds": median(side, lambda c, r: c["seconds"]),
        "events_per_s": median(side, lambda c, r: c["events_per_s"]),
        "peak_heap_mib": max(r["workloads"][name][side]["peak_heap_mib"] for r in played),
        "source_files": median(side, lambda c, r: c["source_read"]["files"]),
        "source_bytes": median(side, lambda c, r: c["source_read"]["bytes"]),
        "read_per_change_byte": median(side, lambda c, r: c["source_read"]["bytes"] / max(1, r["applied"]["change_bytes"])),
        "read_per_table_byte": median(side, lambda c, r: c["source_read"]["bytes"] / max(1, r["applied"]["table_bytes"])),
    } for side in sides}
    ratios = {}
    for other in [s for s in ("streaming", "full") if s in sides]:
        ratios[f"incremental/{other}"] = {
            "ratio": medians["incremental"]["seconds"] / medians[other]["seconds"],
            "paired": statistics.median(r["workloads"][name]["incremental"]["seconds"]
                                        / r["workloads"][name][other]["seconds"] for r in played)}
    in_full = sum(r["workloads"][name]["incremental"].get("outcome", {}).get("reason") == "FULL_CHEAPER"
                  for r in played)
    return {"medians": medians, "ratios": ratios, "auto_full": in_full, "rounds": len(played)}


def run(scales: tuple[int, ...], rounds: dict[str, int], workloads: list[str], full_on_appends: bool,
        policy: str = "AUTO") -> dict:
    """Every variant at every scale; the results/nexmark.json document."""
    began = time.perf_counter()
    shutil.rmtree(MV_HOME, ignore_errors=True)   # a warehouse of its own, fresh each run
    shutil.rmtree(CHECKPOINTS, ignore_errors=True)
    os.environ["MV_HOME"] = str(MV_HOME)
    import mv

    measured_engine = engine(mv)
    spark = mv.session(conf={"spark.app.name": "mv-bench-nexmark"})
    load_before = os.getloadavg()
    results = []
    for bids in scales:
        plan = Plan(bids=bids, batches=max(BATCHES, sum(rounds.values())))
        results += run_scale(spark, plan, history_tables(spark, plan)["bids"], rounds, workloads, full_on_appends,
                             policy)
        shutil.rmtree(CHECKPOINTS, ignore_errors=True)   # the next scale's jobs start afresh
    return {
        "benchmark": "nexmark", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "engine": measured_engine, "machine": machine(spark), "rounds": rounds, "workloads": workloads,
        "full_on_appends": full_on_appends, "policy": policy,
        "notes": {n: WORKLOADS[n].note for n in workloads if WORKLOADS[n].note},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "runs": results, "total_s": round(time.perf_counter() - began, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """The command line: run, write results/nexmark.json, RESULTS.md and the chart; 1 if the run is invalid."""
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1M bids, 3 append-only batches (no full refreshes) and 2 with changes")
    parser.add_argument("--bids", type=int, action="append", help="bids in all (repeatable; default 1M, 10M, 50M)")
    parser.add_argument("--rounds", type=int, nargs=2, metavar=("APPEND", "CHANGES"),
                        help="batches of each variant (default 8 4; --quick: 3 2)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, of " + ", ".join(WORKLOADS))
    parser.add_argument("--policy", choices=["AUTO", "INCREMENTAL"], default="AUTO",
                        help="the incremental view's REFRESH POLICY (AUTO may refresh it in full: FULL_CHEAPER)")
    parser.add_argument("--render", action="store_true", help="only redo RESULTS.md and the chart from the JSON")
    parser.add_argument("--json", type=Path, default=nexmark_report.RESULTS_JSON,
                        help="where the run's JSON goes; RESULTS.md and the chart are redone only for the default"
                             " (a run kept beside it, such as results/nexmark-50m.json)")
    parser.add_argument("--chart-scales", action="store_true",
                        help="only draw results/nexmark-scales.png from every results/nexmark*.json")
    args = parser.parse_args(argv)
    if args.chart_scales:
        print(nexmark_report.plot_scales(nexmark_report.scale_documents()))
        return 0
    if args.render:
        results = json.loads(nexmark_report.RESULTS_JSON.read_text())
    else:
        scales = tuple(args.bids or (QUICK_SCALES if args.quick else SCALES))
        rounds = dict(zip(ROUNDS, args.rounds)) if args.rounds else (QUICK_ROUNDS if args.quick else ROUNDS)
        try:
            results = run(scales, rounds, args.workloads.split(","), full_on_appends=not args.quick,
                          policy=args.policy)
        except InvalidRun as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        if args.json.resolve() != nexmark_report.RESULTS_JSON.resolve():
            print(nexmark_report.markdown(results))
            return 0
    print(nexmark_report.write(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
