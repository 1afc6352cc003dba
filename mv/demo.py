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
from mv.auction_site import ALIGN_US, MINUTE_US, Site, Size
from mv.internal_columns import IN
from mv.names import TableName
from mv.query import describe, interval_micros

CATALOG = Path(__file__).resolve().parent.parent / "catalog"
DATABASE = "nexmark"
HOT_VIEW, CHART_VIEW = "hot_items", "highest_bid"


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
        say(f"\nRound {number}, {site.play_round(number, watermark, window.size, grace, view=CHART_VIEW)}")
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
            outcome = refresh.refresh(spark, name, refreshed=done)
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
        counts = dict((only_view.withColumn(IN, F.lit("view"))   # both ways in one Spark job
                       .unionByName(only_query.withColumn(IN, F.lit("query")))
                       .groupBy(IN).count().collect()))
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
    late = TableName.parse(view.name).late
    if spark.catalog.tableExists(late):  # its rows carry the window the view's function gave them
        touched = spark.sql(f"SELECT DISTINCT window_start AS {start}, window_end AS {end} FROM {late}")
        expected = expected.join(touched, [start, end], "left_anti")
        actual = actual.join(touched, [start, end], "left_anti")
    return expected, actual


if __name__ == "__main__":
    from mv import cli  # the CLI runs the demo, so that its errors print as the CLI's do
    sys.exit(cli.main(["demo"]))
