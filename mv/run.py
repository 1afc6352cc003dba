"""One refresh in progress (`Run`) and what it did (`Outcome`): the view, what its query means,
the source versions it reads to, and the helpers every strategy shares (the max event time and
watermark a refresh reaches, where closed windows end, a source's time column type).

Example:
    >>> run.query_over({"bids": "affected_bids"})   # the view's query over just those bid rows
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.util import InheritableThread

from mv import estimate, watermark
from mv.catalog import View
from mv.estimate import Estimate, Sizes
from mv.maintainer import extension
from mv.query import QueryInfo, interval_micros, sql_string
from mv.state import RefreshState
from mv.statements import Definition

if TYPE_CHECKING:
    from mv.open_windows import Kept

@dataclass
class Outcome:
    """What one refresh did, as REFRESH answers it (its commit's history row says the same)."""
    view: str
    technique: str
    reason: str
    refresh_id: int = 0
    source_versions: dict = field(default_factory=dict)
    rows_read: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    late_rows: int = 0
    groups_combined: int = 0
    groups_recomputed: int = 0
    watermark: int | None = None
    watermark_idle: bool = False  # the watermark moved with the clock (IDLE AFTER), not with event time
    work_bytes: int | None = None  # what it read and matched, as planned (mv/estimate.py), when weighed
    started_at: float = 0.0
    duration_s: float = 0.0
    # AUTO's last estimate of this refresh in seconds from its start, incrementally and in full (the
    # history's estimated_incremental_s and estimated_full_s): the duration says how far it was off
    estimated_incremental_s: float | None = None
    estimated_full_s: float | None = None

    def weighed(self, found: Estimate | None) -> Estimate | None:
        """`found`, kept as this refresh's estimate when it has seconds, both sides counted from the
        refresh's start: a by-kind estimate (estimate.dearer_by_kind) already is; the others price
        what is left of the refresh, after the seconds it has spent.

        Example: weighed 1.5 s in, incremental 2.0 s, full 4.0 s: kept as 3.5 s and 5.5 s.
        """
        if found is not None and found.incremental_s is not None and found.full_s is not None:
            spent = 0.0 if found.by_kind is not None else time.time() - self.started_at
            self.estimated_incremental_s = round(found.incremental_s + spent, 2)
            self.estimated_full_s = round(found.full_s + spent, 2)
        return found


INFINITY = 2 ** 62  # µs: later than any time, and still room to add a gap


@dataclass
class Run:
    """One refresh in progress: the view, what its query means, where it starts and ends."""
    spark: SparkSession
    view: View
    info: QueryInfo
    previous: RefreshState | None
    targets: dict[str, int]
    outcome: Outcome
    temp: str = field(default_factory=lambda: "__mv_" + uuid.uuid4().hex[:12])
    marker: str | None = None  # the view's mv.refresh_id property the refresh started from
    cached: list[DataFrame] = field(default_factory=list)
    source_ids: dict[str, str] = field(default_factory=dict)  # Delta table ids, read with the target versions
    now: int = field(default_factory=watermark.now)  # wall-clock µs at the refresh's start (IDLE AFTER)
    sizes: Sizes = Sizes(None, None, None)  # of the sources, their changes and the view, from the log (estimate.py)
    dry: bool = False  # only estimate (EXPLAIN): stop before anything is written (estimate.Stopped)
    previous_end: float | None = None  # when the previous refresh committed, epoch s (estimate.past)
    open_state: Kept | None = None  # the view's open-window table (mv/open_windows.py); None: it keeps none
    late_exists: bool = False  # whether <view>__late exists, as mv_delta_tables found it (history.write_late_rows)
    source_schemas: dict[str, dict[str, str]] = field(default_factory=dict)  # the sources' columns (state.py)
    # The query's columns are no longer the view's (a source's column type changed): a full refresh
    # overwrites the view, its table's schema replaced in the same commit (mv/jvm/RefreshCommit.scala)
    replaces_schema: bool = False
    # The sources whose change may hold updates, as their logs say (change files or removed files
    # since the previous refresh): their changes are netted (change_feed.netted)
    updated: frozenset[str] = frozenset()
    # Each source's change as change_feed.read cached it with every column, where its late rows are
    # taken from it (change_feed.whole_rows) rather than read again from the change feed, and
    # whether no update image of it cancels (none needs netting again)
    whole: dict[str, tuple[DataFrame, bool]] = field(default_factory=dict)
    # What the Delta statistics of an append's files say of a column (change_feed.appended_span), by
    # (source, column): asked by several steps (a join's count and bounds, a watermark's times)
    spans: dict[tuple[str, str], tuple | None] = field(default_factory=dict)
    switched_s: float = 0.0  # when AUTO switched to a full refresh after reading the change (estimate.Past)
    near_full: bool = False  # AUTO went full: an incremental refresh not yet measured planned near a full one's work
    upfront: Estimate | None = None  # AUTO's (or EXPLAIN's) estimate before reading the change, if any
    retracts: bool | None = None  # whether the change takes rows away, when weighed (estimate.recent)
    view_small: bool = True  # the view's checksum lists its files (snapshots.warming lists a large one's)
    begun: list = field(default_factory=list)  # work running beside the refresh (`beside`): (thread, outcome)

    def beside(self, work: Callable[[], None]) -> None:
        """Run `work` (a commit to a table beside the view's: open_windows.replace) in a thread of
        its own, with this thread's Spark job properties, while the refresh goes on; `waited` joins it."""
        outcome: dict = {}

        def run() -> None:
            try:
                work()
            except BaseException as e:  # noqa: BLE001 - handed to the refresh's thread by `waited`
                outcome["error"] = e
        thread = InheritableThread(run, session=self.spark)
        thread.start()
        self.begun.append((thread, outcome))

    def waited(self) -> BaseException | None:
        """Wait for the work begun `beside`; the first error it raised, if any."""
        found = None
        for thread, outcome in self.begun:
            thread.join()
            found = found or outcome.get("error")
        self.begun.clear()
        return found

    def carried(self) -> RefreshState:
        """The previous state carried to this refresh's id and the source versions it reads to: the
        new state of a refresh that moves no watermark and keeps no open windows."""
        return replace(self.previous, refresh_id=self.outcome.refresh_id, sources=dict(self.targets))

    @property
    def columns(self) -> list[str]:
        return [c.name for c in self.info.output]

    @property
    def time_type(self) -> str:
        return next(c.type for c in self.info.output if c.window_role == "window_start")

    def held(self, frame: DataFrame) -> DataFrame:
        """`frame` computed now, once, and held in Spark's cache until the refresh ends, as a
        DataFrame whose plan is those rows alone (mv/jvm/HeldRows.scala), not the query that made
        them: each statement built on it later analyses and prints a plan of one leaf. Over Spark
        Connect (no JVM here) the cached frame itself, computed.

        Example:
            >>> net = run.held(signed.groupBy(*columns).agg(F.sum(SIGN).alias(N)))  # one job, now
        """
        frame = frame.cache()
        self.cached.append(frame)
        jvm = extension(self.spark)
        if jvm is None:
            frame.count()
            return frame
        return DataFrame(jvm.HeldRows.of(frame._jdf), self.spark)

    def temp_view(self, df: DataFrame, suffix: str) -> str:
        name = f"{self.temp}_{suffix}"
        df.createOrReplaceTempView(name)
        return name

    def source(self, table: str) -> str:
        """The source `table` as of the version this refresh reads to, as a relation in SQL's FROM
        (`bids VERSION AS OF 7`). A row a writer adds while the refresh runs belongs to the next
        refresh, which reads it from the change feed: read here too, it would be counted twice.
        Text, not a temporary view: registering one is a Spark SQL execution of its own.
        A source that is not a Delta table (REFRESH POLICY FULL over parquet) has no versions: as it is."""
        if self.targets[table] < 0:
            return table
        return f"{table} VERSION AS OF {self.targets[table]}"

    def previous_source(self, table: str) -> str:
        """The source `table` as of the version the previous refresh read to (`bids VERSION AS OF 5`):
        a term of another source's change reads it there, as do an outer join's flips at the old side."""
        return f"{table} VERSION AS OF {self.previous.sources[table]}"

    @property
    def query(self) -> str:
        """The view's query over its sources as of this refresh's versions (`source`)."""
        return self.query_over({})

    def query_over(self, replaced: dict[str, str], changed: str | None = None, keys: bool = False,
                   flips: str | None = None, regroups: str | None = None, signed: bool = False) -> str:
        """The view's query reading each source in `replaced` from the view named there, and the
        others as of this refresh's versions; a read's name (query.Read) picks one read of a table read
        more than once, the table every read. With `changed`, a source (or one read of it): the query's change through
        that source alone, its UNION branches that do not read it empty (mv/row_refresh.py); with
        `keys` too, a superset of the rows that change reaches (outer joins, HAVING: DeltaRules.forKeys),
        or of their keys alone when each is a column of the changed rows (mv/jvm/ChangedKeys.scala);
        with `flips`, the view holding that source's change, the rows of the other side of an outer,
        semi or anti join whose match it brings or takes, at the version `replaced` gives the source;
        with `regroups`, the same view, each aggregate over the source kept to the groups it reaches;
        `signed`: `replaced` gives the changed read both sides of its change, and the change's
        `__mv_sign` is the last column (mv_substitute_signed_change)."""
        pairs = [x for r in self.info.reads
                 for x in (r.name, replaced.get(r.name) or replaced.get(r.table) or self.source(r.table))]
        if not changed:
            function, leading = "mv_substitute", []
        elif flips or regroups:
            function, leading = f"mv_substitute_{'flips' if flips else 'regroups'}", [changed, flips or regroups]
        else:
            function = "mv_substitute_keys" if keys else "mv_substitute_signed_change" if signed else "mv_substitute_change"
            # The keys a term outputs: a partitions view's, or its GROUP BY's (ChangedKeys cuts the term to them).
            leading = [changed, json.dumps(self.info.partition_by or self.info.group_by or [])] if keys else [changed]
        return f"SELECT * FROM {function}(" + ", ".join(
            sql_string(x) for x in [self.view.definition.query, *leading] + pairs) + ")"


def known_dearer(run: Run) -> Estimate | None:
    """Under REFRESH POLICY AUTO (or for EXPLAIN), a full refresh when the view's incremental
    refreshes of this change's kind all took longer than a full one would, whatever the change's
    size (estimate.by_kind), after the seconds this refresh has spent; asked by a window view with
    a WATERMARK before its change is read (window_refresh.full_ahead, which then reads only its
    late rows) and again once it is read (window_refresh.weigh; SESSION views only then, whose
    late rows come from the classified change), and by the others before reading
    (refresh._weighed_before_reading).

    Example: Nexmark's q7 (TUMBLE, EMIT ON WINDOW CLOSE) at 1M bids, repriced and withdrawn bids
    (bench.nexmark): such changes took 3.2-3.3 s incrementally, a full refresh 1.4-1.8 s; the next
    one, its late rows written, goes full.
    """
    if not run.dry and run.view.definition.policy != "AUTO":
        return None
    return run.outcome.weighed(estimate.by_kind(run.spark, run.view.name, run.sizes, run.previous, run.previous_end,
                                                bool(run.updated), spent=time.time() - run.outcome.started_at,
                                                over_appends=estimate.retracts_over_appends(run.info)))


def advanced(run: Run, latest: list[int | None]) -> tuple[int | None, int | None]:
    """The max event time after the previous refresh's and the new event times `latest` (None for
    none), and the watermark it brings (None without a WATERMARK): neither ever goes back. Under
    IDLE AFTER, when no newer event time came, the clock may move the watermark further (and
    `run.outcome.watermark_idle` says so)."""
    previous, d = run.previous, run.view.definition
    before = previous.max_event_time if previous else None
    max_event = max(filter(None, latest + [before]), default=None)
    if not d.watermark_column:
        return max_event, None
    delay = interval_micros(run.spark, d.watermark_delay)
    new = watermark.advance(previous.watermark if previous else None, max_event, delay)
    by_clock = idle_watermark(run.spark, d, previous, run.now) if max_event == before else None
    if by_clock is not None and (new is None or by_clock > new):
        run.outcome.watermark_idle = True
        return max_event, by_clock
    return max_event, new


def idle_watermark(spark: SparkSession, d: Definition, previous: RefreshState | None, now: int) -> int | None:
    """The watermark the clock brings a view of definition `d` at `now` if its sources stayed quiet
    since `previous` (IDLE AFTER), or None."""
    if not d.watermark_idle or previous is None:
        return None
    return watermark.idle(previous.max_event_time, previous.event_time_seen_at, now,
                          interval_micros(spark, d.watermark_delay), interval_micros(spark, d.watermark_idle))


def clock_closes(spark: SparkSession, d: Definition, previous: RefreshState | None, now: int) -> bool:
    """Whether the clock moves a quiet view's watermark at `now` (IDLE AFTER): a refresh with no
    change then still closes windows, and a TRIGGER ON UPDATE view is due."""
    by_clock = idle_watermark(spark, d, previous, now)
    return by_clock is not None and (previous.watermark is None or by_clock > previous.watermark)


def seen_at(run: Run, max_event_time: int | None) -> int | None:
    """When the view's newest event time was first seen: this refresh's start if it brought it."""
    previous = run.previous
    if previous is None or max_event_time != previous.max_event_time or previous.event_time_seen_at is None:
        return run.now if max_event_time is not None else None
    return previous.event_time_seen_at


def closed_bound(run: Run) -> int:
    return run.previous.watermark if run.previous.watermark is not None else -INFINITY


def source_time_type(run: Run, w) -> str:
    return next(f.dataType.simpleString() for f in run.spark.table(w.sources[0]).schema
                if f.name.lower() == w.time_column.lower())
