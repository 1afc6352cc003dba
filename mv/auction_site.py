"""The demo's auction site: Nexmark's people, auctions and bids, generated into Delta tables.

Nexmark, the streaming benchmark Flink and RisingWave report, models an auction site as three
streams: people register, open auctions and bid. `Site` generates them with spark.range and hashes
of the row number and a fixed seed (the same data on every run), and plays rounds of what the site
sees next: new rows, late bids, bids corrected and withdrawn. The demo (mv/demo.py) and the Nexmark
benchmark (bench/nexmark_data.py) both use it.

Example:
    >>> site = Site(spark, Size(bids_per_minute=50, hours=1, rounds=2), start_us)
    >>> site.load_history()       # into the tables persons, auctions and bids of the current database
    '1 hour of history (08:00-09:00 UTC): 3,000 bids, 1,080 auctions, 360 people'
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession

from mv.query import sql_string

SEED = 2015                  # every value is a hash of a row number and the seed: the same data each run
MINUTE_US = 60_000_000
ALIGN_US = 10 * MINUTE_US    # event time starts on a 10-minute boundary, so every run has the same windows

# What a round does besides adding `round_minutes` of new data. Late and changed bids are of the
# last hour or so, as on a real site (a SESSION view's refresh costs in proportion to the time
# its changes span).
LATE_IN_GRACE = 0.02         # of the round's new bids: late for highest_bid, but within its grace
LATE_PAST_GRACE = 0.005      # of the round's new bids: too late, so into highest_bid__late ...
LATE_PAST_SPAN_US = 30 * MINUTE_US   # ... dated in the half hour before its newest final window's end
CORRECTED = 0.005            # of the last hour's bids: price and time corrected (UPDATE)
WITHDRAWN = 0.004            # of the last hour's bids: withdrawn (DELETE)
AUCTIONS_WITHDRAWN = 0.01    # of the last hour's auctions (DELETE)

# As Nexmark's generator does: some auctions and bidders are hot. Every 20th auction draws half
# the bids while it is among the 3 newest such; every 10th person bids 40% of the time while among
# the 5 newest such. The other bidders come in 20-minute shifts of 100 people, so sessions end.
HOT_AUCTION_EVERY, HOT_AUCTIONS, HOT_AUCTION_SHARE = 20, 3, 50
HOT_BIDDER_EVERY, HOT_BIDDERS, HOT_BIDDER_SHARE = 10, 5, 40
SHIFT_US, SHIFT_BIDDERS = 20 * MINUTE_US, 100
AUCTION_OPEN_MINUTES = 60
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent"]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
ITEMS = ["lamp", "watch", "bicycle", "guitar", "camera", "teapot", "globe", "typewriter", "kite"]
ADJECTIVES = ["vintage", "rare", "signed", "boxed", "restored", "antique", "mint"]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]



@dataclass(frozen=True)
class Size:
    """How much the demo generates: `hours` of history before the views are deployed, then
    `rounds` rounds of `round_minutes` each. The defaults run in a few minutes on 2 cores.

    Example:
        >>> Size(bids_per_minute=50, hours=1, rounds=2).span_minutes
        90
    """
    bids_per_minute: int = 800
    auctions_per_minute: int = 18
    persons_per_minute: int = 6
    hours: int = 3
    rounds: int = 4
    round_minutes: int = 15

    @property
    def span_minutes(self) -> int:
        return self.hours * 60 + self.rounds * self.round_minutes



def _draw(part: int, bound: int | str, salt: int = 0) -> str:
    """SQL for a hash of the row number, the seed, `salt` and `part`, in [0, bound)."""
    return f"pmod(xxhash64(id, {SEED}, {salt}, {part}), {bound})"


def _hot(existing: str, every: int, back: str) -> str:
    """SQL: the id of the `back`-th newest hot one (every `every`-th id is hot) of `existing` ones."""
    return f"greatest(0, (greatest(0, {existing} - 1) div {every} - {back}) * {every})"


def _pick(values: list[str], part: int) -> str:
    return f"element_at(array({', '.join(map(sql_string, values))}), 1 + CAST({_draw(part, len(values))} AS INT))"


class Site:
    """Generates the site's people, auctions and bids from `start_us` on, with spark.range and hashes.

    People and auctions arrive at a steady rate, numbered in order (as in Nexmark): the n-th comes
    in the n-th slot of 1/rate minutes. A bid's time is drawn first; its auction and bidder are then
    drawn among those that exist at that time, so late bids look like the bids of their time.
    """

    def __init__(self, spark: SparkSession, size: Size, start_us: int):
        self.spark, self.size, self.start_us = spark, size, start_us

    def clock(self, minutes: int) -> str:
        return datetime.fromtimestamp((self.start_us + minutes * MINUTE_US) / 1e6, timezone.utc).strftime("%H:%M")

    def round_end_us(self, number: int) -> int:
        return self.start_us + (self.size.hours * 60 + number * self.size.round_minutes) * MINUTE_US

    def persons(self, first_minute: int, minutes: int) -> DataFrame:
        rate = self.size.persons_per_minute
        return self.spark.range(first_minute * rate, (first_minute + minutes) * rate, numPartitions=1).selectExpr(
            "id", f"{_pick(FIRST_NAMES, 1)} || ' ' || {_pick(LAST_NAMES, 2)} AS name",
            "concat('user', id, '@example.com') AS email", f"{_pick(CITIES, 3)} AS city",
            f"{_pick(STATES, 4)} AS state", f"timestamp_micros({self._slot_time(rate, 5)}) AS date_time")

    def auctions(self, first_minute: int, minutes: int) -> DataFrame:
        rate, people = self.size.auctions_per_minute, self._existing(self.size.persons_per_minute)
        # Half the sellers registered in the last ten minutes (Nexmark q8 looks for them).
        seller = (f"CASE WHEN {_draw(2, 100)} < 50 "
                  f"THEN greatest(0, {people} - 1 - {_draw(3, 10 * self.size.persons_per_minute)}) "
                  f"ELSE {_draw(4, f'greatest(1, {people})')} END")
        return (self.spark.range(first_minute * rate, (first_minute + minutes) * rate, numPartitions=1)
                .selectExpr("*", f"{self._slot_time(rate, 1)} AS us")
                .selectExpr("id", f"{_pick(ADJECTIVES, 5)} || ' ' || {_pick(ITEMS, 6)} AS item_name",
                            f"10 + {_draw(7, 990)} AS initial_bid", f"100 + {_draw(8, 9900)} AS reserve",
                            f"{seller} AS seller", f"10 + {_draw(9, 5)} AS category",
                            "timestamp_micros(us) AS date_time",
                            f"timestamp_micros(us) + make_dt_interval(0, 0, {AUCTION_OPEN_MINUTES}) AS expires"))

    def bids(self, count: int, first_us: int, span_us: int, salt: int) -> DataFrame:
        """`count` bids with times drawn in [first_us, first_us + span_us); `salt` makes each batch new."""
        size = self.size
        auctions, people = self._existing(size.auctions_per_minute), self._existing(size.persons_per_minute)
        open_auctions = AUCTION_OPEN_MINUTES * size.auctions_per_minute
        auction = (f"CASE WHEN {_draw(2, 100, salt)} < {HOT_AUCTION_SHARE} "
                   f"THEN {_hot(auctions, HOT_AUCTION_EVERY, _draw(3, HOT_AUCTIONS, salt))} "
                   f"ELSE greatest(0, {auctions} - 1 - {_draw(4, open_auctions, salt)}) END")
        shift = f"(us - {self.start_us}) div {SHIFT_US}"
        on_shift = f"greatest(1, {shift} * {SHIFT_US * size.persons_per_minute} div {MINUTE_US})"  # by its start
        bidder = (f"CASE WHEN {_draw(5, 100, salt)} < {HOT_BIDDER_SHARE} "
                  f"THEN {_hot(people, HOT_BIDDER_EVERY, _draw(6, HOT_BIDDERS, salt))} "
                  f"ELSE pmod(xxhash64({shift}, {_draw(7, SHIFT_BIDDERS, salt)}, {SEED}), {on_shift}) END")
        partitions = max(1, min(4, count // 50_000))
        return (self.spark.range(count, numPartitions=partitions)
                .selectExpr("*", f"{first_us} + {_draw(1, max(1, span_us), salt)} AS us")
                .selectExpr(f"{auction} AS auction", f"{bidder} AS bidder",
                            f"CAST(pow(10, 1 + {_draw(8, 1_000_000, salt)} / 300000.0) AS BIGINT) AS price",
                            f"{_pick(CHANNELS, 9)} AS channel", "timestamp_micros(us) AS date_time"))

    def _slot_time(self, rate: int, part: int) -> str:
        return f"{self.start_us} + id * {MINUTE_US} div {rate} + {_draw(part, MINUTE_US // rate)}"

    def _bid_pick(self, salt: int, share: float) -> str:
        """SQL: whether a bid is among a `share` of bids drawn by hashing them (times from the start,
        so every run draws the same ones) with `salt`."""
        bid = f"auction, bidder, price, unix_micros(date_time) - {self.start_us}"
        return f"pmod(xxhash64({bid}, {SEED}, {salt}), 1000000) < {round(share * 1e6)}"

    def _existing(self, rate: int) -> str:
        """SQL for how many people (or auctions) have come by the row's time `us`."""
        return f"(us - {self.start_us}) * {rate} div {MINUTE_US}"

    def load_history(self) -> str:
        """The first `hours`, written in time order (half an hour a file) so time filters skip files;
        what was written, in words."""
        size, minutes = self.size, self.size.hours * 60
        self.persons(0, minutes).writeTo("persons").append()
        self.auctions(0, minutes).writeTo("auctions").append()
        (self.bids(minutes * size.bids_per_minute, self.start_us, minutes * MINUTE_US, salt=0)
         .repartitionByRange(max(1, minutes // 30), "date_time").sortWithinPartitions("date_time")
         .writeTo("bids").append())
        return (f"{size.hours} hour{'s' * (size.hours != 1)} of history ({self.clock(0)}-{self.clock(minutes)} UTC): "
                f"{minutes * size.bids_per_minute:,} bids, {minutes * size.auctions_per_minute:,} auctions, "
                f"{minutes * size.persons_per_minute:,} people")

    def play_round(self, number: int, watermark: int, window_us: int, grace_us: int,
                   view: str = "highest_bid") -> str:
        """Round `number`'s changes to the sources; what they were, in words. Late bids go to
        `view`'s windows (TUMBLE, `window_us` long): its `watermark` has closed them, and some
        are within its grace (`grace_us`, at least `window_us`), some past it."""
        size, spark = self.size, self.spark
        first = size.hours * 60 + (number - 1) * size.round_minutes
        begin_us, end_us = self.start_us + first * MINUTE_US, self.round_end_us(number)
        new = size.round_minutes * size.bids_per_minute
        in_grace, past_grace = round(new * LATE_IN_GRACE), round(new * LATE_PAST_GRACE)
        closed_end = (watermark + 1) // window_us * window_us       # the newest closed window's end
        final_end = (watermark - grace_us) // window_us * window_us  # the newest final window's end
        (self.bids(new, begin_us, end_us - begin_us, salt=10 * number + 1)
         .unionByName(self.bids(in_grace, closed_end - window_us, window_us, salt=10 * number + 2))
         .unionByName(self.bids(past_grace, final_end - LATE_PAST_SPAN_US, LATE_PAST_SPAN_US, salt=10 * number + 3))
         .writeTo("bids").append())
        self.persons(first, size.round_minutes).writeTo("persons").append()
        self.auctions(first, size.round_minutes).writeTo("auctions").append()
        corrected = _affected(spark.sql(
            "UPDATE bids SET price = price + 1, date_time = date_time + INTERVAL 20 SECONDS "
            f"WHERE {_since(begin_us, 60)} AND date_time < timestamp_micros({begin_us}) "
            f"AND {self._bid_pick(number, CORRECTED)}"))
        withdrawn = _affected(spark.sql(
            f"DELETE FROM bids WHERE {_since(begin_us, 60)} AND {self._bid_pick(-number, WITHDRAWN)}"))
        auctions_withdrawn = _affected(spark.sql(
            f"DELETE FROM auctions WHERE {_since(begin_us, 60)} "
            f"AND pmod(xxhash64(id, {SEED}, {number}), 1000000) < {round(AUCTIONS_WITHDRAWN * 1e6)}"))
        return (f"{self.clock(first)}-{self.clock(first + size.round_minutes)} UTC: +{new:,} bids, "
                f"+{size.round_minutes * size.persons_per_minute:,} people, "
                f"+{size.round_minutes * size.auctions_per_minute:,} auctions ({auctions_withdrawn:,} withdrawn)\n"
                f"  late bids: {in_grace:,} within {view}'s grace (window {_clock(closed_end - window_us)}-"
                f"{_clock(closed_end)}, watermark {_clock(watermark)}), {past_grace:,} past it "
                f"({_clock(final_end - LATE_PAST_SPAN_US)}-{_clock(final_end)})\n"
                f"  earlier bids: {corrected:,} corrected (price + 1, 20 s later), {withdrawn:,} withdrawn")


def _clock(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, timezone.utc).strftime("%H:%M")


def _affected(result: DataFrame) -> int:
    """The rows a Delta UPDATE or DELETE changed, from the row it returns."""
    row = result.first()
    return int(row.asDict().get("num_affected_rows", 0)) if row is not None else 0


def _since(end_us: int, minutes: int) -> str:
    """SQL: whether a row is of the `minutes` before `end_us`, or later."""
    return f"date_time >= timestamp_micros({end_us - minutes * MINUTE_US})"
