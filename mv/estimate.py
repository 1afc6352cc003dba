"""What the rest of a refresh would cost done incrementally and done in full, so that REFRESH
POLICY AUTO runs the cheaper one (reason FULL_CHEAPER) and EXPLAIN shows both.

Work is counted in bytes of Delta files, as planned before anything runs (the extension's
mv_scan_bytes, after file skipping): the source files the refresh still has to read, plus twice
the view's files its merge matches (read, then rewritten or marked deleted). Incrementally, that
is the source files of the windows the changes touch (none when they are combined from the view's
rows) and the view files holding those windows; in full, every source file and every view file.
The change itself is read before the estimate: its cost is spent either way.

Bytes become seconds with the view's own past refreshes (their `work_bytes` in the history). A
full refresh reads everything, so its time is its work at the median seconds per byte of the
technique's newest refreshes that did at least MIN_WORK (below that, a refresh's time is mostly
fixed costs). An incremental refresh has a fixed part however small its change (reading the
change feed, late rows, the commit): the shortest of its newest refreshes, plus its work at the
median rate of what they took beyond that. Weighed after the change was read, the part of that
fixed cost the refresh already spent is not counted again. A technique never seen at MIN_WORK
takes the other's rate; with no rate at all the bytes decide. A scattered change that makes an
incremental refresh as slow as a full one shows up in that rate after one such refresh.

The view's first refresh is a full one, but not like the others: it also created the view's tables
and ran its query's code for the first time (Nexmark's q7 at 1M bids: created in 4.8 s, refreshed in
full in 2.0 s later). Its rate stands for a full refresh only while no other full refresh is among
the newest; then, when it makes a full refresh cost less than TRY_FULL_WITHIN times the incremental
one, AUTO refreshes in full once to measure it (`tries_full`), instead of trusting the first
refresh's rate for ever and staying incremental at twice the cost.

Example:
    >>> e = weigh(900 * MB, 1000 * MB, [Past("full", 1000 * MB, 30.0), Past("incremental", MB, 2.0),
    ...                                 Past("incremental", 100 * MB, 8.0)])
    >>> e.incremental_s, e.full_s, e.cheaper     # 2 s + 900 MB at 6 s per 100 MB; 30 s per 1000 MB
    (56.0, 30.0, 'full')
"""
from __future__ import annotations

import statistics
from dataclasses import astuple, dataclass, replace

from pyspark.sql import SparkSession

from mv import errors, history
from mv.delta_tables import Table
from mv.query import QueryInfo, Read, sql_string
from mv.state import RefreshState

MB = 1 << 20
MIN_WORK = 8 * MB
MIN_WORK_SETTING = "mv.estimate.minWorkBytes"  # MIN_WORK, for a session (tests weigh small tables)
# Past refreshes read for their rates: the view's newest ones.
PAST_REFRESHES = 20
# Before reading a change, it is weighed when its bytes are at least this share of a full refresh's work.
WEIGH_CHANGE = 0.1
# A change under this share of its sources' bytes is refreshed incrementally without an estimate:
# only a scattered change could make that cost a full refresh's, and then the two cost about the same.
SMALL_CHANGE = 0.01
# The reason of a full refresh AUTO chose.
FULL_CHEAPER = "FULL_CHEAPER"
# The reason of a view's first refresh, whose rate is a full refresh's only until another is measured.
FIRST_REFRESH = "FIRST_REFRESH"
# A full refresh known only from the first is tried when it is estimated under this many times the
# incremental one (the first of Nexmark's q7 cost 1.6-2.4 times its later full refreshes).
TRY_FULL_WITHIN = 3.0
# A change that takes rows away, of a kind the view has not refreshed incrementally yet, costs at
# least this many times its appends: it does what they do, then reads the view to net and merge.
# bench.nexmark_queries at 1M bids (2026-11-29), the first such refresh against the fastest append:
# 0.7-2.5 for views of windows, aggregates and partitions, and views of rows window by window
# (q12, a TUMBLE count per bidder: 4.4).
RETRACTS_OVER_APPENDS = 2.0
# The same for a view of rows kept by its delta rules (row_refresh.refresh_rows), whose append is
# the query over the appended rows alone, written without reading the view: Nexmark's q0-q2,
# q13-q14 and q20-q22 took 2.9-9.1 times their fastest append (q3, a join of two tables that both
# change, 1.9), and at 2.0 AUTO explored such a change at 2.0-4.9 times the cheaper way (two runs).
ROWS_RETRACTS_OVER_APPENDS = 4.0
# An incremental refresh the view has not run yet is priced at its planned bytes alone, without
# the fixed part that reading its change and merging add: when those bytes are at least this share
# of a full refresh's, the full refresh is the cheaper. bench.nexmark_queries at 1M bids, the first
# refresh after CREATE (2026-11-30): q4, q6 and q18 planned at least that and took 1.8-5.3 times
# a full refresh's time incrementally; q19 and q20 planned less and took 2.0 and 1.03 times.
UNMEASURED_WITHIN = 0.75
# The techniques each view has refreshed by in this driver process, by Spark application and view:
# the next refresh by one of them runs warm, its plans' code generated and its classes loaded.
# bench.joins at 1M bids, a GROUP BY over a join: a view's first incremental refresh took 5.2-6.2 s,
# its next ones 2.0-3.2 s; AUTO priced the next changes by the first and refreshed them in full for
# as long as it stayed among the newest (PAST_REFRESHES).
_WARM: dict[tuple[str, str], set[str]] = {}
# About how many times what the same refresh takes warm a cold one takes: measured 1.6-3.1 (bench.joins
# at 1M bids, above; Nexmark's q7 view at 1M bids, a two-hour append, 2026-12-01: 4.9-5.2 s cold,
# 2.6-3.2 s warm).
COLD_OVER_WARM = 2.0


@dataclass(frozen=True)
class Past:
    """One earlier refresh of the view: its technique, the work it did (bytes; None when it was
    not weighed), its duration, its reason (None in states kept before reasons were), whether
    its change took rows away (`retracts`: updates or deletes; None where not known) and, for a
    full refresh AUTO switched to once it had read the change (FULL_CHEAPER), the seconds it had
    spent by then (`switched_s`), whether it did because an incremental refresh not yet
    measured planned nearly a full refresh's work (`near_full`: Estimate.unmeasured_near_full),
    and whether it ran cold (`cold`: the view's first incremental refresh in its driver process;
    a full one's first is the view's first refresh, FIRST_REFRESH, which has rules of its own)."""
    technique: str
    work_bytes: int | None
    duration_s: float
    reason: str | None = None
    retracts: bool | None = None
    switched_s: float = 0.0
    near_full: bool = False
    cold: bool = False

    @property
    def own_s(self) -> float:
        """The seconds its technique took: a full refresh AUTO switched to, without the change's reading."""
        return max(0.0, self.duration_s - self.switched_s)


@dataclass(frozen=True)
class Sizes:
    """What the log and the checksums say before anything is read: the sources' bytes, their change
    feeds' bytes since the view's state, the view's bytes; None where unknown."""
    source: int | None
    change: int | None
    view: int | None
    # A view over several sources: what its change's terms read besides the change, at least (`joined`).
    joined: int = 0
    # What the log did not tell: `table` (its bytes) or `table's change` (its change feed's bytes).
    unknown: tuple[str, ...] = ()

    @staticmethod
    def of(tables: dict[str, Table], view: str, reads: list[Read], by_terms: bool = True,
           bounded: bool = False) -> Sizes:
        """The sizes of `view` over its sources' `reads`; `joined` only for a refresh `by_terms`
        (mv/row_refresh.py): one window by window (window_refresh, or row_refresh.window_terms)
        reads the other sources' touched windows alone, not known before reading. `bounded`: its
        terms are all its work (a view of rows), so those of a change joined on columns it bounds
        may read little of the other sources (`joined`)."""
        def total(values: list[int | None]) -> int | None:
            return None if None in values else sum(values)
        sources = list(dict.fromkeys(r.table for r in reads))
        unknown = tuple([s for s in [*sources, view] if tables[s].bytes is None] +
                        [f"{s}'s change" for s in sources if tables[s].change_bytes is None])
        return Sizes(total([tables[s].bytes for s in sources]), total([tables[s].change_bytes for s in sources]),
                     tables[view].bytes, joined(tables, view, reads, bounded) if by_terms else 0, unknown)

    @property
    def full(self) -> int | None:
        """A full refresh's work: every source file read, every view file matched (twice: read, rewritten)."""
        return None if self.source is None or self.view is None else self.source + 2 * self.view

    @property
    def small_change(self) -> bool:
        return None not in (self.change, self.source) and self.change < SMALL_CHANGE * self.source


def joined(tables: dict[str, Table], view: str, reads: list[Read], bounded: bool = False) -> int:
    """What a change of a view that reads several sources (or one twice: a self-join) reads besides
    itself, at least, known from the log before it is read (mv/row_refresh.py's terms): each changed
    read's terms read every other read in full, once per sign its change has (inserted rows; taken
    away: `change_retracts`), twice more where it flips an outer join's rows; a read under an
    aggregate, twice (at both versions), and the view, as does a change that takes rows away: they
    merge into it. 0 for one read, or when a size is unknown. With `bounded` (a view of rows,
    whose terms are all its work: a GROUP BY or OVER recomputes its touched keys from whole
    sources after them), a change joined on columns it is bounded by (Read.equated) may skip most
    of the other reads (new auctions join the newest bids' files alone): those of MIN_WORK or
    more count nothing before it is read (smaller ones have few files to skip, and their
    refreshes' times are fixed costs, which bytes do not tell), and its flips read the matched
    source itself, at both versions.

    Example: a 1 MB dimension updated under a 90 MB fact, joined on a column computed from the
    fact's: 2 x 90 MB (its two signs' terms) + 2 x the view.
    """
    if len(reads) < 2 or any(tables[r.table].bytes is None for r in reads) or tables[view].bytes is None:
        return 0
    work, retracts = 0, False
    for i, read in enumerate(reads):
        changed = tables[read.table]
        if not changed.change_bytes:
            continue
        others = [tables[r.table].bytes for j, r in enumerate(reads) if j != i]
        signs = 2 if read.regroups or changed.change_retracts else 1
        if bounded and read.equated and not read.regroups:  # only small tables, with few files to skip
            others = [b for b in others if b < MIN_WORK]
            work += 2 * changed.bytes if read.flips else 0
        work += sum(others) * (signs + (2 if read.flips else 0))
        retracts = retracts or read.regroups or bool(changed.change_retracts)
    return work + (2 * tables[view].bytes if retracts else 0)


@dataclass(frozen=True)
class Estimate:
    """The rest of the refresh, incrementally and in full: bytes, and seconds when past refreshes tell."""
    incremental_bytes: int
    full_bytes: int
    incremental_s: float | None = None
    full_s: float | None = None
    small_change: bool = False  # under SMALL_CHANGE of the sources' bytes: AUTO refreshes incrementally unweighed
    at_least: bool = False  # the incremental side is its change alone, before the change was read
    tries_full: bool = False  # full is known only from the first refresh, and within reach: AUTO measures it
    by_kind: bool | None = None  # the incremental side: the fastest of the view's refreshes of a kind (dearer_by_kind)
    from_appends: float = 0.0  # by_kind's incremental side: this many times the appends' fastest (0: not from them)
    unmeasured: bool = False  # no incremental refresh among the view's newest: its side is its bytes alone
    planned_near_full: bool = False  # no incremental measured, and a change of its kind planned near full before
    unrated_unmeasured: bool = False  # no rate: the bytes alone decide; and no incremental refresh measured
    unknown: tuple[str, ...] = ()  # sizes the log did not tell, so the change was not weighed before reading

    @property
    def near_full(self) -> bool:
        """Whether a full refresh it chooses is recorded as one an incremental refresh not yet
        measured planned near (Past.near_full): by UNMEASURED_WITHIN, or with no rate, by its bytes
        over a full refresh's, or, for a change that takes rows away, of a kind never refreshed
        incrementally, priced above a full refresh once read (its appends' bound and its planned
        work: `from_appends`, not before reading, `at_least`). bench.joins' closed_per_minute, a
        window over a join under EMIT ON WINDOW CLOSE, at 1M bids: every change round read its
        change and terms to switch, 3.3-3.5 s against 1.8-1.9 s for its full twin."""
        return self.unmeasured_near_full or (self.unrated_unmeasured and self.cheaper == "full") \
            or (bool(self.from_appends) and not self.at_least and self.cheaper == "full")

    @property
    def unmeasured_near_full(self) -> bool:
        """An incremental refresh not yet measured whose bytes are within UNMEASURED_WITHIN of a full one's."""
        return self.unmeasured and self.incremental_bytes >= UNMEASURED_WITHIN * self.full_bytes

    @property
    def cheaper(self) -> str:
        if self.unmeasured_near_full or self.planned_near_full:
            return "full"
        if self.incremental_s is not None and self.full_s is not None:
            return "full" if self.full_s < self.incremental_s else "incremental"
        return "full" if self.full_bytes < self.incremental_bytes else "incremental"

    @property
    def switches(self) -> bool:
        """Whether REFRESH POLICY AUTO refreshes in full for it (reason FULL_CHEAPER)."""
        return (self.cheaper == "full" or self.tries_full) and not self.small_change

    def describe(self) -> str:
        """One line for EXPLAIN: `incremental 12.0 MB (about 0.8 s), full 310.4 MB (about 9.6 s): ...`."""
        def side(name: str, work: int, seconds: float | None) -> str:
            return f"{name} {work / MB:.1f} MB" + (f" (about {seconds:.1f} s)" if seconds is not None else "")
        incremental = side("incremental" + (" at least" if self.at_least else ""), self.incremental_bytes,
                           self.incremental_s)
        line = f"{incremental}, {side('full', self.full_bytes, self.full_s)}: {self.cheaper} is cheaper"
        if self.unmeasured_near_full:
            line += (f"; the incremental refresh, not yet measured, plans at least {UNMEASURED_WITHIN:.0%} of a "
                     f"full refresh's work before its change and merge")
        if self.planned_near_full:
            line += ("; the incremental refresh, not yet measured, was priced above a full refresh for a change "
                     f"of this kind before (its planned work at least {UNMEASURED_WITHIN:.0%} of a full one's, "
                     "or its appends' bound once that change was read)")
        if self.tries_full and self.cheaper == "incremental":
            line += "; full is tried once: its only measure is the view's first refresh, which also created it"
        if self.from_appends:
            line += (f"; changes that take rows away, not yet refreshed incrementally, cost at least "
                     f"{self.from_appends:g} times the view's appends: {self.incremental_s:.1f} s")
        elif self.by_kind is not None:
            kind = "changes that take rows away" if self.by_kind else "appends"
            line += f"; the view's incremental refreshes of {kind} took at least {self.incremental_s:.1f} s"
        if self.unknown:
            line += f"; not weighed before reading its change: unknown size of {', '.join(self.unknown)}"
        return line + (f"; a change under {SMALL_CHANGE:.0%} of its sources' bytes refreshes incrementally"
                       if self.small_change else "")


def hindsight(technique: str, reason: str, duration_s: float, incremental_s: float | None,
              full_s: float | None) -> str:
    """EXPLAIN's `last_refresh` row: how the view's last refresh ran, and how far AUTO's estimate of
    it was off (the history's estimated_incremental_s and estimated_full_s, seconds from its start:
    `Outcome.weighed`) on the side it ran.

    Example:
        >>> hindsight("incremental", "CHANGES_ONLY", 3.1, 2.5, 4.0)
        'incremental (CHANGES_ONLY) in 3.1 s; estimated incremental 2.5 s (took 1.24x that), full 4.0 s'
    """
    ran = f"{technique} ({reason}) in {duration_s:.1f} s"
    if incremental_s is None or full_s is None:
        return f"{ran}; not estimated in seconds"
    def side(name: str, seconds: float) -> str:
        took = f" (took {duration_s / seconds:.2f}x that)" if name == technique and seconds > 0 else ""
        return f"{name} {seconds:.1f} s{took}"
    return f"{ran}; estimated {side('incremental', incremental_s)}, {side('full', full_s)}"


@dataclass(frozen=True)
class Stopped:
    """An incremental refresh stopped at its estimate, before writing the view: the answer EXPLAIN
    asked for (`Run.dry`; None when the change has nothing to weigh), or, under REFRESH POLICY
    AUTO, a full refresh that costs less (FULL_CHEAPER), which the refresh then runs instead. A
    strategy returns it in place of its `writes.Recomputed` (mv/strategies.py).

    Example:
        >>> Stopped(found).estimate.describe()
        'incremental 120.0 MB (about 4.1 s), full 310.4 MB (about 3.6 s): full is cheaper'
    """
    estimate: Estimate | None


def stops(dry: bool, found: Estimate | None) -> Stopped | None:
    """Where a strategy's estimate `found` stops its refresh: always when it was asked only for the
    estimate (`dry`, EXPLAIN), else when a full refresh costs less; None to go on."""
    return Stopped(found) if dry or (found is not None and found.switches) else None


def weigh(incremental_bytes: int, full_bytes: int, past: list[Past], min_work: int = MIN_WORK,
          spent: float = 0.0, retracts: bool | None = None, source_bytes: int | None = None,
          over_appends: float = RETRACTS_OVER_APPENDS) -> Estimate:
    """Both ways of doing the rest of a refresh, in bytes and, by `past` (rates from refreshes of at
    least `min_work` bytes; the incremental fixed part from all of its own, less the `spent` seconds
    this refresh already took), in seconds. A change that takes rows away or not (`retracts`) is
    priced by the incremental refreshes of its kind when there are some (`alike`); one that takes
    rows away is never priced by appends, which cost a fraction of it (`dearer_by_kind` bounds it by
    them before reading): with none of its kind, it is not yet measured (Nexmark's q0 at 1M bids,
    its appends 0.2-0.4 s, its first change priced from them at 1.1 s, took 3.5 s), but its fixed
    part is at least `over_appends` times their fastest, as `dearer_by_kind` bounds it (`floor`),
    not its bytes alone, which priced it under that bound (a bound under a full refresh's time
    still explores it once: Nexmark's q14 and q21 at 1M bids, 2.1-2.5 times the cheaper way). The first
    refresh's rate is a full refresh's only while no other full refresh tells it, and with the
    sources' bytes known (`source_bytes`) it prices one by them alone (`_first_only`); then
    `tries_full` says whether it is within reach. With a rate but no incremental refresh at all, that side has
    no fixed part: bytes within UNMEASURED_WITHIN of a full refresh's make full the cheaper
    (`unmeasured`). With no rate, the bytes alone decide (the refreshes' times are fixed costs);
    when they say full and no incremental refresh is measured, the refresh that goes full is
    recorded as one that planned near a full refresh's work (`near_full`), so the next change of
    its kind goes full unread (Nexmark's q8 at 1M bids, 4 MB of work: it read every change of
    updates and deletes to switch, 2.0-2.9 s against 0.5-0.7 s for a full refresh).

    Example: first refresh 4.8 s, an incremental one 3.2 s, 1 s of this one spent:
        >>> weigh(MB, 14 * MB, [Past("full", 14 * MB, 4.8, FIRST_REFRESH), Past("incremental", MB, 3.2)], spent=1.0)
        Estimate(incremental_bytes=1048576, full_bytes=14680064, incremental_s=2.5, full_s=4.8, ..., tries_full=True)
    """
    incremental = pricing(past, retracts)
    measured = _measured_full(past)
    floor = _appends_bound(past, over_appends) if retracts and not incremental else 0.0
    fixed = min((p.duration_s for p in incremental), default=floor)
    rates = {"incremental": _rate(incremental, min_work, fixed), "full": _full_rate(past, min_work)}
    inc_rate = rates["incremental"] if rates["incremental"] is not None else rates["full"]
    full_rate = rates["full"] if rates["full"] is not None else rates["incremental"]
    if inc_rate is None:  # bytes alone
        return Estimate(incremental_bytes, full_bytes, unrated_unmeasured=not incremental)
    incremental_s = round(max(0.0, fixed - spent) + incremental_bytes * inc_rate, 1)
    first = _first_only(past, source_bytes, min_work)
    full_s = round(first if first is not None else full_bytes * full_rate, 1)
    tries = (not measured and rates["full"] is not None and bool(incremental)
             and full_s < TRY_FULL_WITHIN * incremental_s)
    return Estimate(incremental_bytes, full_bytes, incremental_s, full_s, tries_full=tries, unmeasured=not incremental,
                    from_appends=over_appends if floor else 0.0)


def alike(past: list[Past], retracts: bool | None) -> list[Past]:
    """The incremental refreshes of `past` whose change was of the kind `retracts` says (none when
    it is not known): a change that takes rows away costs more than an append of its size (it
    reads the view, nets, merges; Nexmark's q2 at 1M bids: 0.9 s an append, 3.9 s a change)."""
    return [p for p in past if p.technique == "incremental" and retracts is not None and p.retracts == retracts]


def pricing(past: list[Past], retracts: bool | None) -> list[Past]:
    """The incremental refreshes of `past` that price a change of the kind `retracts` says: those of
    its kind (`alike`); with none, every incremental refresh, but never for a change that takes rows
    away, which its appends price at a fraction of its cost (`dearer_by_kind` bounds it by them
    before it is read): it is not yet measured.

    Example:
        >>> appends = [Past("incremental", MB, 0.3, retracts=False)]
        >>> pricing(appends, True), pricing(appends, None) == appends
        ([], True)
    """
    return alike(past, retracts) or ([] if retracts else [p for p in past if p.technique == "incremental"])


def planned_near_full(past: list[Past], retracts: bool | None) -> bool:
    """Whether none of `past` is an incremental refresh that prices a change of the kind `retracts`
    says (`pricing`: for one that takes rows away, one that did) and one went full because an
    incremental one, not yet measured, planned nearly a full refresh's work (`Past.near_full`) for
    a change of that kind, or for an append (a change that takes rows away does what it does):
    such a change goes full without being read until that
    refresh leaves the newest (PAST_REFRESHES), when a change is weighed again. Nexmark's q6 at 1M
    bids: its change round read the change to switch, 1.02 s against 0.67 s for a full refresh;
    q1, with an append measured, read each of three, 1.3-1.4 s against 0.95-1.1 s.

    Example:
        >>> planned_near_full([Past("full", 9 * MB, 1.1, FULL_CHEAPER, False, 0.4, True)], True)
        True
    """
    if pricing(past, retracts):
        return False
    return any(p.near_full and (bool(retracts) or not p.retracts) for p in past)


def dearer_by_kind(past: list[Past], retracts: bool | None, change_bytes: int, full_bytes: int,
                   min_work: int = MIN_WORK, spent: float = 0.0, over_appends: float = RETRACTS_OVER_APPENDS,
                   source_bytes: int | None = None) -> Estimate | None:
    """A full refresh (the estimate of both), whatever the change's size, when every incremental
    refresh of the change's kind among the view's newest (`alike`) took longer than a full refresh
    of today's sources would (`_full_seconds`), after the `spent` seconds this refresh already
    took (reading the change, under a watermark): whatever its size, such a change costs at
    least that. A change that takes rows away, of a kind not yet measured, costs at least
    `over_appends` times what the view's appends did (it does all they do, and reads the view to
    net and merge; `retracts_over_appends`): it is tried incrementally once a full refresh costs
    more. While the full side is known only from the view's first refresh (which overstates it), a
    full refresh is tried once when it is within TRY_FULL_WITHIN times the kind's own, or that
    bound (`tries_full`, as `weigh` does): a bound is the least such a change costs, and at 1M bids
    Nexmark's views took 3-20 times their appends' history time for it, so the full refresh is the
    side worth measuring first (q0, q1: read to switch, 1.9-2.4 times the cheaper way; q2, q16:
    explored incrementally, 1.7-6.6 times). A view whose incremental refresh, not yet measured, planned
    nearly a full refresh's work for such a change goes full too (`planned_near_full`). None when
    none is so, or not known. An incremental refresh
    of the kind is tried again once all such refreshes have left the newest (PAST_REFRESHES), and
    sooner as the sources grow, since the full refresh's estimate grows with them.

    Example: Nexmark's q2 at 1M bids, updated and deleted bids: incremental refreshes of that kind
    took 3.9 s, a full refresh 0.8 s: the next such change is refreshed in full, not read.
        >>> dearer_by_kind([Past("full", 30 * MB, 0.8), Past("incremental", MB, 3.9, retracts=True)],
        ...                True, MB, 30 * MB).cheaper
        'full'
    """
    if planned_near_full(past, retracts):
        full_s = _full_seconds(past, full_bytes, min_work, source_bytes)
        return Estimate(change_bytes, full_bytes, full_s=None if full_s is None else round(full_s + spent, 1),
                        at_least=True, planned_near_full=True)
    same, kind = alike(past, retracts), retracts
    if not same and retracts:
        same, kind = alike(past, False), False
    full_s = _full_seconds(past, full_bytes, min_work, source_bytes)
    if not same or full_s is None:
        return None
    from_appends = over_appends if kind != retracts else 0.0
    fastest = _appends_bound(past, from_appends) if from_appends else min(p.duration_s for p in same)
    full_s = round(full_s + spent, 1)
    tries = not _measured_full(past) and fastest <= full_s < TRY_FULL_WITHIN * fastest
    if fastest <= full_s and not tries:
        return None
    return Estimate(change_bytes, full_bytes, round(fastest, 1), full_s, at_least=True, tries_full=tries,
                    by_kind=kind, from_appends=from_appends)


def _appends_bound(past: list[Past], over_appends: float) -> float:
    """The least a change that takes rows away, of a kind none of `past`'s incremental refreshes
    was, costs: `over_appends` times the fastest of the view's incremental appends (0 without one).
    `dearer_by_kind` weighs it against a full refresh before the change is read; `weigh` prices
    that side no lower.

    Example: appends of 0.3 s and 0.5 s, a view of rows (4 times): 1.2 s.
    """
    return over_appends * min((p.duration_s for p in alike(past, False)), default=0.0)


def _full_seconds(past: list[Past], full_bytes: int, min_work: int, source_bytes: int | None = None) -> float | None:
    """What a full refresh of `full_bytes` of work would take: by the first refresh and the sources'
    bytes (`source_bytes`) while it is the only full one (`_first_only`); at the full refreshes' rate (`_full_rate`);
    for work under `min_work`, where no rate is measured, the median time of the full refreshes
    AUTO chose (FULL_CHEAPER: mostly fixed costs, as theirs; Nexmark's q8 at 1M bids reads 4 MB;
    the others also created the view, or repaired it). None when neither is known."""
    first = _first_only(past, source_bytes, min_work)
    if first is not None:
        return first
    rate = _full_rate(past, min_work)
    if rate is not None:
        return full_bytes * rate
    measured = [p.own_s for p in past if p.technique == "full" and p.reason == FULL_CHEAPER]
    return statistics.median(measured) if measured and full_bytes < min_work else None


def _full_rate(past: list[Past], min_work: int) -> float | None:
    """A full refresh's seconds per byte (`_rate`): the first refresh's only while no other full
    refresh is among `past` (it also created the view's tables)."""
    return _rate(_measured_full(past) or [p for p in past if p.technique == "full"], min_work, 0.0)


def _first_only(past: list[Past], source_bytes: int | None, min_work: int) -> float | None:
    """A full refresh's seconds while the view's first refresh (FIRST_REFRESH) is the only full one
    among `past`: its time, scaled by the sources' bytes now (`source_bytes`) against its work. It
    wrote the view from nothing, so its work was the sources' bytes; a later full refresh's also
    counts the view's files twice (Sizes.full), which its rate would price as dearly as the
    sources: Nexmark's q0 at 1M bids, a view of as many bytes as its source, was estimated at
    3.1 s in full, and took 0.7 s. None when another full refresh is measured, the first did
    under `min_work` (its time is fixed costs), or the sources' bytes are not known.

    Example: a first refresh of 12 MB of sources in 0.9 s, the sources now 13 MB: 0.975 s.
    """
    first = [p for p in past if p.technique == "full" and p.reason == FIRST_REFRESH and p.work_bytes]
    if _measured_full(past) or not first or not source_bytes or first[-1].work_bytes < min_work:
        return None
    return first[-1].own_s * source_bytes / first[-1].work_bytes


def _measured_full(past: list[Past]) -> list[Past]:
    """The full refreshes of `past` but the first, which also created the view's tables."""
    return [p for p in past if p.technique == "full" and p.reason != FIRST_REFRESH]


def _rate(past: list[Past], min_work: int, fixed: float) -> float | None:
    """Seconds per byte beyond `fixed`: the median over refreshes that did at least `min_work`."""
    rates = [max(0.0, p.own_s - fixed) / p.work_bytes for p in past if p.work_bytes and p.work_bytes >= min_work]
    return statistics.median(rates) if rates else None


def before_reading(spark: SparkSession, view: str, sizes: Sizes, previous: RefreshState | None,
                   previous_end: float | None, retracts: bool | None = None,
                   over_appends: float = RETRACTS_OVER_APPENDS) -> Estimate | None:
    """The estimate from the change's size alone, before it is read: an incremental refresh reads at
    least the change (and over several sources what its terms must join it with: `joined`), a full
    one every source file and every view file; or, whatever the change's size, a full refresh when
    the view's incremental refreshes of the change's kind (`retracts`) all took longer than a full
    one would (`dearer_by_kind`, from the newest refreshes its state keeps). None when a size is
    unknown, or neither tells and the change is under WEIGH_CHANGE of the full refresh's work."""
    if sizes.change is None or sizes.full is None:
        return None
    known = by_kind(spark, view, sizes, previous, previous_end, retracts, over_appends=over_appends)
    if known is not None:
        return known
    if sizes.change + sizes.joined < WEIGH_CHANGE * sizes.full:
        return None
    return replace(weigh(sizes.change + sizes.joined, sizes.full, measured(spark, view, previous, previous_end),
                         _min_work(spark), retracts=retracts, source_bytes=sizes.source, over_appends=over_appends),
                   at_least=True)


def by_kind(spark: SparkSession, view: str, sizes: Sizes, previous: RefreshState | None,
            previous_end: float | None, retracts: bool | None, spent: float = 0.0,
            over_appends: float = RETRACTS_OVER_APPENDS) -> Estimate | None:
    """`dearer_by_kind` for a change of the kind `retracts` says to `view` (`sizes`, from the log),
    from the newest refreshes the `previous` refresh's state keeps, `spent` seconds into this one,
    a retracting change not yet measured priced at `over_appends` times the appends; None when it
    keeps none, or the full refresh's work is not known. It reads no file: any shape, any time in
    a refresh."""
    if sizes.full is None or previous is None or not previous.recent or previous_end is None:
        return None
    return dearer_by_kind(measured(spark, view, previous, previous_end), retracts, (sizes.change or 0) + sizes.joined,
                          sizes.full, _min_work(spark), spent, over_appends, source_bytes=sizes.source)


def retracts_over_appends(info: QueryInfo) -> float:
    """How many times its fastest append a change that takes rows away costs a view of the query
    `info`, at least, until one is measured: ROWS_RETRACTS_OVER_APPENDS for a view of rows kept by
    its delta rules, not window by window (its appends read nothing but the change), else
    RETRACTS_OVER_APPENDS."""
    rows = info.shape == "rows" and not info.window_local
    return ROWS_RETRACTS_OVER_APPENDS if rows else RETRACTS_OVER_APPENDS


def planned(spark: SparkSession, view: str, query: str, incremental: tuple[str | None, str], sizes: Sizes,
            spent: float, previous: RefreshState | None, previous_end: float | None,
            retracts: bool | None = None, over_appends: float = RETRACTS_OVER_APPENDS) -> Estimate:
    """The estimate of a refresh of `view` (its `query` over its sources) whose rest reads the source
    query and the view query of `incremental` (no source query: combined from the view's rows),
    planned in one query (mv_scan_bytes), against a full refresh (`sizes`; planned too when a
    size is unknown); the view's newest refreshes (of the change's kind, `retracts`, when known)
    turn bytes into seconds, less the `spent` seconds the refresh took so far (its change read); a
    change that takes rows away, of a kind not yet measured, costs at least `over_appends` times
    the view's fastest append (`weigh`)."""
    source, view_part = _planned_bytes(spark, list(incremental))
    full = sizes.full if sizes.full is not None else full_work(spark, query, view)
    found = weigh(source + 2 * view_part, full, measured(spark, view, previous, previous_end), _min_work(spark), spent,
                  retracts, sizes.source if sizes.full is not None else None, over_appends)
    return replace(found, small_change=sizes.small_change, unknown=sizes.unknown)


def full_work(spark: SparkSession, query: str, view: str) -> int:
    """The work of a full refresh of `view` (`query` over every source file, every view file matched)."""
    source, view_bytes = _planned_bytes(spark, [query, f"SELECT * FROM {view}"])
    return source + 2 * view_bytes


def _planned_bytes(spark: SparkSession, queries: list[str | None]) -> list[int]:
    """The bytes each query would read (0 for None), in one query of the extension's mv_scan_bytes."""
    texts = [q for q in queries if q is not None]
    read = dict(spark.sql(f"SELECT query, bytes FROM mv_scan_bytes({', '.join(map(sql_string, texts))})").collect())
    positions = iter(range(len(texts)))
    return [read[next(positions)] if q is not None else 0 for q in queries]


def _min_work(spark: SparkSession) -> int:
    value = spark.conf.get(MIN_WORK_SETTING, None)
    if value is None:
        return MIN_WORK
    if not value.strip().isdigit():
        raise errors.invalid_setting(MIN_WORK_SETTING, value, "a whole number of bytes")
    return int(value)


def runs_warm(spark: SparkSession, view: str, technique: str) -> bool:
    """Whether this driver process has refreshed `view` by `technique` before (`warmed`)."""
    return technique in _WARM.get(_warm_key(spark, view), ())


def warmed(spark: SparkSession, view: str, technique: str | None) -> None:
    """Records that `view` refreshed by `technique` in this driver process; a view's first refresh
    (`technique` None: CREATE, or its state lost) forgets what a view of that name did before."""
    if technique is None:
        _WARM.pop(_warm_key(spark, view), None)
    else:
        _WARM.setdefault(_warm_key(spark, view), set()).add(technique)


def _warm_key(spark: SparkSession, view: str) -> tuple[str, str]:
    """`_WARM`'s key: the Spark application this process drives, and the view."""
    return spark.conf.get("spark.app.id", ""), view


def measured(spark: SparkSession, view: str, previous: RefreshState | None, previous_end: float | None) -> list[Past]:
    """The view's newest refreshes (`past`) as estimates price this one: a refresh that ran cold
    (Past.cold) is left out when this process would run its technique warm (`runs_warm`) and a
    warm one of its technique is among them: its time is mostly code generation and class
    loading, which the next one does not repeat. While it is its technique's only measure, it
    counts at its time over COLD_OVER_WARM, so that a view's first change that takes rows away
    is priced from its cold appends (`dearer_by_kind`) instead of read to be weighed, or run
    incrementally unweighed. A process that refreshes once (a scheduled `mv refresh`) runs every
    refresh cold, and keeps them as they are.

    Example: the view's first incremental refresh took 6.2 s in this process, cold: the next is
    priced as if it took 3.1 s; once a warm one is measured, without it.
    """
    found = past(spark, view, previous, previous_end)
    return as_warm(found, {p.technique for p in found if runs_warm(spark, view, p.technique)})


def as_warm(found: list[Past], warm: set[str]) -> list[Past]:
    """`found` as refreshes by the techniques this process runs `warm` would take (`measured`).

    Example: a cold incremental refresh of 6.2 s, the only one: as one of 3.1 s; beside a warm one, left out.
        >>> as_warm([Past("incremental", MB, 6.2, cold=True)], {"incremental"})[0].duration_s
        3.1
    """
    measured_warm = {p.technique for p in found if not p.cold}
    return [replace(p, duration_s=p.duration_s / COLD_OVER_WARM) if p.cold and p.technique in warm else p
            for p in found if not (p.cold and p.technique in warm and p.technique in measured_warm)]


def past(spark: SparkSession, view: str, previous: RefreshState | None, previous_end: float | None) -> list[Past]:
    """The view's newest refreshes, oldest first: as the `previous` refresh's state keeps them, the
    last (that refresh, whose entry was written before its commit) timed up to `previous_end`
    (epoch seconds), when it committed, as the history times it; or read from the view's history
    (a state written before states kept them, or that refresh's end unknown)."""
    started = previous.metrics.get("started_at") if previous else None
    if previous is not None and previous.recent and previous_end is not None and started is not None:
        *before, last = previous.recent
        ended = [*last[:2], max(0, round(previous_end * 1000) - round(started * 1000)) / 1000, *last[3:]]
        return [Past(*entry) for entry in [*before, ended]]
    rows = history.of_view(spark, view, newest=PAST_REFRESHES).select(
        "technique", "work_bytes", "duration_s", "reason").collect()
    return [Past(*row) for row in rows]


def recent(past_refreshes: list[Past], technique: str, work_bytes: int | None, duration_s: float,
           reason: str | None, retracts: bool | None = None, switched_s: float = 0.0,
           near_full: bool = False, cold: bool = False) -> list[list]:
    """The newest refreshes a new state keeps (RefreshState.recent): `past_refreshes` (`past`), then
    this one, timed up to now: the next refresh times it up to its commit; whether its change took
    rows away (`retracts`), when it switched to a full refresh (`switched_s`), whether because
    an incremental one not yet measured planned near a full one's work (`near_full`), and whether
    it ran cold (`cold`: `measured`) last.

    Example: past [Past("full", 9000, 2.4, "FIRST_REFRESH")], this refresh incremental, 300 bytes, 0.4 s so far:
        [["full", 9000, 2.4, "FIRST_REFRESH", None, 0.0, False, False],
         ["incremental", 300, 0.4, "CHANGES_ONLY", False, 0.0, False, False]]
    """
    this = Past(technique, work_bytes, duration_s, reason, retracts, switched_s, near_full, cold)
    return [list(astuple(p)) for p in [*past_refreshes, this]][-PAST_REFRESHES:]  # Past's fields, in order
