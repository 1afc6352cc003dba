"""The window functions on the reference documents' own examples, and on the edge cases docs/design.md names.

The documents' examples are fixture files in tests/fixtures/window_examples/: each holds the input
tables and the queries as the document prints them, each query followed by the result the document
prints. Given those tables, when a query runs, then it gives exactly the printed rows.
"""
from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql.types import DecimalType, IntegralType, StringType, TimestampNTZType

pytestmark = pytest.mark.compat  # run on every supported Spark line (make test-compat)

FIXTURES = Path(__file__).parent / "fixtures" / "window_examples"

# Flink prints window_time as window_end - 1 ms; ours is window_end - 1 microsecond (docs/design.md rule 7).
WINDOW_TIME_SHIFT = {"flink": dt.timedelta(microseconds=999)}


# --- the fixture format: "-- table:" and "-- example:" blocks, tables as the documents print them ---

@dataclass(frozen=True)
class Printed:
    """A table as a document prints it: a header and rows of cell texts."""
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, Spark type)
    printed: Printed


@dataclass(frozen=True)
class Example:
    document: str
    name: str
    queries: tuple[str, ...]
    expected: Printed
    tables: dict[str, Table] = field(hash=False)


def is_comment(line: str) -> bool:
    return re.match(r"\s*--(\s|$)", line) is not None  # "-- note", not a rule like "-----|-----"


def is_table_line(line: str) -> bool:
    """A row, or a border ("+---+") or rule ("---|---"), of a printed table."""
    text = line.strip()
    return bool(text) and not is_comment(text) and ("|" in text or set(text) <= set("+-"))


def printed_table(lines: list[str]) -> Printed:
    """Parse Flink's "| a | b |" tables and RisingWave's " a | b " ones; borders and rules are skipped."""
    def cells(line: str) -> tuple[str, ...]:
        text = line.strip()
        text = text[1:] if text.startswith("|") else text
        text = text[:-1] if text.endswith("|") else text
        return tuple(cell.strip() for cell in text.split("|"))
    rows = [cells(line) for line in lines if is_table_line(line) and set(line.strip()) - set("+-| ")]
    return Printed(rows[0], tuple(rows[1:]))


def statements(sql: str) -> tuple[str, ...]:
    """The statements in ``sql`` (each ends with ";" at the end of a line), comments kept."""
    chunks = (chunk.strip() for chunk in re.split(r";[ \t]*$", sql, flags=re.M))
    return tuple(chunk for chunk in chunks
                 if any(line.strip() and not is_comment(line) for line in chunk.splitlines()))


def load(path: Path) -> list[Example]:
    """The examples of one fixture file; each sees the tables defined above it (the latest of a name)."""
    parts = re.split(r"^-- (table|example): (.*)$", path.read_text(), flags=re.M)
    tables: dict[str, Table] = {}
    examples = []
    for kind, title, body in zip(parts[1::3], parts[2::3], parts[3::3]):
        lines = body.splitlines()
        if kind == "table":
            name, columns = re.fullmatch(r"(\w+) \((.*)\)", title.strip()).groups()
            tables[name] = Table(name, tuple(re.findall(r"(\w+) (\w+(?:\([^)]*\))?)", columns)),
                                 printed_table(lines))
        else:
            first_row = next(i for i, line in enumerate(lines) if is_table_line(line))
            examples.append(Example(path.stem, title.strip(), statements("\n".join(lines[:first_row])),
                                    printed_table(lines[first_row:]), dict(tables)))
    return examples


EXAMPLES = [example for path in sorted(FIXTURES.glob("*.txt")) for example in load(path)]
QUERIES = [pytest.param(example, i, id=f"{example.document}-{example.name}-{i + 1}")
           for example in EXAMPLES for i in range(len(example.queries))]


def create_view(spark, table: Table) -> None:
    names = [name for name, _ in table.columns]
    assert list(table.printed.header) == names, f"{table.name}: the printed header names the declared columns"
    values = ", ".join("(" + ", ".join("'" + cell.replace("'", "''") + "'" for cell in row) + ")"
                       for row in table.printed.rows)
    casts = ", ".join(f"CAST({name} AS {type_}) AS {name}" for name, type_ in table.columns)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {table.name} AS SELECT {casts} "
              f"FROM VALUES {values} AS t({', '.join(names)})")


def documented_value(text: str, data_type, column: str, document: str):
    """A printed cell as the Python value Spark returns for a column of ``data_type``."""
    if text.upper() in ("NULL", "(NULL)"):
        return None
    if isinstance(data_type, TimestampNTZType):
        value = dt.datetime.fromisoformat(text)
        return value + WINDOW_TIME_SHIFT.get(document, dt.timedelta()) if column == "window_time" else value
    if isinstance(data_type, DecimalType):
        return Decimal(text)
    if isinstance(data_type, IntegralType):
        return int(text)
    if isinstance(data_type, StringType):
        return text
    raise AssertionError(f"no reading of printed {data_type.simpleString()} values: {text!r}")


@pytest.mark.parametrize("example, index", QUERIES)
def test_documented_example(spark, example: Example, index: int):
    for table in example.tables.values():
        create_view(spark, table)
    query = example.queries[index]
    result = spark.sql(query)
    fields = result.schema.fields
    assert len(fields) == len(example.expected.header)
    for printed, ours in zip(example.expected.header, (f.name for f in fields)):
        if re.fullmatch(r"\w+", ours):  # Flink prints SUM(price) as "price"; named columns must agree
            assert printed == ours
    expected = [tuple(documented_value(cell, f.dataType, f.name, example.document)
                      for cell, f in zip(row, fields))
                for row in example.expected.rows]
    got = [tuple(row) for row in result.collect()]
    code = "\n".join(line for line in query.splitlines() if not is_comment(line))  # a comment may say ORDER BY
    if re.search(r"\bORDER\s+BY\s+[^)]*$", code, re.IGNORECASE):  # the result's order, not a window's
        assert got == expected
    else:
        assert Counter(got) == Counter(expected), f"missing {Counter(expected) - Counter(got)}, " \
                                                  f"extra {Counter(got) - Counter(expected)}"


def test_every_fixture_file_has_examples():
    assert {example.document for example in EXAMPLES} == {"flink", "risingwave"}
    assert len(QUERIES) >= 20


# Flink's "Window Offset" section: the record at 2021-06-30 00:00:04 in 10-minute tumbling windows.
FLINK_OFFSETS = [
    ("-16", "2021-06-29 23:54:00", "2021-06-30 00:04:00"),
    ("-6", "2021-06-29 23:54:00", "2021-06-30 00:04:00"),
    ("-4", "2021-06-29 23:56:00", "2021-06-30 00:06:00"),
    ("0", "2021-06-30 00:00:00", "2021-06-30 00:10:00"),
    ("4", "2021-06-29 23:54:00", "2021-06-30 00:04:00"),
    ("6", "2021-06-29 23:56:00", "2021-06-30 00:06:00"),
    ("16", "2021-06-29 23:56:00", "2021-06-30 00:06:00"),
]


@pytest.mark.parametrize("offset, start, end", FLINK_OFFSETS)
def test_flink_offset_example(sql, offset, start, end):
    rows = sql("SELECT CAST(window_start AS STRING), CAST(window_end AS STRING) "
               "FROM TUMBLE(TABLE(SELECT TIMESTAMP_NTZ '2021-06-30 00:00:04' AS t), DESCRIPTOR(t), "
               f"INTERVAL '10' MINUTE, INTERVAL '{offset}' MINUTE)")
    assert rows == [(start, end)]


TUMBLE_0800 = (dt.datetime(2020, 4, 15, 8, 0), dt.datetime(2020, 4, 15, 8, 10))
SESSION_0805 = (dt.datetime(2020, 4, 15, 8, 5), dt.datetime(2020, 4, 15, 8, 10))


@pytest.mark.parametrize("query, window", [
    ("SELECT * FROM TABLE(TUMBLE(TABLE(Bid), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))", TUMBLE_0800),
    ("SELECT * FROM TABLE(TUMBLE(DATA => TABLE(Bid), TIMECOL => DESCRIPTOR(bidtime), "
     "SIZE => INTERVAL '10' MINUTES))", TUMBLE_0800),
    ("SELECT * FROM TABLE(TUMBLE(DATA => TABLE Bid, TIMECOL => DESCRIPTOR(bidtime), "
     "SIZE => INTERVAL '10' MINUTES))", TUMBLE_0800),
    ("SELECT * FROM TABLE(SESSION(DATA => TABLE Bid PARTITION BY item, TIMECOL => DESCRIPTOR(bidtime), "
     "GAP => INTERVAL '5' MINUTES))", SESSION_0805),
])
def test_flink_named_arguments_verbatim(sql, query, window):
    sql("CREATE OR REPLACE TEMP VIEW Bid AS SELECT TIMESTAMP_NTZ '2020-04-15 08:05' AS bidtime, 4.00 AS price, "
        "'C' AS item")
    assert [row[-3:-1] for row in sql(query)] == [window]


# --- edge cases: boundaries, NULL times, before 1970, output types, sessions -----------------------

TIME_TYPES = ["TIMESTAMP_NTZ", "TIMESTAMP"]  # TIMESTAMP values are read in the session zone, UTC
TUMBLE_10 = "TUMBLE(TABLE(events), DESCRIPTOR(ts), INTERVAL '10' MINUTES)"
HOP_5_10 = "HOP(TABLE(events), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)"
CUMULATE_5_10 = "CUMULATE(TABLE(events), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)"
SESSION_5 = "SESSION(TABLE(events), DESCRIPTOR(ts), INTERVAL '5' MINUTES)"


def given_events(sql, time_type: str, *rows: tuple) -> None:
    """The view ``events`` (id, k1, k2, ts) with ``rows`` of (id, time text or None[, k1[, k2]])."""
    def row(id_, time, k1="a", k2=1):
        return f"({id_}, {'NULL' if time is None else repr(time)}, '{k1}', {k2})"
    sql(f"CREATE OR REPLACE TEMP VIEW events AS SELECT id, k1, k2, CAST(ts AS {time_type}) AS ts "
        f"FROM VALUES {', '.join(row(*r) for r in rows)} AS t(id, ts, k1, k2)")


def windows(sql, call: str) -> list[tuple]:
    """(id, window_start, window_end) of ``SELECT * FROM call`` as text in the session zone, sorted."""
    return sorted(sql(f"SELECT id, CAST(window_start AS STRING), CAST(window_end AS STRING) FROM {call}"))


@pytest.mark.parametrize("time_type", TIME_TYPES)
def test_a_row_on_a_window_end_belongs_to_the_next_window(sql, time_type):
    given_events(sql, time_type, (1, "2020-04-15 08:09:59.999999"), (2, "2020-04-15 08:10:00"))
    assert windows(sql, TUMBLE_10) == [
        (1, "2020-04-15 08:00:00", "2020-04-15 08:10:00"),
        (2, "2020-04-15 08:10:00", "2020-04-15 08:20:00"),
    ]
    assert windows(sql, HOP_5_10) == [
        (1, "2020-04-15 08:00:00", "2020-04-15 08:10:00"),
        (1, "2020-04-15 08:05:00", "2020-04-15 08:15:00"),
        (2, "2020-04-15 08:05:00", "2020-04-15 08:15:00"),
        (2, "2020-04-15 08:10:00", "2020-04-15 08:20:00"),
    ]
    assert windows(sql, CUMULATE_5_10) == [
        (1, "2020-04-15 08:00:00", "2020-04-15 08:10:00"),
        (2, "2020-04-15 08:10:00", "2020-04-15 08:15:00"),
        (2, "2020-04-15 08:10:00", "2020-04-15 08:20:00"),
    ]


def test_a_row_on_a_cumulate_step_leaves_the_shorter_windows(sql):
    given_events(sql, "TIMESTAMP_NTZ", (1, "2020-04-15 08:04:59.999999"), (2, "2020-04-15 08:05:00"))
    assert windows(sql, CUMULATE_5_10) == [
        (1, "2020-04-15 08:00:00", "2020-04-15 08:05:00"),
        (1, "2020-04-15 08:00:00", "2020-04-15 08:10:00"),
        (2, "2020-04-15 08:00:00", "2020-04-15 08:10:00"),
    ]


@pytest.mark.parametrize("call", [
    TUMBLE_10, HOP_5_10, CUMULATE_5_10, SESSION_5,
    "SESSION(TABLE(events) PARTITION BY k1, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
])
@pytest.mark.parametrize("time_type", TIME_TYPES)
def test_rows_with_a_null_time_are_dropped(sql, time_type, call):
    given_events(sql, time_type, (1, None), (2, "2020-04-15 08:07:00"), (3, None))
    assert {row[0] for row in windows(sql, call)} == {2}


@pytest.mark.parametrize("time_type", TIME_TYPES)
def test_windows_before_1970(sql, time_type):
    given_events(sql, time_type, (1, "1969-12-31 23:55:00"), (2, "1969-12-31 23:59:59.999999"),
                 (3, "1900-01-01 00:00:00"))
    assert windows(sql, TUMBLE_10) == [
        (1, "1969-12-31 23:50:00", "1970-01-01 00:00:00"),
        (2, "1969-12-31 23:50:00", "1970-01-01 00:00:00"),
        (3, "1900-01-01 00:00:00", "1900-01-01 00:10:00"),
    ]
    minus_3 = "TUMBLE(TABLE(events), DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '-3' MINUTES)"
    assert windows(sql, minus_3) == [
        (1, "1969-12-31 23:47:00", "1969-12-31 23:57:00"),
        (2, "1969-12-31 23:57:00", "1970-01-01 00:07:00"),
        (3, "1899-12-31 23:57:00", "1900-01-01 00:07:00"),
    ]
    assert windows(sql, HOP_5_10) == [
        (1, "1969-12-31 23:50:00", "1970-01-01 00:00:00"),
        (1, "1969-12-31 23:55:00", "1970-01-01 00:05:00"),
        (2, "1969-12-31 23:50:00", "1970-01-01 00:00:00"),
        (2, "1969-12-31 23:55:00", "1970-01-01 00:05:00"),
        (3, "1899-12-31 23:55:00", "1900-01-01 00:05:00"),
        (3, "1900-01-01 00:00:00", "1900-01-01 00:10:00"),
    ]
    assert windows(sql, CUMULATE_5_10) == [
        (1, "1969-12-31 23:50:00", "1970-01-01 00:00:00"),
        (2, "1969-12-31 23:50:00", "1970-01-01 00:00:00"),
        (3, "1900-01-01 00:00:00", "1900-01-01 00:05:00"),
        (3, "1900-01-01 00:00:00", "1900-01-01 00:10:00"),
    ]
    assert windows(sql, SESSION_5) == [
        (1, "1969-12-31 23:55:00", "1970-01-01 00:04:59.999999"),
        (2, "1969-12-31 23:55:00", "1970-01-01 00:04:59.999999"),
        (3, "1900-01-01 00:00:00", "1900-01-01 00:05:00"),
    ]


@pytest.mark.parametrize("call", [
    "TUMBLE(TABLE(events), DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
    "HOP(TABLE(events), DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '10' MINUTES)",
    "CUMULATE(TABLE(events), DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '10' MINUTES)",
    "SESSION(TABLE(events), DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
])
@pytest.mark.parametrize("time_type", TIME_TYPES)
def test_window_columns_are_typed_like_the_time_column(spark, sql, time_type, call):
    given_events(sql, time_type, (1, "2020-04-15 08:05:00"))
    types = {f.name: f.dataType.simpleString() for f in spark.sql(f"SELECT * FROM {call}").schema.fields}
    assert types == {"id": "int", "k1": "string", "k2": "int", "ts": time_type.lower(),
                     "window_start": time_type.lower(), "window_end": time_type.lower(),
                     "window_time": time_type.lower()}
    expected = ("2020-04-15 08:00:00", "2020-04-15 08:10:00", "2020-04-15 08:09:59.999999")
    if call.startswith("SESSION"):
        expected = ("2020-04-15 08:05:00", "2020-04-15 08:15:00", "2020-04-15 08:14:59.999999")
    assert sql(f"SELECT CAST(window_start AS STRING), CAST(window_end AS STRING), CAST(window_time AS STRING) "
               f"FROM {call}") == [expected]


def test_session_rows_a_gap_apart_touch_and_merge(sql):
    given_events(sql, "TIMESTAMP_NTZ", (1, "2020-04-15 10:00:00"), (2, "2020-04-15 10:05:00"),
                 (3, "2020-04-15 10:10:00.000001"))
    # 10:05 == 10:00 + gap joins the session; 10:10:00.000001 is 1 microsecond past 10:05 + gap.
    assert windows(sql, SESSION_5) == [
        (1, "2020-04-15 10:00:00", "2020-04-15 10:10:00"),
        (2, "2020-04-15 10:00:00", "2020-04-15 10:10:00"),
        (3, "2020-04-15 10:10:00.000001", "2020-04-15 10:15:00.000001"),
    ]


SESSION_ROWS = [(1, "2020-04-15 10:00:00", "a", 1), (2, "2020-04-15 10:02:00", "a", 2),
                (3, "2020-04-15 10:04:00", "b", 1), (4, "2020-04-15 10:20:00", "a", 1)]


def test_session_without_partition_by_is_one_sequence(sql):
    given_events(sql, "TIMESTAMP_NTZ", *SESSION_ROWS)
    assert windows(sql, SESSION_5) == [
        (1, "2020-04-15 10:00:00", "2020-04-15 10:09:00"),
        (2, "2020-04-15 10:00:00", "2020-04-15 10:09:00"),
        (3, "2020-04-15 10:00:00", "2020-04-15 10:09:00"),
        (4, "2020-04-15 10:20:00", "2020-04-15 10:25:00"),
    ]


def test_session_partitioned_by_one_key(sql):
    given_events(sql, "TIMESTAMP_NTZ", *SESSION_ROWS)
    assert windows(sql, "SESSION(TABLE(events) PARTITION BY k1, DESCRIPTOR(ts), INTERVAL '5' MINUTES)") == [
        (1, "2020-04-15 10:00:00", "2020-04-15 10:07:00"),
        (2, "2020-04-15 10:00:00", "2020-04-15 10:07:00"),
        (3, "2020-04-15 10:04:00", "2020-04-15 10:09:00"),
        (4, "2020-04-15 10:20:00", "2020-04-15 10:25:00"),
    ]


def test_session_partitioned_by_two_keys(sql):
    given_events(sql, "TIMESTAMP_NTZ", *SESSION_ROWS)
    two_keys = "SESSION(TABLE(events) PARTITION BY (k1, k2), DESCRIPTOR(ts), INTERVAL '5' MINUTES)"
    assert windows(sql, two_keys) == [
        (1, "2020-04-15 10:00:00", "2020-04-15 10:05:00"),
        (2, "2020-04-15 10:02:00", "2020-04-15 10:07:00"),
        (3, "2020-04-15 10:04:00", "2020-04-15 10:09:00"),
        (4, "2020-04-15 10:20:00", "2020-04-15 10:25:00"),
    ]
