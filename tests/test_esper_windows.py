"""Esper's data windows as table functions (docs/windows.md, "Esper data windows").

Each test is one of the chapter's examples (its EPL quoted) or an edge case, checked against the
event-by-event reference in tests/esper_reference.py or against values worked out by hand.
Times in the tables are seconds after 2024-01-01 00:00 (TIMESTAMP_NTZ).
"""
import datetime as dt
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

import esper_reference as ref

pytestmark = pytest.mark.compat  # run on every supported Spark line (make test-compat)

T0 = dt.datetime(2024, 1, 1)
SECOND = 1_000_000
FIXTURE = Path(__file__).parent / "fixtures" / "esper_window_errors.txt"

# id, seconds, symbol, price, volume: a tie at 3 s, a row exactly 10 s after the first, a NULL time.
TICKS = [
    (1, 0, "GE", 10.0, 100), (2, 1, "IBM", 20.0, 50), (3, 2, "GE", 30.0, 100), (4, 3, "MSFT", 15.0, 200),
    (5, 3, "IBM", 25.0, 100), (6, 5, "GE", 5.0, 300), (7, 7, "IBM", 40.0, 100), (8, 10, "GE", 35.0, 100),
    (9, None, "GE", 99.0, 100),
]
EVENTS = [(i, None if s is None else s * SECOND, sym) for i, s, sym, _, _ in TICKS]


def at(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def create_view(spark, name, rows):
    data = [(i, None if s is None else at(s), sym, price, vol) for i, s, sym, price, vol in rows]
    schema = "id INT, ts TIMESTAMP_NTZ, symbol STRING, price DOUBLE, volume BIGINT"
    spark.createDataFrame(data, schema).createOrReplaceTempView(name)


@pytest.fixture(scope="module")
def ticks(spark):
    create_view(spark, "ticks", TICKS)
    create_view(spark, "no_ticks", [])


def windows(spark, call, key):
    """{window key: sorted row ids} of a window function call, grouped by its key columns."""
    rows = spark.sql(f"SELECT {key}, sort_array(collect_list(id)) AS ids FROM {call} GROUP BY {key}").collect()
    return {(tuple(r)[:-1] if len(r) > 2 else r[0]): list(r.ids) for r in rows}


def ids(spark, call):
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {call}").collect())


def micros(value: dt.datetime) -> int:
    return (value - T0) // dt.timedelta(microseconds=1)


# --- sliding windows -------------------------------------------------------------------------

def test_length_window_holds_the_last_n_rows_at_each_arrival(spark, ticks):
    # select * from StockTickEvent#length(3): one window per arriving row, numbered by window_seq
    got = windows(spark, "WIN_LENGTH(TABLE(ticks), DESCRIPTOR(ts), 3)", "window_seq")
    assert got == {seq: sorted(members) for seq, members in ref.length(EVENTS, 3)}


def test_length_window_columns_span_its_rows_and_end_just_after_the_arriving_row(spark, ticks):
    row = spark.sql("SELECT DISTINCT window_start, window_end, window_time FROM "
                    "WIN_LENGTH(TABLE(ticks), DESCRIPTOR(ts), 3) WHERE window_seq = 6").first()
    assert row.window_start == at(3) and row.window_time == at(5)
    assert row.window_end == at(5) + dt.timedelta(microseconds=1)


def test_groupwin_length_keeps_a_length_window_per_symbol(spark, ticks):
    # select symbol, sum(price) from StockTickEvent#groupwin(symbol)#length(2) group by symbol
    got = windows(spark, "WIN_LENGTH(TABLE(ticks) PARTITION BY symbol, DESCRIPTOR(ts), 2)", "symbol, window_seq")
    expected = {}
    for symbol in ("GE", "IBM", "MSFT"):
        for seq, members in ref.length([e for e in EVENTS if e[2] == symbol], 2):
            expected[(symbol, seq)] = sorted(members)
    assert got == expected


def test_time_window_holds_the_rows_of_the_last_size_up_to_each_event_time(spark, ticks):
    # select sum(price) from StockTickEvent#time(3 sec); a row exactly 3 s older has expired
    got = windows(spark, "WIN_TIME(TABLE(ticks), DESCRIPTOR(ts), INTERVAL '3' SECONDS)", "window_time")
    assert {micros(k): v for k, v in got.items()} == dict(ref.time(EVENTS, 3 * SECOND))
    assert got[at(3)] == [2, 3, 4, 5], "rows at 1, 2, 3 s and both rows tied at 3 s; not the row at 0 s"


def test_time_window_accepts_esper_seconds_and_ext_timed_is_the_same(spark, ticks):
    # time(125) is time(125 sec) in Esper; ext_timed(timestamp, 3 seconds) slides on the event's own time
    as_seconds = windows(spark, "WIN_TIME(TABLE(ticks), DESCRIPTOR(ts), 3)", "window_time")
    ext_timed = windows(spark, "WIN_EXT_TIMED(TABLE(ticks), DESCRIPTOR(ts), INTERVAL '3' SECONDS)", "window_time")
    assert as_seconds == ext_timed == windows(
        spark, "WIN_TIME(TABLE(ticks), DESCRIPTOR(ts), INTERVAL '3' SECONDS)", "window_time")


def test_time_window_bounds_are_the_half_open_span_ending_at_the_event(spark, ticks):
    row = spark.sql("SELECT DISTINCT window_start, window_end FROM WIN_TIME(TABLE(ticks), DESCRIPTOR(ts), 3) "
                    "WHERE window_time = TIMESTAMP_NTZ'2024-01-01 00:00:05'").first()
    assert row.window_start == at(2) + dt.timedelta(microseconds=1)
    assert row.window_end == at(5) + dt.timedelta(microseconds=1)


def test_time_accum_releases_when_no_row_arrives_for_size(spark, ticks):
    # select * from MyEvent#time_accum(2 sec): a gap of exactly 2 s (5 s -> 7 s) starts a new window
    got = windows(spark, "WIN_TIME_ACCUM(TABLE(ticks), DESCRIPTOR(ts), 2)", "window_start, window_end")
    expected = {(at(a // SECOND), at(b // SECOND)): sorted(m) for (a, b), m in ref.time_accum(EVENTS, 2 * SECOND)}
    assert got == expected
    assert got[(at(0), at(5))] == [1, 2, 3, 4, 5]


# --- batch windows ---------------------------------------------------------------------------

def test_length_batch_releases_full_batches_only(spark, ticks):
    # select * from MyEvent#length_batch(3): 8 rows make 2 batches, the last 2 rows wait for a third
    got = windows(spark, "WIN_LENGTH_BATCH(TABLE(ticks), DESCRIPTOR(ts), 3)", "window_seq")
    assert got == dict(ref.length_batch(EVENTS, 3)) == {1: [1, 2, 3], 2: [4, 5, 6]}


def test_time_batch_with_a_reference_point_batches_five_seconds_after_each_hour(spark):
    # select * from OrderSummaryEvent#time_batch(1 hour, 5000L)
    create_view(spark, "orders", [(1, 4, "a", 1.0, 1), (2, 5, "a", 1.0, 1), (3, 3604, "a", 1.0, 1),
                                  (4, 3606, "a", 1.0, 1)])
    got = windows(spark, "WIN_TIME_BATCH(TABLE(orders), DESCRIPTOR(ts), INTERVAL '1' HOUR, 5000)",
                  "window_start, window_end")
    assert got == {(at(-3595), at(5)): [1], (at(5), at(3605)): [2, 3], (at(3605), at(7205)): [4]}


def test_time_batch_reference_may_be_a_timestamp(spark, ticks):
    by_millis = windows(spark, "WIN_TIME_BATCH(TABLE(ticks), DESCRIPTOR(ts), 4, 1704067201000)", "window_start")
    by_time = windows(spark, "WIN_TIME_BATCH(TABLE(ticks), DESCRIPTOR(ts), 4, TIMESTAMP_NTZ'2024-01-01 00:00:01')",
                      "window_start")
    assert by_millis == by_time == {at(-3): [1], at(1): [2, 3, 4, 5], at(5): [6, 7], at(9): [8]}


def test_ext_timed_batch_without_reference_starts_at_the_first_row(spark, ticks):
    # select * from StockTickEvent#ext_timed_batch(timestamp, 5 sec); the row at 10 s opens the third batch
    got = windows(spark, "WIN_EXT_TIMED_BATCH(TABLE(ticks), DESCRIPTOR(ts), INTERVAL '5' SECONDS)", "window_start")
    assert {micros(k): v for k, v in got.items()} == dict(ref.time_batch(EVENTS, 5 * SECOND))
    assert got == windows(spark, "WIN_TIME_BATCH(TABLE(ticks), DESCRIPTOR(ts), 5)", "window_start")


def test_time_batch_per_group_starts_at_each_groups_first_row(spark, ticks):
    got = windows(spark, "WIN_TIME_BATCH(TABLE(ticks) PARTITION BY symbol, DESCRIPTOR(ts), 4)", "symbol, window_start")
    assert got == {("GE", at(0)): [1, 3], ("GE", at(4)): [6], ("GE", at(8)): [8], ("IBM", at(1)): [2, 5],
                   ("IBM", at(5)): [7], ("MSFT", at(3)): [4]}


def test_force_update_emits_empty_batches_up_to_the_last_one(spark, ticks):
    # select * from MyEvent#time_batch(2 sec, 0L, "FORCE_UPDATE"): empty batches are rows with NULL columns
    rows = spark.sql("SELECT symbol, window_start, count(ts) AS n FROM WIN_TIME_BATCH(TABLE(ticks) PARTITION BY "
                     "symbol, DESCRIPTOR(ts), 2, 0, 'FORCE_UPDATE') GROUP BY ALL").collect()
    counts = {(r.symbol, r.window_start): r.n for r in rows}
    assert {k[1]: n for k, n in counts.items() if k[0] == "MSFT"} == {at(2): 1, at(4): 0, at(6): 0, at(8): 0,
                                                                        at(10): 0}
    assert counts[("GE", at(0))] == 1 and counts[("GE", at(6))] == 0 and counts[("GE", at(10))] == 1
    assert len(counts) == 6 + 6 + 5, "GE and IBM from 0 s, MSFT from 2 s, all up to 10 s"


def test_start_eager_also_emits_empty_batches_before_a_groups_first_row(spark, ticks):
    # select * from MyEvent#time_batch(10 sec, "FORCE_UPDATE, START_EAGER"), per symbol
    rows = spark.sql("SELECT symbol, window_start, count(ts) AS n FROM WIN_TIME_BATCH(TABLE(ticks) PARTITION BY "
                     "symbol, DESCRIPTOR(ts), 4, FLOW_CONTROL => 'FORCE_UPDATE, START_EAGER') GROUP BY ALL").collect()
    msft = {r.window_start: r.n for r in rows if r.symbol == "MSFT"}
    assert msft == {at(0): 1, at(4): 0, at(8): 0}, "batches align on the table's first row, not MSFT's"


def test_time_length_batch_releases_at_count_or_at_the_end_of_the_interval(spark):
    # time_length_batch(10 sec, 2): the 2nd row releases at once and restarts the interval; the row
    # at 2 s waits for the interval's end at 11 s; after two empty intervals the row at 45 s opens one
    create_view(spark, "bursts", [(1, 0, "a", 1.0, 1), (2, 1, "a", 1.0, 1), (3, 2, "a", 1.0, 1),
                                  (4, 45, "a", 1.0, 1)])
    got = windows(spark, "WIN_TIME_LENGTH_BATCH(TABLE(bursts), DESCRIPTOR(ts), 10, 2)",
                  "window_seq, window_start, window_end")
    tick = dt.timedelta(microseconds=1)
    assert got == {(1, at(0), at(1) + tick): [1, 2], (2, at(1), at(11)): [3], (3, at(45), at(55)): [4]}


def test_time_length_batch_matches_the_reference_per_group(spark, ticks):
    # time_length_batch(1 sec, 100) in Esper; here 3 seconds or 2 rows, per symbol and over all rows
    for table, keys in (("TABLE(ticks)", ""), ("TABLE(ticks) PARTITION BY symbol", "symbol, ")):
        got = windows(spark, f"WIN_TIME_LENGTH_BATCH({table}, DESCRIPTOR(ts), 3, 2)",
                      f"{keys}window_start, window_end")
        expected = {}
        for symbol in (("GE", "IBM", "MSFT") if keys else (None,)):
            events = [e for e in EVENTS if symbol in (None, e[2])]
            for (start, end), members in ref.time_length_batch(events, 3 * SECOND, 2):
                window = (at(0) + dt.timedelta(microseconds=start), at(0) + dt.timedelta(microseconds=end))
                expected[(symbol, *window) if keys else window] = sorted(members)
        assert got == expected


def test_expr_batch_releases_a_batch_at_each_row_meeting_the_condition(spark, ticks):
    # select * from MyEvent#expr_batch(myvalue = 'postme'), here symbol = 'IBM'; the last batch is still open
    got = windows(spark, "WIN_EXPR_BATCH(TABLE(ticks), DESCRIPTOR(ts), symbol = 'IBM')", "window_seq")
    assert got == dict(ref.expr_batch(EVENTS, lambda e: e[2] == "IBM")) == {1: [1, 2], 2: [3, 4, 5], 3: [6, 7]}


def test_expr_batch_can_put_the_triggering_row_into_the_next_batch(spark, ticks):
    # expr_batch(..., false): "the triggering event not included in the current batch"
    got = windows(spark, "WIN_EXPR_BATCH(TABLE(ticks), DESCRIPTOR(ts), symbol = 'IBM', false)", "window_seq")
    assert sorted(got.values()) == sorted(m for _, m in ref.expr_batch(EVENTS, lambda e: e[2] == "IBM", False))
    assert sorted(got.values()) == [[1], [2, 3, 4], [5, 6]]


# --- retention windows -----------------------------------------------------------------------

def test_keepall_keeps_every_row_with_a_time(spark, ticks):
    # select * from StockTickEvent#keepall
    assert ids(spark, "WIN_KEEPALL(TABLE(ticks), DESCRIPTOR(ts))") == list(range(1, 9))


def test_firstlength_and_firstevent_keep_the_first_rows(spark, ticks):
    assert ids(spark, "WIN_FIRSTLENGTH(TABLE(ticks), DESCRIPTOR(ts), 4)") == ref.firstlength(EVENTS, 4)
    assert ids(spark, "STD_FIRSTEVENT(TABLE(ticks), DESCRIPTOR(ts))") == [1]
    assert ids(spark, "WIN_FIRSTLENGTH(TABLE(ticks), DESCRIPTOR(ts), 100)") == list(range(1, 9))


def test_firsttime_keeps_the_rows_before_first_time_plus_size(spark, ticks):
    # firsttime(3 sec): the rows tied at exactly 3 s arrive when the interval has passed
    assert ids(spark, "WIN_FIRSTTIME(TABLE(ticks), DESCRIPTOR(ts), 3)") == ref.firsttime(EVENTS, 3 * SECOND) == [1, 2, 3]


def test_unique_keeps_the_latest_row_per_key_like_groupwin_length_one(spark, ticks):
    # select * from StockTickEvent#unique(symbol)  ... equivalent to ... #groupwin(symbol)#length(1)
    unique = ids(spark, "STD_UNIQUE(TABLE(ticks), DESCRIPTOR(ts), DESCRIPTOR(symbol))")
    assert unique == ref.unique(EVENTS) == [4, 7, 8]
    assert unique == ids(spark, "STD_LASTEVENT(TABLE(ticks) PARTITION BY symbol, DESCRIPTOR(ts))")


def test_firstunique_keeps_the_first_row_per_category(spark, ticks):
    # select * from ReferenceData#firstunique(category)
    assert ids(spark, "STD_FIRSTUNIQUE(TABLE(ticks), DESCRIPTOR(ts), DESCRIPTOR(symbol))") == ref.firstunique(EVENTS)


def test_unique_over_two_keys_and_lastevent(spark, ticks):
    assert ids(spark, "STD_UNIQUE(TABLE(ticks), DESCRIPTOR(ts), DESCRIPTOR(symbol, volume))") == [2, 4, 6, 7, 8]
    assert ids(spark, "STD_LASTEVENT(TABLE(ticks), DESCRIPTOR(ts))") == [8]


def test_sort_keeps_the_highest_prices(spark, ticks):
    # select sum(price) from StockTickEvent#sort(3, price desc)
    got = ids(spark, "EXT_SORT(TABLE(ticks) WITH SINGLE PARTITION ORDER BY (price DESC), DESCRIPTOR(ts), 3)")
    assert got == ref.sort(EVENTS, 3, lambda e: -TICKS[e[0] - 1][3]) == [3, 7, 8]


def test_sort_breaks_price_ties_by_symbol_then_by_arrival(spark):
    # select * from StockTickEvent#sort(2, price desc, symbol asc)
    create_view(spark, "tied", [(1, 0, "B", 9.0, 1), (2, 1, "A", 9.0, 1), (3, 2, "A", 9.0, 1), (4, 3, "C", 1.0, 1)])
    assert ids(spark, "EXT_SORT(TABLE(tied) WITH SINGLE PARTITION ORDER BY (price DESC, symbol ASC), "
                      "DESCRIPTOR(ts), 2)") == [2, 3]
    assert ids(spark, "EXT_SORT(TABLE(tied) WITH SINGLE PARTITION ORDER BY (price DESC), DESCRIPTOR(ts), 2)") \
        == ref.sort([(i, t, None) for i, t in [(1, 0), (2, 1), (3, 2), (4, 3)]], 2, lambda e: -9.0 if e[0] < 4 else -1)


def test_groupwin_sort_keeps_the_top_prices_per_group(spark, ticks):
    # groupwin(market)#sort(10, price desc), here per symbol and 1
    assert ids(spark, "EXT_SORT(TABLE(ticks) PARTITION BY symbol ORDER BY (price DESC), DESCRIPTOR(ts), 1)") \
        == [4, 7, 8]


def test_rank_keeps_the_top_prices_among_the_latest_row_per_symbol(spark, ticks):
    # select sum(price) from StockTickEvent#rank(symbol, 2, price desc): latest GE 35, IBM 40, MSFT 15
    call = ("EXT_RANK(TABLE(ticks) WITH SINGLE PARTITION ORDER BY (price DESC), DESCRIPTOR(ts), "
            "DESCRIPTOR(symbol), 2)")
    assert ids(spark, call) == [7, 8]
    assert spark.sql(f"SELECT sum(price) FROM {call}").first()[0] == 75.0


def test_rank_per_group_and_on_two_criteria(spark, ticks):
    # groupwin(market)#rank(symbol, 10, price desc), with volume as the market; rank(market, symbol, 10, price, quantity)
    assert ids(spark, "EXT_RANK(TABLE(ticks) PARTITION BY volume ORDER BY (price DESC), DESCRIPTOR(ts), "
                      "DESCRIPTOR(symbol), 1)") == [2, 4, 6, 7]
    assert ids(spark, "EXT_RANK(TABLE(ticks) WITH SINGLE PARTITION ORDER BY (price, volume), DESCRIPTOR(ts), "
                      "DESCRIPTOR(volume, symbol), 2)") == [4, 6]


# --- every kind: empty input, NULL times, output types, registration -------------------------

CALLS = [
    "WIN_LENGTH({t}, DESCRIPTOR(ts), 2)", "WIN_TIME({t}, DESCRIPTOR(ts), 2)", "WIN_EXT_TIMED({t}, DESCRIPTOR(ts), 2)",
    "WIN_TIME_ACCUM({t}, DESCRIPTOR(ts), 2)", "WIN_LENGTH_BATCH({t}, DESCRIPTOR(ts), 2)",
    "WIN_TIME_BATCH({t}, DESCRIPTOR(ts), 2)", "WIN_TIME_BATCH({t}, DESCRIPTOR(ts), 2, 0, 'START_EAGER')",
    "WIN_EXT_TIMED_BATCH({t}, DESCRIPTOR(ts), 2)", "WIN_TIME_LENGTH_BATCH({t}, DESCRIPTOR(ts), 2, 2)", "WIN_EXPR_BATCH({t}, DESCRIPTOR(ts), price > 20)",
    "WIN_KEEPALL({t}, DESCRIPTOR(ts))", "WIN_FIRSTLENGTH({t}, DESCRIPTOR(ts), 2)",
    "WIN_FIRSTTIME({t}, DESCRIPTOR(ts), 2)", "STD_UNIQUE({t}, DESCRIPTOR(ts), DESCRIPTOR(symbol))",
    "STD_FIRSTUNIQUE({t}, DESCRIPTOR(ts), DESCRIPTOR(symbol))", "STD_LASTEVENT({t}, DESCRIPTOR(ts))",
    "STD_FIRSTEVENT({t}, DESCRIPTOR(ts))",
    "EXT_SORT({t} WITH SINGLE PARTITION ORDER BY (price DESC), DESCRIPTOR(ts), 2)",
    "EXT_RANK({t} WITH SINGLE PARTITION ORDER BY (price DESC), DESCRIPTOR(ts), DESCRIPTOR(symbol), 2)",
]


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.split("(")[0])
def test_empty_input_gives_no_rows(spark, ticks, call):
    assert spark.sql(f"SELECT * FROM {call.format(t='TABLE(no_ticks)')}").collect() == []


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.split("(")[0])
def test_rows_with_a_null_time_are_dropped(spark, ticks, call):
    rows = [r for r in spark.sql(f"SELECT id, ts FROM {call.format(t='TABLE(ticks)')}").collect()
            if r.id is not None]  # flow control's empty batches have no id
    assert rows and all(r.ts is not None for r in rows) and 9 not in {r.id for r in rows}


@pytest.mark.parametrize("time_type", ["TIMESTAMP", "TIMESTAMP_NTZ"])
def test_window_columns_have_the_time_columns_type(spark, ticks, time_type):
    for call in ("WIN_LENGTH(TABLE(t), DESCRIPTOR(ts), 2)", "WIN_TIME_LENGTH_BATCH(TABLE(t), DESCRIPTOR(ts), 2, 2)", "WIN_TIME_BATCH(TABLE(t), DESCRIPTOR(ts), 2, 0, "
                 "'FORCE_UPDATE')", "WIN_TIME(TABLE(t), DESCRIPTOR(ts), 2)"):
        sql = (f"WITH t AS (SELECT id, CAST(ts AS {time_type}) AS ts, price FROM ticks) "
               f"SELECT window_start, window_end, window_time FROM {call}")
        types = {f.dataType.typeName() for f in spark.sql(sql).schema.fields}
        assert types == {"timestamp" if time_type == "TIMESTAMP" else "timestamp_ntz"}


def test_a_null_partition_key_is_a_group_of_its_own(spark):
    # Esper's groupwin: "The runtime treats a null value as any other value."
    create_view(spark, "nullkeys", [(1, 0, None, 1.0, 1), (2, 1, None, 2.0, 1), (3, 2, "A", 3.0, 1)])
    assert windows(spark, "WIN_LENGTH(TABLE(nullkeys) PARTITION BY symbol, DESCRIPTOR(ts), 5)",
                   "symbol, window_seq") == {(None, 1): [1], (None, 2): [1, 2], ("A", 1): [3]}


def test_ties_break_on_the_table_order_by_then_on_the_other_columns(spark):
    create_view(spark, "ties", [(2, 0, "B", 1.0, 1), (1, 0, "A", 1.0, 1)])
    assert ids(spark, "STD_FIRSTEVENT(TABLE(ties), DESCRIPTOR(ts))") == [1], "id breaks the tie first"
    assert ids(spark, "STD_FIRSTEVENT(TABLE(ties) WITH SINGLE PARTITION ORDER BY (symbol DESC), DESCRIPTOR(ts))") \
        == [2]


def test_functions_are_listed_and_described_with_their_esper_name(spark):
    names = {r[0] for r in spark.sql("SHOW FUNCTIONS LIKE 'win_*|std_*|ext_*|stat_*'").collect()}
    assert {"win_length", "win_time_batch", "std_unique", "ext_rank", "stat_linest", "std_size"} <= names
    described = " ".join(r[0] for r in spark.sql("DESCRIBE FUNCTION win_time_batch").collect())
    assert "Esper: time_batch" in described


# --- bad calls -------------------------------------------------------------------------------

def _error_cases():
    for line in FIXTURE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            error_class, sql = (part.strip() for part in line.split("|", 1))
            yield pytest.param(error_class, sql, id=f"{error_class}: {sql[14:70]}")


@pytest.mark.parametrize("error_class, sql", list(_error_cases()))
def test_bad_call_raises_its_error_class_with_a_hint(spark, ticks, error_class, sql):
    with pytest.raises(AnalysisException) as raised:
        spark.sql(sql).collect()
    assert raised.value.getCondition() == error_class
    if error_class.startswith("MV_"):
        message = raised.value.getMessage()
        assert message.startswith(f"[{error_class}]") and "Hint: " in message


@pytest.mark.parametrize("call", [
    "STD_UNIQUE(TABLE(ticks), DESCRIPTOR(ts), DESCRIPTOR(symbol))",
    "EXT_SORT(TABLE(ticks) WITH SINGLE PARTITION ORDER BY (price DESC), DESCRIPTOR(ts), 3)",
    "WIN_TIME_LENGTH_BATCH(TABLE(ticks), DESCRIPTOR(ts), 3, 2)"], ids=lambda c: c.split("(")[0])
def test_views_over_esper_windows_are_refreshed_in_full(spark, ticks, call):
    # a new row can push another out of the window, which the source's change feed does not show
    query = f"SELECT symbol, SUM(price) AS total FROM {call} GROUP BY symbol".replace("'", "''")
    description = spark.sql(f"SELECT description FROM mv_describe('{query}')").first()[0]
    assert "ROWS_DEPEND_ON_OTHER_ROWS" in description
