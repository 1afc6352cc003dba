"""Property tests: on random small tables the window functions give exactly what the rules give.

Given random rows (ids, keys, times as TIMESTAMP_NTZ or as TIMESTAMP in UTC, before and after 1970,
often exactly on window boundaries, some NULL) and random sizes, slides, steps, gaps and offsets
(negative ones too), when windowed by the engine, then the multiset of (id, window_start,
window_end, window_time) equals the one tests/window_reference.py derives from the window rules 1-8 of docs/design.md.
"""
from __future__ import annotations

import datetime as dt
import doctest
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import window_reference as ref

pytestmark = pytest.mark.compat  # run on every supported Spark line (make test-compat)

SECOND = 1_000_000
MINUTE = 60 * SECOND

# One Spark job per engine example: these budgets keep the module around a minute on two cores.
ENGINE = settings(max_examples=40, deadline=None)
REFERENCE_ONLY = settings(max_examples=300, deadline=None)

# The zone of each time type's Python values; TIMESTAMP rows are instants, given in UTC.
TIME_TYPES = {"TIMESTAMP_NTZ": None, "TIMESTAMP": dt.timezone.utc}


@dataclass(frozen=True)
class Row:
    id: int
    k: str | None
    k2: int
    t: int | None  # microseconds since the epoch; None is a NULL time


@dataclass(frozen=True)
class Table:
    time_type: str
    unit: int  # times lie on a grid of this step (a few nudged off it), so many fall on boundaries
    rows: tuple[Row, ...]


@st.composite
def tables(draw) -> Table:
    unit = draw(st.sampled_from([SECOND, MINUTE]))
    anchor = draw(st.one_of(
        st.integers(-15, 15),  # around the epoch: times of both signs in one table
        st.integers(-3_000_000_000, 3_000_000_000).map(lambda seconds: seconds * SECOND // unit),
    ))
    rows = []
    for i in range(draw(st.integers(0, 14))):
        key, key2 = draw(st.sampled_from(["a", "b", None])), draw(st.sampled_from([1, 2]))
        null = draw(st.integers(0, 7)) == 7
        t = None if null else (anchor + draw(st.integers(-15, 15))) * unit + draw(nudges(unit))
        rows.append(Row(i, key, key2, t))
    return Table(draw(st.sampled_from(sorted(TIME_TYPES))), unit, tuple(rows))


def nudges(unit: int) -> st.SearchStrategy[int]:
    """Mostly 0 (on the grid), sometimes one microsecond either side, sometimes anywhere within a unit."""
    return st.integers(0, 5).flatmap(lambda kind: st.just(0) if kind < 4 else
                                     st.sampled_from([-1, 1]) if kind == 4 else st.integers(-unit, unit))


def offsets(unit: int) -> st.SearchStrategy[int]:
    """Offsets on the time grid (so rows land on shifted boundaries), now and then off it by a little."""
    return st.builds(lambda n, nudge: n * unit + nudge, st.integers(-30, 30), nudges(unit))


def interval(micros: int) -> str:
    """A day-time interval literal of exactly ``micros`` microseconds (negative ones too)."""
    sign = "-" if micros < 0 else ""
    return f"INTERVAL '{sign}{abs(micros) // SECOND}.{abs(micros) % SECOND:06d}' SECOND"


def create_view(spark, table: Table) -> None:
    """Register ``table`` as the view ``rows`` (id, k, k2, ts), its times written as exact literals."""
    zone = TIME_TYPES[table.time_type]

    def literal(value) -> str:
        if value is None:
            return "NULL"
        return f"'{value}'" if isinstance(value, str) else str(value)

    def time_literal(t: int | None) -> str:
        return "NULL" if t is None else f"{table.time_type} '{ref.from_micros(t, zone).isoformat(' ')}'"

    values = ", ".join(f"({r.id}, {literal(r.k)}, {r.k2}, {time_literal(r.t)})" for r in table.rows)
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW rows AS
        SELECT CAST(id AS INT) AS id, CAST(k AS STRING) AS k, CAST(k2 AS INT) AS k2,
               CAST(ts AS {table.time_type}) AS ts
        FROM VALUES {values or "(NULL, NULL, NULL, NULL)"} AS t(id, k, k2, ts)
        {"" if values else "WHERE FALSE"}""")


def run_engine(spark, table: Table, window_call: str) -> Counter:
    """Window ``table`` (as view ``rows``) with ``window_call``; count the (id, start, end, time) rows."""
    create_view(spark, table)
    result = spark.sql(f"SELECT * FROM {window_call}")
    columns = ("window_start", "window_end", "window_time")
    types = {f.name: f.dataType.simpleString() for f in result.schema.fields if f.name in columns}
    assert types == dict.fromkeys(columns, table.time_type.lower()), "window columns typed like the time column"
    # Read instants as microseconds: no Python time-zone conversion between the engine and the check.
    micros = ", ".join(f"unix_micros(CAST({c} AS TIMESTAMP))" for c in columns)
    return Counter(tuple(r) for r in spark.sql(f"SELECT id, {micros} FROM {window_call}").collect())


def expected(rows: list[tuple[Row, int, int, int]]) -> Counter:
    return Counter((row.id, start, end, time) for row, start, end, time in rows)


def assert_same(got: Counter, want: Counter) -> None:
    missing, extra = want - got, got - want
    assert not missing and not extra, f"missing {sorted(missing.elements())}, extra {sorted(extra.elements())}"


@pytest.fixture(scope="module")
def utc_spark(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC", "TIMESTAMP windows align in the session zone"
    return spark


# --- the engine against the reference --------------------------------------------------------------

@ENGINE
@given(table=tables(), data=st.data())
def test_tumble_matches_the_rules(utc_spark, table, data):
    size = data.draw(st.integers(1, 12)) * table.unit
    offset = data.draw(st.one_of(st.just(None), offsets(table.unit)))
    call = f"TUMBLE(TABLE(rows), DESCRIPTOR(ts), {interval(size)}" + (
        ")" if offset is None else f", {interval(offset)})")
    want = ref.window_rows(table.rows, lambda t: ref.tumble(t, size, offset or 0), time=lambda r: r.t)
    assert_same(run_engine(utc_spark, table, call), expected(want))


@ENGINE
@given(table=tables(), data=st.data())
def test_hop_matches_the_rules(utc_spark, table, data):
    slide_units = data.draw(st.integers(1, 12))
    slide = slide_units * table.unit
    size = data.draw(st.integers(1, 20 * slide_units)) * table.unit  # at most 20 windows per row
    offset = data.draw(st.one_of(st.just(None), offsets(table.unit)))
    call = f"HOP(TABLE(rows), DESCRIPTOR(ts), {interval(slide)}, {interval(size)}" + (
        ")" if offset is None else f", {interval(offset)})")
    want = ref.window_rows(table.rows, lambda t: ref.hop(t, slide, size, offset or 0), time=lambda r: r.t)
    assert_same(run_engine(utc_spark, table, call), expected(want))


@ENGINE
@given(table=tables(), data=st.data())
def test_cumulate_matches_the_rules(utc_spark, table, data):
    step = data.draw(st.integers(1, 6)) * table.unit
    size = data.draw(st.integers(1, 10)) * step
    offset = data.draw(st.one_of(st.just(None), offsets(table.unit)))
    call = f"CUMULATE(TABLE(rows), DESCRIPTOR(ts), {interval(step)}, {interval(size)}" + (
        ")" if offset is None else f", {interval(offset)})")
    want = ref.window_rows(table.rows, lambda t: ref.cumulate(t, step, size, offset or 0), time=lambda r: r.t)
    assert_same(run_engine(utc_spark, table, call), expected(want))


SESSION_KEYS = {
    "": lambda r: None,
    " PARTITION BY k": lambda r: r.k,
    " PARTITION BY (k, k2)": lambda r: (r.k, r.k2),
}


@ENGINE
@given(table=tables(), data=st.data())
def test_session_matches_the_rules(utc_spark, table, data):
    times = {r.t for r in table.rows if r.t is not None}
    distances = sorted({b - a for a in times for b in times if b > a})
    # A gap equal to some distance between two rows makes touching sessions (t == last + gap) common.
    gaps = st.integers(1, 10).map(lambda n: n * table.unit)
    gap = data.draw(gaps | st.sampled_from(distances) if distances else gaps)
    partition = data.draw(st.sampled_from(sorted(SESSION_KEYS)))
    call = f"SESSION(TABLE(rows){partition}, DESCRIPTOR(ts), {interval(gap)})"
    want = ref.sessions(table.rows, gap, time=lambda r: r.t, key=SESSION_KEYS[partition])
    assert_same(run_engine(utc_spark, table, call), expected(want))


# --- the reference against rule 1 (a window holds t when start <= t < end), by brute force ---------

def test_reference_docstring_examples():
    result = doctest.testmod(ref)
    assert result.attempted > 10 and result.failed == 0


times = st.integers(-10**12, 10**12)
periods = st.integers(1, 50)


def grid(t: int, period: int, offset: int, before: int) -> range:
    """Every point offset + n * period from t - before - period to t + period."""
    low = t - before - period
    first = low + (offset - low) % period
    return range(first, t + period + 1, period)


@REFERENCE_ONLY
@given(t=times, size=periods, offset=st.integers(-200, 200))
def test_reference_tumble_is_the_one_aligned_window_holding_t(t, size, offset):
    assert ref.tumble(t, size, offset) == [(s, s + size) for s in grid(t, size, offset, 0) if s <= t < s + size]


@REFERENCE_ONLY
@given(t=times, slide=periods, size=periods, offset=st.integers(-200, 200))
def test_reference_hop_is_every_aligned_window_holding_t(t, slide, size, offset):
    holding = [(s, s + size) for s in grid(t, slide, offset, size) if s <= t < s + size]
    assert sorted(ref.hop(t, slide, size, offset)) == holding


@REFERENCE_ONLY
@given(t=times, step=st.integers(1, 10), steps=st.integers(1, 10), offset=st.integers(-200, 200))
def test_reference_cumulate_is_every_prefix_window_holding_t(t, step, steps, offset):
    size = step * steps
    holding = [(s, s + k * step) for s in grid(t, size, offset, 0) for k in range(1, steps + 1)
               if s <= t < s + k * step]
    assert ref.cumulate(t, step, size, offset) == holding
