"""Property tests: random inserts, updates, deletes and refreshes keep every view right.

Given a small Delta table of bids (id, k, price, ts) and a few materialized views over it, when a
random sequence of inserts, updates (of the price, the event time, both, or the key), deletes and refreshes
runs, then after every refresh:

- a view without a watermark (EMIT ON UPDATE) holds exactly what its query gives when run in full:
  TUMBLE, HOP and CUMULATE grouped by window and key, a plain GROUP BY key, and SESSION (both
  kept incrementally, and, with its key not in the view, refreshed in full);
- a view with a WATERMARK (EMIT ON WINDOW CLOSE, with or without GRACE, and EMIT ON UPDATE) holds
  what an independent oracle derives from docs/design.md rules 10-13: the changes that were not late,
  over the windows it shows; the late ones are in <view>__late, counted by the refresh. SESSION
  views have an oracle of their own (``SessionOracle``, the rule of mv/session_lateness.py), and
  a REFRESH ... FULL right after a refresh must leave every watermarked view as it was; one
  SESSION view under EMIT ON WINDOW CLOSE is also drawn alone, with more deletes and updates, so
  that its retractions reach the open sessions it keeps.

The oracle (``Oracle`` below) replays the source's change feed: every insert and update post-image
is +1, every delete and update pre-image -1. At a refresh, watermark_before is what the previous
refresh left; a change is late for a window when watermark_before >= window_end + grace; the
watermark then becomes max(event time of every +1 change so far) - delay, never lower.

Each example creates a fresh source and a view drawn from a catalogue (CREATE costs about two
refreshes), so the default budget is two examples per machine: about two minutes on a busy
two-core machine. A bug hunt runs MV_PROPERTY_EXAMPLES=15 (two views per example then) and
MV_PROPERTY_SHRINK=1 to minimise what it finds.
"""
from __future__ import annotations

import datetime as dt
import itertools
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import mv
import window_reference as ref
from mv import window_refresh

MINUTE = 60_000_000
BASE = ref.to_micros(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))  # minute 0 of every example

EXAMPLES = int(os.environ.get("MV_PROPERTY_EXAMPLES", "2"))
VIEWS = 2 if EXAMPLES > 2 else 1  # views per example; each CREATE costs about as much as two refreshes
BUDGET = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    # Shrinking replays whole examples (a minute each here): only when hunting, not on every run.
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    + ([Phase.shrink] if os.environ.get("MV_PROPERTY_SHRINK") else []),
)

_names = itertools.count()


# --- the views under test -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """A view kind: its clauses and query (``{src}`` is the source), how it is refreshed, and for a
    watermarked view the oracle's parameters (window assignment, delay, grace, emit mode)."""
    clauses: str
    query: str
    technique: str = "incremental"  # how every refresh after CREATE's must go
    windows: Callable[[int], list[ref.Window]] | None = None
    delay: int = 0
    grace: int = 0
    on_close: bool = False
    gap: int = 0  # a SESSION view's gap: its oracle is SessionOracle

    @property
    def watermarked(self) -> bool:
        return self.windows is not None or self.gap > 0


AGGREGATES = "k, count(*) AS n, sum(price) AS total"
BY_WINDOW = "GROUP BY window_start, window_end, k"

RECOMPUTED = {
    "tumble": Spec("", f"SELECT window_start, window_end, {AGGREGATES} "
                       f"FROM TUMBLE(TABLE({{src}}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) {BY_WINDOW}"),
    "hop": Spec("", f"SELECT window_start, window_end, {AGGREGATES}, max(price) AS top "
                    f"FROM HOP(TABLE({{src}}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '15' MINUTES) "
                    f"{BY_WINDOW}"),
    "cumulate": Spec("", f"SELECT window_start, window_end, {AGGREGATES} "
                         f"FROM CUMULATE(TABLE({{src}}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, "
                         f"INTERVAL '20' MINUTES) WHERE price > 1 {BY_WINDOW}"),
    "group_by": Spec("", f"SELECT {AGGREGATES}, min(ts) AS first_ts FROM {{src}} GROUP BY k"),
    "session": Spec("", f"SELECT window_start, window_end, {AGGREGATES} "
                        f"FROM SESSION(TABLE({{src}}) PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES) "
                        f"{BY_WINDOW}"),
    # Sessions per k, but k not in the view: not kept incrementally, refreshed in full.
    "session_full": Spec("", "SELECT window_start, window_end, count(*) AS n, sum(price) AS total "
                             "FROM SESSION(TABLE({src}) PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES) "
                             "GROUP BY window_start, window_end", technique="full"),
}

WATERMARKED = {
    "close": Spec("WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE",
                  f"SELECT window_start, window_end, {AGGREGATES} "
                  f"FROM TUMBLE(TABLE({{src}}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) {BY_WINDOW}",
                  windows=lambda t: ref.tumble(t, 10 * MINUTE), delay=5 * MINUTE, on_close=True),
    "close_grace": Spec("WATERMARK FOR ts AS ts - INTERVAL '2' MINUTES EMIT ON WINDOW CLOSE "
                        "GRACE INTERVAL '10' MINUTES",
                        f"SELECT window_start, window_end, {AGGREGATES} "
                        f"FROM HOP(TABLE({{src}}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES) "
                        f"{BY_WINDOW}",
                        windows=lambda t: ref.hop(t, 5 * MINUTE, 10 * MINUTE), delay=2 * MINUTE,
                        grace=10 * MINUTE, on_close=True),
    "update": Spec("WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES GRACE INTERVAL '5' MINUTES",
                   f"SELECT window_start, window_end, {AGGREGATES} "
                   f"FROM TUMBLE(TABLE({{src}}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) {BY_WINDOW}",
                   windows=lambda t: ref.tumble(t, 10 * MINUTE), delay=5 * MINUTE, grace=5 * MINUTE),
    "session_close": Spec("WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES EMIT ON WINDOW CLOSE",
                          f"SELECT window_start, window_end, {AGGREGATES} FROM SESSION(TABLE({{src}}) "
                          f"PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES) {BY_WINDOW}",
                          delay=5 * MINUTE, on_close=True, gap=5 * MINUTE),
    "session_update": Spec("WATERMARK FOR ts AS ts - INTERVAL '2' MINUTES GRACE INTERVAL '4' MINUTES",
                           f"SELECT window_start, window_end, {AGGREGATES} FROM SESSION(TABLE({{src}}) "
                           f"PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' MINUTES) {BY_WINDOW}",
                           delay=2 * MINUTE, grace=4 * MINUTE, gap=3 * MINUTE),
}


# --- the source's rows and their change feed -------------------------------------------------------

@dataclass(frozen=True)
class Bid:
    id: int
    k: str | None
    price: int
    t: int | None  # microseconds since the epoch; None is a NULL event time


Change = tuple[int, Bid]  # (+1 insert / post-image, -1 delete / pre-image)

keys = st.sampled_from(["a", "a", "b", None])
prices = st.integers(1, 9)


def time_literal(t: int | None, time_type: str) -> str:
    if t is None:
        return f"CAST(NULL AS {time_type})"
    return f"{time_type} '{ref.from_micros(t).isoformat(' ')}'"


def sql_value(value) -> str:
    return "NULL" if value is None else f"'{value}'" if isinstance(value, str) else str(value)


def as_micros(column: str) -> str:
    """A TIMESTAMP or TIMESTAMP_NTZ column as microseconds (the session zone is UTC)."""
    return f"unix_micros(CAST({column} AS TIMESTAMP))"


# --- the oracle for watermarked views -------------------------------------------------------------

class Clock:
    """The oracles' event time and watermark: max(event time of every +1 change so far) - delay,
    never lower than before."""
    spec: Spec
    seen: int
    max_event: int | None
    watermark: int | None

    def saw(self, sign: int, t: int) -> None:
        if sign > 0:
            self.max_event = t if self.max_event is None else max(self.max_event, t)

    def closed(self, end: int) -> bool:
        return self.watermark is not None and self.watermark >= end - 1

    def caught_up(self, log: list, before: int | None) -> None:
        self.seen = len(log)
        if self.max_event is not None:
            candidate = self.max_event - self.spec.delay
            self.watermark = candidate if before is None else max(before, candidate)


@dataclass
class Oracle(Clock):
    """What a watermarked view must hold, from the changes it has seen (docs/design.md rules 10-13)."""
    spec: Spec
    seen: int = 0  # how many entries of the change log earlier refreshes processed
    max_event: int | None = None
    watermark: int | None = None
    # (window_start, window_end, k, price) -> how many non-late rows, over all changes so far
    contents: Counter = field(default_factory=Counter)

    def refresh(self, log: list[Change]) -> Counter:
        """Process the changes since the last refresh; return the late (id, sign, window_start) ones."""
        before, late = self.watermark, Counter()
        for sign, bid in log[self.seen:]:
            if bid.t is None:
                continue  # rule 8: no window, no event time
            for start, end in self.spec.windows(bid.t):
                if before is not None and before >= end + self.spec.grace:
                    late[(bid.id, sign, start)] += 1
                else:
                    self.contents[(start, end, bid.k, bid.price)] += sign
            self.saw(sign, bid.t)
        self.caught_up(log, before)
        return late

    def rows(self) -> Counter:
        """(window_start, window_end, k, n, total) of every non-empty (and, on close, closed) group."""
        groups: dict[tuple, list[int]] = {}
        for (start, end, k, price), count in self.contents.items():
            assert count >= 0, "the oracle retracted a row it never added"
            n_total = groups.setdefault((start, end, k), [0, 0])
            n_total[0] += count
            n_total[1] += count * price
        return Counter((start, end, k, n, total) for (start, end, k), (n, total) in groups.items()
                       if n > 0 and (not self.spec.on_close or self.closed(end)))


@dataclass
class SessionOracle(Clock):
    """What a watermarked SESSION view must hold (mv/session_lateness.py): a change is late when
    the session of its row alone would be final (t + gap + grace <= watermark_before), or when it
    is no later than the end of a final session of its key; the sessions are those of the changes
    that were not late, computed afresh after every refresh."""
    spec: Spec
    seen: int = 0
    max_event: int | None = None
    watermark: int | None = None
    contents: Counter = field(default_factory=Counter)  # (k, t, price) -> how many non-late rows

    def sessions(self) -> list[tuple]:
        """(window_start, window_end, k, n, total) of every session of the rows not late."""
        rows = [row for row, count in self.contents.items() for _ in range(count)]
        assert all(count >= 0 for count in self.contents.values()), "the oracle retracted a row it never added"
        groups: dict[tuple, list[int]] = {}
        for (k, _, price), start, end, _ in ref.sessions(rows, self.spec.gap, time=lambda r: r[1],
                                                            key=lambda r: r[0]):
            n_total = groups.setdefault((start, end, k), [0, 0])
            n_total[0] += 1
            n_total[1] += price
        return [(start, end, k, n, total) for (start, end, k), (n, total) in groups.items()]

    def refresh(self, log: list[Change]) -> Counter:
        """Process the changes since the last refresh; return the late (id, sign, t) ones."""
        before, late, gap, grace = self.watermark, Counter(), self.spec.gap, self.spec.grace
        cuts: dict = {}  # key -> latest end of its final sessions
        for _, end, k, _, _ in self.sessions():
            if before is not None and end + grace <= before:
                cuts[k] = max(cuts.get(k, end), end)
        for sign, bid in log[self.seen:]:
            if bid.t is None:
                continue  # rule 8: no session, no event time
            if before is not None and (bid.t + gap + grace <= before or bid.t <= cuts.get(bid.k, bid.t - 1)):
                late[(bid.id, sign, bid.t)] += 1
            else:
                self.contents[(bid.k, bid.t, bid.price)] += sign
            self.saw(sign, bid.t)
        self.caught_up(log, before)
        return late

    def rows(self) -> Counter:
        return Counter(row for row in self.sessions() if not self.spec.on_close or self.closed(row[1]))


# --- one example: a source, a view or two, and a drawn list of operations ---------------------------

# Inserts and refreshes twice as likely as the rest; every example ends with a refresh of each view,
# so at most 8 steps with one view.
OPERATIONS = ["insert", "insert", "update", "delete", "refresh", "refresh"]


def netted(images: list[Change]) -> list[Change]:
    """One update's images without those that cancel: the images of equal key, time and price (every
    column a watermarked view reads) that count as many pre- as post-images change nothing the view
    shows and are no late rows either (change_feed.netted, docs/design.md)."""
    def read(bid: Bid) -> tuple:
        return bid.k, bid.t, bid.price
    sums = Counter()
    for sign, bid in images:
        sums[read(bid)] += sign
    return [(sign, bid) for sign, bid in images if sums[read(bid)] != 0]


class Example:
    """One source and its views, changed and refreshed as ``data`` draws; each refresh is checked."""

    def __init__(self, spark, data, catalogue: dict[str, Spec]):
        self.spark, self.data, self.catalogue = spark, data, catalogue
        n = next(_names)
        self.n, self.src = n, f"prop_src_{n}"
        self.views: dict[str, Spec] = {}
        self.oracles: dict[str, Oracle] = {}
        self.rows: dict[int, Bid] = {}
        self.log: list[Change] = []
        self.next_id = 1
        self.clock = 20  # minutes: new event times fall in [clock - 25, clock + 10], and move it on
        self.time_type = "TIMESTAMP"

    def draw(self, strategy, label: str):
        return self.data.draw(strategy, label=label)

    def event_time(self) -> int | None:
        if self.draw(st.integers(0, 11), "NULL time?") == 0:
            return None
        minute = self.draw(st.integers(self.clock - 25, self.clock + 10), "minute")
        self.clock = max(self.clock, minute)
        return BASE + minute * MINUTE + self.draw(st.sampled_from([0, 0, 0, -1, 1]), "microseconds off")

    def new_bids(self, most: int) -> list[Bid]:
        bids = []
        for _ in range(self.draw(st.integers(1, most), "rows")):
            bids.append(Bid(self.next_id, self.draw(keys, "k"), self.draw(prices, "price"), self.event_time()))
            self.next_id += 1
        return bids

    def some_ids(self) -> list[int]:
        return self.draw(st.lists(st.sampled_from(sorted(self.rows)), min_size=1, max_size=4, unique=True), "ids")

    # -- set-up and tear-down

    def create(self, views: int) -> None:
        kinds = self.draw(st.lists(st.sampled_from(sorted(self.catalogue)), min_size=1, max_size=views,
                                   unique=True), "views")
        self.time_type = self.draw(st.sampled_from(["TIMESTAMP", "TIMESTAMP_NTZ"]), "time type")
        self.spark.sql(f"CREATE TABLE {self.src} (id BIGINT, k STRING, price INT, ts {self.time_type}) USING delta")
        if self.draw(st.booleans(), "rows before CREATE?"):
            self.insert()
        for kind in kinds:
            name, spec = f"prop_{kind}_{self.n}", self.catalogue[kind]
            mv.sql(self.spark, f"CREATE MATERIALIZED VIEW {name} {spec.clauses} AS {self.query(spec)}")
            self.views[name] = spec
            if spec.watermarked:
                self.oracles[name] = SessionOracle(spec) if spec.gap else Oracle(spec)
            self.check(name)  # CREATE's first refresh, in full

    def drop(self) -> None:
        for name in self.views:
            mv.sql(self.spark, f"DROP MATERIALIZED VIEW IF EXISTS {name}")
        self.spark.sql(f"DROP TABLE IF EXISTS {self.src}")

    def query(self, spec: Spec) -> str:
        return spec.query.format(src=self.src)

    # -- changes to the source

    def insert(self) -> None:
        bids = self.new_bids(most=8)
        values = ", ".join(f"({b.id}, {sql_value(b.k)}, {b.price}, {time_literal(b.t, self.time_type)})"
                           for b in bids)
        self.spark.sql(f"INSERT INTO {self.src} VALUES {values}")
        for b in bids:
            self.rows[b.id] = b
            self.log.append((1, b))

    def update(self) -> None:
        if not self.rows:
            return
        what = self.draw(st.sampled_from(["price", "time", "price and time", "key"]), "update what")
        changed = {}
        for i in self.some_ids():
            old = self.rows[i]
            changed[i] = Bid(i, self.draw(keys, "k") if what == "key" else old.k,
                             self.draw(prices, "price") if "price" in what else old.price,
                             self.event_time() if "time" in what else old.t)
        cases = {column: " ".join(f"WHEN {i} THEN {value(b)}" for i, b in changed.items()) for column, value in
                 [("k", lambda b: sql_value(b.k)), ("price", lambda b: b.price),
                  ("ts", lambda b: time_literal(b.t, self.time_type))]}
        self.spark.sql(f"UPDATE {self.src} SET " + ", ".join(f"{c} = CASE id {w} END" for c, w in cases.items())
                       + f" WHERE id IN ({', '.join(map(str, changed))})")
        images = []
        for i in sorted(changed):  # the change feed has a pre- and a post-image per updated row
            images += [(-1, self.rows[i]), (1, changed[i])]
            self.rows[i] = changed[i]
        self.log += netted(images)

    def delete(self) -> None:
        if not self.rows:
            return
        if self.draw(st.integers(0, 9), "delete all?") == 0:  # no predicate: Delta removes whole files
            ids = sorted(self.rows)
            self.spark.sql(f"DELETE FROM {self.src}")
        else:
            ids = self.some_ids()
            self.spark.sql(f"DELETE FROM {self.src} WHERE id IN ({', '.join(map(str, ids))})")
        for i in ids:
            self.log.append((-1, self.rows.pop(i)))

    # -- refreshes, each checked

    def refresh(self, name: str | None = None) -> None:
        name = name or self.draw(st.sampled_from(sorted(self.views)), "view")
        outcome = mv.sql(self.spark, f"REFRESH MATERIALIZED VIEW {name}").first()
        # AUTO may weigh a change of a few rows as costing more than the whole tiny view (FULL_CHEAPER)
        assert outcome.technique == self.views[name].technique or outcome.reason == "FULL_CHEAPER", outcome
        if outcome.technique == "incremental":  # NO_CHANGES: no source commit since its last refresh
            assert outcome.reason in ("CHANGES_ONLY", "NO_CHANGES"), outcome
        self.check(name, outcome)

    def refresh_full(self) -> None:
        name = self.draw(st.sampled_from(sorted(self.views)), "view")
        outcome = mv.sql(self.spark, f"REFRESH MATERIALIZED VIEW {name} FULL").first()
        assert (outcome.technique, outcome.reason) == ("full", "REQUESTED_FULL"), outcome
        self.check(name)

    def refresh_and_full(self) -> None:
        """A refresh, then REFRESH ... FULL with no change between: the view stays as it is."""
        name = self.draw(st.sampled_from(sorted(self.views)), "view")
        self.refresh(name)
        outcome = mv.sql(self.spark, f"REFRESH MATERIALIZED VIEW {name} FULL").first()
        assert (outcome.technique, outcome.late_rows) == ("full", 0), outcome
        self.check(name)

    def check(self, name: str, outcome=None) -> None:
        spec = self.views[name]
        if not spec.watermarked:
            got = sorted(map(tuple, self.spark.table(name).collect()), key=repr)
            want = sorted(map(tuple, self.spark.sql(self.query(spec)).collect()), key=repr)
            assert got == want, f"{name} differs from its query run in full:\n got  {got}\n want {want}"
            return
        oracle = self.oracles[name]
        late = oracle.refresh(self.log)
        got = Counter(map(tuple, self.spark.sql(
            f"SELECT {as_micros('window_start')}, {as_micros('window_end')}, k, n, total FROM {name}").collect()))
        want = oracle.rows()
        assert got == want, (f"{name} (watermark {oracle.watermark}) differs from the oracle:\n"
                             f" missing {sorted(want - got, key=repr)}\n extra   {sorted(got - want, key=repr)}")
        if outcome is None or outcome.reason == "NO_CHANGES":
            assert not late, "CREATE's first refresh, and one with no change to read, find nothing late"
            return
        assert outcome.late_rows == sum(late.values()), (outcome, late)
        late_table = f"{name}__late"
        got_late = Counter()
        if self.spark.catalog.tableExists(late_table):
            got_late = Counter(map(tuple, self.spark.sql(
                f"SELECT id, _change_sign, {as_micros('ts' if spec.gap else 'window_start')} FROM {late_table} "
                f"WHERE refresh_id = {outcome.refresh_id}").collect()))
        assert got_late == late, f"{late_table} of refresh {outcome.refresh_id}: got {got_late}, want {late}"
        recorded = self.spark.sql(f"SELECT watermark_micros FROM mv_refresh_history WHERE view = '{name}' "
                                  f"AND refresh_id = {outcome.refresh_id}").first()
        assert recorded is not None and recorded[0] == oracle.watermark, (recorded, oracle.watermark)


SMALL_CHANGE_BYTES = window_refresh.SMALL_CHANGE_BYTES


def run_example(spark, data, catalogue: dict[str, Spec], operations: list[str]) -> None:
    example = Example(spark, data, catalogue)
    # Both ways of keeping windows: combined from the view's rows, or recomputed from the source.
    combine_always = data.draw(st.booleans(), label="combine windows however few")
    window_refresh.COMBINE_AFTER_RUNS = 0 if combine_always else window_refresh.MAX_RANGES
    # Both ways of merging into the view: classified in the driver (small), or by a distributed join.
    distributed = data.draw(st.booleans(), label="merge by a distributed join")
    spark.conf.set("mv.localMergeRows", "0" if distributed else "100000")
    # Both ways of finding the touched windows: a small change grouped in the driver, or by Spark.
    grouped_by_spark = data.draw(st.booleans(), label="touched windows grouped by Spark")
    window_refresh.SMALL_CHANGE_BYTES = 0 if grouped_by_spark else SMALL_CHANGE_BYTES
    try:
        example.create(views=VIEWS)
        for operation in data.draw(st.lists(st.sampled_from(operations), min_size=2, max_size=7), label="operations"):
            getattr(example, operation)()
        for name in sorted(example.views):  # every example ends with its views refreshed and checked
            example.refresh(name)
    finally:
        window_refresh.COMBINE_AFTER_RUNS = window_refresh.MAX_RANGES
        window_refresh.SMALL_CHANGE_BYTES = SMALL_CHANGE_BYTES
        spark.conf.unset("mv.localMergeRows")
        example.drop()


@pytest.fixture(scope="module")
def utc_spark(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC", "the oracle's windows align in UTC"
    return spark


@BUDGET
@given(data=st.data())
def test_views_without_watermark_equal_their_query_run_in_full(utc_spark, data):
    run_example(utc_spark, data, RECOMPUTED, OPERATIONS + ["refresh_full"])


@BUDGET
@given(data=st.data())
def test_watermarked_views_equal_the_oracle(utc_spark, data):
    run_example(utc_spark, data, WATERMARKED, OPERATIONS + ["refresh_and_full"])


@BUDGET
@given(data=st.data())
def test_watermarked_sessions_under_retractions_equal_the_oracle(utc_spark, data):
    """Sessions kept open beside the view fold with inserts and are recomputed under a retraction
    (session_refresh.recent_sessions): one SESSION view, more deletes and updates than above."""
    run_example(utc_spark, data, {"session_close": WATERMARKED["session_close"]},
                ["insert", "update", "delete", "delete", "refresh", "refresh"])


def test_the_oracle_on_a_hand_worked_example():
    """Windows of 10 minutes, delay 5, no grace: the oracle's verdicts, checked by hand."""
    oracle = Oracle(WATERMARKED["close"])
    log = [(1, Bid(1, "a", 2, BASE + 3 * MINUTE)), (1, Bid(2, "a", 5, BASE + 16 * MINUTE))]
    assert oracle.refresh(log) == Counter() and oracle.watermark == BASE + 11 * MINUTE
    assert oracle.rows() == Counter({(BASE, BASE + 10 * MINUTE, "a", 1, 2): 1})  # [0, 10) closed at 9:59.999999
    log += [(1, Bid(3, "a", 7, BASE + 9 * MINUTE)), (1, Bid(4, "b", 1, BASE + 14 * MINUTE))]
    assert oracle.refresh(log) == Counter({(3, 1, BASE): 1})  # 11:00 >= 10:00 + 0: final, so late
    assert oracle.watermark == BASE + 11 * MINUTE  # no newer event time: unchanged
    log += [(1, Bid(5, None, 1, BASE + 25 * MINUTE)), (-1, Bid(2, "a", 5, BASE + 16 * MINUTE))]
    assert oracle.refresh(log) == Counter() and oracle.watermark == BASE + 20 * MINUTE
    assert oracle.rows() == Counter({(BASE, BASE + 10 * MINUTE, "a", 1, 2): 1,
                                     (BASE + 10 * MINUTE, BASE + 20 * MINUTE, "b", 1, 1): 1})


def test_the_session_oracle_on_a_hand_worked_example():
    """Sessions of 5 minutes, delay 5, no grace, on close: the oracle's verdicts, checked by hand."""
    oracle = SessionOracle(WATERMARKED["session_close"])
    log = [(1, Bid(1, "a", 2, BASE)), (1, Bid(2, "a", 3, BASE + 20 * MINUTE))]
    assert oracle.refresh(log) == Counter() and oracle.watermark == BASE + 15 * MINUTE
    assert oracle.rows() == Counter({(BASE, BASE + 5 * MINUTE, "a", 1, 2): 1})  # a's first session is final
    log += [(1, Bid(3, "a", 1, BASE + 4 * MINUTE)),    # would join the final session: late
            (1, Bid(4, "b", 1, BASE + 9 * MINUTE)),    # 9 + 5 <= 15: its own session is final: late
            (1, Bid(5, "b", 1, BASE + 11 * MINUTE)),   # 11 + 5 > 15: on time, open until 16 - 1 µs
            (1, Bid(6, "a", 4, BASE + 16 * MINUTE))]   # joins a's open session [20, 25)
    assert oracle.refresh(log) == Counter({(3, 1, BASE + 4 * MINUTE): 1, (4, 1, BASE + 9 * MINUTE): 1})
    assert oracle.watermark == BASE + 15 * MINUTE
    assert oracle.rows() == Counter({(BASE, BASE + 5 * MINUTE, "a", 1, 2): 1})
    log += [(1, Bid(7, "c", 1, BASE + 40 * MINUTE))]
    assert oracle.refresh(log) == Counter() and oracle.rows() == Counter(
        {(BASE, BASE + 5 * MINUTE, "a", 1, 2): 1, (BASE + 11 * MINUTE, BASE + 16 * MINUTE, "b", 1, 1): 1,
         (BASE + 16 * MINUTE, BASE + 25 * MINUTE, "a", 2, 7): 1})
