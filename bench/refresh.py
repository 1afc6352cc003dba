"""Incremental refresh against full refresh: a per-minute view over a bid table that keeps changing, timed.

Each scenario clones a cached Delta table of bids (7 days, written in time order as 150 files) and
creates two identical views on it. A round applies one batch of changes to the source, then refreshes
one view incrementally (REFRESH MATERIALIZED VIEW v, under REFRESH POLICY AUTO, which runs it in full
when its estimate says that is cheaper: FULL_CHEAPER) and the other in full (its twin under REFRESH
POLICY FULL: a plain full refresh as AUTO runs one, not REFRESH ... FULL, the repair), so both
refreshes see the same source state and write the same change; then both views are checked against
the query recomputed from scratch, and a difference stops the run. What counts is
ratio = median(incremental) / median(full) from one run (target <= 0.1 at a 1% change), and how the
incremental time grows with the source at a fixed change (target <= 1.5 for 10x the rows).

Example:
    $ python -m bench.refresh --quick          # 1M-row source, 2 rounds
    $ python -m bench.refresh                  # 10M-row source, 3 rounds
    $ python -m bench.refresh --render         # rewrite RESULTS.md from results/refresh.json
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench.report import InvalidRun, ResultMismatch, add_output_arguments, reported, results
from bench.windows import RESULTS_MD, machine
from mv import progress

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
MV_HOME = DATA_DIR / "mv_home_refresh"
RESULTS_JSON = BENCH_DIR / "results" / "refresh.json"

# The bid table. Bump DATA_VERSION when the generator changes, so cached tables are not reused.
DATA_VERSION = 1
START = "2026-01-05 00:00:00"                  # a Monday, UTC
HOUR_US = 3_600_000_000
SPAN_US = 7 * 24 * HOUR_US                     # seven days of bids
FILES = 150                                    # each file a slice of about 67 minutes
OPEN_AUCTIONS = 300                            # a new block of auction ids each hour; each runs ~3 hours
AUCTION_STRIDE = 100
BIDDERS = 10_000

# A change batch: mostly new bids after the newest one, some corrected or withdrawn.
SIZES = (0.001, 0.01, 0.1)                     # of the source's rows
SCALE_SHARE = 0.01                             # (c) applies (a)'s 1% change to a source a tenth the size
APPENDS, UPDATES, DELETES = 0.8, 0.1, 0.1
RECENT_US = HOUR_US                            # "recent" bids are at least the last hour's ...
CANDIDATES = 4                                 # ... and at least 4x as many as the bids touched

VIEW = """SELECT auction, window_start, window_end, count(*) AS bids, sum(price) AS total, max(price) AS top
FROM TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '1' MINUTE)
GROUP BY auction, window_start, window_end"""


@dataclass(frozen=True)
class Scenario:
    """Where a scenario's updates and deletes fall: among the newest bids, or anywhere in the 7 days."""
    name: str
    label: str
    spread: str


RECENT = Scenario("recent", "(a) appends + updates/deletes of recent bids", "recent")
UNIFORM = Scenario("uniform", "(b) appends + updates/deletes spread over 7 days", "uniform")


@dataclass(frozen=True)
class Batch:
    """How many bids one change appends, updates and deletes, and where (see Scenario.spread).

    Appended bids come at ``pace`` bids per microsecond after the newest bid, the pace of the
    benchmark's full-size table, so a batch of the same size has the same time layout on any source.
    """
    appends: int
    updates: int
    deletes: int
    spread: str
    pace: float

    @classmethod
    def of(cls, rows: int, spread: str, pace: float) -> "Batch":
        return cls(round(rows * APPENDS), round(rows * UPDATES), round(rows * DELETES), spread, pace)


def bids(spark, rows: int, first_us: int, span_us: int, salt: int):
    """``rows`` bids with times spread over [first_us, first_us + span_us), from hashes of the row number.

    Auction ids come in hourly blocks (an auction takes bids for about three hours, ~300 are open at
    a time), so a minute holds a few bids per open auction, as a per-auction, per-minute view expects.

    Example:
        >>> bids(spark, 3, 0, 60_000_000, salt=0).show()
    """
    def draw(part: int, bound: int) -> str:
        return f"pmod(xxhash64(id, {salt}, {part}), {bound})"

    return (spark.range(rows, numPartitions=max(1, min(8, rows // 100_000)))
            .selectExpr("id", f"{first_us} + {draw(2, span_us)} AS us")
            .selectExpr(f"(us div {HOUR_US}) * {AUCTION_STRIDE} + {draw(1, OPEN_AUCTIONS)} AS auction",
                        f"{draw(3, BIDDERS)} AS bidder", f"1 + {draw(4, 10_000)} AS price",
                        "timestamp_micros(us) AS ts"))


def start_us(spark) -> int:
    return spark.sql(f"SELECT unix_micros(TIMESTAMP '{START}')").first()[0]


def bids_table(spark, rows: int) -> str:
    """The path of a Delta table of ``rows`` bids over 7 days, generated on first use, cached under bench/data/.

    Written in time order as FILES files, each a slice of time, so a time filter skips most of them.

    Example:
        >>> spark.read.format("delta").load(bids_table(spark, 1000)).count()
        1000
    """
    path = DATA_DIR / f"bids-7d-v{DATA_VERSION}-{rows}"
    if not (path / "_delta_log" / f"{0:020d}.json").is_file():   # no commit: absent or half-written
        print(f"generating {rows:,} bids into {path} ...", flush=True)
        (bids(spark, rows, start_us(spark), SPAN_US, salt=0).repartitionByRange(FILES, "ts")
         .sortWithinPartitions("ts").write.format("delta").mode("overwrite").save(str(path)))
    return str(path)


def source_table(spark, name: str, path: str) -> str:
    """A catalog table ``name`` that starts as the cached table at ``path`` (a shallow clone: no copy).

    Changes go to the clone's own folder; the cached table is never written.
    """
    spark.sql(f"CREATE TABLE {name} SHALLOW CLONE delta.`{path}`")
    return name


def apply(spark, table: str, batch: Batch, salt: int) -> dict:
    """Apply ``batch`` to ``table`` (an append, a DELETE, an UPDATE) and return what Delta says it did.

    Updated bids get a new price and a time 20 s later, so some move to the next window. Which bids
    are updated or deleted is drawn by hashing them with ``salt``, among the recent ones (the last
    hour, or as far back as holds CANDIDATES times the bids to touch) or among all.

    Example:
        >>> apply(spark, "bids_recent", Batch.of(10_000, "recent", pace=1.65e-05), salt=1)
        {'appended': 8000, 'updated': 1013, 'deleted': 987, 'appended_minutes': 8.1, ...}
    """
    newest, rows = spark.sql(f"SELECT unix_micros(max(ts)), count(*) FROM {table}").first()
    span = max(1, round(batch.appends / batch.pace))
    (bids(spark, batch.appends, newest + 1, span, salt)
     .write.format("delta").mode("append").saveAsTable(table))
    where, reach = "true", None
    if batch.spread == "recent":
        reach = max(RECENT_US, round(CANDIDATES * (batch.updates + batch.deletes) * SPAN_US / rows))
        where = f"ts > timestamp_micros({newest - reach}) AND ts <= timestamp_micros({newest})"
    pool = spark.sql(f"SELECT count(*) FROM {table} WHERE {where}").first()[0]
    pick = "pmod(xxhash64(auction, bidder, price, ts, {salt}), 1000000) < {share}"
    delete_share = round(1_000_000 * batch.deletes / pool)
    update_share = round(1_000_000 * batch.updates / max(1, pool - batch.deletes))
    spark.sql(f"DELETE FROM {table} WHERE {where} AND {pick.format(salt=salt, share=delete_share)}")
    spark.sql(f"UPDATE {table} SET price = price + 1, ts = ts + INTERVAL 20 SECONDS "
              f"WHERE {where} AND {pick.format(salt=salt + 1, share=update_share)}")
    metrics = {row["operation"]: row["operationMetrics"] for row in
               spark.sql(f"DESCRIBE HISTORY {table} LIMIT 3").collect()}
    return {"appended": int(metrics["WRITE"]["numOutputRows"]),
            "updated": int(metrics["UPDATE"]["numUpdatedRows"]),
            "deleted": int(metrics["DELETE"]["numDeletedRows"]),
            "appended_minutes": round(span / 60_000_000, 1),
            "touched_hours": round(reach / HOUR_US, 1) if reach else None,
            "source_rows_before": rows}


def checksum(df) -> tuple:
    """An order-free fingerprint of ``df``'s rows as a multiset: row count and sum of 64-bit row hashes."""
    row = df.selectExpr("count(*)", f"sum(CAST(xxhash64({', '.join(df.columns)}) AS DECIMAL(38, 0)))").first()
    return tuple(row)


def check_views(spark, query: str, views: tuple[str, ...]) -> int:
    """Raise ResultMismatch unless every view holds exactly the rows of ``query``; return how many.

    Example:
        >>> check_views(spark, VIEW.format(source="bids_recent"), ("recent_inc", "recent_full"))
        2879114
    """
    truth = spark.sql(query)
    expected = checksum(truth)
    for view in views:
        actual = spark.table(view).select(*truth.columns)
        if checksum(actual) != expected:
            only_view = actual.exceptAll(truth).limit(5).collect()
            only_query = truth.exceptAll(actual).limit(5).collect()
            raise ResultMismatch(f"{view} differs from its query\n  only in the view: {only_view}\n"
                                 f"  only in the query: {only_query}")
    return expected[0]


# Where a refresh's time went, from Spark's own record of the SQL executions it ran (the data behind
# the SQL tab of the UI, kept even with the UI off). Diagnostics only: if Spark's internals move,
# the figures go missing and the benchmark still runs.
PHASES = (   # first match wins: (label, what the physical plan of a top-level execution contains)
    ("MERGE into the view", "MergeIntoCommand"),
    ("the refresh's commit (RefreshCommit)", "RefreshCommitCommand"),
    ("the view's snapshot (background)", "DescribeDeltaDetail"),
    ("change feed read", "DeltaCDFRelation"),
    ("DESCRIBE HISTORY", "DescribeDeltaHistory"),
    ("SHOW TBLPROPERTIES", "ShowTableProperties"),
    ("ALTER TABLE (state-only commit)", "AlterTable"),
    ("history / late-row appends", "AppendData"),
)
DRIVER = "driver only (between Spark executions)"
MERGE_STEPS = (   # Delta's descriptions of the jobs inside one MERGE: (label, what the description says)
    ("materialize source (recompute, view rows to delete)", "materialize source"),
    ("find the view files that match", "scanning files for matches"),
    ("write deletion vectors", "Writing Deletion Vectors"),
    ("write changed rows", "Writing modified data"),
)


def execution_marker(spark) -> int:
    """The id of the newest SQL execution so far (-1 if none or unknown)."""
    try:
        store = _status_store(spark)
        count = store.executionsCount()
        return store.executionsList(count - 1, 1).head().executionId() if count else -1
    except Exception:                            # diagnostics only
        return -1


def where_time_went(spark, after: int, wall: float) -> dict | None:
    """Seconds per kind of top-level SQL execution run since ``after`` (a REFRESH statement's split into
    the refresh's phases, as mv/progress.py labels its executions), the steps of MERGE, files read per
    table, and the profile: each execution inside a REFRESH statement.

    Example:
        >>> marker = execution_marker(spark); mv.sql(spark, "REFRESH MATERIALIZED VIEW v").collect()
        >>> where_time_went(spark, marker, wall=3.3)["phases"]
        {'refresh, merging': 1.1, 'refresh, reading changes': 0.9, ..., 'refresh, driver (between its Spark executions)': 0.4}
    """
    try:
        executions = _executions_since(spark, after)
    except Exception:                            # diagnostics only
        return None
    phases: dict[str, float] = {}
    steps: dict[str, list[tuple[float, float]]] = {}
    files: dict[str, int] = {}
    refreshes = {e["root"] for e in executions if e["id"] != e["root"] and e["description"].startswith(progress.LABEL)}
    for e in executions:
        if e["id"] == e["root"] and e["id"] not in refreshes:
            label = next((name for name, marker in PHASES if marker in e["plan"]), None)
            label = label or "other queries: " + _call_site(e["description"])
            phases[label] = phases.get(label, 0.0) + e["end"] - e["start"]
        elif "MERGE" in e["description"] and "Compute snapshot" not in e["description"]:
            step = next((name for name, marker in MERGE_STEPS if marker in e["description"]), "other")
            steps.setdefault(step, []).append((e["start"], e["end"]))
        for table, count in e["files"].items():
            files[table] = files.get(table, 0) + count
    phases |= _refresh_phases(executions, refreshes)
    profile = [step for e in executions if (step := _step(e, refreshes))]
    phases[DRIVER] = max(0.0, wall - sum(phases.values()))
    # A MERGE job may run nested jobs with the same description: count the time they cover once.
    merge_steps = {step: _covered(spans) for step, spans in steps.items()}
    return {"phases": _rounded(phases), "merge_steps": _rounded(merge_steps), "files_read": files,
            "executions": len(executions), "profile": profile}


def _refresh_phase(e: dict, refreshes: set[int]) -> str | None:
    """The refresh phase an execution inside a REFRESH statement belongs to, from its description
    (Delta's own jobs describe themselves: "Delta: Compute snapshot for version: N"); None outside."""
    if e["id"] == e["root"] or e["root"] not in refreshes:
        return None
    if e["description"].startswith(progress.LABEL):
        return "refresh, " + e["description"].split(": ", 1)[-1]
    return "refresh, other: " + re.sub(r"\d+", "N", e["description"])[:60]


def _refresh_phases(executions: list[dict], refreshes: set[int]) -> dict[str, float]:
    """The REFRESH statements' seconds split into the refresh's phases (the time their executions of
    each phase cover) and the driver work between them."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for e in executions:
        if phase := _refresh_phase(e, refreshes):
            spans.setdefault(phase, []).append((e["start"], e["end"]))
    split = {phase: _covered(covered) for phase, covered in spans.items()}
    statements = sum(e["end"] - e["start"] for e in executions if e["id"] in refreshes)
    if refreshes:
        split["refresh, driver (between its Spark executions)"] = max(0.0, statements - sum(split.values()))
    return split


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of the time spans."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


def _rounded(seconds: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}


def _step(e: dict, refreshes: set[int]) -> dict | None:
    """An execution inside a REFRESH statement: its phase, what it did (the top of its physical plan),
    its start after the statement's and its seconds."""
    if not (phase := _refresh_phase(e, refreshes)):
        return None
    return {"phase": phase, "plan": _plan_head(e["plan"]),
            "seconds": round(e["end"] - e["start"], 2), "at": round(e["start"] - e["root_start"], 2)}


def _plan_head(plan: str) -> str:
    """The physical plan's top operator, e.g. 'Execute MergeIntoCommand' or 'CollectLimit 21'."""
    for line in plan.splitlines():
        line = line.strip(" +-*:()0123456789")
        if line and not line.startswith("==") and line != "AdaptiveSparkPlan isFinalPlan=true":
            return line[:80]
    return ""


def _call_site(description: str) -> str:
    site = re.sub(r"^.*?/(?=(mv|bench)/)", "", description.split(" at ", 1)[-1])
    if site.startswith(("NativeMethodAccessorImpl", "<unknown>")):
        return "spark.sql (no Python call site)"
    return "the benchmark (result row)" if site.startswith("bench/") else site


def _status_store(spark):
    return spark._jsparkSession.sharedState().statusStore()


def _executions_since(spark, after: int, settle_s: float = 5.0) -> list[dict]:
    store = _status_store(spark)
    deadline = time.monotonic() + settle_s
    while True:   # Spark records an execution's end asynchronously; give the last ones a moment
        count = store.executionsCount()
        window = store.executionsList(max(0, count - 1000), 1000)
        found = [e for e in _scala_list(window) if e.executionId() > after]
        if all(e.completionTime().isDefined() for e in found) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    executions = [_execution(store, e) for e in found]
    starts = {e["id"]: e["start"] for e in executions}
    return [e | {"root_start": starts.get(e["root"], e["start"])} for e in executions]


def _execution(store, e) -> dict:
    start = e.submissionTime() / 1000
    end = e.completionTime().get().getTime() / 1000 if e.completionTime().isDefined() else start
    plan = e.physicalPlanDescription()
    files: dict[str, int] = {}
    if "Scan parquet" in plan:
        values = _scala_dict(e.metricValues()) if e.metricValues() is not None else {}
        for node in _scala_list(store.planGraph(e.executionId()).allNodes()):
            table = node.name().removeprefix("Scan parquet ").strip()
            if node.name().startswith("Scan parquet") and table:
                for metric in _scala_list(node.metrics()):
                    if metric.name() == "number of files read":
                        count = int(values.get(metric.accumulatorId(), "0").replace(",", ""))
                        table = table.rsplit(".", 1)[-1]
                        files[table] = files.get(table, 0) + count
    return {"id": e.executionId(), "root": e.rootExecutionId(), "description": e.description(),
            "start": start, "end": end, "plan": plan[:2000], "files": files}


def _scala_list(seq) -> list:
    items, it = [], seq.iterator()
    while it.hasNext():
        items.append(it.next())
    return items


def _scala_dict(mapping) -> dict:
    pairs, it = {}, mapping.iterator()
    while it.hasNext():
        pair = it.next()
        pairs[pair._1()] = pair._2()
    return pairs


@dataclass(frozen=True)
class Setup:
    """A scenario's source table and its two views: one refreshed incrementally, one in full."""
    source: str
    incremental: str
    full: str

    @property
    def query(self) -> str:
        return VIEW.format(source=self.source)


def prepare(spark, prefix: str, path: str) -> Setup:
    """Clone the cached table at ``path`` as ``bids_<prefix>`` and create its two views (their first
    refresh): the incremental one under AUTO, the full one under REFRESH POLICY FULL."""
    import mv

    setup = Setup(source_table(spark, f"bids_{prefix}", path), f"{prefix}_inc", f"{prefix}_full")
    for view, policy in ((setup.incremental, "AUTO"), (setup.full, "FULL")):
        started = time.perf_counter()
        mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} REFRESH POLICY {policy} AS {setup.query}").collect()
        print(f"  created {view} in {time.perf_counter() - started:.1f} s", flush=True)
    return setup


def timed_refresh(spark, view: str, full: bool) -> dict:
    """Refresh ``view`` and return the wall-clock seconds of the statement, its outcome and where the time went.

    Example:
        >>> timed_refresh(spark, "recent_inc", full=False)["technique"]
        'incremental'
    """
    import mv

    version = _version(spark, view)
    marker = execution_marker(spark)
    started = time.perf_counter()
    row = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()   # the full side: its policy, FULL
    seconds = time.perf_counter() - started
    spent = where_time_went(spark, marker, seconds) or {}   # before any other query of ours
    expected = "full" if full else "incremental"
    if row.technique != expected and row.reason != "FULL_CHEAPER":  # AUTO's own choice is what users get
        raise InvalidRun(f"{view}: expected an {expected} refresh, got {row.technique} ({row.reason})")
    written = row.rows_inserted + row.rows_updated + row.rows_deleted
    return {"seconds": round(seconds, 3), "technique": row.technique, "reason": row.reason, "rows_read": row.rows_read,
            "rows_written": written, "rows_inserted": row.rows_inserted, "rows_updated": row.rows_updated,
            "rows_deleted": row.rows_deleted, "engine_duration_s": row.duration_s,
            "merge": _merge_metrics(spark, view, version), **spent}


def _version(spark, table: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"]


def _merge_metrics(spark, view: str, after_version: int) -> dict | None:
    """What Delta says the refresh's MERGE into ``view`` did: files replaced, unchanged rows copied, times."""
    for row in spark.sql(f"DESCRIBE HISTORY {view} LIMIT 5").collect():
        if row["version"] > after_version and row["operation"] == "MERGE":
            metrics = row["operationMetrics"]
            return {k: int(v) for k, v in sorted(metrics.items())
                    if k.startswith("numTarget") or k.endswith("TimeMs")} | {
                "view_files_after": spark.sql(f"DESCRIBE DETAIL {view}").first()["numFiles"]}
    return None


def measure_round(spark, setup: Setup, batch: Batch, salt: int, full_first: bool) -> dict:
    """Apply ``batch``, refresh both views (the two in alternating order over rounds), check them.

    Example:
        >>> measure_round(spark, setup, Batch.of(100_000, "recent", pace), salt=7, full_first=False)["ratio"]
        0.95...
    """
    applied = apply(spark, setup.source, batch, salt)
    sides = (("full", setup.full), ("incremental", setup.incremental))
    timed = {side: timed_refresh(spark, view, side == "full")
             for side, view in (sides if full_first else sides[::-1])}
    view_rows = check_views(spark, setup.query, (setup.incremental, setup.full))
    return {"applied": applied, "view_rows": view_rows, **{side: timed[side] for side, _ in sides[::-1]},
            "ratio": timed["incremental"]["seconds"] / timed["full"]["seconds"]}


def summary(share: float, batch: Batch, rounds: list[dict]) -> dict:
    """Medians over one change size's rounds, and the phases of its median incremental and full rounds."""
    def median(side: str, key: str):
        return statistics.median(r[side][key] for r in rounds)

    def median_round(side: str) -> dict:
        ordered = sorted(rounds, key=lambda r: r[side]["seconds"])
        return ordered[(len(ordered) - 1) // 2][side]

    medians = {side: median(side, "seconds") for side in ("incremental", "full")}
    batch_fields = {k: v for k, v in asdict(batch).items() if k != "pace"}
    return {
        "share": share, "batch": batch_fields, "rounds": rounds, "median_s": medians,
        "ratio": medians["incremental"] / medians["full"],
        "paired_ratio": statistics.median(r["ratio"] for r in rounds),
        "rows_read": {side: median(side, "rows_read") for side in ("incremental", "full")},
        "rows_written": {side: median(side, "rows_written") for side in ("incremental", "full")},
        "files_read": {side: median_round(side).get("files_read") for side in ("incremental", "full")},
        "phases": {side: median_round(side).get("phases") for side in ("incremental", "full")},
        "merge_steps": {side: median_round(side).get("merge_steps") for side in ("incremental", "full")},
        "merge": {side: median_round(side).get("merge") for side in ("incremental", "full")},
        "view_rows": rounds[-1]["view_rows"],
    }


def _report(label: str, index: int, result: dict) -> None:
    inc, full = result["incremental"], result["full"]
    print(f"  {label} round {index + 1}: incremental {inc['seconds']:.1f} s, full {full['seconds']:.1f} s,"
          f" ratio {result['ratio']:.2f}; {inc['rows_read']:,} change rows read, views checked"
          f" ({result['view_rows']:,} rows)", flush=True)


def run(rows: int, rounds: int, uniform_rounds: int, shares: tuple[float, ...] = SIZES) -> dict:
    """Run the three scenarios on a ``rows``-bid source and return the results/refresh.json document.

    (a) and (b) apply changes of each of `shares` ((b) none with no `uniform_rounds`); (c) applies
    the 1% change of (a) to a source a tenth the size, its rounds interleaved with (a)'s 1% rounds
    so both sides meet the same machine load.

    Example:
        >>> run(rows=100_000, rounds=1, uniform_rounds=1)["scenarios"][0]["sizes"][1]["ratio"]
        0.9...
    """
    began = time.perf_counter()
    # A warehouse and metastore of the benchmark's own, emptied so every run starts from the cached tables.
    shutil.rmtree(MV_HOME, ignore_errors=True)
    os.environ["MV_HOME"] = str(MV_HOME)
    import mv

    measured_engine = engine(mv)                 # the sources imported now are the ones measured
    spark = mv.session(conf={"spark.app.name": "mv-bench-refresh"})
    small_rows, change_rows = rows // 10, round(rows * SCALE_SHARE)
    big, small = bids_table(spark, rows), bids_table(spark, small_rows)
    pace = rows / SPAN_US                        # bids per microsecond of the full-size table
    load_before = os.getloadavg()
    print(f"{rows:,}-row source, {rounds} rounds ((b): {uniform_rounds}); (c) also on {small_rows:,} rows",
          flush=True)
    results, scale_small = [], []
    salt = 100
    for scenario, count in [(RECENT, rounds)] + [(UNIFORM, uniform_rounds)] * bool(uniform_rounds):
        print(f"{scenario.label}", flush=True)
        setup = prepare(spark, scenario.name, big)
        small_setup = prepare(spark, "small", small) if scenario is RECENT else None
        sizes = []
        for share in shares:
            batch = Batch.of(round(rows * share), scenario.spread, pace)
            measured = []
            for index in range(count):
                salt += 2
                measured.append(measure_round(spark, setup, batch, salt, full_first=index % 2 == 1))
                _report(f"{scenario.name} {share:.1%}", index, measured[-1])
                if small_setup and share == SCALE_SHARE:
                    scale_small.append(measure_round(spark, small_setup, batch, salt, index % 2 == 1))
                    _report(f"(c) {small_rows:,} rows, {change_rows:,} changed", index, scale_small[-1])
            sizes.append(summary(share, batch, measured))
        results.append({"name": scenario.name, "label": scenario.label, "rounds": count, "sizes": sizes})
    return {
        "benchmark": "refresh", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "rows": rows, "rounds": rounds, "uniform_rounds": uniform_rounds, "data_version": DATA_VERSION,
        "files": FILES, "view": " ".join(VIEW.split()), "engine": measured_engine, "machine": machine(spark),
        # Other jobs may share the machine: load averages say how busy it was around the run.
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "scenarios": results, "scale": scale(results[0], scale_small, rows, small_rows, change_rows),
        "total_s": round(time.perf_counter() - began, 1),
    }


def scale(recent: dict, small_rounds: list[dict], rows: int, small_rows: int, change_rows: int) -> dict:
    """(c): the incremental refresh of one fixed change on the full-size source against a tenth of it."""
    big = next(s for s in recent["sizes"] if s["share"] == SCALE_SHARE)
    small = summary(change_rows / small_rows, Batch(**big["batch"], pace=0.0), small_rounds)
    inc = {"small": small["median_s"]["incremental"], "big": big["median_s"]["incremental"]}
    paired = statistics.median(b["incremental"]["seconds"] / s["incremental"]["seconds"]
                               for b, s in zip(big["rounds"], small_rounds))
    return {"change_rows": change_rows, "small_rows": small_rows, "big_rows": rows, "small": small,
            "incremental_s": inc, "ratio": inc["big"] / inc["small"], "paired_ratio": paired}


def engine(package) -> dict:
    """Which engine was measured: the mv package's folder, a hash of its sources, the checkout's commit.

    The engine may be edited while a long run goes on; hashed at import, the sources say which
    engine the figures belong to.
    """
    folder = Path(package.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*folder.rglob("*.py"), *folder.rglob("*.scala")]):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None                            # a copy outside any checkout
    return {"package": str(folder), "sources_sha256": digest.hexdigest()[:16], "commit": commit}


def markdown_table(results: dict) -> str:
    """The RESULTS.md section for a results/refresh.json document.

    Example:
        >>> print(markdown_table(json.loads(RESULTS_JSON.read_text())))
        10,000,000-row source ...
    """
    m, load = results["machine"], results["load_average"]
    lines = [
        f"{results['rows']:,}-row source (7 days, {results['files']} files in time order),"
        f" {results['rounds']} rounds per change size ((b): {results['uniform_rounds']}), medians;"
        f" measured {results['measured_at'][:10]} on {m['cores']} cores / {m['memory_gib']} GiB,"
        f" Spark {m['spark']}, Delta {m['delta']}, Python {m['python']}, Java {m['java']};"
        f" load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after;"
        f" whole run {results['total_s'] / 60:.0f} min.",
        "",
        "| Scenario | Change | Appended / updated / deleted | Incremental (s) | Full (s) | Ratio"
        " | Paired ratio | Change rows read | Rows written | Files read: incremental | Files read: full |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario in results["scenarios"]:
        for size in scenario["sizes"]:
            lines.append(_size_row(scenario["label"], f"{size['share']:.1%}", size,
                                   target=0.1 if size["share"] == SCALE_SHARE else None))
    sc = results["scale"]
    verdict = "" if sc["ratio"] <= 1.5 else " (over)"
    lines += [
        "", "Ratio = median(incremental) / median(full); target <= 0.1 at a 1% change. Paired ratio ="
        " median over rounds of incremental / full within the round. Files read: Parquet files of the"
        " source / of the view scanned by the refresh's Spark executions. Change rows read: rows of the"
        " source's change feed (an update counts twice). The incremental side is a plain REFRESH under"
        " REFRESH POLICY AUTO: \"AUTO: full in k of n\" marks rounds its estimate ran in full (FULL_CHEAPER).", "",
        f"(c) The same {sc['change_rows']:,}-row change (1% of the full-size source) on sources of"
        f" {sc['small_rows']:,} and {sc['big_rows']:,} rows:"
        f" incremental time ratio = **{sc['ratio']:.2f}**{verdict} (paired {sc['paired_ratio']:.2f}),"
        " target <= 1.5.", "",
        "| Source rows | Change | Appended / updated / deleted | Incremental (s) | Full (s) | Ratio"
        " | Paired ratio | Change rows read | Rows written | Files read: incremental | Files read: full |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        _size_row(f"{sc['small_rows']:,}", f"{sc['change_rows']:,}", sc["small"]),
        _size_row(f"{sc['big_rows']:,}", f"{sc['change_rows']:,}",
                  next(s for s in results["scenarios"][0]["sizes"] if s["share"] == SCALE_SHARE)),
    ]
    lines += ["", "Where the time of the median round at a 1% recent change went (seconds: the REFRESH statement"
              " split by the refresh's phases, as Spark's UI labels its executions, and the driver work between"
              " them; other top-level executions by kind):", ""]
    one_percent = next(s for s in results["scenarios"][0]["sizes"] if s["share"] == SCALE_SHARE)
    lines += _phase_table(one_percent)
    lines += ["", _merge_sentence(one_percent)]
    return "\n".join(lines)


def _merge_sentence(size: dict) -> str:
    inc, full = size["merge"]["incremental"], size["merge"]["full"]
    if not inc or not full:
        return ""

    def said(m: dict) -> str:  # the refresh's own commit (RefreshCommit.scala) records counts, not times
        times = (f"; {m['executionTimeMs'] / 1000:.1f} s, of which materializing the source"
                 f" {m.get('materializeSourceTimeMs', 0) / 1000:.1f} s, scanning {m.get('scanTimeMs', 0) / 1000:.1f} s,"
                 f" rewriting {m.get('rewriteTimeMs', 0) / 1000:.1f} s") if m.get("executionTimeMs") else ""
        return (f"{m.get('numTargetFilesAdded', 0)} files added, {m.get('numTargetDeletionVectorsAdded', 0)}"
                f" deletion vectors added, {m.get('numTargetRowsCopied', 0):,} unchanged rows copied{times}")

    return (f"The view's commit's MERGE metrics for the same rounds. Incremental: {said(inc)}. Full: {said(full)}."
            f" After the round the view had {size['view_rows']:,} rows; the incremental one"
            f" {inc['view_files_after']} files, the full one {full['view_files_after']}.")


def _size_row(scenario: str, change: str, size: dict, target: float | None = None) -> str:
    applied = size["rounds"][-1]["applied"]
    ratio = f"{size['ratio']:.2f}"
    if target is not None:
        ratio = f"**{ratio}**" + ("" if size["ratio"] <= target else " (over)")
    files = {side: _files(size["files_read"][side]) for side in ("incremental", "full")}
    switched = sum(r["incremental"].get("reason") == "FULL_CHEAPER" for r in size["rounds"])
    if switched:  # REFRESH POLICY AUTO ran these rounds in full: its estimate said that was cheaper
        change += f" (AUTO: full in {switched} of {len(size['rounds'])})"
    return (f"| {scenario} | {change} | {applied['appended']:,} / {applied['updated']:,} / {applied['deleted']:,}"
            f" | {size['median_s']['incremental']:.1f} | {size['median_s']['full']:.1f} | {ratio}"
            f" | {size['paired_ratio']:.2f} | {size['rows_read']['incremental']:,.0f}"
            f" | {size['rows_written']['incremental']:,.0f} | {files['incremental']} | {files['full']} |")


def _files(files: dict | None) -> str:
    if not files:
        return "n/a"
    source = sum(n for table, n in files.items() if table.startswith("bids_"))
    view = sum(n for table, n in files.items() if not table.startswith("bids_"))
    return f"{source} / {view}"


def _phase_table(size: dict) -> list[str]:
    phases, steps = size["phases"], size["merge_steps"]
    if not phases["incremental"] or not phases["full"]:
        return ["(not recorded)"]
    lines = ["| Phase | Incremental (s) | Full (s) |", "|---|---:|---:|"]
    for name in dict.fromkeys([*phases["incremental"], *phases["full"]]):
        lines.append(f"| {name} | {phases['incremental'].get(name, 0):.1f} | {phases['full'].get(name, 0):.1f} |")
        if name == "MERGE into the view":
            for step in dict.fromkeys([*steps["incremental"], *steps["full"]]):
                lines.append(f"| &nbsp;&nbsp;of which {step} | {steps['incremental'].get(step, 0):.1f}"
                             f" | {steps['full'].get(step, 0):.1f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """The command line: run, write results/refresh.json and RESULTS.md, print the tables; 1 if the run is invalid."""
    parser = argparse.ArgumentParser(prog="python -m bench.refresh", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, help="bids in the source (default 10,000,000)")
    parser.add_argument("--rounds", type=int, help="rounds per change size in (a) and (c) (default 3)")
    parser.add_argument("--uniform-rounds", type=int, default=1, help="rounds per change size in (b); 0: no (b)")
    parser.add_argument("--sizes", type=_shares, default=SIZES,
                        help="change sizes, shares of the source's rows, 0.01 among them (default 0.001,0.01,0.1)")
    parser.add_argument("--quick", action="store_true", help="1,000,000 rows and 2 rounds ((b): 1)")
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    if SCALE_SHARE not in args.sizes:
        parser.error(f"--sizes must include {SCALE_SHARE}: (c) and the phase table are of that change")
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    rounds = args.rounds or (2 if args.quick else 3)
    return reported(args, RESULTS_JSON, RESULTS_MD, "refresh", "Incremental refresh vs full refresh",
                    lambda: results(args, RESULTS_JSON, lambda: run(rows, rounds, args.uniform_rounds, args.sizes)),
                    markdown_table)


def _shares(text: str) -> tuple[float, ...]:
    """`--sizes`: "0.01,0.1" -> (0.01, 0.1)."""
    return tuple(float(part) for part in text.split(","))

if __name__ == "__main__":
    sys.exit(main())
