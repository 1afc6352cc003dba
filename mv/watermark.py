"""Watermarks and when windows close, in microseconds (docs/design.md, rules 10-12 and 14).

Watermark = max event time ever processed - delay; it never decreases. A window [start, end) is
closed when watermark >= end - 1 µs, and final (no late row may change it) when
watermark >= end + grace; a row whose window is final goes to the view's __late table.
With IDLE AFTER, a watermark also follows the clock once no newer event time has come for that
long: as if event time had kept pace with the clock since the newest row (`idle`).

Example:
    >>> advance(None, max_event_time=600_000_000, delay=60_000_000)
    540000000
    >>> is_closed(window_end=540_000_001, watermark=540_000_000)
    True
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from mv.query import time_sql

_clock: Callable[[], float] = time.time  # seconds; tests replace it (`clock`)


def now() -> int:
    """The wall clock in microseconds, as the idle rule reads it."""
    return int(_clock() * 1_000_000)


@contextmanager
def clock(seconds: Callable[[], float]) -> Iterator[None]:
    """Read the wall clock from `seconds` in the block (tests move time without sleeping).

    Example:
        >>> with watermark.clock(lambda: 1_700_000_000.0):
        ...     watermark.now()
        1700000000000000
    """
    global _clock
    saved, _clock = _clock, seconds
    try:
        yield
    finally:
        _clock = saved


def advance(previous: int | None, max_event_time: int | None, delay: int) -> int | None:
    """The watermark after seeing events up to `max_event_time`: never below `previous`."""
    if max_event_time is None:
        return previous
    candidate = max_event_time - delay
    return candidate if previous is None else max(previous, candidate)


def idle(max_event_time: int | None, seen_at: int | None, now_us: int, delay: int,
         idle_after: int | None) -> int | None:
    """The watermark the clock brings when no newer event time than `max_event_time` has come since
    the wall-clock time `seen_at`, for `idle_after` or longer: event time taken to have kept pace
    with the clock since then, never past `now_us`, minus the delay. None while not idle.

    Example (in minutes of 60_000_000 µs: newest row 09:58 seen at 10:00, now 10:40, delay 5,
    idle after 30): 09:58 + 40 - 5 = 10:33.
        >>> M = 60_000_000
        >>> idle(598 * M, seen_at=600 * M, now_us=640 * M, delay=5 * M, idle_after=30 * M) == 633 * M
        True
    """
    if idle_after is None or max_event_time is None or seen_at is None or now_us - seen_at < idle_after:
        return None
    return min(max_event_time + (now_us - seen_at), now_us) - delay


def is_closed(window_end: int, watermark: int | None) -> bool:
    return watermark is not None and watermark >= window_end - 1


def closed_sql(window_end: str, watermark: int | None, time_type: str) -> str:
    """SQL of is_closed for the column `window_end` (of `time_type`): false before any watermark.

    Example: closed_sql("window_end", 540_000_000, "timestamp") == "window_end <= timestamp_micros(540000001)"
    """
    return f"{window_end} <= {time_sql(watermark + 1, time_type)}" if watermark is not None else "false"


def is_final(window_end: int, watermark: int | None, grace: int) -> bool:
    return watermark is not None and watermark >= window_end + grace


def closed_of(windows, watermark: int | None) -> list[tuple[int, int]]:
    """The windows (start, end) of `windows` that `watermark` closes (`is_closed`), in their order:
    one comparison a window, where calling is_closed for each of a large append's 50,000 windows
    took 12-20 ms of the driver's time, several times a refresh.

    Example: closed_of([(0, 10), (10, 20)], 9) == [(0, 10)]
    """
    if watermark is None:
        return []
    last_end = watermark + 1
    return [w for w in windows if w[1] <= last_end]


def not_final_of(windows, watermark: int | None, grace: int) -> list[tuple[int, int]]:
    """The windows (start, end) of `windows` that are not final under `watermark` and `grace`
    (`is_final`), in their order, as `closed_of` does.

    Example: not_final_of([(0, 10), (10, 20)], 12, 2) == [(10, 20)]
    """
    if watermark is None:
        return list(windows)
    final_end = watermark - grace
    return [w for w in windows if w[1] > final_end]
