"""The Nexmark benchmark's data: two days of history, then a day of bids in scheduled batches.

The site is mv.auction_site's Site (people, the auctions they open, the bids on them, drawn from hashes of
the row number and a fixed seed), scaled to ``bids`` bids: HISTORY_SHARE of them over the first two
days, cached under bench/data/ as Delta tables written in time order; the rest over the third day,
in BATCHES batches of 2 hours whose sizes follow the day (fewer at night). Each batch also carries
late bids: LATE_SHARE of its size, dated in the LATE_SPAN before the batch (``extra = 'late'``),
some still within a 10-minute watermark, most beyond it. The changes variant also corrects
(UPDATE) and withdraws (DELETE) bids of the half hour before each batch.

Example:
    >>> plan = Plan(bids=20_000)
    >>> history = history_tables(spark, plan)            # {'bids': '.../bids', 'auctions': ..., ...}
    >>> append_batch(spark, "bids", plan, 0)      # {'appended': 179, 'late': 3, ...}
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql import functions as F

from mv.auction_site import MINUTE_US, Site, Size

from bench.windows import DATA_DIR

# Bump DATA_VERSION when the generator changes, so cached tables are not reused.
DATA_VERSION = 1
START = "2026-01-05 00:00:00"          # a Monday, UTC
DAY_US = 24 * 60 * MINUTE_US
HISTORY_DAYS = 2
HISTORY_SHARE = 0.7                    # of the bids: the two days before the views' first refresh
HISTORY_FILES = 48                     # one an hour, in time order, so time filters skip files
BATCHES = 12                           # the third day, in scheduled refreshes of 2 hours each
LATE_SHARE = 0.02                      # of a batch: bids dated in the LATE_SPAN before it ...
LATE_SPAN_US = 30 * MINUTE_US          # ... two thirds of them beyond a 10-minute watermark
CHANGED_SPAN_US = 30 * MINUTE_US       # the changes variant corrects and withdraws bids this recent ...
UPDATES, DELETES = 0.05, 0.05          # ... as many as these shares of the batch's new bids


@dataclass(frozen=True)
class Plan:
    """The data of one scale: ``bids`` in all, the third day's ``batches`` of which the run plays some.

    Example:
        >>> [round(n, -2) for n in Plan(bids=1_000_000).batch_sizes()][:4]
        [10500.0, 14400.0, 21100.0, 28900.0]
    """
    bids: int
    batches: int = BATCHES

    @property
    def history_bids(self) -> int:
        return round(self.bids * HISTORY_SHARE)

    def batch_sizes(self) -> list[int]:
        """New bids per batch: the day's bids spread by a daily curve (0.4x at night to 1.6x at noon)."""
        weights = [1 - 0.6 * math.cos(2 * math.pi * (i + 0.5) / self.batches) for i in range(self.batches)]
        day = self.bids - self.history_bids
        return [round(day * w / sum(weights)) for w in weights]

    def batch_span(self, index: int, start_us: int) -> tuple[int, int]:
        """[first, end) microseconds of batch ``index``'s new bids."""
        length = DAY_US // self.batches
        first = start_us + HISTORY_DAYS * DAY_US + index * length
        return first, first + length


def site(spark, start_us: int) -> Site:
    """mv.auction_site's generator starting at ``start_us`` (its rates of people and auctions)."""
    return Site(spark, Size(hours=HISTORY_DAYS * 24, rounds=0), start_us)


def start_us(spark) -> int:
    return spark.sql(f"SELECT unix_micros(TIMESTAMP '{START}')").first()[0]


def _bids(generator: Site, count: int, first_us: int, span_us: int, salt: int, extra: str):
    """Nexmark's bid columns (Site's, and ``extra``), ``count`` of them dated in [first_us, first_us + span_us)."""
    return generator.bids(count, first_us, span_us, salt).withColumn("extra", F.lit(extra))


def history_tables(spark, plan: Plan) -> dict[str, str]:
    """Paths of the cached Delta tables of the first two days (bids, auctions, persons), generated on first use."""
    folder = DATA_DIR / f"nexmark-v{DATA_VERSION}-{plan.bids}"
    paths = {name: str(folder / name) for name in ("persons", "auctions", "bids")}
    if all((folder / name / "_delta_log" / f"{0:020d}.json").is_file() for name in paths):
        return paths
    print(f"generating {plan.history_bids:,} bids of history into {folder} ...", flush=True)
    first = start_us(spark)
    generator, minutes = site(spark, first), HISTORY_DAYS * 24 * 60
    generator.persons(0, minutes).write.format("delta").mode("overwrite").save(paths["persons"])
    generator.auctions(0, minutes).write.format("delta").mode("overwrite").save(paths["auctions"])
    (_bids(generator, plan.history_bids, first, HISTORY_DAYS * DAY_US, salt=0, extra="")
     .repartitionByRange(HISTORY_FILES, "date_time").sortWithinPartitions("date_time")
     .write.format("delta").mode("overwrite").save(paths["bids"]))
    return paths


def source_table(spark, name: str, path: str) -> str:
    """A catalog table ``name`` that starts as the cached table at ``path`` (a shallow clone: no copy)."""
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} SHALLOW CLONE delta.`{path}`")
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    return name


def append_batch(spark, table: str, plan: Plan, index: int) -> dict:
    """Append batch ``index`` of the third day to ``table`` (its new bids and its late ones) in one commit.

    Example:
        >>> append_batch(spark, "bids", Plan(bids=20_000), 0)
        {'batch': 0, 'appended': 175, 'late': 3, 'first_us': ..., 'end_us': ...}
    """
    first = start_us(spark)
    generator = site(spark, first)
    begin, end = plan.batch_span(index, first)
    count = plan.batch_sizes()[index]
    late = round(count * LATE_SHARE)
    (_bids(generator, count, begin, end - begin, salt=1000 + index, extra="")
     .unionByName(_bids(generator, late, begin - LATE_SPAN_US, LATE_SPAN_US, salt=2000 + index, extra="late"))
     .write.format("delta").mode("append").saveAsTable(table))
    return {"batch": index, "appended": count + late, "late": late, "first_us": begin, "end_us": end}


def change_batch(spark, table: str, plan: Plan, index: int) -> dict:
    """Append batch ``index``, then correct (price + 1, 20 s later) and withdraw bids of the half hour before it.

    Which bids is drawn by hashing them, among those dated in the CHANGED_SPAN before the batch;
    the late bids just appended are left alone.

    Example:
        >>> change_batch(spark, "bids", Plan(bids=20_000), 0)
        {'batch': 0, 'appended': 178, 'late': 3, 'updated': 9, 'deleted': 8, ...}
    """
    done = append_batch(spark, table, plan, index)
    begin = done["first_us"]
    where = (f"date_time >= timestamp_micros({begin - CHANGED_SPAN_US}) AND date_time < timestamp_micros({begin})"
             " AND extra = ''")
    pool = max(1, spark.sql(f"SELECT count(*) FROM {table} WHERE {where}").first()[0])
    new = done["appended"] - done["late"]
    pick = "pmod(xxhash64(auction, bidder, price, date_time, {salt}), 1000000) < {share}"
    deleted = spark.sql(f"DELETE FROM {table} WHERE {where} AND "
                        + pick.format(salt=3000 + index, share=round(1e6 * DELETES * new / pool))).first()
    updated = spark.sql(f"UPDATE {table} SET price = price + 1, date_time = date_time + INTERVAL 20 SECONDS"
                        f" WHERE {where} AND "
                        + pick.format(salt=4000 + index, share=round(1e6 * UPDATES * new / pool))).first()
    return {**done, "updated": int(updated[0]), "deleted": int(deleted[0])}
