"""A pure-Python reference of the window rules of docs/design.md ("Window rules", 1-8).

Times, sizes and offsets are integers in microseconds since 1970-01-01 00:00 (UTC for TIMESTAMP,
the value itself for TIMESTAMP_NTZ). Each function is written from the rule it cites, not from the
engine's code, so that the engine can be checked against it.

Example:
    >>> m = 60_000_000  # one minute
    >>> tumble(7 * m, 10 * m)
    [(0, 600000000)]
    >>> hop(7 * m, 5 * m, 10 * m) == [(5 * m, 15 * m), (0, 10 * m)]
    True
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

MICROSECOND = dt.timedelta(microseconds=1)
EPOCH_NTZ = dt.datetime(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

Window = tuple[int, int]


def to_micros(value: dt.datetime) -> int:
    """Microseconds since the epoch: a naive datetime counts as TIMESTAMP_NTZ, an aware one as an instant.

    Example:
        >>> to_micros(dt.datetime(1969, 12, 31, 23, 59, 59, 999999))
        -1
        >>> to_micros(dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))))
        0
    """
    epoch = EPOCH_NTZ if value.tzinfo is None else EPOCH_UTC
    return (value - epoch) // MICROSECOND


def from_micros(micros: int, tz: dt.tzinfo | None = None) -> dt.datetime:
    """The datetime ``micros`` after the epoch: naive (TIMESTAMP_NTZ) or, given ``tz``, aware.

    Example:
        >>> from_micros(-1)
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999999)
        >>> from_micros(0, dt.timezone.utc)
        datetime.datetime(1970, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if tz is None:
        return EPOCH_NTZ + micros * MICROSECOND
    return (EPOCH_UTC + micros * MICROSECOND).astimezone(tz)


def window_start(t: int, period: int, offset: int = 0) -> int:
    """Rule 2: the latest window start at or before ``t`` for windows every ``period``, shifted by ``offset``.

    Python's ``%`` with a positive divisor is floorMod, so offsets of any sign are taken modulo period.

    Example (Flink's offset example: 00:00:04 in 10-minute windows, offsets in minutes):
        >>> s, m = 1_000_000, 60_000_000
        >>> [window_start(4 * s, 10 * m, k * m) // m for k in (-16, -6, -4, 0, 4, 6, 16)]
        [-6, -6, -4, 0, -6, -4, -4]
    """
    assert period > 0
    return t - (t - offset) % period


def tumble(t: int, size: int, offset: int = 0) -> list[Window]:
    """Rule 3: the one window [start, start + size) that holds ``t``.

    Example:
        >>> tumble(10, 10)  # half-open (rule 1): a time on a window end starts the next window
        [(10, 20)]
        >>> tumble(-1, 10)
        [(-10, 0)]
    """
    start = window_start(t, size, offset)
    return [(start, start + size)]


def hop(t: int, slide: int, size: int, offset: int = 0) -> list[Window]:
    """Rule 4: windows [s, s + size) for s = start(t), start(t) - slide, ... while s > t - size.

    Slide comes first, as in Flink. Latest window first.

    Example:
        >>> hop(7, 5, 10)
        [(5, 15), (0, 10)]
        >>> hop(7, 10, 5)  # slide > size leaves gaps that hold no window
        []
    """
    assert slide > 0 and size > 0
    windows = []
    s = window_start(t, slide, offset)
    while s > t - size:
        windows.append((s, s + size))
        s -= slide
    return windows


def cumulate(t: int, step: int, size: int, offset: int = 0) -> list[Window]:
    """Rule 5: with S = start(t) for period size, windows [S, e) for e from start(t) + step (period
    step) up to S + size, by step. Size must be a multiple of step.

    Example:
        >>> cumulate(5, 2, 10)
        [(0, 6), (0, 8), (0, 10)]
        >>> cumulate(10, 2, 10)
        [(10, 12), (10, 14), (10, 16), (10, 18), (10, 20)]
    """
    assert step > 0 and size % step == 0
    first = window_start(t, size, offset)
    first_end = window_start(t, step, offset) + step
    return [(first, end) for end in range(first_end, first + size + 1, step)]


def window_rows(rows: Iterable[Any], windows: Callable[[int], list[Window]],
                time: Callable[[Any], int | None]) -> list[tuple[Any, int, int, int]]:
    """Each row once per window that holds it, as (row, window_start, window_end, window_time).

    Rule 7: window_time = window_end - 1 microsecond. Rule 8: a row whose time is None is dropped.

    Example:
        >>> window_rows([("a", 3), ("b", None)], lambda t: tumble(t, 10), time=lambda row: row[1])
        [(('a', 3), 0, 10, 9)]
    """
    return [(row, start, end, end - 1)
            for row in rows if time(row) is not None
            for start, end in windows(time(row))]


def sessions(rows: Iterable[Any], gap: int, time: Callable[[Any], int | None],
             key: Callable[[Any], Any] = lambda row: None) -> list[tuple[Any, int, int, int]]:
    """Rule 6: per key, sorted by time, a row joins the current session when t <= last + gap.

    Returns (row, window_start, window_end, window_time) with window_start = the session's first
    time, window_end = its last time + gap, window_time = window_end - 1 (rule 7). Rows whose time
    is None are dropped (rule 8). None is a key like any other.

    Example:
        >>> rows = [("x", 0), ("x", 5), ("x", 11), ("y", 1)]
        >>> sessions(rows, 5, time=lambda r: r[1], key=lambda r: r[0])  # 5 == 0 + 5 touches: merged
        [(('x', 0), 0, 10, 9), (('x', 5), 0, 10, 9), (('x', 11), 11, 16, 15), (('y', 1), 1, 6, 5)]
    """
    by_key: dict[Any, list[Any]] = {}
    for row in rows:
        if time(row) is not None:
            by_key.setdefault(key(row), []).append(row)
    result = []
    for members in by_key.values():
        current: list[Any] = []
        for row in sorted(members, key=time):
            if current and time(row) > time(current[-1]) + gap:
                result += _session(current, gap, time)
                current = []
            current.append(row)
        result += _session(current, gap, time)
    return result


def _session(members: list[Any], gap: int, time: Callable[[Any], int]) -> list[tuple[Any, int, int, int]]:
    start, end = time(members[0]), time(members[-1]) + gap
    return [(row, start, end, end - 1) for row in members]


# eKuiper's windows over a whole input (docs/windows.md, "eKuiper windows"): the engine's readings,
# written from the rules as documented, on times in any one unit.

def ekuiper_sliding(times: list[int], size: int, delay: int = 0) -> list[tuple[int, list[int]]]:
    """One window per event t: the indices of the events in (t - size, t + delay].

    Example:
        >>> ekuiper_sliding([1, 4, 8], 5)
        [(1, [0]), (4, [0, 1]), (8, [1, 2])]
    """
    return [(t, [i for i, u in enumerate(times) if t - size < u <= t + delay]) for t in times]


def ekuiper_count(n_rows: int, n: int, m: int) -> list[list[int]]:
    """COUNTWINDOW(n, m) over rows 0..n_rows-1 in time order: rows j-n..j-1 for j = m, 2m, ... with n <= j <= n_rows.

    Example (eKuiper's walk-through of COUNTWINDOW(5, 2): the window at event 6 holds events 2..6):
        >>> ekuiper_count(7, 5, 2)
        [[1, 2, 3, 4, 5]]
    """
    return [list(range(j - n, j)) for j in range(m, n_rows + 1, m) if j >= n]


def ekuiper_session(times: list[int], max_duration: int, timeout: int) -> list[tuple[int, int, list[int]]]:
    """SESSIONWINDOW over sorted times: (start, end, member indices). A session from s ends at
    last + timeout when the next event is more than timeout later, or at the check
    c = floor(s / max) * max + 2 * max (the first multiple of max with c - max > s) once an event at
    or after c arrives, whichever is earlier.

    Example (max 10, timeout 4):
        >>> ekuiper_session([1, 4, 8, 11, 14, 17, 21], 10, 4)
        [(1, 20, [0, 1, 2, 3, 4, 5]), (21, 25, [6])]
    """
    sessions: list[tuple[int, int, list[int]]] = []
    members: list[int] = []
    start = last = 0
    for i, t in enumerate(times):
        if members:
            check = (start // max_duration) * max_duration + 2 * max_duration
            ends = [last + timeout] if t - last > timeout else []
            ends += [check] if t >= check else []
            if ends:
                sessions.append((start, min(ends), members))
                members = []
        if not members:
            start = t
        members.append(i)
        last = t
    if members:
        sessions.append((start, last + timeout, members))
    return sessions
