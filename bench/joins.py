"""Fact-dimension join views kept by their changes (mv/row_refresh.py), against a full refresh, a
plain Delta append of the same rows and Structured Streaming's stream-static join.

Bids (the fact, `rows` of them: auction, bidder, price, time) joined to 1,000 auctions (the
dimension: category, seller). `--view` picks the view (VIEWS): `rows`, the bids of auctions
outside category 7,
    SELECT b.auction, b.bidder, b.price, b.ts, a.category, a.seller
    FROM jb_bids b JOIN jb_auctions a ON b.auction = a.id WHERE a.category <> 7
or `outer_rows`, every bid, its auction's category where that is not 7 (a LEFT JOIN: a
recategorized auction's bids are padded with NULLs or matched again, DeltaRules.flips),
or `per_category`, the bids joined to their auctions counted, summed and topped per category (no
window: the change's own aggregates combined with the view's rows, mv/combine.py's terms),
or `per_minute`, a TUMBLE over the bids joined to their auctions, per minute and category (its
groups combined the same way; no Structured Streaming contender: the stream would need a watermark),
or `closed_per_minute`, the same under `WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON
WINDOW CLOSE` (each minute written once the watermark passes it, late changes kept out of final
minutes; checked against its twin under REFRESH POLICY FULL, not against its query),
or `top_per_minute`, Nexmark q7's shape: each bid that is its minute's highest, the bids joined to
their own TUMBLE's maximum (a self-join of rows and an aggregate whose bounds the output leaves
out: DeltaRules.regroups, its terms kept to the change's time range), or `shards_per_minute`, the
bids counted per minute and auction shard with the minute left out of the output (one read of an
aggregate whose window bounds the output leaves out: its two regroup runs read only the change's
minutes).
Cases, each a few rounds, medians; every round checks the view against its query:
    small append    1,000 new bids: REFRESH / a plain Delta append of them      target <= 5
    batch append    1% new bids: REFRESH / a full refresh (a twin view under REFRESH POLICY FULL)  <= 0.1
                    and / Structured Streaming (availableNow, the same join into a Delta table)  <= 1.0
    changes         0.5% of bids repriced, 0.5% deleted, 1% of auctions recategorized (both
                    sides): REFRESH / the full refresh                          target <= 0.5
                    (AUTO may choose full: FULL_CHEAPER)

Example:
    $ python -m bench.joins --rows 1000000 --rounds 3
    $ python -m bench.joins --rows 10000000 --view per_minute
    $ python -m bench.joins --view top_per_minute --policy INCREMENTAL --label forced   # the change's path
    $ python -m bench.joins --render          # rewrite RESULTS.md from results/joins.json
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

from bench.refresh import BENCH_DIR, DATA_DIR
from bench.report import InvalidRun
from bench.report import rewrite_section
from bench.windows import RESULTS_MD, machine

MV_HOME = DATA_DIR / "mv_home_joins"
RESULTS_JSON = BENCH_DIR / "results" / "joins.json"
AUCTIONS, SMALL = 1_000, 1_000
VIEWS = {
    "rows": """SELECT b.auction, b.bidder, b.price, b.ts, a.category, a.seller
FROM jb_bids b JOIN jb_auctions a ON b.auction = a.id WHERE a.category <> 7""",
    "outer_rows": """SELECT b.auction, b.bidder, b.price, b.ts, a.category
FROM jb_bids b LEFT JOIN jb_auctions a ON b.auction = a.id AND a.category <> 7""",
    "per_category": """SELECT a.category, count(*) AS bids, sum(b.price) AS total, max(b.price) AS top
FROM jb_bids b JOIN jb_auctions a ON b.auction = a.id GROUP BY a.category""",
    "per_minute": """SELECT window_start, window_end, a.category, count(*) AS bids, sum(b.price) AS total
FROM TUMBLE(TABLE(jb_bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE) b JOIN jb_auctions a ON b.auction = a.id
GROUP BY window_start, window_end, a.category""",
    "closed_per_minute": """SELECT window_start, window_end, a.category, count(*) AS bids, sum(b.price) AS total
FROM TUMBLE(TABLE(jb_bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE) b JOIN jb_auctions a ON b.auction = a.id
GROUP BY window_start, window_end, a.category""",
    "top_per_minute": """SELECT b.auction, b.bidder, b.price, b.ts FROM jb_bids b
JOIN (SELECT window_start, window_end, max(price) AS top FROM TUMBLE(TABLE(jb_bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE)
      GROUP BY window_start, window_end) m ON b.price = m.top AND b.ts >= m.window_start AND b.ts < m.window_end""",
    "shards_per_minute": """SELECT auction % 10 AS shard, count(*) AS bids, max(price) AS top
FROM TUMBLE(TABLE(jb_bids), DESCRIPTOR(ts), INTERVAL '1' MINUTE) GROUP BY auction % 10, window_start, window_end""",
}
QUERY = VIEWS["rows"]
# The views' clauses beside REFRESH POLICY; a view with a WATERMARK is checked against its full twin.
CLAUSES = {"closed_per_minute": "WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE EMIT ON WINDOW CLOSE"}


def bids(spark, count: int, first: int):
    """`count` bids numbered from `first`: auctions cycle, one bid a second."""
    return spark.range(first, first + count).selectExpr(
        f"CAST(id * 7919 % {AUCTIONS} AS BIGINT) AS auction", "id % 5000 AS bidder", "id % 997 AS price",
        "timestamp_seconds(1767225600 + id) AS ts")


def prepare(spark, rows: int, query: str, policy: str = "AUTO", clauses: str = "") -> None:
    """The tables, `rows` bids, the view under `policy` (INCREMENTAL: every refresh by the change,
    to measure that path where AUTO would go full) and its twin under REFRESH POLICY FULL."""
    import mv

    for view in ("jb_view", "jb_full"):
        mv.sql(spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
    for table in ("jb_bids", "jb_auctions", "jb_plain", "jb_stream"):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    shutil.rmtree(MV_HOME / "jb_checkpoint", ignore_errors=True)
    spark.sql("CREATE TABLE jb_bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("CREATE TABLE jb_plain (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP) USING delta")
    spark.sql("CREATE TABLE jb_auctions (id BIGINT, category INT, seller BIGINT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.range(AUCTIONS).selectExpr("id", "CAST(id % 10 AS INT) AS category", "id % 100 AS seller") \
        .write.insertInto("jb_auctions")
    bids(spark, rows, 0).write.insertInto("jb_bids")
    mv.sql(spark, f"CREATE MATERIALIZED VIEW jb_view {clauses} REFRESH POLICY {policy} AS {query}").collect()
    mv.sql(spark, f"CREATE MATERIALIZED VIEW jb_full {clauses} REFRESH POLICY FULL AS {query}").collect()
    if query == QUERY:
        stream(spark)  # its first batch: everything so far, untimed


def stream(spark) -> float:
    """Structured Streaming's run over the bids it has not seen, joined to the static auctions."""
    started = time.perf_counter()
    static = spark.table("jb_auctions").withColumnRenamed("id", "a_id")
    b = spark.readStream.option("skipChangeCommits", "true").table("jb_bids")  # appends only, as compared
    query = (b.join(static, b.auction == static.a_id).where("category <> 7")
             .select("auction", "bidder", "price", "ts", "category", "seller")
             .writeStream.format("delta").option("checkpointLocation", str(MV_HOME / "jb_checkpoint"))
             .trigger(availableNow=True).toTable("jb_stream"))
    query.awaitTermination()
    return time.perf_counter() - started


def refresh(spark, full: bool = False) -> tuple[float, str]:
    """REFRESH of the view (AUTO), or with `full` of its twin under REFRESH POLICY FULL: a full
    refresh as AUTO runs one (its rows overwritten), not REFRESH ... FULL, which repairs (it
    compares every row with the view's, to keep the change feed exact) and costs more."""
    import mv

    started = time.perf_counter()
    row = mv.sql(spark, "REFRESH MATERIALIZED VIEW " + ("jb_full" if full else "jb_view")).first()
    return time.perf_counter() - started, f"{row.technique} {row.reason}"


def check(spark, query: str, *views: str) -> None:
    for view in views:
        missing = spark.sql(query).exceptAll(spark.table(view)).count()
        extra = spark.table(view).exceptAll(spark.sql(query)).count()
        if missing or extra:
            raise InvalidRun(f"{view} differs from {query}: {missing} rows missing, {extra} extra")


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run(rows: int, rounds: int, view: str, policy: str = "AUTO") -> dict:
    import mv

    os.environ.setdefault("MV_HOME", str(MV_HOME))
    spark = mv.session()
    query, clauses = VIEWS[view], CLAUSES.get(view, "")
    prepare(spark, rows, query, policy, clauses)
    def checked(view: str, other: str | None = None) -> None:
        """`view`, just refreshed, against the query; with a watermark (final windows kept, open ones
        held back: not the query), against its twin `other` once both are refreshed."""
        if not clauses:
            check(spark, query, view)
        elif other:
            check(spark, f"SELECT * FROM {other}", view)
    cases: dict[str, list[dict]] = {"small append": [], "batch append": [], "changes": []}
    first = rows
    for i in range(rounds):
        append = timed(lambda: bids(spark, SMALL, first).write.insertInto("jb_plain"))
        bids(spark, SMALL, first).write.insertInto("jb_bids")
        first += SMALL
        seconds, how = refresh(spark)
        checked("jb_view")
        if query == QUERY:
            stream(spark)
        cases["small append"].append({"refresh_s": seconds, "append_s": append, "technique": how})

        batch = rows // 100
        bids(spark, batch, first).write.insertInto("jb_bids")
        first += batch
        seconds, how = refresh(spark)
        checked("jb_view")
        streaming = stream(spark) if query == QUERY else None
        full, _ = refresh(spark, full=True)
        checked("jb_full", "jb_view")
        cases["batch append"].append({"refresh_s": seconds, "full_s": full, "streaming_s": streaming,
                                      "technique": how})

        spark.sql(f"UPDATE jb_bids SET price = price + 1 WHERE bidder % 200 = {i}")
        spark.sql(f"DELETE FROM jb_bids WHERE bidder % 200 = {100 + i}")
        spark.sql(f"UPDATE jb_auctions SET category = (category + 1) % 10 WHERE id % 100 = {i}")
        seconds, how = refresh(spark)
        checked("jb_view")
        full, _ = refresh(spark, full=True)
        checked("jb_full", "jb_view")
        cases["changes"].append({"refresh_s": seconds, "full_s": full, "technique": how})
        print(f"round {i + 1}: " + "; ".join(f"{k}: {v[-1]}" for k, v in cases.items()), flush=True)
    return {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(spark),
            "rows": rows, "view": view, "policy": policy, "cases": cases, "summary": summary(cases)}


def summary(cases: dict[str, list[dict]]) -> dict:
    def median(case: str, pick) -> float | None:
        try:
            return round(statistics.median(pick(r) for r in cases[case]), 3)
        except TypeError:  # None: the view has no streaming contender
            return None

    return {
        "small_refresh_s": median("small append", lambda r: r["refresh_s"]),
        "small_append_s": median("small append", lambda r: r["append_s"]),
        "small_ratio": median("small append", lambda r: r["refresh_s"] / r["append_s"]),
        "batch_refresh_s": median("batch append", lambda r: r["refresh_s"]),
        "batch_full_s": median("batch append", lambda r: r["full_s"]),
        "batch_ratio": median("batch append", lambda r: r["refresh_s"] / r["full_s"]),
        "batch_streaming_s": median("batch append", lambda r: r["streaming_s"]),
        "batch_streaming_ratio": median("batch append", lambda r: r["refresh_s"] / r["streaming_s"]),
        "changes_refresh_s": median("changes", lambda r: r["refresh_s"]),
        "changes_full_s": median("changes", lambda r: r["full_s"]),
        "changes_ratio": median("changes", lambda r: r["refresh_s"] / r["full_s"]),
        "techniques": sorted({r["technique"] for case in cases.values() for r in case}),
    }


def markdown_table(runs: list[dict]) -> str:
    """One table per view (VIEWS), a column per run."""
    return "\n\n".join(_view_table(view, [r for r in runs if r.get("view", "rows") == view])
                       for view in VIEWS if any(r.get("view", "rows") == view for r in runs))


def _view_table(view: str, runs: list[dict]) -> str:
    rows = [("1,000 new bids: REFRESH (s)", "small_refresh_s", "{:.2f}", ""),
            ("the same rows appended to a plain Delta table (s)", "small_append_s", "{:.2f}", ""),
            ("REFRESH / plain append", "small_ratio", "{:.1f}", "<= 5"),
            ("1% new bids: REFRESH (s)", "batch_refresh_s", "{:.2f}", ""),
            ("full refresh, REFRESH POLICY FULL twin (s)", "batch_full_s", "{:.2f}", ""),
            ("REFRESH / full refresh", "batch_ratio", "{:.2f}", "<= 0.1"),
            ("Structured Streaming, stream-static join, availableNow (s)", "batch_streaming_s", "{:.2f}", ""),
            ("REFRESH / Structured Streaming", "batch_streaming_ratio", "{:.2f}", "<= 1.0"),
            ("0.5% bids repriced, 0.5% deleted, 1% auctions recategorized: REFRESH (s)", "changes_refresh_s",
             "{:.2f}", ""),
            ("full refresh, REFRESH POLICY FULL twin (s)", "changes_full_s", "{:.2f}", ""),
            ("REFRESH / full refresh", "changes_ratio", "{:.2f}", "<= 0.5 or AUTO full")]
    head = "| measure | " + " | ".join(f"{r['label']} ({r['rows']:,} bids)" for r in runs) + " | target |"
    lines = [head, "| --- |" + " ---: |" * (len(runs) + 1)]
    for title, key, form, target in rows:
        values = [r["summary"][key] for r in runs]
        lines.append(f"| {title} | " + " | ".join("-" if v is None else form.format(v) for v in values) +
                     f" | {target} |")
    def policy(r: dict) -> str:
        return f"REFRESH POLICY {r['policy']}, " if r.get("policy", "AUTO") != "AUTO" else ""
    when = "; ".join(f"{r['label']}: {r['when']}, {len(r['cases']['changes'])} rounds, {policy(r)}"
                     f"{', '.join(r['summary']['techniques'])}" for r in runs)
    clauses = f" under `{CLAUSES[view]}`" if view in CLAUSES else ""
    checked = "against its twin, both refreshed" if view in CLAUSES else "against its query"
    return f"""`--view {view}`: `{VIEWS[view].replace(chr(10), ' ')}` over 1,000 auctions{clauses}
(`python -m bench.joins --view {view} --rows N`). The full refresh is a twin view's under REFRESH
POLICY FULL (rows overwritten, as AUTO's FULL_CHEAPER does). Medians over the rounds of each run
({when}; {runs[-1]['machine']['cores']} cores). Every round checks the view {checked}.

{chr(10).join(lines)}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.joins", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--view", choices=list(VIEWS), default="rows")
    parser.add_argument("--policy", choices=["AUTO", "INCREMENTAL"], default="AUTO",
                        help="the view's REFRESH POLICY (INCREMENTAL: the change's path even where AUTO goes full)")
    parser.add_argument("--label", default="current", help="the run's name; a run of the same name is replaced")
    parser.add_argument("--render", action="store_true", help="only rewrite RESULTS.md from the JSON")
    args = parser.parse_args(argv)
    runs = json.loads(RESULTS_JSON.read_text())["runs"] if RESULTS_JSON.exists() else []
    if not args.render:
        try:
            result = run(args.rows, args.rounds, args.view, args.policy) | {"label": args.label}
        except InvalidRun as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        same = (args.label, args.rows, args.view)
        runs = [r for r in runs if (r["label"], r["rows"], r.get("view", "rows")) != same] + [result]
        RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_JSON.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    rewrite_section(RESULTS_MD, "joins", "Fact-dimension join views: incremental vs full vs Structured Streaming",
                    markdown_table(runs))
    print(markdown_table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
