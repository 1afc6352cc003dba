"""The demo behind `make demo` (`mv demo`): a Nexmark-style auction site kept in materialized views.

Nexmark, the streaming benchmark Flink and RisingWave report, models an auction site as three
streams: people register, open auctions and bid. The demo generates them with a fixed seed into
Delta tables of a database of its own, `nexmark` (dropped and made again on every run), deploys
catalog/ as `mv deploy` does (q5 hot items, q7 highest bid, q8 new users, q11 user sessions), then
plays rounds of what the site sees next: new people, auctions and bids; bids that arrive late,
some within highest_bid's GRACE and some after it (those go to highest_bid__late); bids corrected
and withdrawn; auctions withdrawn. After each round it refreshes every view, upstream first, and
prints what each refresh did. At the end it checks every view against its query recomputed from
scratch (a difference fails the demo) and charts highest_bid's refresh history.

Event time ends at most 10 minutes before the demo starts: the site's last hours, replayed faster
than they happened, so the chart's watermark lag shrinks as the replay catches up.

Example:
    $ make demo                  # the same as `mv demo` and `python -m mv.demo`
    >>> from mv import demo
    >>> demo.main(spark, demo.Size(bids_per_minute=50, hours=1, rounds=2)).checked
    ['highest_bid', 'hot_items', 'hot_items_peak', 'new_users', 'user_sessions']
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mv import api, chart, config, console, dependencies, deploy, refresh
from mv.query import describe, interval_micros, sql_string

CATALOG = Path(__file__).resolve().parent.parent / "catalog"
DATABASE = "nexmark"
SEED = 2015                  # every value is a hash of a row number and the seed: the same data each run
MINUTE_US = 60_000_000
ALIGN_US = 10 * MINUTE_US    # event time starts on a 10-minute boundary, so every run has the same windows
HOT_VIEW, CHART_VIEW = "hot_items", "highest_bid"

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


@dataclass
class Result:
    """What a run did: each round's refreshes (outcome, wall-clock seconds), the views checked,
    the chart's path, seconds in all."""
    rounds: list[list[tuple[refresh.Outcome, float]]] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    chart: Path | None = None
    seconds: float = 0.0


class ViewMismatch(AssertionError):
    """A view differs from its query recomputed from scratch."""


def main(spark: SparkSession | None = None, size: Size = Size(), out: TextIO | None = None,
         now: datetime | None = None) -> Result:
    """Run the demo on `spark` (the active session, else mv.session()), its history ending by `now`;
    raises ViewMismatch if a view ends up different from its query.

    Example:
        >>> demo.main(spark, demo.Size(bids_per_minute=50, hours=1, rounds=2)).chart
        PosixPath('.../nexmark_highest_bid.png')
    """
    started = time.time()
    if spark is None:
        import mv
        spark = SparkSession.getActiveSession() or mv.session()
    now_us = int((now or datetime.now(timezone.utc)).timestamp() * 1_000_000)
    site = Site(spark, size, (now_us - size.span_minutes * MINUTE_US) // ALIGN_US * ALIGN_US)
    say = _printer(out or sys.stdout)
    say(f"A Nexmark-style auction site in Delta Lake: database {DATABASE}, Spark {spark.version}, "
        f"MV_HOME {config.home_dir()}")
    with in_database(spark, DATABASE, fresh=True):
        for source in deploy.read(CATALOG)[0]:  # the tables as catalog/sources.sql declares them
            spark.sql(source.text)
        t0 = time.time()
        say(f"\nGenerated {site.load_history()} ({time.time() - t0:.1f} s)")
        say("\nDeploying catalog/, as `mv deploy catalog/` does:")
        views = _deploy(spark, say)
        say("\nEach round changes the sources, then refreshes every view, upstream first (seconds: wall clock).")
        result = Result(rounds=_play(spark, site, views, say, out or sys.stdout))
        result.checked = check(spark, views)
        closing = [name for name in views
                   if api.MaterializedView.for_name(spark, name).definition.emit == "WINDOW CLOSE"]
        say(f"\nchecked: {', '.join(result.checked)} equal their queries recomputed from scratch"
            + (f" ({', '.join(closing)}: the closed windows no too-late row touched)" if closing else ""))
        rows = api.MaterializedView.for_name(spark, CHART_VIEW).history().collect()
        result.chart = chart.plot_history(CHART_VIEW, rows, config.home_dir() / f"{DATABASE}_{CHART_VIEW}.png")
        say(f"chart of {CHART_VIEW}'s refreshes: {result.chart}")
    result.seconds = time.time() - started
    say(f"Done in {result.seconds:.0f} s. The tables stay in database {DATABASE}: "
        f"try  mv sql \"SELECT * FROM {DATABASE}.{HOT_VIEW} ORDER BY bids DESC LIMIT 5\"")
    return result


def _play(spark: SparkSession, site: Site, views: list[str], say, out: TextIO) -> list:
    """Each round: change the sources, refresh every view, print what the refreshes did."""
    chart_view = api.MaterializedView.for_name(spark, CHART_VIEW)
    watermark = chart_view.history().collect()[-1].watermark_micros
    window = describe(spark, chart_view.definition.query).windows[0]
    grace = interval_micros(spark, chart_view.definition.grace)
    rounds = []
    for number in range(1, site.size.rounds + 1):
        say(f"\nRound {number}, {site.play_round(number, watermark, window.size, grace)}")
        outcomes = refresh_all(spark, views, out)
        rounds.append(outcomes)
        watermark = next(o.watermark for o, _ in outcomes if o.view == CHART_VIEW)
        say(outcome_table(outcomes))
        say("  " + hot_items_line(spark, site.round_end_us(number)))
    return rounds


def _printer(out: TextIO):
    def say(text: str) -> None:
        print(text, file=out, flush=True)
    return say


@contextmanager
def in_database(spark: SparkSession, name: str, fresh: bool = False) -> Iterator[None]:
    """Make `name` the current database for the block (dropped and created anew if `fresh`)."""
    previous = spark.catalog.currentDatabase()
    if fresh:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
        spark.sql(f"CREATE DATABASE {name}")
    spark.catalog.setCurrentDatabase(name)
    try:
        yield
    finally:
        spark.catalog.setCurrentDatabase(previous)


# ---- the auction site ---------------------------------------------------------------------------

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

    def play_round(self, number: int, watermark: int, window_us: int, grace_us: int) -> str:
        """Round `number`'s changes to the sources; what they were, in words. Late bids go to
        highest_bid's windows (TUMBLE, `window_us` long): its `watermark` has closed them, and some
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
                f"  late bids: {in_grace:,} within {CHART_VIEW}'s grace (window {_clock(closed_end - window_us)}-"
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




# ---- deploying and refreshing -------------------------------------------------------------------

def _deploy(spark: SparkSession, say) -> list[str]:
    """Deploy catalog/ as `mv deploy` does, printing each view created and how long it took (its
    first refresh is a full one); the views, upstream first."""
    planned = deploy.plan(spark, CATALOG)
    width = max(len(change.name) for change in planned.views)
    started = time.time()
    for action, name, detail in deploy.apply(spark, planned):
        if action != "ran":
            say(f"  {action:<9}  {name:<{width}}  {detail} in {time.time() - started:.1f} s")
        started = time.time()
    return [change.name for change in planned.views]


def refresh_all(spark: SparkSession, names: list[str], out: TextIO) -> list[tuple[refresh.Outcome, float]]:
    """Refresh `names`, given upstream views first (as deploy.plan orders them), one at a time, as
    `mv refresh --all` does; each one's outcome and wall-clock seconds."""
    done: set[str] = set()  # refreshed in this pass: not refreshed again as an upstream view
    outcomes = []
    for name in names:
        started = time.time()
        with console.Progress(spark, name, out):
            outcome = refresh.refresh(spark, name, _upstream_done=done)
        outcomes.append((outcome, time.time() - started))
        done.add(dependencies.qualify(spark, name))
    return outcomes


def outcome_table(outcomes: list[tuple[refresh.Outcome, float]]) -> str:
    """Refresh outcomes and their wall-clock seconds as an indented table, one line per view."""
    header = ["view", "technique", "reason", "read", "inserted", "updated", "deleted", "late", "seconds"]
    rows = [(o.view, o.technique, o.reason, f"{o.rows_read:,}", f"{o.rows_inserted:,}", f"{o.rows_updated:,}",
             f"{o.rows_deleted:,}", f"{o.late_rows:,}", f"{seconds:.1f}") for o, seconds in outcomes]
    text = console.table(header, rows, right=[False] * 3 + [True] * 6)
    return "\n".join("  " + line for line in text.splitlines())


def hot_items_line(spark: SparkSession, end_us: int, top: int = 3) -> str:
    """The `top` auctions of the newest HOP window of hot_items ending by `end_us` (Nexmark q5's answer)."""
    rows = spark.sql(f"""
        SELECT auction, bids, window_start, window_end FROM {HOT_VIEW}
        WHERE window_end = (SELECT max(window_end) FROM {HOT_VIEW} WHERE window_end <= timestamp_micros({end_us}))
        ORDER BY bids DESC, auction LIMIT {top}""").collect()
    if not rows:
        return "hot items: none yet"
    hottest = ", ".join(f"auction {r.auction} ({r.bids:,} bids)" for r in rows)
    return f"hot items {rows[0].window_start:%H:%M}-{rows[0].window_end:%H:%M} UTC: {hottest}"


# ---- checking -----------------------------------------------------------------------------------

def check(spark: SparkSession, names: list[str]) -> list[str]:
    """Raise ViewMismatch unless each view holds exactly its query's rows recomputed from scratch
    (exceptAll both ways); returns `names`. An EMIT ON WINDOW CLOSE view is compared on its closed
    windows, except the windows a too-late row (in <view>__late) touched: those keep their final rows."""
    for name in names:
        view = api.MaterializedView.for_name(spark, name)
        expected = spark.sql(view.definition.query)
        actual = view.toDF().select(*expected.columns)
        if view.definition.emit == "WINDOW CLOSE":
            expected, actual = _final_windows(spark, view, expected, actual)
        only_view, only_query = actual.exceptAll(expected), expected.exceptAll(actual)
        counts = dict((only_view.withColumn("__in", F.lit("view"))   # both ways in one Spark job
                       .unionByName(only_query.withColumn("__in", F.lit("query")))
                       .groupBy("__in").count().collect()))
        extra, missing = counts.get("view", 0), counts.get("query", 0)
        if extra or missing:
            raise ViewMismatch(f"{name} differs from its query recomputed from scratch: {extra} rows only in the "
                               f"view (e.g. {only_view.limit(3).collect()}), {missing} only in the query "
                               f"(e.g. {only_query.limit(3).collect()})")
    return list(names)


def _final_windows(spark: SparkSession, view: api.MaterializedView, expected: DataFrame,
                   actual: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The query's closed windows and the view's windows, both without those a too-late row touched."""
    info = describe(spark, view.definition.query)
    start, end = info.window_start, info.window_end
    watermark = view.describe().get("watermark_micros", "None")
    closed = F.col(end) <= F.timestamp_micros(F.lit(int(watermark) + 1)) if watermark != "None" else F.lit(False)
    expected = expected.where(closed)
    late = f"{view.name}__late"
    if spark.catalog.tableExists(late):  # its rows carry the window the view's function gave them
        touched = spark.sql(f"SELECT DISTINCT window_start AS {start}, window_end AS {end} FROM {late}")
        expected = expected.join(touched, [start, end], "left_anti")
        actual = actual.join(touched, [start, end], "left_anti")
    return expected, actual


if __name__ == "__main__":
    from mv import cli  # the CLI runs the demo, so that its errors print as the CLI's do
    sys.exit(cli.main(["demo"]))
