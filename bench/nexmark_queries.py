"""Every Nexmark query (q0-q22 but q10, which writes files) as a materialized view over Nexmark's
tables at 1M bids: refreshed by its change and in full after rounds of appends and of changes,
timed, and checked against its query recomputed from scratch.

The queries (QUERIES) are the Flink SQL of the nexmark/nexmark repository, adapted only in syntax:
q13's side input is a Delta table joined without FOR SYSTEM_TIME, q14's count_char UDF and q22's
SPLIT_INDEX are their Spark equivalents, q16 keeps 8 of its 19 aggregates (the others are the same
functions under other FILTERs); q9, q18 and q19 break ties in their ROW_NUMBER's order by further
columns, so that the answer is one; q5, q7 and q8 call the window functions as this engine spells
them, HOP(TABLE(bid), ...); q6 selects B.dateTime without grouping it, which Spark refuses: it takes
the auction's latest bid time, max(B.dateTime), its OVER ordered by that and the auction's id; q11
and q12 use this engine's window functions, q12 over event time for processing time.
tests/test_nexmark_rows.py keeps every one of them incremental and equal on small tables.

The tables (`tables`) are bench/nexmark_data.py's cached history under Nexmark's column names (a
bid's url made from its channel and auction; descriptions and extras constant). Each round
(`play`) appends the next batch of bids of the third day with the people and auctions of its two
hours; a change round also reprices 0.5% of the bids, deletes 0.5%, moves 1% of the auctions to
another category, deletes 0.1% of them, moves 1% of the people to another state and changes one
side-input value, each in its own commit.

Contenders, per query: its view under REFRESH POLICY INCREMENTAL (what keeps it: EXPLAIN's shape;
a view no rule keeps refreshes in full and says why), a twin under REFRESH POLICY FULL (a full
refresh as the policy and AUTO's FULL_CHEAPER run one, not REFRESH ... FULL, which repairs: it
compares every row with the view's, and cost Nexmark's q0 8.4 s against 2.7 s), and a third under
REFRESH POLICY AUTO (the default: what users get, which must cost at most 1.2 times the cheaper
of the other two), one after the other, in an order that rotates over the rounds. Ratios are of
medians in one run.

Example:
    $ python -m bench.nexmark_queries --quick                # 1M bids: 1 append round, 1 change round
    $ python -m bench.nexmark_queries --queries q3,q20 --rounds 2 2
    $ python -m bench.nexmark_queries --render               # RESULTS.md's section from results/queries.json
    $ python -m bench.nexmark_queries --queries q0,q13 --rounds 1 1 --json bench/results/queries-rows.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone

from bench.nexmark_data import Plan, _bids, history_tables, site, start_us
from bench.refresh import engine
from bench.report import add_output_arguments, publish, results
from bench.windows import BENCH_DIR, DATA_DIR, RESULTS_MD, machine
from mv.auction_site import MINUTE_US

MV_HOME = DATA_DIR / "mv_home_nexmark_queries"
RESULTS_JSON = BENCH_DIR / "results" / "queries.json"
ROUNDS, QUICK_ROUNDS = {"append": 2, "changes": 2}, {"append": 1, "changes": 1}
# Each query's views: the side's name and its REFRESH POLICY, each refreshed by a plain REFRESH.
SIDES = {"incremental": "INCREMENTAL", "full": "FULL", "auto": "AUTO"}

QUERIES = {
    "q0": "SELECT auction, bidder, price, dateTime, extra FROM {bid}",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM {bid}",
    "q2": "SELECT auction, price FROM {bid} WHERE MOD(auction, 3) = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id FROM {auction} AS A INNER JOIN {person} AS P ON A.seller = P.id
             WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    "q4": """SELECT Q.category, AVG(Q.final) AS avg_final
             FROM (SELECT MAX(B.price) AS final, A.category FROM {auction} A, {bid} B
                   WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
                   GROUP BY A.id, A.category) Q
             GROUP BY Q.category""",
    # q5, q7, q8: windows whose bounds the output leaves out, joined (q5 and q7 to their own source)
    "q5": """SELECT AuctionBids.auction, AuctionBids.num
             FROM (SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
                   FROM HOP(TABLE({bid}), DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND)
                   GROUP BY auction, window_start, window_end) AS AuctionBids
             JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
                   FROM (SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
                         FROM HOP(TABLE({bid}), DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND)
                         GROUP BY auction, window_start, window_end) AS CountBids
                   GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
             ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
                AND AuctionBids.num >= MaxBids.maxn""",
    "q7": """SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra FROM {bid} B
             JOIN (SELECT MAX(price) AS maxprice, window_end AS dateTime
                   FROM TUMBLE(TABLE({bid}), DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
                   GROUP BY window_start, window_end) B1
             ON B.price = B1.maxprice
             WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime""",
    "q8": """SELECT P.id, P.name, P.starttime
             FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
                   FROM TUMBLE(TABLE({person}), DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
                   GROUP BY id, name, window_start, window_end) P
             JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
                   FROM TUMBLE(TABLE({auction}), DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
                   GROUP BY seller, window_start, window_end) A
             ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
    "q6": """SELECT Q.seller, AVG(Q.final) OVER (PARTITION BY Q.seller ORDER BY Q.dateTime, Q.id
                                         ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS avg_final
             FROM (SELECT MAX(B.price) AS final, A.id, A.seller, max(B.dateTime) AS dateTime
                   FROM {auction} AS A, {bid} AS B
                   WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
                   GROUP BY A.id, A.seller) AS Q""",
    "q11": """SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
              FROM SESSION(TABLE({bid}) PARTITION BY bidder, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
              GROUP BY bidder, window_start, window_end""",
    "q12": """SELECT bidder, count(*) AS bid_count, window_start, window_end
              FROM TUMBLE(TABLE({bid}), DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
              GROUP BY bidder, window_start, window_end""",
    "q13": """SELECT B.auction, B.bidder, B.price, B.dateTime, S.value FROM {bid} B
              JOIN {side_input} S ON mod(B.auction, 5) = S.key""",
    "q14": """SELECT auction, bidder, 0.908 * price AS price,
                     CASE WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime'
                          WHEN HOUR(dateTime) <= 6 OR HOUR(dateTime) >= 20 THEN 'nightTime'
                          ELSE 'otherTime' END AS bidTimeType,
                     dateTime, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
              FROM {bid} WHERE 0.908 * price > 10 AND 0.908 * price < 500""",
    "q15": """SELECT DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day, count(*) AS total_bids,
                     count(*) FILTER (WHERE price < 10000) AS rank1_bids,
                     count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
                     count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
                     count(DISTINCT bidder) AS total_bidders,
                     count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
                     count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
                     count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
                     count(DISTINCT auction) AS total_auctions,
                     count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
                     count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
                     count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
              FROM {bid} GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd')""",
    "q16": """SELECT channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day, max(DATE_FORMAT(dateTime, 'HH:mm')) AS minute,
                     count(*) AS total_bids, count(*) FILTER (WHERE price < 10000) AS rank1_bids,
                     count(DISTINCT bidder) AS total_bidders, count(DISTINCT auction) AS total_auctions,
                     count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
              FROM {bid} GROUP BY channel, DATE_FORMAT(dateTime, 'yyyy-MM-dd')""",
    "q17": """SELECT auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day, count(*) AS total_bids,
                     count(*) FILTER (WHERE price < 10000) AS rank1_bids,
                     count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
                     count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
                     min(price) AS min_price, max(price) AS max_price, avg(price) AS avg_price, sum(price) AS sum_price
              FROM {bid} GROUP BY auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd')""",
    # q9, q18, q19: ties broken by further columns, so that the answer is one (Nexmark's is any)
    "q9": """SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra,
               auction, bidder, price, bid_dateTime, bid_extra
             FROM (SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
                     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC, B.bidder, B.url,
                                        B.channel, B.extra) AS rownum
                   FROM {auction} A, {bid} B
                   WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
             WHERE rownum <= 1""",
    "q18": """SELECT auction, bidder, price, channel, url, dateTime, extra
              FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC, price, url,
                                                 channel, extra) AS rank_number FROM {bid})
              WHERE rank_number <= 1""",
    "q19": """SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, dateTime, bidder,
                                                       url, channel, extra) AS rank_number FROM {bid})
              WHERE rank_number <= 10""",
    "q20": """SELECT auction, bidder, price, channel, url, B.dateTime AS bid_time, B.extra AS bid_extra,
                     itemName, description, initialBid, reserve, A.dateTime AS auction_time, expires, seller,
                     category, A.extra AS auction_extra
              FROM {bid} AS B INNER JOIN {auction} AS A ON B.auction = A.id WHERE A.category = 10""",
    "q21": """SELECT auction, bidder, price, channel,
                     CASE WHEN lower(channel) = 'apple' THEN '0' WHEN lower(channel) = 'google' THEN '1'
                          WHEN lower(channel) = 'facebook' THEN '2' WHEN lower(channel) = 'baidu' THEN '3'
                          ELSE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) END AS channel_id
              FROM {bid} WHERE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) <> ''
                 OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q22": """SELECT auction, bidder, price, channel, get(split(url, '/'), 3) AS dir1,
                     get(split(url, '/'), 4) AS dir2, get(split(url, '/'), 5) AS dir3 FROM {bid}""",
}

NAMES = {"bid": "nq_bid", "auction": "nq_auction", "person": "nq_person", "side_input": "nq_side_input"}
# Nexmark's columns over bench/nexmark_data.py's (a relation in SQL's FROM named {t}).
COLUMNS = {
    "bid": "auction, bidder, price, channel, concat('https://www.nexmark.com/', lower(channel), '/', auction % 13, "
           "'/item.htm?query=1', IF(auction % 3 = 0, concat('&channel_id=', auction % 97), '')) AS url, "
           "date_time AS dateTime, extra",
    "auction": "id, item_name AS itemName, concat('item ', id) AS description, initial_bid AS initialBid, reserve, "
               "date_time AS dateTime, expires, seller, category, '' AS extra",
    "person": "id, name, email AS emailAddress, concat('cc', id % 10) AS creditCard, city, state, "
              "date_time AS dateTime, '' AS extra",
}


HISTORY_FILES = 48  # the history's files per table: an hour of the two days each


def tables(spark, plan: Plan) -> None:
    """Nexmark's four tables, with a change feed, from the cached history (generated on first use).
    Each is written in time order in HISTORY_FILES files, as a table grown by appends is (a plain
    CTAS packs the history into a file per core, each spanning both days: no time range skips one)."""
    history = history_tables(spark, plan)
    for table, path in (("bid", history["bids"]), ("auction", history["auctions"]), ("person", history["persons"])):
        rows = spark.sql(f"SELECT {COLUMNS[table]} FROM delta.`{path}`").orderBy("dateTime")
        per_file = -(-rows.count() // HISTORY_FILES)
        (rows.writeTo(NAMES[table]).using("delta").tableProperty("delta.enableChangeDataFeed", "true")
         .option("maxRecordsPerFile", str(per_file)).createOrReplace())
    spark.sql(f"CREATE OR REPLACE TABLE {NAMES['side_input']} USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true) AS SELECT id AS key, concat('v', id) AS value "
              "FROM range(5)")


def append(spark, plan: Plan, index: int) -> int:
    """Batch `index` of the third day: its bids, and the people and auctions of its hours; rows added."""
    first = start_us(spark)
    generator = site(spark, first)
    begin, end = plan.batch_span(index, first)
    count = plan.batch_sizes()[index]
    minute, minutes = (begin - first) // MINUTE_US, (end - begin) // MINUTE_US
    new = {"person": generator.persons(minute, minutes), "auction": generator.auctions(minute, minutes),
           "bid": _bids(generator, count, begin, end - begin, salt=1000 + index, extra="")}
    for table, rows in new.items():
        rows.createOrReplaceTempView("nq_new")
        spark.sql(f"INSERT INTO {NAMES[table]} SELECT {COLUMNS[table]} FROM nq_new")
    return count


def change(spark, index: int) -> None:
    """The change round's corrections, each its own commit (shares drawn by hashing the rows)."""
    def pick(columns: str, salt: int, per_mille: int) -> str:
        return f"pmod(xxhash64({columns}, {salt}), 1000) < {per_mille}"

    bid = "auction, bidder, dateTime"
    statements = [
        f"UPDATE {{bid}} SET price = price + 1 WHERE {pick(bid, index, 5)}",
        f"DELETE FROM {{bid}} WHERE {pick(bid, 100 + index, 5)}",
        f"UPDATE {{auction}} SET category = 10 + pmod(category + 1, 5) WHERE {pick('id', index, 10)}",
        f"DELETE FROM {{auction}} WHERE {pick('id', 100 + index, 1)}",
        f"UPDATE {{person}} SET state = 'OR' WHERE {pick('id', index, 10)}",
        f"UPDATE {{side_input}} SET value = 'v{index}' WHERE key = {index % 5}",
    ]
    for statement in statements:
        spark.sql(statement.format(**NAMES))


class Mismatch(Exception):
    """A view that is not its query: the run stops before any figure is written."""


def create(spark, queries: list[str]) -> dict:
    """Each query's two views, created and timed, and what keeps the incremental one (EXPLAIN's shape)."""
    import mv

    made = {}
    for q in queries:
        entry = {}
        for side, policy in SIDES.items():
            view = _view(q, side)
            mv.sql(spark, f"DROP MATERIALIZED VIEW IF EXISTS {view}")
            started = time.perf_counter()
            mv.sql(spark, f"CREATE MATERIALIZED VIEW {view} REFRESH POLICY {policy} AS "
                          f"{QUERIES[q].format(**NAMES)}").collect()
            entry[f"{side}_create_s"] = round(time.perf_counter() - started, 2)
        explained = dict(map(tuple, mv.sql(spark, f"EXPLAIN MATERIALIZED VIEW {_view(q, 'incremental')}").collect()))
        made[q] = {**entry, "shape": explained.get("shape")}
        print(f"  {q}: created in {entry['incremental_create_s']} s ({made[q]['shape']})", flush=True)
    return made


def _view(query: str, side: str) -> str:
    return f"nq_{query}_{side[:4]}"


def refresh(spark, view: str) -> dict:
    """One REFRESH of `view`, as its policy has it: its seconds, technique and reason, and from its
    history row its duration up to its commit and AUTO's estimate of it (seconds incrementally and
    in full; None where it was not estimated in seconds)."""
    import mv

    started = time.perf_counter()
    row = mv.sql(spark, f"REFRESH MATERIALIZED VIEW {view}").first()
    seconds = round(time.perf_counter() - started, 3)
    last = spark.sql(f"SELECT duration_s, estimated_incremental_s, estimated_full_s "
                     f"FROM mv_refresh_history('default', '{view}', '1')").first()  # after the timing
    estimated = [last.estimated_incremental_s, last.estimated_full_s] if last else [None, None]
    return {"seconds": seconds, "technique": row.technique, "reason": row.reason,
            "history_s": last.duration_s if last else None, "estimated": estimated}


def play(spark, queries: list[str], plan: Plan, variant: str, index: int) -> dict:
    """Round `index`: the batch appended (and the changes made), then every query's views refreshed."""
    appended = append(spark, plan, index)
    if variant == "changes":
        change(spark, index)
    measured = {}
    for i, q in enumerate(queries):
        sides = list(SIDES)
        order = sides[(index + i) % len(sides):] + sides[:(index + i) % len(sides)]
        measured[q] = {side: refresh(spark, _view(q, side)) for side in order}
    print(f"  {variant} round {index + 1}: " + "; ".join(
        f"{q} " + "/".join(f"{m[side]['seconds']:.1f}" for side in SIDES) for q, m in measured.items()), flush=True)
    return {"variant": variant, "batch": index, "appended": appended, "queries": measured}


def check(spark, query: str) -> int:
    """The incremental view's rows, which must be its query's (as a bag), as must the AUTO view's;
    raises Mismatch if not."""
    expected = spark.sql(QUERIES[query].format(**NAMES))
    for side in ("incremental", "auto"):
        view = spark.table(_view(query, side))
        missing, extra = expected.exceptAll(view).count(), view.exceptAll(expected).count()
        if missing or extra:
            raise Mismatch(f"{query} ({side}): {missing} rows of the query missing from its view, {extra} extra")
    return spark.table(_view(query, "incremental")).count()


def summarize(rounds: list[dict], made: dict, rows: dict) -> dict:
    """Per query and variant: median seconds of each side, their ratio, and how the incremental side refreshed."""
    summary = {}
    for q, entry in made.items():
        summary[q] = {"shape": entry["shape"], "rows": rows[q], "create_s": entry["incremental_create_s"]}
        for variant in ("append", "changes"):
            played = [r["queries"][q] for r in rounds if r["variant"] == variant]
            if not played:
                continue
            inc, full = (statistics.median(p[side]["seconds"] for p in played) for side in ("incremental", "full"))
            ways = sorted({f"{p['incremental']['technique']} {p['incremental']['reason']}" for p in played})
            summary[q][variant] = {"incremental_s": inc, "full_s": full, "ratio": round(inc / full, 2), "how": ways}
            if all("auto" in p for p in played):
                auto = statistics.median(p["auto"]["seconds"] for p in played)
                summary[q][variant].update(auto_s=auto, auto_ratio=round(auto / min(inc, full), 2), auto_how=sorted(
                    {f"{p['auto']['technique']} {p['auto']['reason']}" for p in played}))
    return summary


def run(bids: int, rounds: dict[str, int], queries: list[str]) -> dict:
    """Create the views, play the rounds, check every view; the results/queries.json document."""
    began = time.perf_counter()
    shutil.rmtree(MV_HOME, ignore_errors=True)   # a warehouse of its own, fresh each run
    os.environ["MV_HOME"] = str(MV_HOME)
    import mv

    measured_engine = engine(mv)
    spark = mv.session(conf={"spark.app.name": "mv-bench-nexmark-queries"})
    plan, load_before = Plan(bids=bids), os.getloadavg()
    tables(spark, plan)
    made = create(spark, queries)
    variants = [v for v, n in rounds.items() for _ in range(n)]
    played = [play(spark, queries, plan, variant, i) for i, variant in enumerate(variants)]
    rows = {q: check(spark, q) for q in queries}
    print("  checked: every view equals its query", flush=True)
    return {"benchmark": "nexmark_queries", "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "engine": measured_engine, "machine": machine(spark), "bids": bids, "rounds": rounds,
            "load_average": {"before": load_before, "after": os.getloadavg()}, "played": played,
            "summary": summarize(played, made, rows), "total_s": round(time.perf_counter() - began, 1)}


TARGETS = {"append": 0.1, "changes": 0.5}
AUTO_TARGET = 1.2   # AUTO's refresh against the cheaper of incremental and full (issue 38)


def markdown(results: dict) -> str:
    """RESULTS.md's section: one line per query."""
    m, load = results["machine"], results["load_average"]
    lines = [f"Measured {results['measured_at'][:10]} on {m.get('cores')} cores, {results['bids']:,} bids, "
             f"rounds: {results['rounds']['append']} append, {results['rounds']['changes']} with changes; "
             f"load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after; whole run "
             f"{results['total_s'] / 60:.0f} min. Every view equals its query after the last round.", "",
             "| Query | Kept by (shape) | View rows | Append: incremental / full / AUTO s | Ratio | AUTO / cheaper | "
             "Changes: incremental / full / AUTO s | Ratio | AUTO / cheaper | Incremental side refreshed as | "
             "AUTO refreshed as |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for q, s in results["summary"].items():
        cells = []
        for variant in ("append", "changes"):
            v = s.get(variant)
            if v is None:
                cells += ["n/a", "n/a", "n/a"]
                continue
            over = "" if v["ratio"] <= TARGETS[variant] else " (over)"
            auto = f" / {v['auto_s']:.1f}" if "auto_s" in v else ""
            cells += [f"{v['incremental_s']:.1f} / {v['full_s']:.1f}{auto}", f"**{v['ratio']:.2f}**{over}",
                      (f"**{v['auto_ratio']:.2f}**" + ("" if v["auto_ratio"] <= AUTO_TARGET else " (over)"))
                      if "auto_ratio" in v else "n/a"]
        how = ["; ".join(sorted({w for variant in ("append", "changes") for w in s.get(variant, {}).get(key, [])}))
               or "n/a" for key in ("how", "auto_how")]
        lines.append(f"| {q} | {s['shape']} | {s['rows']:,} | {' | '.join(cells)} | {' | '.join(how)} |")
    lines += ["", f"Targets (issues 37, 38): append-only <= {TARGETS['append']} of full, with updates and deletes "
              f"<= {TARGETS['changes']}; AUTO <= {AUTO_TARGET} times the cheaper of the other two. The incremental "
              "view is under REFRESH POLICY INCREMENTAL, so every refresh takes its rule's path; the AUTO view "
              "under the default policy, which weighs the two."]
    played = results.get("played", [])
    return "\n".join(lines + _auto_by_round(played) + _estimates_by_round(played))


def _auto_by_round(played: list[dict]) -> list[str]:
    """Lines of a table: per query and round, AUTO's refresh against the cheaper of the other two,
    and how AUTO refreshed (i: incremental, f: full): how it learns from the view's own refreshes."""
    if not played or any("auto" not in m for r in played for m in r["queries"].values()):
        return []
    heads = [f"{i + 1}: {r['variant']}" for i, r in enumerate(played)]
    lines = ["", "AUTO / the cheaper of incremental and full, round by round (i: AUTO refreshed "
             "incrementally, f: in full):", "", f"| Query | {' | '.join(heads)} |", "|---|" + "---:|" * len(heads)]
    for q in played[0]["queries"]:
        cells = []
        for r in played:
            m = r["queries"][q]
            cheaper = min(m["incremental"]["seconds"], m["full"]["seconds"])
            cells.append(f"{m['auto']['seconds'] / cheaper:.2f} {m['auto']['technique'][0]}")
        lines.append(f"| {q} | {' | '.join(cells)} |")
    return lines


def _estimates_by_round(played: list[dict]) -> list[str]:
    """Lines of a table: per query and round, how far AUTO's estimate of its refresh was off on the
    side it ran (the history's duration_s / its estimated_* seconds: over 1, slower than estimated),
    and what it estimated of the other side; '-' where it was not estimated in seconds."""
    if not played or any("estimated" not in m.get("auto", {}) for r in played for m in r["queries"].values()):
        return []
    heads = [f"{i + 1}: {r['variant']}" for i, r in enumerate(played)]
    lines = ["", "AUTO's estimate of each refresh against the time it took, on the side it ran (took / "
             "estimated, then i or f as above; '-': not estimated in seconds, a change too small to weigh or "
             "no rate yet):", "", f"| Query | {' | '.join(heads)} |", "|---|" + "---:|" * len(heads)]
    for q in played[0]["queries"]:
        cells = []
        for r in played:
            auto = r["queries"][q]["auto"]
            estimated = auto["estimated"][0 if auto["technique"] == "incremental" else 1]
            cells.append(f"{auto['history_s'] / estimated:.2f} {auto['technique'][0]}" if estimated else "-")
        lines.append(f"| {q} | {' | '.join(cells)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """The command line: run, write results/queries.json and RESULTS.md's section; 1 if a view is wrong."""
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark_queries", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 append round and 1 with changes")
    parser.add_argument("--bids", type=int, default=1_000_000, help="bids in all (default 1M)")
    parser.add_argument("--rounds", type=int, nargs=2, metavar=("APPEND", "CHANGES"), help="default 2 2")
    parser.add_argument("--queries", default=",".join(QUERIES), help="comma-separated, of " + ", ".join(QUERIES))
    add_output_arguments(parser, RESULTS_JSON)
    args = parser.parse_args(argv)
    rounds = dict(zip(ROUNDS, args.rounds)) if args.rounds else (QUICK_ROUNDS if args.quick else ROUNDS)
    try:
        found = results(args, RESULTS_JSON, lambda: run(args.bids, rounds, args.queries.split(",")))
    except Mismatch as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    publish(args, RESULTS_JSON, RESULTS_MD, "nexmark-queries", "Every Nexmark query: incremental vs full",
            markdown(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
